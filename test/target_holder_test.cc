// Who holds a target, asked per path (ProveHolder, WhoHoldsTarget) and of
// the mount table (WhoHolds), on real mounts: the per-path proof must never
// claim a target the table would not, must answer the common case (our own
// bind on top) without reading the table, and must leave every doubtful case
// to the table. The same for whether the data tmpfs is mounted
// (MountTmpfsIfNeeded). Each test runs in a private mount namespace of its
// own, so no mount outlives the test process whatever happens.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/env.h"
#include "support/root.h"
#include "support/temp_dir.h"
#include "volume/mount.h"
#include "volume/mountinfo.h"

namespace certmount {
namespace {

namespace fs = std::filesystem;

// Counts the reads of the mount table that go through it.
class CountingEnv : public EnvWrapper {
 public:
  CountingEnv() : EnvWrapper(Env::Default()) {}
  Result<std::string> ReadFile(const std::string& path) override {
    if (path == "/proc/self/mountinfo") ++mount_table_reads;
    return EnvWrapper::ReadFile(path);
  }
  int mount_table_reads = 0;
};

// A kernel before 5.8: statx does not report STATX_ATTR_MOUNT_ROOT.
class NoMountRootEnv : public CountingEnv {
 public:
  Result<MountRootStat> LStatMountRoot(const std::string& path) override {
    CERTMOUNT_ASSIGN_OR_RETURN(MountRootStat stat, CountingEnv::LStatMountRoot(path));
    stat.mount_root.reset();
    return stat;
  }
};

class TargetHolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CERTMOUNT_REQUIRE_ROOT();
    ASSERT_EQ(unshare(CLONE_NEWNS), 0) << strerror(errno);
    ASSERT_EQ(mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr), 0) << strerror(errno);
    // mountinfo prints canonical paths; TMPDIR may hold a symlink.
    base_ = fs::canonical(temp_.path()).string();
    ASSERT_EQ(mount("tmpfs", base_.c_str(), "tmpfs", 0, "size=16m"), 0) << strerror(errno);
    scratch_mounted_ = true;
    volumes_ = base_ + "/data/volumes";
    fs::create_directories(volumes_);
    ASSERT_EQ(
        mount("tmpfs", volumes_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0700"), 0)
        << strerror(errno);
    data_ = MakeVolume("csi-1");
    target_ = base_ + "/pods/uid/volumes/kubernetes.io~csi/tls/mount";
    fs::create_directories(target_);
  }

  void TearDown() override {
    // A lazy unmount of the scratch tmpfs takes every mount below it.
    if (scratch_mounted_) {
      EXPECT_EQ(umount2(base_.c_str(), MNT_DETACH), 0) << strerror(errno);
    }
  }

  // A volume's data directory holding one file, as a publish leaves it.
  std::string MakeVolume(const std::string& id) {
    const std::string data = volumes_ + "/" + id + "/data";
    fs::create_directories(data);
    std::ofstream(data + "/tls.crt") << id;
    return data;
  }

  void Bind(const std::string& source, const std::string& at) {
    ASSERT_TRUE(BindMountReadOnly(source, at, Env::Default()).ok()) << source << " at " << at;
  }

  void MountForeign(const std::string& at) {
    ASSERT_EQ(mount("foreign", at.c_str(), "tmpfs", 0, "size=64k"), 0) << strerror(errno);
  }

  TargetHolder FromTable(const std::string& target) {
    Result<MountTable> table = MountTable::Read(Env::Default());
    EXPECT_TRUE(table.ok()) << table.status().ToString();
    return table.ok() ? WhoHolds(*table, target, data_) : TargetHolder::kOther;
  }

  // WhoHoldsTarget's answer; `table_reads` is how many times it read the
  // mount table to give it.
  TargetHolder PerTarget(const std::string& target, CountingEnv& env, int* table_reads) {
    const int before = env.mount_table_reads;
    Result<TargetHolder> holder = WhoHoldsTarget(target, data_, &env);
    EXPECT_TRUE(holder.ok()) << holder.status().ToString();
    *table_reads = env.mount_table_reads - before;
    return holder.ok() ? *holder : TargetHolder::kOther;
  }

  testing::TempDir temp_;
  bool scratch_mounted_ = false;
  std::string base_, volumes_, data_, target_;
  CountingEnv env_;
};

TEST_F(TargetHolderTest, OwnBindOnTopIsProvenWithoutReadingTheTable) {
  Bind(data_, target_);
  EXPECT_EQ(ProveHolder(target_, data_, &env_), TargetHolder::kThisVolume);
  int reads = -1;
  EXPECT_EQ(PerTarget(target_, env_, &reads), TargetHolder::kThisVolume);
  EXPECT_EQ(reads, 0);
  EXPECT_EQ(FromTable(target_), TargetHolder::kThisVolume);
}

TEST_F(TargetHolderTest, TwoOwnBindsStackedProveTheTopOne) {
  Bind(data_, target_);
  Bind(data_, target_);
  EXPECT_EQ(ProveHolder(target_, data_, &env_), TargetHolder::kThisVolume);
  EXPECT_EQ(FromTable(target_), TargetHolder::kThisVolume);
}

TEST_F(TargetHolderTest, GoneTargetHoldsNothing) {
  const std::string gone = base_ + "/pods/uid/volumes/kubernetes.io~csi/gone/mount";
  EXPECT_EQ(ProveHolder(gone, data_, &env_), TargetHolder::kNothing);
  EXPECT_EQ(FromTable(gone), TargetHolder::kNothing);
}

TEST_F(TargetHolderTest, PlainDirectoryIsLeftToTheTable) {
  EXPECT_EQ(ProveHolder(target_, data_, &env_), std::nullopt);
  int reads = -1;
  EXPECT_EQ(PerTarget(target_, env_, &reads), TargetHolder::kNothing);
  EXPECT_EQ(reads, 1);
}

TEST_F(TargetHolderTest, ForeignMountIsOther) {
  MountForeign(target_);
  EXPECT_EQ(ProveHolder(target_, data_, &env_), std::nullopt);
  int reads = -1;
  EXPECT_EQ(PerTarget(target_, env_, &reads), TargetHolder::kOther);
  EXPECT_EQ(reads, 1);
}

TEST_F(TargetHolderTest, OwnBindUnderAForeignMountIsCovered) {
  Bind(data_, target_);
  MountForeign(target_);
  EXPECT_EQ(ProveHolder(target_, data_, &env_), std::nullopt);
  int reads = -1;
  EXPECT_EQ(PerTarget(target_, env_, &reads), TargetHolder::kThisVolumeCovered);
  EXPECT_EQ(reads, 1);
}

TEST_F(TargetHolderTest, OwnBindOnTopOfAForeignMountIsThisVolume) {
  // A foreign mount under ours does not matter: only the top one is removed.
  MountForeign(target_);
  Bind(data_, target_);
  EXPECT_EQ(ProveHolder(target_, data_, &env_), TargetHolder::kThisVolume);
  EXPECT_EQ(FromTable(target_), TargetHolder::kThisVolume);
}

TEST_F(TargetHolderTest, AnotherVolumesBindIsOther) {
  Bind(MakeVolume("csi-2"), target_);
  EXPECT_EQ(ProveHolder(target_, data_, &env_), std::nullopt);
  int reads = -1;
  EXPECT_EQ(PerTarget(target_, env_, &reads), TargetHolder::kOther);
}

TEST_F(TargetHolderTest, BindOfTheVolumeRootOrASubdirectoryIsOther) {
  // Same filesystem, near the data directory, but not it: the volume's root
  // would show its private files, a subdirectory only part of the volume.
  Bind(volumes_ + "/csi-1", target_);
  EXPECT_EQ(ProveHolder(target_, data_, &env_), std::nullopt);
  EXPECT_EQ(FromTable(target_), TargetHolder::kOther);
  ASSERT_EQ(umount2(target_.c_str(), 0), 0);
  fs::create_directories(data_ + "/sub");
  Bind(data_ + "/sub", target_);
  EXPECT_EQ(ProveHolder(target_, data_, &env_), std::nullopt);
  EXPECT_EQ(FromTable(target_), TargetHolder::kOther);
}

TEST_F(TargetHolderTest, SymlinkAtTheTargetIsNotFollowed) {
  const std::string real = base_ + "/elsewhere";
  fs::create_directories(real);
  Bind(data_, real);
  fs::remove(target_);
  fs::create_directory_symlink(real, target_);
  EXPECT_EQ(ProveHolder(target_, data_, &env_), std::nullopt);
  int reads = -1;
  EXPECT_EQ(PerTarget(target_, env_, &reads), TargetHolder::kNothing);
}

TEST_F(TargetHolderTest, DataDirectoryReplacedSinceTheBindIsOther) {
  Bind(data_, target_);
  // The bind keeps showing the directory it was made of, whatever its name
  // is now; the new directory at the old path is another inode.
  fs::rename(data_, volumes_ + "/csi-1/old-data");
  MakeVolume("csi-1");
  EXPECT_EQ(ProveHolder(target_, data_, &env_), std::nullopt);
  int reads = -1;
  EXPECT_EQ(PerTarget(target_, env_, &reads), TargetHolder::kOther);
}

TEST_F(TargetHolderTest, DataDirectoryReplacedBySymlinkProvesNothing) {
  Bind(data_, target_);
  fs::rename(data_, volumes_ + "/csi-1/old-data");
  fs::create_directory_symlink(volumes_ + "/csi-1/old-data", data_);
  EXPECT_EQ(ProveHolder(target_, data_, &env_), std::nullopt);
}

TEST_F(TargetHolderTest, BindFromAReplacedVolumesTmpfsIsOther) {
  Bind(data_, target_);
  // The driver restarted without the host's tmpfs: a new, empty one is
  // mounted over the volumes root and the same volume id is laid out again.
  // tmpfs numbers inodes per filesystem, so the new data directory, made in
  // the same order, gets the old one's inode number (6.x kernels do): only
  // the device tells them apart.
  ASSERT_EQ(
      mount("tmpfs", volumes_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0700"), 0)
      << strerror(errno);
  MakeVolume("csi-1");
  EXPECT_EQ(ProveHolder(target_, data_, &env_), std::nullopt);
  int reads = -1;
  EXPECT_EQ(PerTarget(target_, env_, &reads), TargetHolder::kOther);
  EXPECT_EQ(FromTable(target_), TargetHolder::kOther);
}

TEST_F(TargetHolderTest, KernelThatCannotTellMountRootsUsesTheTable) {
  Bind(data_, target_);
  NoMountRootEnv old_kernel;
  EXPECT_EQ(ProveHolder(target_, data_, &old_kernel), std::nullopt);
  int reads = -1;
  EXPECT_EQ(PerTarget(target_, old_kernel, &reads), TargetHolder::kThisVolume);
  EXPECT_EQ(reads, 1);
}

TEST_F(TargetHolderTest, DataTmpfsIsFoundPerPathAndMountedOnce) {
  // The directory lies on the scratch tmpfs, which is not mounted at it (a
  // node whose /var/lib is a tmpfs): not the driver's tmpfs, so one is
  // mounted; the second call finds it.
  const std::string data = base_ + "/data2/volumes";
  ASSERT_TRUE(MountTmpfsIfNeeded(data, &env_).ok());
  ASSERT_TRUE(MountTmpfsIfNeeded(data, &env_).ok());
  EXPECT_EQ(env_.mount_table_reads, 0);
  Result<MountTable> table = MountTable::Read(Env::Default());
  ASSERT_TRUE(table.ok());
  ASSERT_EQ(table->MountCountAt(data), 1u);
  const MountInfoEntry* mounted = table->TopMountAt(data);
  EXPECT_EQ(mounted->fstype, "tmpfs");
  EXPECT_FALSE(mounted->major == table->TopMountAt(base_)->major &&
               mounted->minor == table->TopMountAt(base_)->minor);
}

TEST_F(TargetHolderTest, DataTmpfsWhereTheKernelCannotTellMountRootsUsesTheTable) {
  const std::string data = base_ + "/data2/volumes";
  NoMountRootEnv old_kernel;
  ASSERT_TRUE(MountTmpfsIfNeeded(data, &old_kernel).ok());
  ASSERT_TRUE(MountTmpfsIfNeeded(data, &old_kernel).ok());
  EXPECT_EQ(old_kernel.mount_table_reads, 2);
  Result<MountTable> table = MountTable::Read(Env::Default());
  ASSERT_TRUE(table.ok());
  EXPECT_EQ(table->MountCountAt(data), 1u);
}

}  // namespace
}  // namespace certmount
