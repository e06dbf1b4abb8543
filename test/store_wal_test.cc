// The state database stays small and honest: the WAL shrinks back once an
// admin's long read ends, and a damaged file is refused at open.
#include <SQLiteCpp/SQLiteCpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "state/store.h"
#include "support/fake_clock.h"
#include "support/store_test_access.h"
#include "support/temp_dir.h"

namespace certmount {
namespace {

namespace fs = std::filesystem;

VolumeRecord Volume(const std::string& id, size_t attribute_bytes) {
  VolumeRecord volume;
  volume.volume_id = id;
  volume.target_path = "/var/lib/kubelet/pods/" + id + "/volumes/v/mount";
  volume.pod_namespace = "ns";
  volume.pod_name = "pod-" + id;
  volume.attributes = {{"csi.cert-manager.io/issuer-name", "ca"}};
  // Annotations of at most 15 KiB each, as the attribute bounds allow.
  for (size_t i = 0; attribute_bytes > 0; ++i) {
    const size_t n = std::min<size_t>(attribute_bytes, 15 * 1024);
    volume.attributes["example.com/note-" + std::to_string(i)] = std::string(n, 'a' + i % 26);
    attribute_bytes -= n;
  }
  volume.issuer = "ca";
  return volume;
}

class StoreWalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = Store::Open(db_path_, clock_);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    store_ = std::move(*opened);
  }

  uintmax_t WalBytes() {
    std::error_code error;
    const uintmax_t size = fs::file_size(db_path_ + "-wal", error);
    return error ? 0 : size;
  }

  void Mount(const std::string& id, size_t attribute_bytes) {
    ASSERT_TRUE(StoreTestAccess(*store_).RegisterVolume(Volume(id, attribute_bytes)).ok());
    ASSERT_TRUE(StoreTestAccess(*store_).MarkMounted(id, {"01", 1, 2, 3}).ok());
  }

  testing::TempDir dir_;
  const std::string db_path_ = dir_.Sub("state.db");
  testing::FakeClock clock_;
  std::unique_ptr<Store> store_;
};

TEST_F(StoreWalTest, WalShrinksToAFewMibOnceAnAdminReadEnds) {
  Mount("v-first", 100);
  {
    // An admin's sqlite3 shell with an open read transaction: no checkpoint
    // can pass its snapshot, so the WAL grows under traffic.
    SQLite::Database admin(db_path_, SQLite::OPEN_READONLY);
    admin.exec("BEGIN");
    SQLite::Statement read(admin, "SELECT count(*) FROM volumes");
    ASSERT_TRUE(read.executeStep());
    for (int i = 0; i < 1200; ++i) Mount("v-" + std::to_string(i), 8 * 1024);
    ASSERT_GT(WalBytes(), 10u << 20);
    read.reset();
    admin.exec("COMMIT");
  }
  // Ordinary traffic after the read ended.
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(store_->RecordRenewalFailure("v-first", i + 1, 100 + i, "retry").ok());
  }
  EXPECT_LE(WalBytes(), 4u << 20);
}

TEST_F(StoreWalTest, DamagedIndexPageIsRefusedAtOpenNamingTheRecovery) {
  for (int i = 0; i < 300; ++i) Mount("v-" + std::to_string(i), 0);
  store_.reset();
  int64_t root_page = 0, page_size = 0;
  {
    SQLite::Database db(db_path_, SQLite::OPEN_READONLY);
    root_page = db.execAndGet(
                      "SELECT rootpage FROM sqlite_schema WHERE name = "
                      "'volumes_mounted_by_next_issuance'")
                    .getInt64();
    page_size = db.execAndGet("PRAGMA page_size").getInt64();
  }
  ASSERT_GT(root_page, 1);
  {
    // The index's root page claims far more cells than it holds.
    std::fstream file(db_path_, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp((root_page - 1) * page_size + 3);
    const char cells[2] = {'\x7f', '\x7f'};
    file.write(cells, 2);
  }
  auto reopened = Store::Open(db_path_, clock_);
  ASSERT_FALSE(reopened.ok());
  EXPECT_EQ(reopened.status().code(), Code::kDataLoss) << reopened.status().ToString();
  EXPECT_NE(reopened.status().message().find(db_path_), std::string::npos);
  EXPECT_NE(reopened.status().message().find("docs/state.md"), std::string::npos)
      << reopened.status().message();
}

}  // namespace
}  // namespace certmount
