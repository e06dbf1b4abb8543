// The startup cleanup with rows in every state, on a real SQLite file, a
// real tmpfs and real bind mounts: only volumes that are mounted and still
// mounted survive a restart; everything else loses its row, its mount and
// its files, and directories without a row are swept.
#include <gtest/gtest.h>

#include <sys/mount.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/clock.h"
#include "common/env.h"
#include "node/node.h"
#include "state/store.h"
#include "support/mounts.h"
#include "support/root.h"
#include "support/store_test_access.h"
#include "support/temp_dir.h"
#include "volume/atomic_writer.h"
#include "volume/mount.h"
#include "volume/publisher.h"
#include "volume/volume_layout.h"

namespace certmount::testing {
namespace {

namespace fs = std::filesystem;

// One driver "life": the Node certmountd runs (src/node/node.h), opened
// over the same data root and never served; the tests drive its publisher.
// Two lives never overlap: each holds the data root's lock.
struct Driver {
  explicit Driver(const TempDir& dir) {
    options.data_root = dir.Sub("data");
    options.target_root = dir.Sub("pods");
    options.socket_path = dir.Sub("csi.sock");
    fs::create_directories(options.target_root);
    auto opened = Node::Open(options);
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    node = std::move(opened).value();
    publisher = &node->publisher();
    store = &node->store();
  }

  NodeOptions options;
  std::unique_ptr<Node> node;
  Publisher* publisher = nullptr;
  Store* store = nullptr;
};

std::string MakeTarget(const Driver& driver, const std::string& pod) {
  std::string parent = driver.options.target_root + "/" + pod + "/volumes/kubernetes.io~csi/tls";
  fs::create_directories(parent);
  return parent + "/mount";
}

std::string ReadFileText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

PublishRequest Request(const std::string& id, const std::string& target) {
  PublishRequest request;
  request.volume_id = id;
  request.target_path = target;
  request.volume_context = {{"csi.storage.k8s.io/ephemeral", "true"},
                            {"csi.storage.k8s.io/pod.name", "p"},
                            {"csi.storage.k8s.io/pod.namespace", "ns"},
                            {"csi.cert-manager.io/issuer-name", "local"},
                            {"csi.cert-manager.io/common-name", id}};
  return request;
}

TEST(StartupCleanupTest, KeepsOnlyMountedVolumesAndSweepsEverythingElse) {
  CERTMOUNT_REQUIRE_ROOT();
  TempDir dir;
  std::string kept_target, lost_mount_target, in_flight_target;
  const std::string volumes_root = dir.Sub("data") + "/volumes";
  {
    Driver first(dir);
    ASSERT_TRUE(first.publisher->Startup().ok());

    // Mounted, with a live bind mount: survives.
    kept_target = MakeTarget(first, "kept");
    ASSERT_TRUE(first.publisher->Publish(Request("csi-kept", kept_target)).ok());

    // Mounted, but the mount is gone (as after a node reboot): deleted.
    lost_mount_target = MakeTarget(first, "lost");
    ASSERT_TRUE(first.publisher->Publish(Request("csi-lost", lost_mount_target)).ok());
    ASSERT_TRUE(Unmount(lost_mount_target, Env::Default()).ok());

    // An in-flight publish that had already written files and bind-mounted
    // when the driver died: the row is unmounted, so it is deleted and its
    // mount undone, even though the mount is live.
    in_flight_target = MakeTarget(first, "inflight");
    VolumeRecord row;
    row.volume_id = "csi-inflight";
    row.target_path = in_flight_target;
    ASSERT_TRUE(StoreTestAccess(*first.store).RegisterVolume(row).ok());
    VolumeLayout layout = VolumeLayout::For(first.options.data_root, "csi-inflight");
    ASSERT_TRUE(WriteFileSet(layout.data, {{"tls.crt", "cert", 0644}}, {}, Env::Default()).ok());
    fs::create_directories(in_flight_target);
    ASSERT_TRUE(BindMountReadOnly(layout.data, in_flight_target, Env::Default()).ok());

    // A directory with no row: a crash after a row's deletion committed.
    ASSERT_TRUE(WriteFileSet(VolumeLayout::For(first.options.data_root, "csi-orphan").data,
                             {{"tls.key", "k", 0600}}, {}, Env::Default())
                    .ok());
  }  // the first life ends without unpublishing anything

  {
    Driver second(dir);
    Result<StartupSummary> summary = second.publisher->Startup();
    ASSERT_TRUE(summary.ok()) << summary.status().ToString();
    EXPECT_EQ(summary->kept, 1);
    EXPECT_EQ(summary->deleted, 2);
    EXPECT_EQ(summary->unmounted_by_check, 1);
    EXPECT_EQ(summary->orphans_removed, 1);

    Result<std::vector<VolumeRecord>> rows = StoreTestAccess(*second.store).ListVolumes();
    ASSERT_TRUE(rows.ok());
    ASSERT_EQ(rows->size(), 1u);
    EXPECT_EQ(rows->front().volume_id, "csi-kept");
    EXPECT_TRUE(rows->front().mounted);

    EXPECT_TRUE(IsMountPoint(kept_target));
    EXPECT_TRUE(fs::exists(kept_target + "/tls.crt"));
    EXPECT_FALSE(IsMountPoint(lost_mount_target));
    EXPECT_FALSE(IsMountPoint(in_flight_target));
    std::vector<std::string> left;
    for (const auto& entry : fs::directory_iterator(volumes_root)) {
      left.push_back(entry.path().filename().string());
    }
    EXPECT_EQ(left, std::vector<std::string>{"csi-kept"});
  }  // the second life ends

  // A third start finds nothing more to do.
  Driver third(dir);
  Result<StartupSummary> again = third.publisher->Startup();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->kept, 1);
  EXPECT_EQ(again->deleted, 0);
  EXPECT_EQ(again->orphans_removed, 0);
  ASSERT_TRUE(third.publisher->Unpublish("csi-kept", kept_target).ok());
}

void RemoveDatabase(const TempDir& dir) {
  for (const char* suffix : {"", "-wal", "-shm"})
    fs::remove(dir.Sub("data") + "/state.db" + suffix);
}

TEST(StartupCleanupTest, MountedDirectoryWithoutRowIsKeptWhenItCannotBeAdopted) {
  CERTMOUNT_REQUIRE_ROOT();
  TempDir dir;
  std::string target;
  {
    Driver first(dir);
    ASSERT_TRUE(first.publisher->Startup().ok());
    target = MakeTarget(first, "p");
    ASSERT_TRUE(first.publisher->Publish(Request("csi-p", target)).ok());
  }
  const std::string volume_dir = dir.Sub("data") + "/volumes/csi-p";
  fs::remove(volume_dir + "/volume.json");  // no description to rebuild from
  RemoveDatabase(dir);
  const std::string cert = ReadFileText(target + "/tls.crt");

  Driver second(dir);
  Result<StartupSummary> summary = second.publisher->Startup();
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->adopted, 0);
  EXPECT_EQ(summary->kept_unadoptable, 1);
  EXPECT_EQ(summary->orphans_removed, 0);
  EXPECT_TRUE(IsMountPoint(target));
  EXPECT_EQ(ReadFileText(target + "/tls.crt"), cert);
  EXPECT_TRUE(fs::exists(volume_dir + "/data/tls.crt"));
}

TEST(StartupCleanupTest, RowsAtForeignMountsGoWithoutTouchingTheMounts) {
  CERTMOUNT_REQUIRE_ROOT();
  TempDir dir;
  std::string foreign_target, empty_target, busy_target;
  {
    Driver first(dir);
    ASSERT_TRUE(first.publisher->Startup().ok());
    // A row that says mounted, but what is mounted at its target is not ours.
    foreign_target = MakeTarget(first, "foreign");
    ASSERT_TRUE(first.publisher->Publish(Request("csi-foreign", foreign_target)).ok());
    ASSERT_EQ(umount2(foreign_target.c_str(), 0), 0);
    ASSERT_EQ(mount("foreign", foreign_target.c_str(), "tmpfs", 0, "size=64k"), 0);
    std::ofstream(foreign_target + "/theirs.txt") << "theirs";
    // Publishes that died before mounting: one target empty, one holding a
    // file the driver never wrote.
    for (const char* pod : {"empty", "busy"}) {
      VolumeRecord row;
      row.volume_id = std::string("csi-") + pod;
      row.target_path = MakeTarget(first, pod);
      fs::create_directories(row.target_path);
      ASSERT_TRUE(StoreTestAccess(*first.store).RegisterVolume(row).ok());
      (std::string(pod) == "empty" ? empty_target : busy_target) = row.target_path;
    }
    std::ofstream(busy_target + "/someone.txt") << "someone's";
  }

  Driver second(dir);
  Result<StartupSummary> summary = second.publisher->Startup();
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->deleted, 3);
  EXPECT_EQ(summary->kept, 0);
  Result<std::vector<VolumeRecord>> rows = StoreTestAccess(*second.store).ListVolumes();
  ASSERT_TRUE(rows.ok());
  EXPECT_TRUE(rows->empty());
  EXPECT_TRUE(IsMountPoint(foreign_target));
  EXPECT_EQ(ReadFileText(foreign_target + "/theirs.txt"), "theirs");
  EXPECT_FALSE(fs::exists(empty_target));
  EXPECT_EQ(ReadFileText(busy_target + "/someone.txt"), "someone's");
  EXPECT_FALSE(fs::exists(dir.Sub("data") + "/volumes/csi-foreign"));
  umount2(foreign_target.c_str(), 0);
}

// The driver restarted without the host's tmpfs: pods still hold binds of
// the old one. The volume is reattached through the pod's mount, so what a
// renewal writes reaches the pod, and unpublish cleans up both mounts.
TEST(StartupCleanupTest, LostVolumesTmpfsIsReattachedThroughThePodsMount) {
  CERTMOUNT_REQUIRE_ROOT();
  TempDir dir;
  std::string target;
  const std::string volumes_root = dir.Sub("data") + "/volumes";
  {
    Driver first(dir);
    ASSERT_TRUE(first.publisher->Startup().ok());
    target = MakeTarget(first, "l");
    ASSERT_TRUE(first.publisher->Publish(Request("csi-l", target)).ok());
  }
  ASSERT_EQ(umount2(volumes_root.c_str(), MNT_DETACH), 0);
  const std::string cert = ReadFileText(target + "/tls.crt");

  Driver second(dir);
  Result<StartupSummary> summary = second.publisher->Startup();
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->kept, 1);
  EXPECT_EQ(summary->deleted, 0);
  Result<std::optional<VolumeRecord>> row = second.store->GetVolume("csi-l");
  ASSERT_TRUE(row.ok() && row->has_value());
  EXPECT_TRUE((*row)->mounted);
  EXPECT_EQ((*row)->last_error, "");
  EXPECT_EQ(ReadFileText(target + "/tls.crt"), cert);

  VolumeLayout layout = VolumeLayout::For(second.options.data_root, "csi-l");
  ASSERT_TRUE(WriteFileSet(layout.data, {{"tls.crt", "renewed", 0644}}, {}, Env::Default()).ok());
  EXPECT_EQ(ReadFileText(target + "/tls.crt"), "renewed");

  ASSERT_TRUE(second.publisher->Unpublish("csi-l", target).ok());
  EXPECT_FALSE(IsMountPoint(target));
  EXPECT_FALSE(fs::exists(layout.root));
  EXPECT_EQ(MountPointsUnder(volumes_root), std::vector<std::string>{volumes_root});
}

TEST(StartupCleanupTest, VolumesTmpfsIsMountedOnceAndKeysNeverTouchDisk) {
  CERTMOUNT_REQUIRE_ROOT();
  TempDir dir;
  const std::string volumes_root = dir.Sub("data") + "/volumes";
  {
    Driver driver(dir);
    ASSERT_TRUE(driver.publisher->Startup().ok());
    ASSERT_TRUE(IsMountPoint(volumes_root));
    std::ifstream mountinfo("/proc/self/mountinfo");
    int tmpfs_mounts = 0;
    for (std::string line; std::getline(mountinfo, line);) {
      if (line.find(" " + volumes_root + " ") != std::string::npos &&
          line.find(" - tmpfs ") != std::string::npos) {
        ++tmpfs_mounts;
      }
    }
    EXPECT_EQ(tmpfs_mounts, 1);
  }  // the first life ends
  // A restart reuses the tmpfs instead of hiding the pods' files under a new one.
  Driver again(dir);
  ASSERT_TRUE(again.publisher->Startup().ok());
  std::ifstream mountinfo2("/proc/self/mountinfo");
  int tmpfs_mounts = 0;
  for (std::string line; std::getline(mountinfo2, line);) {
    if (line.find(" " + volumes_root + " ") != std::string::npos) ++tmpfs_mounts;
  }
  EXPECT_EQ(tmpfs_mounts, 1);
}

}  // namespace
}  // namespace certmount::testing
