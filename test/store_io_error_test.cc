// The store under a failing disk: every write or sync from the first to the
// Nth of a transaction fails in turn. The call reports an error (never a
// crash), the database stays intact, the transaction is wholly there or
// wholly absent, and once the disk heals the same store works again.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <SQLiteCpp/SQLiteCpp.h>

#include "state/store.h"
#include "support/fake_clock.h"
#include "support/fault_vfs.h"
#include "support/store_test_access.h"
#include "support/temp_dir.h"

namespace certmount::testing {
namespace {

VolumeRecord Volume(const std::string& id) {
  VolumeRecord volume;
  volume.volume_id = id;
  volume.target_path = "/var/lib/kubelet/pods/p/volumes/kubernetes.io~csi/" + id + "/mount";
  volume.pod_namespace = "ns";
  volume.pod_name = "p";
  volume.attributes = {{"csi.cert-manager.io/issuer-name", "ca"}};
  return volume;
}

IssuedCertificateFields Certificate() {
  IssuedCertificateFields cert;
  cert.serial = "abc123";
  cert.not_before = 1'700'000'000;
  cert.not_after = 1'700'086'400;
  cert.next_issuance_at = 1'700'057'600;
  return cert;
}

std::string IntegrityCheck(const std::string& path) {
  SQLite::Database db(path, SQLite::OPEN_READONLY);
  return db.execAndGet("PRAGMA integrity_check").getString();
}

class StoreIoErrorTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { FaultVfs::Install(); }
  void TearDown() override { FaultVfs::Heal(); }
  TempDir dir_;
  FakeClock clock_;
};

TEST_P(StoreIoErrorTest, FailedWriteIsAnErrorAndLeavesTheDatabaseWhole) {
  const int error = GetParam();
  const std::string path = dir_.Sub("state.db");
  for (int nth = 1; nth <= 6; ++nth) {
    std::filesystem::remove(path);
    std::filesystem::remove(path + "-wal");
    std::filesystem::remove(path + "-shm");
    auto store = Store::Open(path, clock_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE(StoreTestAccess(**store).RegisterVolume(Volume("kept")).ok());
    ASSERT_TRUE(StoreTestAccess(**store).MarkMounted("kept", Certificate()).ok());

    FaultVfs::FailFrom(nth, error);
    Status registered = StoreTestAccess(**store).RegisterVolume(Volume("new"));
    Status marked = StoreTestAccess(**store).MarkMounted("kept", Certificate());
    const bool any_write_failed = !registered.ok() || !marked.ok();
    FaultVfs::Heal();
    for (const Status* s : {&registered, &marked}) {
      if (s->ok()) continue;
      EXPECT_NE(s->code(), Code::kOk);
      EXPECT_NE(s->message().find(path), std::string::npos) << s->ToString();
      if (error == SQLITE_FULL) {
        EXPECT_EQ(s->code(), Code::kResourceExhausted) << s->ToString();
      }
    }
    EXPECT_TRUE(any_write_failed) << "fault " << nth << " was never reached";

    // The same store works once the disk does.
    Status again = StoreTestAccess(**store).RegisterVolume(Volume("after"));
    EXPECT_TRUE(again.ok()) << "nth " << nth << ": " << again.ToString();
    store->reset();

    // A fresh open sees an intact database: the old row whole, the failed
    // row either whole or absent.
    EXPECT_EQ(IntegrityCheck(path), "ok");
    auto reopened = Store::Open(path, clock_);
    ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
    auto kept = (*reopened)->GetVolume("kept");
    ASSERT_TRUE(kept.ok() && kept->has_value());
    EXPECT_TRUE((*kept)->mounted);
    EXPECT_EQ((*kept)->serial, "abc123");
    auto added = (*reopened)->GetVolume("new");
    ASSERT_TRUE(added.ok());
    if (added->has_value()) {
      EXPECT_EQ((*added)->target_path, Volume("new").target_path);
      EXPECT_FALSE((*added)->mounted);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Errors, StoreIoErrorTest,
                         ::testing::Values(SQLITE_IOERR_WRITE, SQLITE_FULL),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(info.param == SQLITE_FULL ? "DiskFull" : "IoError");
                         });

}  // namespace
}  // namespace certmount::testing
