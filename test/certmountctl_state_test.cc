// certmountctl status and history: state built with the real Store in a temp
// dir, read by the real certmountctl binary, which must never change the
// database, must not be blocked by a writer, and must say clearly why it
// cannot read a missing, newer, older or damaged file.
#include <SQLiteCpp/SQLiteCpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/clock.h"
#include "state/embedded_migrations.h"
#include "state/migrations.h"
#include "state/store.h"
#include "support/daemon.h"
#include "support/fake_clock.h"
#include "support/store_test_access.h"
#include "support/temp_dir.h"

namespace certmount::testing {
namespace {

// The failing volume expires 5h 10m 30s after the test's clock: certmountctl
// reads the real clock a moment later and truncates to minutes, so the half
// minute keeps its "(in 5h 10m)" true however slowly the test runs.
int64_t FailingNotAfter(int64_t now) { return now + 5 * 3600 + 600 + 30; }

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kHistoryLimit = 10;
// 2023-11-14T22:13:20Z, a fixed time whose RFC 3339 form the tests spell out.
constexpr int64_t kFixedTime = 1'700'000'000;
constexpr char kFixedTimeRfc3339[] = "2023-11-14T22:13:20Z";

// Starts at the real time, so certmountctl's relative times (it uses the
// system clock) agree with what the test stored.
int64_t RealNow() { return SystemClock::Instance().NowUnix(); }

VolumeRecord Volume(const std::string& id, const std::string& pod_name) {
  VolumeRecord volume;
  volume.volume_id = id;
  volume.target_path = "/var/lib/kubelet/pods/uid/volumes/kubernetes.io~csi/" + id + "/mount";
  volume.pod_namespace = "default";
  volume.pod_name = pod_name;
  volume.pod_uid = "uid-" + pod_name;
  volume.service_account = "sa-" + pod_name;
  volume.issuer = "local-ca";
  volume.attributes = {{"csi.cert-manager.io/common-name", pod_name}};
  return volume;
}

IssuedCertificateFields Cert(const std::string& serial, int64_t not_before, int64_t not_after,
                             int64_t next_issuance_at) {
  return IssuedCertificateFields{serial, not_before, not_after, next_issuance_at};
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

std::set<std::string> DirEntries(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.insert(entry.path().filename());
  return names;
}

// What reading may add to a quiescent data root: SQLite's WAL sidecars, which
// a read-only connection to a WAL database opens (creating them if need be,
// as the sqlite3 shell does) but never writes a frame to. Anything else, or a
// non-empty WAL, would mean the reader changed the state.
void ExpectOnlyEmptySidecarsAdded(const std::string& data_root,
                                  const std::set<std::string>& before) {
  for (const std::string& name : DirEntries(data_root)) {
    if (before.contains(name)) continue;
    EXPECT_TRUE(name == "state.db-wal" || name == "state.db-shm") << name;
    if (name == "state.db-wal") {
      EXPECT_EQ(fs::file_size(data_root + "/" + name), 0u);
    }
  }
  for (const std::string& name : before) EXPECT_TRUE(fs::exists(data_root + "/" + name)) << name;
}

int KnownSchemaVersion() {
  Result<std::vector<Migration>> migrations = ParseMigrations(EmbeddedMigrations());
  EXPECT_TRUE(migrations.ok()) << migrations.status().ToString();
  return migrations.ok() ? migrations->back().version : 0;
}

ProcessResult Ctl(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {CERTMOUNTCTL_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProcess(argv);
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> result;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) result.push_back(line);
  return result;
}

// A data root holding three volumes, as certmountd leaves it: one healthy,
// one whose renewals fail, one publish still in flight.
class StateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_root_ = dir_.Sub("data");
    fs::create_directories(data_root_);
    db_path_ = data_root_ + "/state.db";
  }

  std::unique_ptr<Store> OpenStore() {
    Result<std::unique_ptr<Store>> store = Store::Open(db_path_, clock_);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  void Populate(Store& store) {
    const int64_t now = clock_.NowUnix();
    ASSERT_TRUE(StoreTestAccess(store).RegisterVolume(Volume("vol-healthy", "web")).ok());
    ASSERT_TRUE(store
                    .MarkMountedWithHistory(
                        "vol-healthy",
                        Cert("0a1b2c", kFixedTime, now + 3 * 86400 + 1800, now + 2 * 86400 + 1800),
                        IssuanceAttempt{"local-ca", 42}, kHistoryLimit)
                    .ok());

    ASSERT_TRUE(StoreTestAccess(store).RegisterVolume(Volume("vol-failing", "api")).ok());
    ASSERT_TRUE(store
                    .MarkMountedWithHistory("vol-failing",
                                            Cert("ff00", now - 3600, FailingNotAfter(now), now),
                                            IssuanceAttempt{"local-ca", 10}, kHistoryLimit)
                    .ok());
    ASSERT_TRUE(store
                    .RecordRenewalFailureWithHistory("vol-failing", 3, kFixedTime, long_error_,
                                                     IssuanceAttempt{"local-ca", 1500},
                                                     kHistoryLimit)
                    .ok());

    ASSERT_TRUE(StoreTestAccess(store).RegisterVolume(Volume("vol-inflight", "batch")).ok());
  }

  TempDir dir_;
  FakeClock clock_{RealNow()};
  std::string data_root_;
  std::string db_path_;
  const std::string long_error_ =
      "issuer local-ca unavailable: connection refused while dialing the signer; " +
      std::string(100, 'x') + " END-OF-ERROR";
};

TEST_F(StateTest, StatusTableShowsEveryVolumeAndLeavesTheFileUnchanged) {
  {
    std::unique_ptr<Store> store = OpenStore();
    ASSERT_NE(store, nullptr);
    Populate(*store);
  }
  const std::string bytes_before = ReadBytes(db_path_);
  const auto mtime_before = fs::last_write_time(db_path_);
  const std::set<std::string> entries_before = DirEntries(data_root_);

  ProcessResult status = Ctl({"status", "--data-root", data_root_});
  ASSERT_EQ(status.exit_code, 0) << status.err;

  const std::vector<std::string> lines = Lines(status.out);
  ASSERT_EQ(lines.size(), 4u) << status.out;
  for (const char* column :
       {"VOLUME", "POD", "MOUNTED", "EXPIRES", "RENEWS AT", "ATTEMPTS", "LAST ERROR"}) {
    EXPECT_NE(lines[0].find(column), std::string::npos) << column;
  }
  // Rows are ordered by volume id.
  EXPECT_EQ(lines[1].rfind("vol-failing", 0), 0u) << status.out;
  EXPECT_EQ(lines[2].rfind("vol-healthy", 0), 0u) << status.out;
  EXPECT_EQ(lines[3].rfind("vol-inflight", 0), 0u) << status.out;

  const std::string healthy = lines[2];
  EXPECT_NE(healthy.find("default/web"), std::string::npos) << healthy;
  EXPECT_NE(healthy.find(" yes "), std::string::npos) << healthy;
  EXPECT_NE(healthy.find("(in 3d 0h)"), std::string::npos) << healthy;
  EXPECT_NE(healthy.find("(in 2d 0h)"), std::string::npos) << healthy;

  const std::string failing = lines[1];
  EXPECT_NE(failing.find("default/api"), std::string::npos) << failing;
  EXPECT_NE(failing.find("(in 5h 10m)"), std::string::npos) << failing;
  EXPECT_NE(failing.find("2023-11-14 22:13Z (due "), std::string::npos) << failing;
  EXPECT_NE(failing.find("  3  "), std::string::npos) << failing;
  // The long error is cut to a readable width, marked, and not printed whole.
  EXPECT_NE(failing.find("issuer local-ca unavailable: connection refused"), std::string::npos);
  EXPECT_EQ(failing.find("END-OF-ERROR"), std::string::npos) << failing;
  EXPECT_EQ(failing.substr(failing.size() - 3), "...") << failing;

  const std::string inflight = lines[3];
  EXPECT_NE(inflight.find("default/batch"), std::string::npos) << inflight;
  EXPECT_NE(inflight.find(" no "), std::string::npos) << inflight;

  // Columns line up: every row has its pod where the header has POD.
  const size_t pod_column = lines[0].find("POD");
  for (size_t i = 1; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i].find("default/"), pod_column) << lines[i];
  }

  ProcessResult history = Ctl({"history", "vol-failing", "--data-root", data_root_});
  ASSERT_EQ(history.exit_code, 0) << history.err;

  EXPECT_EQ(ReadBytes(db_path_), bytes_before);
  EXPECT_EQ(fs::last_write_time(db_path_), mtime_before);
  ExpectOnlyEmptySidecarsAdded(data_root_, entries_before);
}

TEST_F(StateTest, StatusJsonHasEveryFieldWithUnixAndRfc3339Times) {
  {
    std::unique_ptr<Store> store = OpenStore();
    ASSERT_NE(store, nullptr);
    Populate(*store);
  }
  ProcessResult status = Ctl({"status", "--data-root=" + data_root_, "--json"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  const json volumes = json::parse(status.out);
  ASSERT_TRUE(volumes.is_array());
  ASSERT_EQ(volumes.size(), 3u);
  EXPECT_EQ(volumes[0]["volume_id"], "vol-failing");
  EXPECT_EQ(volumes[1]["volume_id"], "vol-healthy");
  EXPECT_EQ(volumes[2]["volume_id"], "vol-inflight");

  const json& failing = volumes[0];
  EXPECT_EQ(failing["pod"], "default/api");
  EXPECT_EQ(failing["pod_namespace"], "default");
  EXPECT_EQ(failing["pod_name"], "api");
  EXPECT_EQ(failing["pod_uid"], "uid-api");
  EXPECT_EQ(failing["service_account"], "sa-api");
  EXPECT_EQ(failing["issuer"], "local-ca");
  EXPECT_EQ(failing["target_path"], Volume("vol-failing", "api").target_path);
  EXPECT_TRUE(failing["file_group"].is_null());
  EXPECT_EQ(failing["attributes"], json({{"csi.cert-manager.io/common-name", "api"}}));
  EXPECT_EQ(failing["mounted"], true);
  EXPECT_EQ(failing["serial"], "ff00");
  EXPECT_EQ(failing["renewal_attempts"], 3);
  EXPECT_EQ(failing["last_error"], long_error_);  // whole, unlike the table
  EXPECT_EQ(failing["next_issuance_at"], kFixedTime);
  EXPECT_EQ(failing["next_issuance_at_rfc3339"], kFixedTimeRfc3339);
  EXPECT_EQ(failing["created_at"], clock_.NowUnix());
  EXPECT_EQ(failing["mounted_at"], clock_.NowUnix());
  EXPECT_EQ(failing["updated_at"], clock_.NowUnix());
  EXPECT_EQ(failing["not_after"], FailingNotAfter(clock_.NowUnix()));
  for (const char* time :
       {"created_at", "mounted_at", "not_before", "not_after", "next_issuance_at", "updated_at"}) {
    ASSERT_TRUE(failing.contains(std::string(time) + "_rfc3339")) << time;
    const std::string text = failing[std::string(time) + "_rfc3339"];
    EXPECT_EQ(text.size(), 20u) << text;  // YYYY-MM-DDTHH:MM:SSZ
    EXPECT_EQ(text.back(), 'Z') << text;
  }

  const json& healthy = volumes[1];
  EXPECT_EQ(healthy["not_before"], kFixedTime);
  EXPECT_EQ(healthy["not_before_rfc3339"], kFixedTimeRfc3339);
  EXPECT_TRUE(healthy["last_error"].is_null());
  EXPECT_EQ(healthy["renewal_attempts"], 0);

  const json& inflight = volumes[2];
  EXPECT_EQ(inflight["mounted"], false);
  EXPECT_TRUE(inflight["serial"].is_null());
  EXPECT_TRUE(inflight["mounted_at"].is_null());
  EXPECT_TRUE(inflight["mounted_at_rfc3339"].is_null());
  EXPECT_TRUE(inflight["not_after"].is_null());
  EXPECT_TRUE(inflight["next_issuance_at"].is_null());
}

TEST_F(StateTest, HistoryListsIssuancesNewestFirst) {
  std::unique_ptr<Store> store = OpenStore();
  ASSERT_NE(store, nullptr);
  const int64_t published_at = clock_.NowUnix();
  ASSERT_TRUE(StoreTestAccess(*store).RegisterVolume(Volume("vol-a", "web")).ok());
  ASSERT_TRUE(store
                  ->MarkMountedWithHistory(
                      "vol-a", Cert("01", published_at, published_at + 7200, published_at + 3600),
                      IssuanceAttempt{"local-ca", 40}, kHistoryLimit)
                  .ok());
  clock_.Advance(std::chrono::seconds(3600));
  const int64_t failed_at = clock_.NowUnix();
  ASSERT_TRUE(store
                  ->RecordRenewalFailureWithHistory("vol-a", 1, failed_at + 60, "signer said no",
                                                    IssuanceAttempt{"local-ca", 7}, kHistoryLimit)
                  .ok());
  clock_.Advance(std::chrono::seconds(60));
  const int64_t renewed_at = clock_.NowUnix();
  ASSERT_TRUE(store
                  ->RecordRenewalWithHistory(
                      "vol-a", Cert("02", renewed_at, renewed_at + 7200, renewed_at + 3600),
                      IssuanceAttempt{"local-ca", 2500}, kHistoryLimit)
                  .ok());
  // Another volume's history must not show up.
  ASSERT_TRUE(StoreTestAccess(*store).RegisterVolume(Volume("vol-b", "other")).ok());
  ASSERT_TRUE(store
                  ->MarkMountedWithHistory(
                      "vol-b", Cert("0b", renewed_at, renewed_at + 7200, renewed_at + 3600),
                      IssuanceAttempt{"local-ca", 1}, kHistoryLimit)
                  .ok());

  ProcessResult history = Ctl({"history", "vol-a", "--data-root", data_root_, "--json"});
  ASSERT_EQ(history.exit_code, 0) << history.err;
  const json rows = json::parse(history.out);
  ASSERT_EQ(rows.size(), 3u) << history.out;
  EXPECT_GT(rows[0]["id"].get<int64_t>(), rows[1]["id"].get<int64_t>());
  EXPECT_GT(rows[1]["id"].get<int64_t>(), rows[2]["id"].get<int64_t>());

  EXPECT_EQ(rows[0]["kind"], "renewal");
  EXPECT_EQ(rows[0]["result"], "ok");
  EXPECT_EQ(rows[0]["serial"], "02");
  EXPECT_EQ(rows[0]["issued_at"], renewed_at);
  EXPECT_EQ(rows[0]["duration_ms"], 2500);
  EXPECT_EQ(rows[0]["not_after"], renewed_at + 7200);
  EXPECT_TRUE(rows[0]["error"].is_null());

  EXPECT_EQ(rows[1]["kind"], "renewal");
  EXPECT_EQ(rows[1]["result"], "error");
  EXPECT_EQ(rows[1]["error"], "signer said no");
  EXPECT_EQ(rows[1]["issued_at"], failed_at);
  EXPECT_TRUE(rows[1]["serial"].is_null());
  EXPECT_TRUE(rows[1]["not_after"].is_null());
  EXPECT_TRUE(rows[1]["not_after_rfc3339"].is_null());

  EXPECT_EQ(rows[2]["kind"], "publish");
  EXPECT_EQ(rows[2]["result"], "ok");
  EXPECT_EQ(rows[2]["serial"], "01");
  EXPECT_EQ(rows[2]["issuer"], "local-ca");
  EXPECT_EQ(rows[2]["issued_at"], published_at);
  for (const json& row : rows) {
    EXPECT_EQ(row["volume_id"], "vol-a");
    EXPECT_EQ(row["issued_at_rfc3339"].get<std::string>().size(), 20u);
  }

  ProcessResult table = Ctl({"history", "vol-a", "--data-root", data_root_});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  const std::vector<std::string> lines = Lines(table.out);
  ASSERT_EQ(lines.size(), 4u) << table.out;
  EXPECT_NE(lines[0].find("ISSUED AT"), std::string::npos);
  EXPECT_NE(lines[1].find("renewal  ok"), std::string::npos) << table.out;
  EXPECT_NE(lines[1].find("2.5s"), std::string::npos) << table.out;
  EXPECT_NE(lines[2].find("renewal  error"), std::string::npos) << table.out;
  EXPECT_NE(lines[2].find("signer said no"), std::string::npos) << table.out;
  EXPECT_NE(lines[3].find("publish  ok"), std::string::npos) << table.out;
  EXPECT_NE(lines[3].find("40ms"), std::string::npos) << table.out;

  ProcessResult unknown = Ctl({"history", "vol-nope", "--data-root", data_root_});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("no volume vol-nope in " + db_path_), std::string::npos)
      << unknown.err;
}

TEST_F(StateTest, ReadsCommittedStateWhileAWriterHoldsItsTransaction) {
  std::unique_ptr<Store> store = OpenStore();  // stays open, as certmountd would
  ASSERT_NE(store, nullptr);
  Populate(*store);

  SQLite::Database writer(db_path_, SQLite::OPEN_READWRITE);
  writer.exec("BEGIN IMMEDIATE");
  writer.exec(
      "INSERT INTO volumes (volume_id, target_path, created_at, updated_at) "
      "VALUES ('vol-uncommitted', '/t', 1, 1)");
  writer.exec("INSERT INTO volume_attributes VALUES ('vol-uncommitted', '{}')");
  writer.exec(
      "UPDATE volumes SET renewal_attempts = 99, last_error = 'uncommitted' "
      "WHERE volume_id = 'vol-healthy'");

  ProcessResult status = Ctl({"status", "--data-root", data_root_, "--json"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  const json volumes = json::parse(status.out);
  ASSERT_EQ(volumes.size(), 3u) << status.out;
  for (const json& volume : volumes) EXPECT_NE(volume["volume_id"], "vol-uncommitted");
  EXPECT_EQ(volumes[1]["volume_id"], "vol-healthy");
  EXPECT_EQ(volumes[1]["renewal_attempts"], 0);
  EXPECT_TRUE(volumes[1]["last_error"].is_null());

  ProcessResult history = Ctl({"history", "vol-healthy", "--data-root", data_root_, "--json"});
  ASSERT_EQ(history.exit_code, 0) << history.err;
  EXPECT_EQ(json::parse(history.out).size(), 1u);

  // The writer was never disturbed: it can still commit.
  writer.exec("COMMIT");
  ProcessResult after = Ctl({"status", "--data-root", data_root_, "--json"});
  ASSERT_EQ(after.exit_code, 0) << after.err;
  EXPECT_EQ(json::parse(after.out).size(), 4u);
}

TEST_F(StateTest, MissingDatabaseIsReportedAndNeverCreated) {
  const std::string expected =
      "no node state at " + db_path_ + ": is --data-root right, has certmountd run on this node?";
  for (const char* command : {"status", "history"}) {
    std::vector<std::string> args = {command};
    if (std::string(command) == "history") args.push_back("vol-a");
    args.insert(args.end(), {"--data-root", data_root_});
    ProcessResult result = Ctl(args);
    EXPECT_EQ(result.exit_code, 1) << command;
    EXPECT_NE(result.err.find(expected), std::string::npos) << result.err;
    EXPECT_TRUE(DirEntries(data_root_).empty());
  }
  // A data root that does not exist is not created either.
  const std::string absent = dir_.Sub("absent");
  ProcessResult result = Ctl({"status", "--data-root", absent});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("no node state at " + absent + "/state.db"), std::string::npos)
      << result.err;
  EXPECT_FALSE(fs::exists(absent));
}

TEST_F(StateTest, NewerSchemaIsRefusedAndTheFileLeftUnchanged) {
  {
    std::unique_ptr<Store> store = OpenStore();
    ASSERT_NE(store, nullptr);
    Populate(*store);
  }
  const int known = KnownSchemaVersion();
  {
    SQLite::Database db(db_path_, SQLite::OPEN_READWRITE);
    db.exec("PRAGMA user_version = " + std::to_string(known + 1));
  }
  const std::string bytes_before = ReadBytes(db_path_);
  const auto mtime_before = fs::last_write_time(db_path_);
  const std::set<std::string> entries_before = DirEntries(data_root_);
  const std::string expected = "state.db is at schema version " + std::to_string(known + 1) +
                               ", this certmountctl knows up to " + std::to_string(known) +
                               "; use a newer certmountctl";

  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"status", "--data-root", data_root_},
        std::vector<std::string>{"history", "vol-healthy", "--data-root", data_root_, "--json"}}) {
    ProcessResult result = Ctl(args);
    EXPECT_EQ(result.exit_code, 1) << args[0];
    EXPECT_NE(result.err.find(expected), std::string::npos) << result.err;
    EXPECT_TRUE(result.out.empty()) << result.out;
  }
  EXPECT_EQ(ReadBytes(db_path_), bytes_before);
  EXPECT_EQ(fs::last_write_time(db_path_), mtime_before);
  ExpectOnlyEmptySidecarsAdded(data_root_, entries_before);
}

TEST_F(StateTest, OlderSchemaShowsVolumesAndSaysHistoryIsNotThereYet) {
  ASSERT_GE(KnownSchemaVersion(), 2);
  {
    Result<std::vector<Migration>> migrations = ParseMigrations(EmbeddedMigrations());
    ASSERT_TRUE(migrations.ok());
    migrations->resize(1);  // 0001 only: before the issuance history
    SQLite::Database db(db_path_, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    ASSERT_TRUE(ApplyMigrations(db, *migrations, db_path_).ok());
    db.exec(
        "INSERT INTO volumes (volume_id, target_path, attributes, created_at, updated_at) "
        "VALUES ('vol-old', '/t', '{}', 1, 1)");
  }
  ProcessResult status = Ctl({"status", "--data-root", data_root_, "--json"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  const json volumes = json::parse(status.out);
  ASSERT_EQ(volumes.size(), 1u);
  EXPECT_EQ(volumes[0]["volume_id"], "vol-old");

  ProcessResult history = Ctl({"history", "vol-old", "--data-root", data_root_});
  EXPECT_EQ(history.exit_code, 1);
  EXPECT_NE(history.err.find("is at schema version 1, which has no issuance history yet"),
            std::string::npos)
      << history.err;
}

TEST_F(StateTest, DamagedDatabaseIsDataLossAndLeftAlone) {
  {
    std::ofstream garbage(db_path_, std::ios::binary);
    garbage << std::string(8192, 'Z');
  }
  const std::string bytes_before = ReadBytes(db_path_);
  ProcessResult result = Ctl({"status", "--data-root", data_root_});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("state database " + db_path_ + " is damaged"), std::string::npos)
      << result.err;
  EXPECT_EQ(ReadBytes(db_path_), bytes_before);
  EXPECT_EQ(DirEntries(data_root_), std::set<std::string>{"state.db"});
}

TEST_F(StateTest, EmptyNodeAndUsageErrors) {
  { ASSERT_NE(OpenStore(), nullptr); }
  ProcessResult table = Ctl({"status", "--data-root", data_root_});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_EQ(table.out, "no volumes in " + db_path_ + "\n");
  ProcessResult empty_json = Ctl({"status", "--data-root", data_root_, "--json"});
  EXPECT_EQ(empty_json.exit_code, 0) << empty_json.err;
  EXPECT_EQ(json::parse(empty_json.out), json::array());

  EXPECT_EQ(Ctl({"history", "--data-root", data_root_}).exit_code, 2);  // no volume id
  EXPECT_EQ(Ctl({"status", "--data-root", data_root_, "--bogus"}).exit_code, 2);
  EXPECT_EQ(Ctl({"status", "extra"}).exit_code, 2);
}

}  // namespace
}  // namespace certmount::testing
