// The renewal scheduler's core on a FakeClock: no threads for timing, no
// sleeps. Real SQLite files, a real local CA behind a counting issuer, real
// file sets in temporary directories.
#include "renew/scheduler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <cctype>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "common/token_bucket.h"
#include "issue/attributes.h"
#include "issue/local_ca.h"
#include "issue/volume_attributes.h"
#include "renew/backoff.h"
#include "support/fake_clock.h"
#include "support/root.h"
#include "support/store_test_access.h"
#include "support/temp_dir.h"
#include "support/x509_inspect.h"
#include "volume/issuance.h"
#include "volume/volume_layout.h"

namespace certmount {
namespace {

// An issuer rate of one a second, no burst: spreading becomes countable.
SchedulerOptions OneIssuancePerSecond() {
  SchedulerOptions options;
  options.issuer_qps = 1;
  options.issuer_burst = 1;
  return options;
}

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Wraps the real CA; counts requests per (fake) second, can fail on demand,
// and can hold a request until it is cancelled.
class CountingIssuer final : public Issuer {
 public:
  CountingIssuer(Issuer* real, const Clock* clock) : real_(real), clock_(clock) {}

  std::string Name() const override { return "counting-ca"; }
  std::string TrustBundlePem() const override { return real_->TrustBundlePem(); }

  Result<IssuedCertificate> Issue(const IssueInput& input,
                                  std::chrono::steady_clock::time_point deadline,
                                  std::stop_token stop) override {
    std::unique_lock lock(mu_);
    ++per_second_[clock_->NowUnix()];
    volumes_.push_back(input.volume_id);
    if (hold_) {
      held_ = true;
      changed_.notify_all();
      std::condition_variable_any wait;
      wait.wait(lock, stop, [] { return false; });
      held_ = false;
      released_ = true;
      changed_.notify_all();
      return Status::Cancelled("issuance cancelled");
    }
    if (failing_) return Status::Unavailable("signer is down");
    lock.unlock();
    return real_->Issue(input, deadline, stop);
  }

  void set_failing(bool failing) {
    std::lock_guard lock(mu_);
    failing_ = failing;
  }
  void set_hold(bool hold) {
    std::lock_guard lock(mu_);
    hold_ = hold;
  }
  void WaitUntilHeld() {
    std::unique_lock lock(mu_);
    changed_.wait(lock, [&] { return held_; });
  }
  bool released() {
    std::lock_guard lock(mu_);
    return released_;
  }
  std::map<int64_t, int> per_second() {
    std::lock_guard lock(mu_);
    return per_second_;
  }
  std::vector<std::string> volumes() {
    std::lock_guard lock(mu_);
    return volumes_;
  }

 private:
  Issuer* real_;
  const Clock* clock_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<int64_t, int> per_second_;
  std::vector<std::string> volumes_;
  bool failing_ = false;
  bool hold_ = false;
  bool held_ = false;
  bool released_ = false;
};

class RenewalSchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(dir_.path().string()); }

  // Everything lives under `root`; the 10,000-volume test puts it on a tmpfs.
  void Open(const std::string& root) {
    root_ = root;
    data_root_ = root + "/data";
    ASSERT_TRUE(Env::Default()->CreateDirectories(data_root_ + "/volumes", 0700).ok());
    auto material = GenerateSelfSignedCa("scheduler test CA", 3650 * 24h, clock_);
    ASSERT_TRUE(material.ok()) << material.status().ToString();
    auto ca = LocalCa::FromPem(material->certificate_pem, material->private_key_pem, clock_);
    ASSERT_TRUE(ca.ok()) << ca.status().ToString();
    ca_ = std::move(*ca);
    issuer_ = std::make_unique<CountingIssuer>(ca_.get(), &clock_);
    RenewerOptions options;
    options.data_root = data_root_;
    options.timeout = 60s;
    renewer_ = std::make_unique<Renewer>(options, issuer_.get(), Env::Default(), &clock_);
    ReopenStore();
  }

  void ReopenStore() {
    scheduler_.reset();
    store_.reset();
    auto store = Store::Open(root_ + "/state.db", clock_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
  }

  RenewalScheduler& MakeScheduler(SchedulerOptions options = {}) {
    if (options.random_seed == 0) options.random_seed = 42;
    scheduler_ = std::make_unique<RenewalScheduler>(options, store_.get(), renewer_.get(), &clock_);
    return *scheduler_;
  }

  VolumeRecord Record(const std::string& id) {
    VolumeRecord record;
    record.volume_id = id;
    record.target_path = root_ + "/pods/" + id + "/mount";
    record.attributes = {{"csi.cert-manager.io/issuer-name", "ca"},
                         {"csi.cert-manager.io/dns-names", id + ".example"},
                         {"csi.cert-manager.io/duration", "1h"},
                         // csi-driver's default is RSA 2048; ECDSA keeps
                         // thousands of renewals cheap without changing
                         // what the scheduler does.
                         {"csi.cert-manager.io/key-algorithm", "ECDSA"}};
    record.issuer = issuer_->Name();
    return record;
  }

  // A published volume with a real first certificate in its data directory,
  // due for renewal at `next_issuance_at`.
  IssuedCertificateFields AddVolume(const std::string& id, int64_t next_issuance_at) {
    VolumeRecord record = Record(id);
    EXPECT_TRUE(StoreTestAccess(*store_).RegisterVolume(record).ok());
    const VolumeLayout layout = VolumeLayout::For(data_root_, id);
    EXPECT_TRUE(Env::Default()->CreateDirectories(layout.data, 0700).ok());
    auto spec = ParseVolumeAttributes(record.attributes, {});
    EXPECT_TRUE(spec.ok()) << spec.status().ToString();
    IssuanceRequest request;
    request.volume_id = id;
    request.spec = &*spec;
    request.layout = layout;
    auto fields = IssueIntoVolume(request, ca_.get(), Env::Default(), clock_.SteadyNow() + 60s, {});
    EXPECT_TRUE(fields.ok()) << fields.status().ToString();
    fields->next_issuance_at = next_issuance_at;
    EXPECT_TRUE(StoreTestAccess(*store_).MarkMounted(id, *fields).ok());
    return *fields;
  }

  VolumeRecord Row(const std::string& id) {
    auto row = store_->GetVolume(id);
    EXPECT_TRUE(row.ok() && row->has_value()) << id;
    return row.ok() && row->has_value() ? **row : VolumeRecord{};
  }

  // What the publisher tells the scheduler about a freshly mounted row.
  ScheduledVolume Scheduled(const std::string& id) { return {id, Row(id).next_issuance_at}; }

  std::string CertPath(const std::string& id) {
    return VolumeLayout::For(data_root_, id).data + "/tls.crt";
  }

  // Runs everything due now, as the dispatcher would, until nothing can start.
  int RunAllDue() {
    int total = 0;
    while (int ran = scheduler_->RunOnce()) total += ran;
    return total;
  }

  // Advances the clock to `unix_time`, one second at a time, running what is due.
  void RunUntil(int64_t unix_time) {
    while (clock_.NowUnix() < unix_time) {
      clock_.Advance(1s);
      RunAllDue();
    }
  }

  testing::TempDir dir_;
  testing::FakeClock clock_;
  std::string root_;
  std::string data_root_;
  std::unique_ptr<LocalCa> ca_;
  std::unique_ptr<CountingIssuer> issuer_;
  std::unique_ptr<Renewer> renewer_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<RenewalScheduler> scheduler_;
};

TEST(BackoffTest, DoublesUpToTheCapWithBoundedJitter) {
  std::mt19937_64 random(7);
  BackoffPolicy policy{30s, 300s, 0.2};
  const int64_t expected[] = {30, 60, 120, 240, 300, 300, 300};
  for (int attempts = 1; attempts <= 7; ++attempts) {
    for (int i = 0; i < 50; ++i) {
      const int64_t delay = RetryDelay(policy, attempts, random).count();
      EXPECT_LE(delay, expected[attempts - 1]) << attempts;
      EXPECT_GE(delay, expected[attempts - 1] * 8 / 10) << attempts;
    }
  }
  EXPECT_EQ(RetryDelay(BackoffPolicy{30s, 300s, 0.0}, 1'000'000, random), 300s);
}

TEST_F(RenewalSchedulerTest, RenewsInNextIssuanceOrderAndNotBefore) {
  const int64_t t0 = clock_.NowUnix();
  AddVolume("a", t0 + 30);
  AddVolume("b", t0 + 10);
  AddVolume("c", t0 + 20);
  RenewalScheduler& scheduler = MakeScheduler();
  auto loaded = scheduler.Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->volumes, 3);
  EXPECT_EQ(loaded->overdue, 0);
  EXPECT_EQ(scheduler.NextDueAt(), t0 + 10);

  clock_.Advance(9s);
  EXPECT_EQ(RunAllDue(), 0);
  RunUntil(t0 + 30);
  EXPECT_THAT(issuer_->volumes(), ElementsAre("b", "c", "a"));
}

TEST_F(RenewalSchedulerTest, RenewalReplacesFilesAndRecordsRowAndHistory) {
  const int64_t t0 = clock_.NowUnix();
  const IssuedCertificateFields first = AddVolume("v", t0 + 5);
  RenewalScheduler& scheduler = MakeScheduler();
  ASSERT_TRUE(scheduler.Load().ok());
  RunUntil(t0 + 5);

  const VolumeRecord row = Row("v");
  EXPECT_NE(row.serial, first.serial);
  EXPECT_EQ(row.not_before, t0 + 5);
  EXPECT_EQ(row.not_after, t0 + 5 + 3600);
  EXPECT_EQ(row.next_issuance_at, t0 + 5 + 2400);  // two thirds of 1h
  EXPECT_EQ(row.renewal_attempts, 0);
  EXPECT_EQ(row.last_error, "");
  EXPECT_EQ(scheduler.DueAt("v"), t0 + 5 + 2400);
  // The pod's files are the new certificate.
  EXPECT_EQ(testing::InspectCertificateFile(CertPath("v")).serial_hex, row.serial);

  auto history = StoreTestAccess(*store_).ListIssuances("v");
  ASSERT_TRUE(history.ok());
  ASSERT_EQ(history->size(), 1u);
  EXPECT_EQ((*history)[0].kind, IssuanceKind::kRenewal);
  EXPECT_TRUE((*history)[0].ok);
  EXPECT_EQ((*history)[0].serial, row.serial);
  EXPECT_EQ((*history)[0].not_after, row.not_after);
  EXPECT_EQ((*history)[0].issued_at, t0 + 5);
  EXPECT_EQ((*history)[0].issuer, "counting-ca");
  EXPECT_EQ((*history)[0].error, "");
}

TEST_F(RenewalSchedulerTest, HistoryIsPrunedToTheLimitAndGoesWithTheVolume) {
  const int64_t t0 = clock_.NowUnix();
  AddVolume("v", t0 + 1);
  SchedulerOptions options;
  options.history_limit = 3;
  RenewalScheduler& scheduler = MakeScheduler(options);
  ASSERT_TRUE(scheduler.Load().ok());
  std::vector<std::string> serials;
  for (int i = 0; i < 5; ++i) {
    RunUntil(*scheduler.NextDueAt());
    serials.push_back(Row("v").serial);
  }
  auto history = StoreTestAccess(*store_).ListIssuances("v");
  ASSERT_TRUE(history.ok());
  ASSERT_EQ(history->size(), 3u);
  EXPECT_EQ((*history)[0].serial, serials[4]);
  EXPECT_EQ((*history)[2].serial, serials[2]);

  ASSERT_TRUE(store_->DeleteVolume("v").ok());
  history = StoreTestAccess(*store_).ListIssuances("v");
  ASSERT_TRUE(history.ok());
  EXPECT_TRUE(history->empty());
}

TEST_F(RenewalSchedulerTest, FailingIssuerBacksOffAndLeavesTheCertificateInPlace) {
  const int64_t t0 = clock_.NowUnix();
  const IssuedCertificateFields first = AddVolume("v", t0 + 1);
  const std::string first_pem = ReadAll(CertPath("v"));
  issuer_->set_failing(true);
  RenewalScheduler& scheduler = MakeScheduler();
  ASSERT_TRUE(scheduler.Load().ok());

  const int64_t expected_cap[] = {30, 60, 120, 240, 300, 300};
  for (int attempt = 1; attempt <= 6; ++attempt) {
    RunUntil(*scheduler.NextDueAt());
    const int64_t failed_at = clock_.NowUnix();
    const VolumeRecord row = Row("v");
    EXPECT_EQ(row.renewal_attempts, attempt);
    EXPECT_THAT(row.last_error, HasSubstr("signer is down"));
    ASSERT_TRUE(row.next_issuance_at.has_value());
    const int64_t delay = *row.next_issuance_at - failed_at;
    EXPECT_LE(delay, expected_cap[attempt - 1]) << attempt;
    EXPECT_GE(delay, expected_cap[attempt - 1] * 8 / 10) << attempt;
    EXPECT_EQ(scheduler.DueAt("v"), row.next_issuance_at);
    // The working certificate stays, in the row and in the files.
    EXPECT_EQ(row.serial, first.serial);
    EXPECT_EQ(ReadAll(CertPath("v")), first_pem);
  }
  auto history = StoreTestAccess(*store_).ListIssuances("v");
  ASSERT_TRUE(history.ok());
  ASSERT_EQ(history->size(), 6u);
  EXPECT_FALSE((*history)[0].ok);
  EXPECT_THAT((*history)[0].error, HasSubstr("signer is down"));
  EXPECT_EQ((*history)[0].serial, "");

  issuer_->set_failing(false);
  RunUntil(*scheduler.NextDueAt());
  const VolumeRecord healed = Row("v");
  EXPECT_EQ(healed.renewal_attempts, 0);
  EXPECT_EQ(healed.last_error, "");
  EXPECT_NE(healed.serial, first.serial);
  EXPECT_EQ(testing::InspectCertificateFile(CertPath("v")).serial_hex, healed.serial);
}

TEST_F(RenewalSchedulerTest, BackoffSurvivesARestart) {
  const int64_t t0 = clock_.NowUnix();
  AddVolume("v", t0 + 1);
  issuer_->set_failing(true);
  {
    RenewalScheduler& scheduler = MakeScheduler();
    ASSERT_TRUE(scheduler.Load().ok());
    RunUntil(*scheduler.NextDueAt());
    RunUntil(*scheduler.NextDueAt());
  }
  const VolumeRecord before = Row("v");
  ASSERT_EQ(before.renewal_attempts, 2);

  // A new process: a new Store on the same file and a new scheduler.
  ReopenStore();
  RenewalScheduler& restarted = MakeScheduler();
  ASSERT_TRUE(restarted.Load().ok());
  EXPECT_EQ(restarted.DueAt("v"), before.next_issuance_at);  // not renewed at once
  EXPECT_EQ(RunAllDue(), 0);
  RunUntil(*before.next_issuance_at);
  const VolumeRecord after = Row("v");
  EXPECT_EQ(after.renewal_attempts, 3);
  const int64_t delay = *after.next_issuance_at - *before.next_issuance_at;
  EXPECT_LE(delay, 120);
  EXPECT_GE(delay, 96);
}

TEST_F(RenewalSchedulerTest, OnlyMountedRowsAreScheduled) {
  const int64_t t0 = clock_.NowUnix();
  AddVolume("mounted", t0 + 1);
  ASSERT_TRUE(StoreTestAccess(*store_).RegisterVolume(Record("publishing")).ok());  // mounted = 0
  RenewalScheduler& scheduler = MakeScheduler();
  auto loaded = scheduler.Load();
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->volumes, 1);
  EXPECT_EQ(scheduler.DueAt("publishing"), std::nullopt);
  RunUntil(t0 + 100);
  EXPECT_THAT(issuer_->volumes(), ElementsAre("mounted"));
  auto history = StoreTestAccess(*store_).ListIssuances("publishing");
  ASSERT_TRUE(history.ok());
  EXPECT_TRUE(history->empty());
}

TEST_F(RenewalSchedulerTest, VolumeWhoseRowIsGoneIsDropped) {
  const int64_t t0 = clock_.NowUnix();
  AddVolume("v", t0 + 1);
  RenewalScheduler& scheduler = MakeScheduler();
  ASSERT_TRUE(scheduler.Load().ok());
  ASSERT_TRUE(store_->DeleteVolume("v").ok());
  RunUntil(t0 + 5);
  EXPECT_TRUE(issuer_->volumes().empty());
  EXPECT_EQ(scheduler.size(), 0u);
}

TEST_F(RenewalSchedulerTest, RemovedVolumeIsNeverRenewed) {
  const int64_t t0 = clock_.NowUnix();
  AddVolume("gone", t0 + 1);
  AddVolume("kept", t0 + 1);
  RenewalScheduler& scheduler = MakeScheduler();
  ASSERT_TRUE(scheduler.Load().ok());
  scheduler.OnRemoved("gone");
  EXPECT_EQ(scheduler.DueAt("gone"), std::nullopt);
  RunUntil(t0 + 5);
  EXPECT_THAT(issuer_->volumes(), ElementsAre("kept"));
}

TEST_F(RenewalSchedulerTest, RemovedAfterBeingTakenNeverStarts) {
  const int64_t t0 = clock_.NowUnix();
  AddVolume("v", t0);
  RenewalScheduler& scheduler = MakeScheduler();
  ASSERT_TRUE(scheduler.Load().ok());
  std::vector<std::string> taken = scheduler.TakeDue();
  ASSERT_THAT(taken, ElementsAre("v"));
  scheduler.OnRemoved("v");
  scheduler.RunRenewal("v");
  EXPECT_TRUE(issuer_->volumes().empty());
  EXPECT_EQ(scheduler.size(), 0u);
}

TEST_F(RenewalSchedulerTest, OnRemovedCancelsAndWaitsForARunningRenewal) {
  const int64_t t0 = clock_.NowUnix();
  const IssuedCertificateFields first = AddVolume("v", t0);
  const std::string first_pem = ReadAll(CertPath("v"));
  issuer_->set_hold(true);
  RenewalScheduler& scheduler = MakeScheduler();
  ASSERT_TRUE(scheduler.Load().ok());

  std::thread worker([&] { scheduler.RunOnce(); });
  issuer_->WaitUntilHeld();
  scheduler.OnRemoved("v");
  // OnRemoved returned: the issuance has ended and recorded nothing.
  EXPECT_TRUE(issuer_->released());
  worker.join();
  EXPECT_EQ(scheduler.size(), 0u);
  const VolumeRecord row = Row("v");
  EXPECT_EQ(row.serial, first.serial);
  EXPECT_EQ(row.renewal_attempts, 0);
  EXPECT_EQ(ReadAll(CertPath("v")), first_pem);
  auto history = StoreTestAccess(*store_).ListIssuances("v");
  ASSERT_TRUE(history.ok());
  EXPECT_TRUE(history->empty());
}

TEST_F(RenewalSchedulerTest, NeverRecreatesARemovedVolumeDirectory) {
  const int64_t t0 = clock_.NowUnix();
  AddVolume("v", t0 + 1);
  RenewalScheduler& scheduler = MakeScheduler();
  ASSERT_TRUE(scheduler.Load().ok());
  const std::string volume_dir = VolumeLayout::For(data_root_, "v").root;
  std::filesystem::remove_all(volume_dir);
  RunUntil(t0 + 1);
  EXPECT_FALSE(std::filesystem::exists(volume_dir));
  EXPECT_TRUE(issuer_->volumes().empty());
  EXPECT_THAT(Row("v").last_error, HasSubstr("missing"));
}

TEST_F(RenewalSchedulerTest, OnMountedSchedulesAPublishedVolume) {
  const int64_t t0 = clock_.NowUnix();
  RenewalScheduler& scheduler = MakeScheduler();
  ASSERT_TRUE(scheduler.Load().ok());
  AddVolume("new", t0 + 3);
  scheduler.OnMounted(Scheduled("new"));
  EXPECT_EQ(scheduler.DueAt("new"), t0 + 3);
  RunUntil(t0 + 3);
  EXPECT_THAT(issuer_->volumes(), ElementsAre("new"));
}

// The local CA switched to files holding `signer` and `bundle`.
void ReloadCa(LocalCa& ca, const std::string& dir, const CaMaterial& signer,
              const std::string& bundle) {
  const LocalCaFiles files{dir + "/ca.crt", dir + "/ca.key", dir + "/bundle.crt"};
  std::ofstream(files.cert, std::ios::trunc) << signer.certificate_pem;
  std::ofstream(files.key, std::ios::trunc) << signer.private_key_pem;
  std::ofstream(files.bundle, std::ios::trunc) << bundle;
  Result<LocalCa::Change> change = ca.Reload(files, Env::Default());
  ASSERT_TRUE(change.ok()) << change.status().ToString();
  ASSERT_TRUE(change->any());
}

TEST_F(RenewalSchedulerTest, ANewTrustBundleRewritesEveryCaFileWithoutIssuing) {
  const int64_t t0 = clock_.NowUnix();
  std::map<std::string, std::string> certificates;
  for (const char* id : {"a", "b", "c"}) {
    AddVolume(id, t0 + 3600);
    certificates[id] = ReadAll(CertPath(id));
  }
  RenewalScheduler& scheduler = MakeScheduler(OneIssuancePerSecond());
  ASSERT_TRUE(scheduler.Load().ok());
  auto other = GenerateSelfSignedCa("other", 24h, clock_);
  ASSERT_TRUE(other.ok());
  // (The scheduler takes whatever bundle the issuer gives; that the signer
  // changed too does not matter here.)
  auto material = GenerateSelfSignedCa("scheduler test CA 2", 24h, clock_);
  ASSERT_TRUE(material.ok());
  const std::string new_bundle = material->certificate_pem + other->certificate_pem;
  ReloadCa(*ca_, dir_.path().string(), *material, new_bundle);

  scheduler.RequestForAll(VolumeRefresh::kTrustBundle);
  EXPECT_EQ(scheduler.Stats().trust_bundle_pending, 3);
  // All three at once, though the issuer allows one request a second: a
  // bundle rewrite asks the issuer nothing.
  EXPECT_EQ(RunAllDue(), 3);
  EXPECT_TRUE(issuer_->volumes().empty());
  for (const char* id : {"a", "b", "c"}) {
    EXPECT_EQ(ReadAll(VolumeLayout::For(data_root_, id).data + "/ca.crt"), new_bundle) << id;
    EXPECT_EQ(ReadAll(CertPath(id)), certificates[id]) << id;
    EXPECT_EQ(scheduler.DueAt(id), t0 + 3600) << id;
  }
  EXPECT_EQ(scheduler.Stats().trust_bundle_pending, 0);
}

TEST_F(RenewalSchedulerTest, ANewSignerReissuesEveryVolumeAtTheIssuerRateUntilItSucceeds) {
  const int64_t t0 = clock_.NowUnix();
  for (const char* id : {"a", "b", "c", "d"}) AddVolume(id, t0 + 3600);
  RenewalScheduler& scheduler = MakeScheduler(OneIssuancePerSecond());
  ASSERT_TRUE(scheduler.Load().ok());
  auto material = GenerateSelfSignedCa("next CA", 24h, clock_);
  ASSERT_TRUE(material.ok());
  ReloadCa(*ca_, dir_.path().string(), *material, material->certificate_pem);

  issuer_->set_failing(true);
  scheduler.RequestForAll(VolumeRefresh::kReissue);
  EXPECT_EQ(scheduler.Stats().reissue_pending, 4);
  RunUntil(t0 + 10);
  // Failures back off and stay owed.
  EXPECT_EQ(scheduler.Stats().reissue_pending, 4);
  for (const char* id : {"a", "b", "c", "d"}) {
    ASSERT_TRUE(scheduler.DueAt(id).has_value());
    EXPECT_LT(*scheduler.DueAt(id), t0 + 3600) << id;
  }
  issuer_->set_failing(false);
  RunUntil(t0 + 400);
  EXPECT_EQ(scheduler.Stats().reissue_pending, 0);
  for (const char* id : {"a", "b", "c", "d"}) {
    EXPECT_TRUE(ca_->SignedByCurrentCa(ReadAll(CertPath(id)))) << id;
    EXPECT_EQ(ReadAll(VolumeLayout::For(data_root_, id).data + "/ca.crt"),
              material->certificate_pem);
  }
  // At most one request a second reached the issuer.
  for (const auto& [second, count] : issuer_->per_second()) EXPECT_LE(count, 1) << second;
}

class OverdueSpreadTest : public RenewalSchedulerTest {
 protected:
  void SetUp() override {
    CERTMOUNT_REQUIRE_ROOT();
    // 10,000 rows with synchronous=FULL would spend minutes in fsync on a
    // disk; a tmpfs keeps every code path and makes fsync free.
    const std::string root = dir_.Sub("tmpfs");
    std::filesystem::create_directories(root);
    ASSERT_EQ(mount("tmpfs", root.c_str(), "tmpfs", 0, "size=512m"), 0) << strerror(errno);
    Open(root);
  }
};

TEST_F(OverdueSpreadTest, TenThousandOverdueVolumesReachTheIssuerAtTheConfiguredRate) {
  const int64_t t0 = clock_.NowUnix();
  constexpr int kVolumes = 10'000;
  for (int i = 0; i < kVolumes; ++i) {
    const std::string id = "vol-" + std::to_string(i);
    VolumeRecord record = Record(id);
    // Overdue by up to a day, as after a long downtime.
    IssuedCertificateFields cert{"0" + std::to_string(i + 1), t0 - 90'000, t0 + 3'600,
                                 t0 - 1 - (i % 86'400)};
    ASSERT_TRUE(StoreTestAccess(*store_).WriteInOneTransaction(record, id, cert, [] {}).ok());
    ASSERT_TRUE(
        Env::Default()->CreateDirectories(VolumeLayout::For(data_root_, id).data, 0700).ok());
  }
  SchedulerOptions options;
  options.issuer_qps = 20;
  options.issuer_burst = 20;
  options.max_concurrent_issuance = 4;
  RenewalScheduler& scheduler = MakeScheduler(options);
  auto loaded = scheduler.Load();
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->overdue, kVolumes);
  EXPECT_EQ(loaded->spread_seconds, kVolumes / 20 - 1);

  constexpr int kSeconds = 30;
  RunAllDue();
  RunUntil(t0 + kSeconds - 1);
  const std::map<int64_t, int> per_second = issuer_->per_second();
  int total = 0;
  for (const auto& [second, count] : per_second) {
    EXPECT_LE(count, 20) << "at second " << second - t0;
    total += count;
  }
  // And the issuer is kept busy at that rate, not starved.
  EXPECT_EQ(total, 20 * kSeconds);
}

TEST_F(OverdueSpreadTest, BurstAfterAQuietPeriodIsBoundedByTheBucket) {
  const int64_t t0 = clock_.NowUnix();
  SchedulerOptions options;
  options.issuer_qps = 5;
  options.issuer_burst = 10;
  options.max_concurrent_issuance = 64;
  RenewalScheduler& scheduler = MakeScheduler(options);
  ASSERT_TRUE(scheduler.Load().ok());
  // Published while running, all due in the same second.
  for (int i = 0; i < 100; ++i) {
    const std::string id = "p-" + std::to_string(i);
    VolumeRecord record = Record(id);
    IssuedCertificateFields cert{"0" + std::to_string(i + 1), t0, t0 + 3'600, t0 + 10};
    ASSERT_TRUE(StoreTestAccess(*store_).WriteInOneTransaction(record, id, cert, [] {}).ok());
    ASSERT_TRUE(
        Env::Default()->CreateDirectories(VolumeLayout::For(data_root_, id).data, 0700).ok());
    scheduler.OnMounted(Scheduled(id));
  }
  RunUntil(t0 + 14);
  const std::map<int64_t, int> per_second = issuer_->per_second();
  EXPECT_EQ(per_second.at(t0 + 10), 10);  // the burst
  for (int64_t s = t0 + 11; s <= t0 + 14; ++s) EXPECT_EQ(per_second.at(s), 5) << s - t0;
}

}  // namespace
}  // namespace certmount
