// The node-state store against real SQLite files.
#include "state/store.h"

#include <SQLiteCpp/SQLiteCpp.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <thread>

#include "state/migrations.h"
#include "support/fake_clock.h"
#include "support/store_test_access.h"
#include "support/temp_dir.h"

namespace certmount {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;
using namespace std::chrono_literals;

VolumeRecord Volume(const std::string& id) {
  VolumeRecord volume;
  volume.volume_id = id;
  volume.target_path = "/var/lib/kubelet/pods/uid-" + id + "/volumes/certmount/mount";
  volume.pod_namespace = "ns";
  volume.pod_name = "pod-" + id;
  volume.pod_uid = "uid-" + id;
  volume.service_account = "sa";
  volume.attributes = {{"certmount.io/common-name", id}, {"certmount.io/issuer", "corp"}};
  volume.issuer = "corp";
  return volume;
}

IssuedCertificateFields Cert(const std::string& serial, int64_t next_issuance_at) {
  return IssuedCertificateFields{serial, 1'700'000'000, 1'700'086'400, next_issuance_at};
}

std::vector<std::string> Ids(const std::vector<VolumeRecord>& volumes) {
  std::vector<std::string> ids;
  for (const VolumeRecord& volume : volumes) ids.push_back(volume.volume_id);
  return ids;
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(); }

  void Reopen() {
    store_.reset();
    auto opened = Store::Open(db_path_, clock_);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    store_ = std::move(*opened);
  }

  VolumeRecord MustGet(const std::string& id) {
    auto got = store_->GetVolume(id);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_TRUE(got.ok() && got->has_value()) << id << " missing";
    return got.ok() && got->has_value() ? **got : VolumeRecord{};
  }

  testing::TempDir dir_;
  const std::string db_path_ = dir_.Sub("state.db");
  testing::FakeClock clock_;
  std::unique_ptr<Store> store_;
};

TEST_F(StoreTest, RegisterThenGetReturnsUnmountedRow) {
  ASSERT_TRUE(StoreTestAccess(*store_).RegisterVolume(Volume("v1")).ok());

  const VolumeRecord got = MustGet("v1");
  const VolumeRecord want = Volume("v1");
  EXPECT_EQ(got.target_path, want.target_path);
  EXPECT_EQ(got.pod_namespace, "ns");
  EXPECT_EQ(got.pod_name, "pod-v1");
  EXPECT_EQ(got.pod_uid, "uid-v1");
  EXPECT_EQ(got.service_account, "sa");
  EXPECT_EQ(got.attributes, want.attributes);
  EXPECT_EQ(got.issuer, "corp");
  EXPECT_FALSE(got.mounted);
  EXPECT_EQ(got.created_at, clock_.NowUnix());
  EXPECT_EQ(got.updated_at, clock_.NowUnix());
  EXPECT_FALSE(got.mounted_at.has_value());
  EXPECT_TRUE(got.serial.empty());
  EXPECT_FALSE(got.not_after.has_value());
  EXPECT_FALSE(got.next_issuance_at.has_value());
  EXPECT_EQ(got.renewal_attempts, 0);
}

TEST_F(StoreTest, RegisterIgnoresCertificateFieldsOfTheInput) {
  VolumeRecord volume = Volume("v1");
  volume.mounted = true;
  volume.serial = "ff";
  volume.created_at = 5;
  ASSERT_TRUE(StoreTestAccess(*store_).RegisterVolume(volume).ok());
  const VolumeRecord got = MustGet("v1");
  EXPECT_FALSE(got.mounted);
  EXPECT_TRUE(got.serial.empty());
  EXPECT_EQ(got.created_at, clock_.NowUnix());
}

TEST_F(StoreTest, GetMissingIsEmptyNotError) {
  auto got = store_->GetVolume("nope");
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(got->has_value());
}

TEST_F(StoreTest, RegisterTwiceIsAlreadyExistsNamingTheTargetPath) {
  ASSERT_TRUE(StoreTestAccess(*store_).RegisterVolume(Volume("v1")).ok());
  VolumeRecord again = Volume("v1");
  again.target_path = "/elsewhere";
  const Status status = StoreTestAccess(*store_).RegisterVolume(again);
  EXPECT_EQ(status.code(), Code::kAlreadyExists);
  EXPECT_THAT(status.message(), HasSubstr(Volume("v1").target_path));
  EXPECT_EQ(MustGet("v1").target_path, Volume("v1").target_path);
}

TEST_F(StoreTest, TryRegisterReportsTheExistingRowAndWritesNothing) {
  auto first = store_->TryRegisterVolume(Volume("v1"));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE(first->has_value());

  VolumeRecord again = Volume("v1");
  again.target_path = "/elsewhere";
  again.pod_name = "someone-else";
  clock_.Advance(5s);
  auto unmounted = store_->TryRegisterVolume(again);
  ASSERT_TRUE(unmounted.ok()) << unmounted.status().ToString();
  ASSERT_TRUE(unmounted->has_value());
  EXPECT_EQ((*unmounted)->target_path, Volume("v1").target_path);
  EXPECT_FALSE((*unmounted)->mounted);
  const VolumeRecord kept = MustGet("v1");
  EXPECT_EQ(kept.pod_name, Volume("v1").pod_name);
  EXPECT_EQ(kept.updated_at, kept.created_at);

  ASSERT_TRUE(StoreTestAccess(*store_).MarkMounted("v1", Cert("01", clock_.NowUnix() + 60)).ok());
  auto mounted = store_->TryRegisterVolume(again);
  ASSERT_TRUE(mounted.ok() && mounted->has_value());
  EXPECT_TRUE((*mounted)->mounted);
  EXPECT_EQ(MustGet("v1").serial, "01");
}

TEST_F(StoreTest, HistoryKeepsTheNewestRowsOfEachVolumeOnly) {
  constexpr int kLimit = 2;
  for (const char* id : {"a", "b"}) {
    ASSERT_TRUE(StoreTestAccess(*store_).RegisterVolume(Volume(id)).ok());
    ASSERT_TRUE(store_
                    ->MarkMountedWithHistory(id, Cert(std::string(id) + "00", 0),
                                             IssuanceAttempt{"corp", 1}, kLimit)
                    .ok());
  }
  // Interleaved renewals: pruning "a" must never touch "b"'s rows.
  for (int i = 1; i <= 3; ++i) {
    for (const char* id : {"a", "b"}) {
      const std::string serial = std::string(id) + "0" + std::to_string(i);
      ASSERT_TRUE(
          store_->RecordRenewalWithHistory(id, Cert(serial, 0), IssuanceAttempt{"corp", 1}, kLimit)
              .ok());
    }
  }
  ASSERT_TRUE(
      store_->MarkMountedWithHistory("a", Cert("a04", 0), IssuanceAttempt{"corp", 1}, kLimit).ok());
  auto serials = [&](const std::string& id) {
    std::vector<std::string> found;
    Result<std::vector<IssuanceRecord>> rows = StoreTestAccess(*store_).ListIssuances(id);
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    if (rows.ok()) {
      for (const IssuanceRecord& row : *rows) found.push_back(row.serial);
    }
    return found;
  };
  EXPECT_THAT(serials("a"), ElementsAre("a04", "a03"));
  EXPECT_THAT(serials("b"), ElementsAre("b03", "b02"));
}

TEST_F(StoreTest, SummariesAgreeWithTheFullRows) {
  ASSERT_TRUE(StoreTestAccess(*store_).RegisterVolume(Volume("b")).ok());
  ASSERT_TRUE(StoreTestAccess(*store_).RegisterVolume(Volume("a")).ok());
  ASSERT_TRUE(StoreTestAccess(*store_).MarkMounted("a", Cert("01", 1'700'050'000)).ok());
  auto summaries = store_->ListVolumeSummaries();
  ASSERT_TRUE(summaries.ok()) << summaries.status().ToString();
  ASSERT_EQ(summaries->size(), 2u);
  const VolumeSummary& a = (*summaries)[0];
  EXPECT_EQ(a.volume_id, "a");
  EXPECT_EQ(a.pod_namespace, "ns");
  EXPECT_EQ(a.pod_name, "pod-a");
  EXPECT_TRUE(a.mounted);
  EXPECT_EQ(a.not_after, 1'700'086'400);
  EXPECT_EQ(a.next_issuance_at, 1'700'050'000);
  const VolumeSummary& b = (*summaries)[1];
  EXPECT_EQ(b.volume_id, "b");
  EXPECT_FALSE(b.mounted);
  EXPECT_EQ(b.not_after, std::nullopt);
  EXPECT_EQ(b.next_issuance_at, std::nullopt);
}

TEST_F(StoreTest, RegisterRejectsMissingIdOrPath) {
  VolumeRecord no_id = Volume("");
  EXPECT_EQ(StoreTestAccess(*store_).RegisterVolume(no_id).code(), Code::kInvalidArgument);
  VolumeRecord no_path = Volume("v1");
  no_path.target_path.clear();
  EXPECT_EQ(StoreTestAccess(*store_).RegisterVolume(no_path).code(), Code::kInvalidArgument);
  auto all = StoreTestAccess(*store_).ListVolumes();
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->empty());
}

TEST_F(StoreTest, RegisterRefusesServiceAccountTokens) {
  VolumeRecord volume = Volume("v1");
  volume.attributes["csi.storage.k8s.io/serviceAccount.tokens"] = R"({"":{"token":"secret"}})";
  EXPECT_EQ(StoreTestAccess(*store_).RegisterVolume(volume).code(), Code::kInvalidArgument);
  auto got = store_->GetVolume("v1");
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(got->has_value());
}

TEST_F(StoreTest, RegisterRejectsAttributesThatAreNotUtf8) {
  VolumeRecord volume = Volume("v1");
  volume.attributes["bad"] = "\xff\xfe";
  EXPECT_EQ(StoreTestAccess(*store_).RegisterVolume(volume).code(), Code::kInvalidArgument);
}

TEST_F(StoreTest, MarkMountedRecordsThePublish) {
  ASSERT_TRUE(StoreTestAccess(*store_).RegisterVolume(Volume("v1")).ok());
  clock_.Advance(7s);
  ASSERT_TRUE(
      StoreTestAccess(*store_).MarkMounted("v1", Cert("0a1b", clock_.NowUnix() + 3600)).ok());

  const VolumeRecord got = MustGet("v1");
  EXPECT_TRUE(got.mounted);
  EXPECT_EQ(got.mounted_at, clock_.NowUnix());
  EXPECT_EQ(got.serial, "0a1b");
  EXPECT_EQ(got.not_before, 1'700'000'000);
  EXPECT_EQ(got.not_after, 1'700'086'400);
  EXPECT_EQ(got.next_issuance_at, clock_.NowUnix() + 3600);
  EXPECT_EQ(got.renewal_attempts, 0);
  EXPECT_TRUE(got.last_error.empty());
  EXPECT_EQ(got.created_at, clock_.NowUnix() - 7);
  EXPECT_EQ(got.updated_at, clock_.NowUnix());
}

TEST_F(StoreTest, MarkMountedUnknownIsNotFound) {
  EXPECT_EQ(StoreTestAccess(*store_).MarkMounted("nope", Cert("01", 1)).code(), Code::kNotFound);
}

TEST_F(StoreTest, MarkMountedNeedsASerial) {
  ASSERT_TRUE(StoreTestAccess(*store_).RegisterVolume(Volume("v1")).ok());
  EXPECT_EQ(StoreTestAccess(*store_).MarkMounted("v1", Cert("", 1)).code(), Code::kInvalidArgument);
  EXPECT_FALSE(MustGet("v1").mounted);
}

TEST_F(StoreTest, RenewalFailureThenSuccess) {
  ASSERT_TRUE(StoreTestAccess(*store_).RegisterVolume(Volume("v1")).ok());
  ASSERT_TRUE(StoreTestAccess(*store_).MarkMounted("v1", Cert("01", 100)).ok());

  clock_.Advance(60s);
  ASSERT_TRUE(store_->RecordRenewalFailure("v1", 3, 500, "issuer unavailable").ok());
  VolumeRecord got = MustGet("v1");
  EXPECT_EQ(got.renewal_attempts, 3);
  EXPECT_EQ(got.next_issuance_at, 500);
  EXPECT_EQ(got.last_error, "issuer unavailable");
  EXPECT_EQ(got.serial, "01");
  EXPECT_EQ(got.updated_at, clock_.NowUnix());

  clock_.Advance(60s);
  const IssuedCertificateFields renewed{"02", 2'000, 3'000, 2'500};
  ASSERT_TRUE(StoreTestAccess(*store_).RecordRenewal("v1", renewed).ok());
  got = MustGet("v1");
  EXPECT_EQ(got.serial, "02");
  EXPECT_EQ(got.not_before, 2'000);
  EXPECT_EQ(got.not_after, 3'000);
  EXPECT_EQ(got.next_issuance_at, 2'500);
  EXPECT_EQ(got.renewal_attempts, 0);
  EXPECT_TRUE(got.last_error.empty());
  EXPECT_TRUE(got.mounted);
  EXPECT_EQ(got.updated_at, clock_.NowUnix());
}

TEST_F(StoreTest, RenewalRecordsNeedAMountedRow) {
  ASSERT_TRUE(StoreTestAccess(*store_).RegisterVolume(Volume("v1")).ok());
  EXPECT_EQ(StoreTestAccess(*store_).RecordRenewal("v1", Cert("01", 1)).code(), Code::kNotFound);
  EXPECT_EQ(store_->RecordRenewalFailure("v1", 1, 1, "x").code(), Code::kNotFound);
  EXPECT_EQ(StoreTestAccess(*store_).RecordRenewal("nope", Cert("01", 1)).code(), Code::kNotFound);
  EXPECT_EQ(store_->RecordRenewalFailure("nope", 1, 1, "x").code(), Code::kNotFound);
  const VolumeRecord got = MustGet("v1");
  EXPECT_FALSE(got.mounted);
  EXPECT_TRUE(got.serial.empty());
  EXPECT_EQ(got.renewal_attempts, 0);
}

TEST_F(StoreTest, DeleteReportsWhetherTheRowExisted) {
  ASSERT_TRUE(StoreTestAccess(*store_).RegisterVolume(Volume("v1")).ok());
  auto first = store_->DeleteVolume("v1");
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(*first);
  auto second = store_->DeleteVolume("v1");
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(*second);
  auto got = store_->GetVolume("v1");
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(got->has_value());
}

TEST_F(StoreTest, ListsAreOrdered) {
  for (const char* id : {"c", "a", "d", "b"})
    ASSERT_TRUE(StoreTestAccess(*store_).RegisterVolume(Volume(id)).ok());
  ASSERT_TRUE(StoreTestAccess(*store_).MarkMounted("c", Cert("0c", 300)).ok());
  ASSERT_TRUE(StoreTestAccess(*store_).MarkMounted("a", Cert("0a", 200)).ok());
  ASSERT_TRUE(StoreTestAccess(*store_).MarkMounted("d", Cert("0d", 100)).ok());

  auto all = StoreTestAccess(*store_).ListVolumes();
  ASSERT_TRUE(all.ok());
  EXPECT_THAT(Ids(*all), ElementsAre("a", "b", "c", "d"));

  auto due = StoreTestAccess(*store_).ListMountedByNextIssuance();
  ASSERT_TRUE(due.ok());
  EXPECT_THAT(Ids(*due), ElementsAre("d", "a", "c"));
}

TEST_F(StoreTest, RowsSurviveReopen) {
  ASSERT_TRUE(StoreTestAccess(*store_).RegisterVolume(Volume("v1")).ok());
  ASSERT_TRUE(StoreTestAccess(*store_).MarkMounted("v1", Cert("01", 100)).ok());
  Reopen();
  const VolumeRecord got = MustGet("v1");
  EXPECT_TRUE(got.mounted);
  EXPECT_EQ(got.serial, "01");
  EXPECT_EQ(got.attributes, Volume("v1").attributes);
}

TEST_F(StoreTest, StartupCleanupKeepsOnlyRowsStillMounted) {
  ASSERT_TRUE(StoreTestAccess(*store_).RegisterVolume(Volume("still-mounted")).ok());
  ASSERT_TRUE(StoreTestAccess(*store_).MarkMounted("still-mounted", Cert("01", 100)).ok());
  ASSERT_TRUE(StoreTestAccess(*store_).RegisterVolume(Volume("gone-after-reboot")).ok());
  ASSERT_TRUE(StoreTestAccess(*store_).MarkMounted("gone-after-reboot", Cert("02", 100)).ok());
  ASSERT_TRUE(StoreTestAccess(*store_).RegisterVolume(Volume("never-published")).ok());

  std::set<std::string> asked;
  const std::string kept_path = Volume("still-mounted").target_path;
  auto result = StoreTestAccess(*store_).StartupCleanup([&](const std::string& path) {
    asked.insert(path);
    return path == kept_path;
  });
  ASSERT_TRUE(result.ok()) << result.status().ToString();

  EXPECT_EQ(result->kept, 1);
  EXPECT_EQ(result->unmounted_by_check, 1);
  std::vector<std::string> deleted_ids;
  for (const DeletedVolume& deleted : result->deleted) {
    deleted_ids.push_back(deleted.volume_id);
    EXPECT_EQ(deleted.target_path, Volume(deleted.volume_id).target_path);
  }
  EXPECT_THAT(deleted_ids, UnorderedElementsAre("gone-after-reboot", "never-published"));
  // Only mounted rows need the mount check.
  EXPECT_THAT(asked, UnorderedElementsAre(kept_path, Volume("gone-after-reboot").target_path));

  auto remaining = StoreTestAccess(*store_).ListVolumes();
  ASSERT_TRUE(remaining.ok());
  EXPECT_THAT(Ids(*remaining), ElementsAre("still-mounted"));
}

TEST_F(StoreTest, StartupCleanupOnEmptyStore) {
  auto result = StoreTestAccess(*store_).StartupCleanup([](const std::string&) { return true; });
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->kept, 0);
  EXPECT_EQ(result->unmounted_by_check, 0);
  EXPECT_TRUE(result->deleted.empty());
}

TEST_F(StoreTest, DatabaseFilesAreOwnerOnlyEvenWithPermissiveUmask) {
  store_.reset();
  std::filesystem::remove(db_path_);
  const mode_t old_umask = umask(0);
  Reopen();
  umask(old_umask);
  ASSERT_TRUE(StoreTestAccess(*store_).RegisterVolume(Volume("v1")).ok());  // creates the -wal file

  for (const std::string& path : {db_path_, db_path_ + "-wal"}) {
    struct stat info {};
    ASSERT_EQ(stat(path.c_str(), &info), 0) << path;
    EXPECT_EQ(info.st_mode & 07777, 0600u) << path;
  }
}

TEST_F(StoreTest, ExistingWorldReadableFileIsNarrowed) {
  store_.reset();
  ASSERT_EQ(chmod(db_path_.c_str(), 0644), 0);
  Reopen();
  struct stat info {};
  ASSERT_EQ(stat(db_path_.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0600u);
}

TEST_F(StoreTest, DatabaseIsInWalMode) {
  SQLite::Database admin(db_path_, SQLite::OPEN_READONLY);
  EXPECT_EQ(admin.execAndGet("PRAGMA journal_mode").getString(), "wal");
}

TEST_F(StoreTest, OpenReaderDoesNotBlockWrites) {
  ASSERT_TRUE(StoreTestAccess(*store_).RegisterVolume(Volume("before")).ok());

  // What an admin's `sqlite3 state.db` session holding a transaction does.
  SQLite::Database admin(db_path_, SQLite::OPEN_READONLY);
  admin.exec("BEGIN");
  EXPECT_EQ(admin.execAndGet("SELECT count(*) FROM volume_status").getInt(), 1);

  ASSERT_TRUE(StoreTestAccess(*store_).RegisterVolume(Volume("during")).ok());
  ASSERT_TRUE(StoreTestAccess(*store_).MarkMounted("during", Cert("01", 100)).ok());
  auto cleanup = StoreTestAccess(*store_).StartupCleanup([](const std::string&) { return true; });
  ASSERT_TRUE(cleanup.ok()) << cleanup.status().ToString();
  EXPECT_EQ(cleanup->deleted.size(), 1u);  // "before"

  // The reader keeps its snapshot; the store sees its own writes.
  EXPECT_EQ(admin.execAndGet("SELECT count(*) FROM volumes").getInt(), 1);
  auto all = StoreTestAccess(*store_).ListVolumes();
  ASSERT_TRUE(all.ok());
  EXPECT_THAT(Ids(*all), ElementsAre("during"));

  admin.exec("COMMIT");
  EXPECT_EQ(admin.execAndGet("SELECT volume_id FROM volumes").getString(), "during");
}

TEST_F(StoreTest, VolumeStatusViewIsReadable) {
  clock_.SetNowUnix(1'700'000'000);  // 2023-11-14 22:13:20Z
  ASSERT_TRUE(StoreTestAccess(*store_).RegisterVolume(Volume("v1")).ok());
  ASSERT_TRUE(StoreTestAccess(*store_).MarkMounted("v1", Cert("0a", 1'700'043'200)).ok());

  SQLite::Database admin(db_path_, SQLite::OPEN_READONLY);
  SQLite::Statement row(admin,
                        "SELECT pod, mounted, created, not_after, renews_at, expires_in "
                        "FROM volume_status WHERE volume_id = 'v1'");
  ASSERT_TRUE(row.executeStep());
  EXPECT_EQ(row.getColumn(0).getString(), "ns/pod-v1");
  EXPECT_EQ(row.getColumn(1).getString(), "yes");
  EXPECT_EQ(row.getColumn(2).getString(), "2023-11-14 22:13:20Z");
  EXPECT_EQ(row.getColumn(3).getString(), "2023-11-15 22:13:20Z");
  EXPECT_EQ(row.getColumn(4).getString(), "2023-11-15 10:13:20Z");
  // Relative to the real now, long after this fixed date.
  EXPECT_EQ(row.getColumn(5).getString(), "expired");
}

TEST_F(StoreTest, VolumeStatusShowsTimeLeftInDaysAndHours) {
  ASSERT_TRUE(StoreTestAccess(*store_).RegisterVolume(Volume("v1")).ok());
  // The view counts from the real time of the query; 30 s of slack keep the
  // expected text stable however slowly the test runs.
  const int64_t real_now = std::time(nullptr);
  const IssuedCertificateFields cert{"0a", real_now, real_now + 12 * 86400 + 3 * 3600 + 30,
                                     real_now + 86400};
  ASSERT_TRUE(StoreTestAccess(*store_).MarkMounted("v1", cert).ok());
  SQLite::Database admin(db_path_, SQLite::OPEN_READONLY);
  EXPECT_EQ(admin.execAndGet("SELECT expires_in FROM volume_status").getString(), "12d 3h");
}

TEST_F(StoreTest, UnparsableAttributesAreDataLossNamingTheVolume) {
  ASSERT_TRUE(StoreTestAccess(*store_).RegisterVolume(Volume("v1")).ok());
  {
    SQLite::Database admin(db_path_, SQLite::OPEN_READWRITE);
    admin.exec(R"(UPDATE volume_attributes SET attributes = '{"n": 1}' WHERE volume_id = 'v1')");
  }
  auto got = store_->GetVolume("v1");
  EXPECT_EQ(got.status().code(), Code::kDataLoss);
  EXPECT_THAT(got.status().message(), HasSubstr("v1"));
  auto all = StoreTestAccess(*store_).ListVolumes();
  EXPECT_EQ(all.status().code(), Code::kDataLoss);
}

TEST_F(StoreTest, DamagedFileIsDataLossNamingTheFile) {
  ASSERT_TRUE(StoreTestAccess(*store_).RegisterVolume(Volume("v1")).ok());
  store_.reset();
  const std::string copy = dir_.Sub("damaged.db");
  std::filesystem::copy_file(db_path_, copy);
  {
    std::fstream file(copy, std::ios::in | std::ios::out | std::ios::binary);
    const std::string garbage(100, '\x5a');
    file.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  auto opened = Store::Open(copy, clock_);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), Code::kDataLoss) << opened.status().ToString();
  EXPECT_THAT(opened.status().message(), HasSubstr(copy));
}

TEST_F(StoreTest, UnopenablePathIsInternal) {
  auto opened = Store::Open(dir_.Sub("missing-dir/state.db"), clock_);
  EXPECT_EQ(opened.status().code(), Code::kInternal);
}

TEST_F(StoreTest, ConcurrentCallersAreSerialised) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 25;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([this, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string id = "t" + std::to_string(t) + "-" + std::to_string(i);
        EXPECT_TRUE(StoreTestAccess(*store_).RegisterVolume(Volume(id)).ok());
        EXPECT_TRUE(StoreTestAccess(*store_).MarkMounted(id, Cert("01", i)).ok());
        EXPECT_TRUE(StoreTestAccess(*store_).ListMountedByNextIssuance().ok());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  auto all = StoreTestAccess(*store_).ListVolumes();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), static_cast<size_t>(kThreads * kPerThread));
}

// Migration 0004: the volume attributes live in their own table, written
// once with the volume's row, never rewritten by a renewal, deleted with the
// row by the startup cleanup's one DELETE, and carried over from older files.

constexpr size_t kAnnotationBytes = 1024 * 1024;

// Registers `id` with an annotation of `annotation_bytes` and marks it mounted.
void Mount(Store& store, const std::string& id, size_t annotation_bytes = 0) {
  VolumeRecord volume = Volume(id);
  if (annotation_bytes > 0)
    volume.attributes["example.com/note"] = std::string(annotation_bytes, 'n');
  ASSERT_TRUE(StoreTestAccess(store).RegisterVolume(volume).ok());
  ASSERT_TRUE(store.MarkMountedWithHistory(id, Cert("0A", 3), {"ca", 5}, /*history_limit=*/3).ok());
}

int64_t Count(const std::string& db_path, const std::string& sql) {
  SQLite::Database admin(db_path, SQLite::OPEN_READONLY);
  return admin.execAndGet(sql).getInt64();
}

// Pages `write` puts into the WAL of `db_path`: the WAL is emptied (TRUNCATE
// checkpoint) before it and its frames counted after it.
int64_t WalPagesWrittenBy(const std::string& db_path, const std::function<void()>& write) {
  SQLite::Database admin(db_path, SQLite::OPEN_READWRITE);
  SQLite::Statement truncate(admin, "PRAGMA wal_checkpoint(TRUNCATE)");
  EXPECT_TRUE(truncate.executeStep());
  EXPECT_EQ(truncate.getColumn(0).getInt(), 0) << "checkpoint was blocked";
  truncate.reset();
  write();
  SQLite::Statement count(admin, "PRAGMA wal_checkpoint(PASSIVE)");
  EXPECT_TRUE(count.executeStep());
  return count.getColumn(1).getInt64();  // frames in the WAL
}

TEST_F(StoreTest, RenewalsDoNotRewriteLargeAttributes) {
  Mount(*store_, "v1", kAnnotationBytes);
  const int64_t attribute_pages = static_cast<int64_t>(kAnnotationBytes / 4096);

  // Each of these changes the row's size (error set, error cleared, a longer
  // serial), which rewrote the whole row, attributes included, while they
  // were a column of it: about attribute_pages + 5 pages each.
  const int64_t failure = WalPagesWrittenBy(db_path_, [&] {
    ASSERT_TRUE(
        store_->RecordRenewalFailureWithHistory("v1", 1, 100, "signer unavailable", {"ca", 7}, 3)
            .ok());
  });
  const int64_t success = WalPagesWrittenBy(db_path_, [&] {
    ASSERT_TRUE(
        store_->RecordRenewalWithHistory("v1", {"0B0C0D0E", 10, 20, 30}, {"ca", 6}, 3).ok());
  });
  const int64_t begin = WalPagesWrittenBy(
      db_path_, [&] { ASSERT_TRUE(store_->BeginIssuance("v1", 2, "v1-request-2").ok()); });
  EXPECT_LE(failure, 8) << "of " << attribute_pages << " attribute pages";
  EXPECT_LE(success, 8) << "of " << attribute_pages << " attribute pages";
  EXPECT_LE(begin, 4) << "of " << attribute_pages << " attribute pages";

  // And the attributes are intact.
  auto got = store_->GetVolume("v1");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->attributes.at("example.com/note").size(), kAnnotationBytes);
  EXPECT_EQ((*got)->last_error, "");
  EXPECT_EQ((*got)->serial, "0B0C0D0E");
}

TEST_F(StoreTest, StartupCleanupAndDeleteLeaveNoAttributeRows) {
  Mount(*store_, "kept");
  Mount(*store_, "stale");
  ASSERT_TRUE(StoreTestAccess(*store_).RegisterVolume(Volume("in-flight")).ok());
  ASSERT_TRUE(StoreTestAccess(*store_).RegisterVolume(Volume("unpublished")).ok());
  ASSERT_EQ(Count(db_path_, "SELECT count(*) FROM volume_attributes"), 4);

  ASSERT_TRUE(store_->DeleteVolume("unpublished").ok());
  Reopen();  // as certmountd's restart
  auto cleaned = store_->StartupCleanupProven(
      [](const std::string& id, const std::string&) { return id == "kept"; });
  ASSERT_TRUE(cleaned.ok()) << cleaned.status().ToString();
  EXPECT_EQ(cleaned->deleted.size(), 2u);

  EXPECT_EQ(Count(db_path_, "SELECT count(*) FROM volume_attributes"), 1);
  EXPECT_EQ(Count(db_path_,
                  "SELECT count(*) FROM volume_attributes WHERE volume_id NOT IN "
                  "(SELECT volume_id FROM volumes)"),
            0);
  EXPECT_EQ(Count(db_path_, "SELECT count(*) FROM issuances WHERE volume_id <> 'kept'"), 0);
}

TEST_F(StoreTest, AnOrphanLeftByAHandDeleteDoesNotBlockTheId) {
  Mount(*store_, "v1");
  {
    // An admin's shell: foreign keys are off there by default.
    SQLite::Database admin(db_path_, SQLite::OPEN_READWRITE);
    admin.exec("DELETE FROM volumes WHERE volume_id = 'v1'");
  }
  ASSERT_EQ(Count(db_path_, "SELECT count(*) FROM volume_attributes"), 1);
  VolumeRecord again = Volume("v1");
  again.attributes["csi.cert-manager.io/common-name"] = "second";
  ASSERT_TRUE(StoreTestAccess(*store_).RegisterVolume(again).ok());
  auto got = store_->GetVolume("v1");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->attributes.at("csi.cert-manager.io/common-name"), "second");
}

TEST_F(StoreTest, AMissingAttributesRowIsDataLossNamingTheVolume) {
  Mount(*store_, "v1");
  {
    SQLite::Database admin(db_path_, SQLite::OPEN_READWRITE);
    admin.exec("DELETE FROM volume_attributes WHERE volume_id = 'v1'");
  }
  auto got = store_->GetVolume("v1");
  EXPECT_EQ(got.status().code(), Code::kDataLoss);
  EXPECT_THAT(got.status().message(), HasSubstr("v1"));
  EXPECT_EQ(StoreTestAccess(*store_).ListMountedByNextIssuance().status().code(), Code::kDataLoss);
}

TEST(StoreMigrationTest, Version3RowsAreCarriedOver) {
  testing::TempDir dir;
  const std::string db_path = dir.Sub("state.db");
  {
    auto migrations = ParseMigrations(EmbeddedMigrations());
    ASSERT_TRUE(migrations.ok());
    ASSERT_GE(migrations->size(), 4u);
    migrations->resize(3);
    SQLite::Database db(db_path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    ASSERT_TRUE(ApplyMigrations(db, *migrations, db_path).ok());
    db.exec(
        "INSERT INTO volumes (volume_id, target_path, attributes, mounted, created_at, "
        "mounted_at, serial, not_after, next_issuance_at, updated_at) VALUES "
        "('old-mounted', '/t1', '{\"csi.cert-manager.io/common-name\":\"web\"}', 1, 1, 2, "
        "'0A', 9, 5, 2), ('old-in-flight', '/t2', '{}', 0, 1, NULL, NULL, NULL, NULL, 1)");
  }
  testing::FakeClock clock;
  auto store = Store::Open(db_path, clock);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_GE(StoreTestAccess(**store).schema_version(), 4);
  auto got = (*store)->GetVolume("old-mounted");
  ASSERT_TRUE(got.ok() && got->has_value()) << got.status().ToString();
  EXPECT_EQ((*got)->attributes.at("csi.cert-manager.io/common-name"), "web");
  EXPECT_EQ((*got)->serial, "0A");
  auto listed = StoreTestAccess(**store).ListVolumes();
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 2u);

  SQLite::Database admin(db_path, SQLite::OPEN_READONLY);
  EXPECT_EQ(admin
                .execAndGet("SELECT count(*) FROM pragma_table_info('volumes') "
                            "WHERE name = 'attributes'")
                .getInt(),
            0);
  EXPECT_EQ(admin.execAndGet("SELECT count(*) FROM volume_status").getInt(), 2);
}

}  // namespace
}  // namespace certmount
