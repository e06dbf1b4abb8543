// The driver touches only what the mount table proves is its own: each
// hostile sequence (foreign, stacked and covered mounts) against the real certmountd over its
// socket, as root, with real mounts, asserting the final mount table, rows, files, the survival of
// foreign mounts and the code kubelet sees.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <unistd.h>

#include <SQLiteCpp/SQLiteCpp.h>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "support/daemon.h"
#include "support/mounts.h"
#include "support/root.h"
#include "support/temp_dir.h"
#include "support/x509_inspect.h"
#include "volume/mountinfo.h"

namespace certmount::testing {
namespace {

namespace fs = std::filesystem;
using grpc::StatusCode;

std::map<std::string, std::string> Attrs(const std::string& common_name) {
  return {{"csi.cert-manager.io/issuer-name", "local"},
          {"csi.cert-manager.io/common-name", common_name}};
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A port the kernel reports free on 127.0.0.1 (the probe socket is closed
// before the daemon binds it).
int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(addr);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length);
  close(fd);
  return ntohs(addr.sin_port);
}

class OwnershipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CERTMOUNT_REQUIRE_ROOT();
    daemon_ = std::make_unique<Daemon>(dir_.path().string());
    metrics_port_ = FreePort();
    ASSERT_TRUE(daemon_->Start({"--metrics-address=127.0.0.1:" + std::to_string(metrics_port_)}))
        << daemon_->log();
  }

  grpc::Status Publish(const std::string& id, const std::string& target,
                       const std::map<std::string, std::string>& attributes,
                       const std::string& volume_mount_group = "") {
    csi::v1::NodePublishVolumeRequest request = KubeletPublishRequest(id, target, attributes);
    request.mutable_volume_capability()->mutable_mount()->set_volume_mount_group(
        volume_mount_group);
    csi::v1::NodePublishVolumeResponse response;
    return daemon_->node().NodePublishVolume(CallContext().get(), request, &response);
  }

  grpc::Status Unpublish(const std::string& id, const std::string& target) {
    csi::v1::NodeUnpublishVolumeRequest request;
    request.set_volume_id(id);
    request.set_target_path(target);
    csi::v1::NodeUnpublishVolumeResponse response;
    return daemon_->node().NodeUnpublishVolume(CallContext().get(), request, &response);
  }

  // The row's mounted flag, or -1 when there is no row.
  int Mounted(const std::string& id) {
    SQLite::Database db(daemon_->data_root() + "/state.db", SQLite::OPEN_READONLY);
    SQLite::Statement row(db, "SELECT mounted FROM volumes WHERE volume_id = ?");
    row.bind(1, id);
    return row.executeStep() ? row.getColumn(0).getInt() : -1;
  }

  int Rows() {
    SQLite::Database db(daemon_->data_root() + "/state.db", SQLite::OPEN_READONLY);
    return db.execAndGet("SELECT count(*) FROM volumes").getInt();
  }

  std::string VolumeDir(const std::string& id) { return daemon_->data_root() + "/volumes/" + id; }

  // A foreign tmpfs at `path` holding one file, as an admin or another
  // driver would leave it.
  void MountForeign(const std::string& path) {
    fs::create_directories(path);
    ASSERT_EQ(mount("foreign", path.c_str(), "tmpfs", 0, "size=64k"), 0) << strerror(errno);
    std::ofstream(path + "/foreign.txt") << "not certmount's";
  }

  bool ForeignIntact(const std::string& path) {
    Result<MountTable> table = MountTable::Read();
    const MountInfoEntry* top = table.ok() ? table->TopMountAt(path) : nullptr;
    return top != nullptr && top->source == "foreign" &&
           ReadAll(path + "/foreign.txt") == "not certmount's";
  }

  size_t MountsAt(const std::string& path) {
    Result<MountTable> table = MountTable::Read();
    return table.ok() ? table->MountCountAt(path) : 0;
  }

  double ScheduledVolumes() {
    httplib::Client client("127.0.0.1", metrics_port_);
    httplib::Result scrape = client.Get("/metrics");
    if (!scrape) {
      ADD_FAILURE() << "scrape: " << httplib::to_string(scrape.error());
      return -1;
    }
    const std::string key = "\ncertmount_renewal_scheduled_volumes ";
    size_t at = scrape->body.find(key);
    return at == std::string::npos ? -1 : std::stod(scrape->body.substr(at + key.size()));
  }

  bool Restart() {
    return daemon_->Start({"--metrics-address=127.0.0.1:" + std::to_string(metrics_port_)});
  }

  TempDir dir_;
  std::unique_ptr<Daemon> daemon_;
  int metrics_port_ = 0;
};

TEST_F(OwnershipTest, UnpublishOfUnknownVolumeLeavesForeignMountAndAnswersOk) {
  const std::string target = daemon_->PodTarget("pod-f");
  MountForeign(target);
  grpc::Status status = Unpublish("csi-unknown", target);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(ForeignIntact(target));
  EXPECT_EQ(MountsAt(target), 1u);
  // A target that is gone is OK too (kubernetes#90752).
  EXPECT_TRUE(Unpublish("csi-unknown", daemon_->PodTarget("pod-none")).ok());
}

TEST_F(OwnershipTest, UnpublishOfUnknownVolumeAtAnotherVolumesTargetLeavesIt) {
  const std::string target = daemon_->PodTarget("pod-a");
  ASSERT_TRUE(Publish("csi-a", target, Attrs("a")).ok());
  const std::string cert = ReadAll(target + "/tls.crt");
  grpc::Status status = Unpublish("csi-stranger", target);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(IsMountPoint(target));
  EXPECT_EQ(ReadAll(target + "/tls.crt"), cert);
  EXPECT_EQ(Mounted("csi-a"), 1);
  EXPECT_TRUE(fs::exists(VolumeDir("csi-a") + "/data/tls.crt"));
}

TEST_F(OwnershipTest, PublishOverAForeignMountIsRefusedAndWritesNothing) {
  const std::string target = daemon_->PodTarget("pod-f");
  MountForeign(target);
  grpc::Status status = Publish("csi-f", target, Attrs("f"));
  EXPECT_EQ(status.error_code(), StatusCode::FAILED_PRECONDITION) << status.error_message();
  EXPECT_NE(status.error_message().find("already a mount point"), std::string::npos);
  EXPECT_TRUE(ForeignIntact(target));
  EXPECT_EQ(MountsAt(target), 1u);
  EXPECT_EQ(Rows(), 0);
  EXPECT_FALSE(fs::exists(VolumeDir("csi-f")));
}

TEST_F(OwnershipTest, PublishOnTopOfAnotherVolumeIsRefused) {
  const std::string target = daemon_->PodTarget("pod-b");
  ASSERT_TRUE(Publish("csi-b", target, Attrs("b")).ok());
  const std::string cert = ReadAll(target + "/tls.crt");
  grpc::Status status = Publish("csi-a", target, Attrs("a"));
  EXPECT_EQ(status.error_code(), StatusCode::FAILED_PRECONDITION) << status.error_message();
  EXPECT_EQ(MountsAt(target), 1u);
  EXPECT_EQ(ReadAll(target + "/tls.crt"), cert);
  EXPECT_EQ(Mounted("csi-a"), -1);
  EXPECT_FALSE(fs::exists(VolumeDir("csi-a")));
  // Unpublishing B takes only B.
  ASSERT_TRUE(Unpublish("csi-b", target).ok());
  EXPECT_FALSE(IsMountPoint(target));
  EXPECT_EQ(Rows(), 0);
}

TEST_F(OwnershipTest, PublishBelowAnotherVolumesMountedDirectoryIsRefused) {
  const std::string b_target = daemon_->PodTarget("pod-b");
  ASSERT_TRUE(Publish("csi-b", b_target, Attrs("b")).ok());
  std::string generation;
  for (const auto& entry : fs::directory_iterator(b_target)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("..", 0) == 0 && name != "..data" && entry.is_directory()) generation = name;
  }
  ASSERT_FALSE(generation.empty());
  const std::string cert = ReadAll(b_target + "/tls.crt");
  for (const std::string& target :
       {b_target + "/" + generation, b_target + "/" + generation + "/x"}) {
    grpc::Status status = Publish("csi-a", target, Attrs("a"));
    EXPECT_TRUE(status.error_code() == StatusCode::INVALID_ARGUMENT)
        << target << ": " << status.error_message();
    EXPECT_FALSE(IsMountPoint(target));
  }
  EXPECT_EQ(ReadAll(b_target + "/tls.crt"), cert);
  EXPECT_EQ(Mounted("csi-a"), -1);
  EXPECT_FALSE(fs::exists(VolumeDir("csi-a")));
  ASSERT_TRUE(Unpublish("csi-b", b_target).ok());
  EXPECT_TRUE(MountPointsUnder(daemon_->target_root()).empty());
}

TEST_F(OwnershipTest, NonEmptyTargetDirectoryIsRefusedAndKept) {
  const std::string target = daemon_->PodTarget("pod-n");
  fs::create_directories(target);
  std::ofstream(target + "/mine.txt") << "someone's";
  grpc::Status status = Publish("csi-n", target, Attrs("n"));
  EXPECT_EQ(status.error_code(), StatusCode::FAILED_PRECONDITION) << status.error_message();
  EXPECT_FALSE(IsMountPoint(target));
  EXPECT_EQ(ReadAll(target + "/mine.txt"), "someone's");
  EXPECT_EQ(Rows(), 0);
  EXPECT_FALSE(fs::exists(VolumeDir("csi-n")));
  // An unpublish kubelet sends after the failure is OK and removes nothing.
  EXPECT_TRUE(Unpublish("csi-n", target).ok());
  EXPECT_EQ(ReadAll(target + "/mine.txt"), "someone's");
}

TEST_F(OwnershipTest, RepublishReestablishesALostMountWithoutReissuing) {
  const std::string target = daemon_->PodTarget("pod-r");
  ASSERT_TRUE(Publish("csi-r", target, Attrs("r")).ok());
  const std::string cert = ReadAll(target + "/tls.crt");
  ASSERT_EQ(umount2(target.c_str(), 0), 0);  // an admin's umount
  ASSERT_FALSE(IsMountPoint(target));
  grpc::Status status = Publish("csi-r", target, Attrs("r"));
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(MountsAt(target), 1u);
  EXPECT_EQ(ReadAll(target + "/tls.crt"), cert);
  // Once more with the mount in place: still one layer.
  ASSERT_TRUE(Publish("csi-r", target, Attrs("r")).ok());
  EXPECT_EQ(MountsAt(target), 1u);
  EXPECT_EQ(Mounted("csi-r"), 1);
}

TEST_F(OwnershipTest, RepublishWithOtherAttributesOrGroupIsAlreadyExists) {
  const std::string target = daemon_->PodTarget("pod-x");
  ASSERT_TRUE(Publish("csi-x", target, Attrs("x")).ok());
  const std::string cert = ReadAll(target + "/tls.crt");
  EXPECT_EQ(Publish("csi-x", target, Attrs("other")).error_code(), StatusCode::ALREADY_EXISTS);
  EXPECT_EQ(Publish("csi-x", target, Attrs("x"), "2345").error_code(), StatusCode::ALREADY_EXISTS);
  EXPECT_EQ(ReadAll(target + "/tls.crt"), cert);
  EXPECT_EQ(MountsAt(target), 1u);
  EXPECT_TRUE(Publish("csi-x", target, Attrs("x")).ok());
}

TEST_F(OwnershipTest, OnlyTheAccessModeKubeletSendsIsAccepted) {
  using Mode = csi::v1::VolumeCapability::AccessMode;
  int n = 0;
  for (auto mode :
       {Mode::SINGLE_NODE_READER_ONLY, Mode::MULTI_NODE_READER_ONLY, Mode::MULTI_NODE_SINGLE_WRITER,
        Mode::MULTI_NODE_MULTI_WRITER, Mode::SINGLE_NODE_SINGLE_WRITER,
        Mode::SINGLE_NODE_MULTI_WRITER, Mode::UNKNOWN}) {
    const std::string target = daemon_->PodTarget("pod-m" + std::to_string(n));
    csi::v1::NodePublishVolumeRequest request =
        KubeletPublishRequest("csi-m" + std::to_string(n++), target, Attrs("m"));
    request.mutable_volume_capability()->mutable_access_mode()->set_mode(mode);
    csi::v1::NodePublishVolumeResponse response;
    grpc::Status status =
        daemon_->node().NodePublishVolume(CallContext().get(), request, &response);
    EXPECT_EQ(status.error_code(), StatusCode::INVALID_ARGUMENT) << Mode::Mode_Name(mode);
    EXPECT_FALSE(fs::exists(target));
  }
  EXPECT_EQ(Rows(), 0);
  EXPECT_TRUE(Publish("csi-ok", daemon_->PodTarget("pod-ok"), Attrs("ok")).ok());
}

TEST_F(OwnershipTest, UnpublishNeverRemovesAForeignMountStackedOnOurs) {
  const std::string target = daemon_->PodTarget("pod-s");
  ASSERT_TRUE(Publish("csi-s", target, Attrs("s")).ok());
  MountForeign(target);
  grpc::Status status = Unpublish("csi-s", target);
  EXPECT_EQ(status.error_code(), StatusCode::FAILED_PRECONDITION) << status.error_message();
  EXPECT_TRUE(ForeignIntact(target));
  EXPECT_EQ(MountsAt(target), 2u);
  EXPECT_EQ(Mounted("csi-s"), 1);
  EXPECT_EQ(ScheduledVolumes(), 1);
  // Once the admin removes theirs, ours goes.
  ASSERT_EQ(umount2(target.c_str(), 0), 0);
  ASSERT_TRUE(Unpublish("csi-s", target).ok());
  EXPECT_FALSE(fs::exists(target));
  EXPECT_EQ(Rows(), 0);
  EXPECT_EQ(ScheduledVolumes(), 0);
}

TEST_F(OwnershipTest, UnpublishKeepsATargetDirectoryHoldingSomeoneElsesFiles) {
  const std::string target = daemon_->PodTarget("pod-k");
  ASSERT_TRUE(Publish("csi-k", target, Attrs("k")).ok());
  ASSERT_EQ(umount2(target.c_str(), 0), 0);
  std::ofstream(target + "/left.txt") << "someone's";
  grpc::Status status = Unpublish("csi-k", target);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(ReadAll(target + "/left.txt"), "someone's");
  EXPECT_EQ(Rows(), 0);
  EXPECT_FALSE(fs::exists(VolumeDir("csi-k")));
}

TEST_F(OwnershipTest, FailedUnmountKeepsRowMountAndSchedule) {
  const std::string target = daemon_->PodTarget("pod-busy");
  ASSERT_TRUE(Publish("csi-busy", target, Attrs("busy")).ok());
  ASSERT_EQ(ScheduledVolumes(), 1);
  {
    // An open file keeps the mount busy; umount2 without MNT_DETACH fails.
    int fd = open((target + "/tls.crt").c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    grpc::Status status = Unpublish("csi-busy", target);
    close(fd);
    EXPECT_EQ(status.error_code(), StatusCode::UNAVAILABLE) << status.error_message();
    EXPECT_TRUE(IsMountPoint(target));
    EXPECT_EQ(Mounted("csi-busy"), 1);
    EXPECT_EQ(ScheduledVolumes(), 1);
  }
  ASSERT_TRUE(Unpublish("csi-busy", target).ok());
  EXPECT_EQ(ScheduledVolumes(), 0);
  EXPECT_EQ(Rows(), 0);
}

// docs/state.md's recovery: a damaged state.db is moved aside and the
// driver restarted. Every published volume keeps its mount and files, gets
// its row back (from volume.json and its certificate) and is renewed again.
TEST_F(OwnershipTest, MovingTheDatabaseAsideKeepsEveryVolumeWorking) {
  const std::string a = daemon_->PodTarget("pod-a");
  const std::string b = daemon_->PodTarget("pod-b");
  ASSERT_TRUE(Publish("csi-a", a, Attrs("a")).ok());
  ASSERT_TRUE(Publish("csi-b", b, Attrs("b"), "2345").ok());
  const std::string cert_a = ReadAll(a + "/tls.crt");
  const std::string cert_b = ReadAll(b + "/tls.crt");
  daemon_->Kill();
  const std::string db = daemon_->data_root() + "/state.db";
  fs::rename(db, db + ".damaged");
  fs::remove(db + "-wal");
  fs::remove(db + "-shm");
  ASSERT_TRUE(Restart()) << daemon_->log();

  EXPECT_EQ(ReadAll(a + "/tls.crt"), cert_a);
  EXPECT_EQ(ReadAll(b + "/tls.crt"), cert_b);
  EXPECT_EQ(MountsAt(a), 1u);
  EXPECT_EQ(MountsAt(b), 1u);
  EXPECT_EQ(Mounted("csi-a"), 1);
  EXPECT_EQ(Mounted("csi-b"), 1);
  EXPECT_EQ(ScheduledVolumes(), 2);
  {
    SQLite::Database state(db, SQLite::OPEN_READONLY);
    SQLite::Statement row(
        state,
        "SELECT serial, not_after, target_path, pod_name, file_group FROM volumes "
        "WHERE volume_id = 'csi-b'");
    ASSERT_TRUE(row.executeStep());
    InspectedCertificate cert = InspectCertificateFile(b + "/tls.crt");
    // Stored as `openssl x509 -serial` prints it, like the inspected file.
    EXPECT_EQ(row.getColumn(0).getString(), cert.serial_hex);
    EXPECT_EQ(row.getColumn(1).getInt64(), cert.not_after);
    EXPECT_EQ(row.getColumn(2).getString(), b);
    EXPECT_EQ(row.getColumn(3).getString(), "web-0");
    EXPECT_EQ(row.getColumn(4).getInt(), 2345);
  }
  // kubelet's republish matches the adopted row; its unpublish cleans up.
  EXPECT_TRUE(Publish("csi-b", b, Attrs("b"), "2345").ok());
  ASSERT_TRUE(Unpublish("csi-a", a).ok());
  ASSERT_TRUE(Unpublish("csi-b", b).ok());
  EXPECT_TRUE(MountPointsUnder(daemon_->target_root()).empty());
  EXPECT_EQ(Rows(), 0);
  EXPECT_FALSE(fs::exists(VolumeDir("csi-a")));
}

// Publishes and unpublishes of one id race from several threads; whatever
// the interleaving, the node ends consistent: mounted row <=> our single
// bind mount <=> files, and after a final unpublish nothing is left.
TEST_F(OwnershipTest, ConcurrentPublishAndUnpublishOfOneIdKeepTheInvariants) {
  const std::string target = daemon_->PodTarget("pod-race");
  std::atomic<bool> stacked{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 12; ++i) {
        if ((i + t) % 2 == 0) {
          (void)Publish("csi-race", target, Attrs("race"));
        } else {
          (void)Unpublish("csi-race", target);
        }
        if (MountsAt(target) > 1) stacked = true;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_FALSE(stacked);
  const int mounted = Mounted("csi-race");
  if (mounted == 1) {
    EXPECT_EQ(MountsAt(target), 1u);
    EXPECT_FALSE(ReadAll(target + "/tls.crt").empty());
  } else {
    EXPECT_EQ(mounted, -1);
    EXPECT_EQ(MountsAt(target), 0u);
    EXPECT_FALSE(fs::exists(VolumeDir("csi-race")));
  }
  ASSERT_TRUE(Unpublish("csi-race", target).ok());
  EXPECT_EQ(Rows(), 0);
  EXPECT_TRUE(MountPointsUnder(daemon_->target_root()).empty());
  EXPECT_FALSE(fs::exists(VolumeDir("csi-race")));
  EXPECT_EQ(ScheduledVolumes(), 0);
  EXPECT_NE(daemon_->log().find("csi-race"), std::string::npos);
}

// A republish of a volume whose files are gone from its data directory
// issues them again before answering OK, through the path renewals take.
TEST_F(OwnershipTest, RepublishReissuesFilesThatAreGone) {
  const std::string target = daemon_->PodTarget("pod-g");
  ASSERT_TRUE(Publish("csi-g", target, Attrs("g")).ok());
  const std::string data = VolumeDir("csi-g") + "/data";
  std::string serial = InspectCertificateFile(target + "/tls.crt").serial_hex;
  // First the three names, then everything in the directory.
  for (bool empty_it : {false, true}) {
    if (empty_it) {
      for (const auto& entry : fs::directory_iterator(data)) fs::remove_all(entry.path());
    } else {
      for (const char* name : {"tls.crt", "tls.key", "ca.crt"}) fs::remove(data + "/" + name);
    }
    ASSERT_FALSE(fs::exists(target + "/tls.crt"));
    grpc::Status status = Publish("csi-g", target, Attrs("g"));
    ASSERT_TRUE(status.ok()) << status.error_message() << daemon_->log();
    InspectedCertificate cert = InspectCertificateFile(target + "/tls.crt");
    EXPECT_NE(cert.serial_hex, serial);
    serial = cert.serial_hex;
    EXPECT_FALSE(ReadAll(target + "/tls.key").empty());
    EXPECT_FALSE(ReadAll(target + "/ca.crt").empty());
    EXPECT_EQ(MountsAt(target), 1u);
    EXPECT_EQ(Mounted("csi-g"), 1);
    EXPECT_EQ(ScheduledVolumes(), 1);
  }
  SQLite::Database db(daemon_->data_root() + "/state.db", SQLite::OPEN_READONLY);
  SQLite::Statement row(db, "SELECT serial FROM volumes WHERE volume_id = 'csi-g'");
  ASSERT_TRUE(row.executeStep());
  EXPECT_EQ(row.getColumn(0).getString(), serial);
}

// CSI: a volume not published at the target path is unpublished there (OK),
// and neither its own mount nor whatever is at that path is touched.
TEST_F(OwnershipTest, UnpublishAtAnotherTargetThanTheRowsAnswersOkAndTouchesNothing) {
  const std::string a = daemon_->PodTarget("pod-a");
  ASSERT_TRUE(Publish("csi-a", a, Attrs("a")).ok());
  const std::string cert = ReadAll(a + "/tls.crt");
  const std::string foreign = daemon_->PodTarget("pod-b");
  MountForeign(foreign);
  const std::string plain = daemon_->PodTarget("pod-c");
  fs::create_directories(plain);
  std::ofstream(plain + "/mine.txt") << "someone's";
  for (const std::string& other : {foreign, plain}) {
    grpc::Status status = Unpublish("csi-a", other);
    EXPECT_TRUE(status.ok()) << other << ": " << status.error_message();
  }
  EXPECT_TRUE(ForeignIntact(foreign));
  EXPECT_EQ(MountsAt(foreign), 1u);
  EXPECT_EQ(ReadAll(plain + "/mine.txt"), "someone's");
  EXPECT_FALSE(IsMountPoint(plain));
  EXPECT_EQ(MountsAt(a), 1u);
  EXPECT_EQ(ReadAll(a + "/tls.crt"), cert);
  EXPECT_EQ(Mounted("csi-a"), 1);
  EXPECT_EQ(ScheduledVolumes(), 1);
}

// The volumes tmpfs is lost (certmountd restarted without the host's) and
// the new one cannot take the volume's directory back: the volume keeps
// its mount and row but reports abnormal, saying what happened and what to
// do, through VOLUME_CONDITION and volume_status.
TEST_F(OwnershipTest, LostVolumesTmpfsThatCannotBeReattachedIsReportedAbnormal) {
  const std::string target = daemon_->PodTarget("pod-l");
  ASSERT_TRUE(Publish("csi-l", target, Attrs("l")).ok());
  const std::string cert = ReadAll(target + "/tls.crt");
  daemon_->Kill();
  const std::string volumes = daemon_->data_root() + "/volumes";
  ASSERT_EQ(umount2(volumes.c_str(), MNT_DETACH), 0);
  // A new tmpfs where a file sits at the volume's directory name: the data
  // directory cannot be made there, so reattachment fails.
  ASSERT_EQ(mount("tmpfs", volumes.c_str(), "tmpfs", 0, "mode=0711"), 0) << strerror(errno);
  std::ofstream(volumes + "/csi-l") << "in the way";
  ASSERT_TRUE(Restart()) << daemon_->log();

  EXPECT_EQ(Mounted("csi-l"), 1);
  EXPECT_EQ(MountsAt(target), 1u);
  EXPECT_EQ(ReadAll(target + "/tls.crt"), cert);
  csi::v1::NodeGetVolumeStatsRequest stats;
  stats.set_volume_id("csi-l");
  stats.set_volume_path(target);
  csi::v1::NodeGetVolumeStatsResponse response;
  grpc::Status got = daemon_->node().NodeGetVolumeStats(CallContext().get(), stats, &response);
  ASSERT_TRUE(got.ok()) << got.error_message();
  EXPECT_TRUE(response.volume_condition().abnormal());
  const std::string& message = response.volume_condition().message();
  for (const char* says : {"no longer mounted", "could not be reattached", "delete the pod"}) {
    EXPECT_NE(message.find(says), std::string::npos) << says << " not in: " << message;
  }
  SQLite::Database db(daemon_->data_root() + "/state.db", SQLite::OPEN_READONLY);
  SQLite::Statement row(db, "SELECT last_error FROM volume_status WHERE volume_id = 'csi-l'");
  ASSERT_TRUE(row.executeStep());
  const std::string last_error = row.getColumn(0).getString();
  EXPECT_NE(last_error.find("could not be reattached"), std::string::npos) << last_error;
  EXPECT_NE(last_error.find("delete the pod"), std::string::npos) << last_error;
}

}  // namespace
}  // namespace certmount::testing
