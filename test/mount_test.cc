#include "volume/mount.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/root.h"
#include "support/temp_dir.h"
#include "volume/atomic_writer.h"
#include "volume/mountinfo.h"

namespace certmount {
namespace {

namespace fs = std::filesystem;

MountTable CurrentMounts() {
  Result<MountTable> table = MountTable::Read(Env::Default());
  EXPECT_TRUE(table.ok()) << table.status().ToString();
  return table.ok() ? std::move(table).value() : MountTable({});
}

std::string ReadThrough(const std::string& path) {
  std::ifstream in(path);
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

// A kernel before 5.12: the new mount API answers ENOSYS.
class OldKernelEnv : public EnvWrapper {
 public:
  OldKernelEnv() : EnvWrapper(Env::Default()) {}
  Status MountReadOnlyBind(const std::string&, const std::string& target) override {
    return Status::Unimplemented(ErrnoStatus(ENOSYS, "injected mount_setattr", target).message());
  }
};

// An old kernel that also refuses the read-only remount of a bind.
class FailingRemountEnv : public OldKernelEnv {
 public:
  Status Mount(const std::string& source, const std::string& target, const std::string& fstype,
               unsigned long flags, const std::string& data) override {
    if ((flags & MS_REMOUNT) != 0) return ErrnoStatus(EPERM, "injected mount", target);
    return OldKernelEnv::Mount(source, target, fstype, flags, data);
  }
};

class MountTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // mountinfo shows canonical paths; TMPDIR may contain a symlink.
    base_ = fs::canonical(temp_.path()).string();
  }
  testing::TempDir temp_;
  std::string base_;
  Env* env_ = Env::Default();
};

TEST_F(MountTest, MountsTheDataTmpfsOnce) {
  CERTMOUNT_REQUIRE_ROOT();
  std::string data = base_ + "/data/volumes";
  ASSERT_TRUE(MountTmpfsIfNeeded(data, env_).ok());
  ASSERT_TRUE(MountTmpfsIfNeeded(data, env_).ok());

  MountTable table = CurrentMounts();
  EXPECT_EQ(table.MountCountAt(data), 1u);
  const MountInfoEntry* top = table.TopMountAt(data);
  ASSERT_NE(top, nullptr);
  EXPECT_EQ(top->fstype, "tmpfs");
  EXPECT_TRUE(HasMountOption(top->mount_options, "nosuid"));
  EXPECT_TRUE(HasMountOption(top->mount_options, "nodev"));
  EXPECT_TRUE(HasMountOption(top->mount_options, "noexec"));
  EXPECT_TRUE(HasMountOption(top->super_options, "mode=700")) << top->super_options;
  EXPECT_EQ(fs::status(data).permissions(), fs::perms::owner_all);
  ASSERT_TRUE(Unmount(data, env_).ok());
}

TEST_F(MountTest, StacksATmpfsOverADiskMount) {
  CERTMOUNT_REQUIRE_ROOT();
  // A bind of a disk directory (like a hostPath) is a mount point, but not
  // one keys may be written to.
  std::string disk = base_ + "/disk";
  std::string data = base_ + "/data";
  fs::create_directories(disk);
  fs::create_directories(data);
  ASSERT_EQ(mount(disk.c_str(), data.c_str(), nullptr, MS_BIND, nullptr), 0) << errno;
  ASSERT_TRUE(MountTmpfsIfNeeded(data, env_).ok());
  MountTable table = CurrentMounts();
  EXPECT_EQ(table.MountCountAt(data), 2u);
  EXPECT_EQ(table.TopMountAt(data)->fstype, "tmpfs");
  ASSERT_TRUE(Unmount(data, env_).ok());
  EXPECT_FALSE(CurrentMounts().IsMountPoint(data));
}

class BindMountTest : public MountTest {
 protected:
  void SetUp() override {
    MountTest::SetUp();
    data_ = base_ + "/data";
    volume_dir_ = data_ + "/volumes/csi-1";
    target_ = base_ + "/pods/uid/mount";
    fs::create_directories(target_);
  }
  void MountDataAndWrite(const std::string& tag) {
    ASSERT_TRUE(MountTmpfsIfNeeded(data_, env_).ok());
    std::vector<FileEntry> files = {{"tls.crt", "cert-" + tag, 0644},
                                    {"tls.key", "key-" + tag, 0600}};
    ASSERT_TRUE(WriteFileSet(volume_dir_, files, {}, env_).ok());
  }
  void TearDown() override {
    EXPECT_TRUE(Unmount(target_, env_).ok());
    EXPECT_TRUE(Unmount(data_, env_).ok());
  }
  std::string data_, volume_dir_, target_;
};

TEST_F(BindMountTest, TargetIsReadOnlyAndLockedDown) {
  CERTMOUNT_REQUIRE_ROOT();
  MountDataAndWrite("a");
  ASSERT_TRUE(BindMountReadOnly(volume_dir_, target_, env_).ok());

  EXPECT_EQ(ReadThrough(target_ + "/tls.crt"), "cert-a");
  EXPECT_EQ(ReadThrough(target_ + "/tls.key"), "key-a");
  int fd = open((target_ + "/new").c_str(), O_WRONLY | O_CREAT, 0644);
  int saved = errno;
  if (fd >= 0) close(fd);
  EXPECT_EQ(fd, -1);
  EXPECT_EQ(saved, EROFS);

  MountTable table = CurrentMounts();
  const MountInfoEntry* bound = table.TopMountAt(target_);
  ASSERT_NE(bound, nullptr);
  for (const char* option : {"ro", "nosuid", "nodev", "noexec"}) {
    EXPECT_TRUE(HasMountOption(bound->mount_options, option)) << bound->mount_options;
  }
  EXPECT_EQ(bound->root, "/volumes/csi-1");
  EXPECT_TRUE(IsMountedFrom(table, target_, data_));
  EXPECT_TRUE(IsMountedFrom(table, target_, volume_dir_));
  EXPECT_FALSE(IsMountedFrom(table, target_, data_ + "/volumes/csi-2"));
}

// What a child process in a mount namespace of its own (made before the
// bind, as the host's namespace exists before certmountd's container) sees
// at `path` once the parent has mounted there and written to `go`: the
// mount options of the top mount, or "none".
class PeerNamespace {
 public:
  explicit PeerNamespace(const std::string& path) {
    int ready[2], go[2], report[2];
    EXPECT_EQ(pipe(ready), 0);
    EXPECT_EQ(pipe(go), 0);
    EXPECT_EQ(pipe(report), 0);
    pid_ = fork();
    if (pid_ == 0) {
      char byte = 0;
      if (unshare(CLONE_NEWNS) != 0) _exit(1);
      if (write(ready[1], &byte, 1) != 1 || read(go[0], &byte, 1) != 1) _exit(1);
      Result<MountTable> table = MountTable::Read(Env::Default());
      const MountInfoEntry* top = table.ok() ? table->TopMountAt(path) : nullptr;
      std::string options = top == nullptr ? "none" : top->mount_options;
      _exit(write(report[1], options.data(), options.size()) == static_cast<ssize_t>(options.size())
                ? 0
                : 1);
    }
    close(ready[1]);
    close(go[0]);
    close(report[1]);
    char byte = 0;
    EXPECT_EQ(read(ready[0], &byte, 1), 1) << "the child could not unshare";
    close(ready[0]);
    go_ = go[1];
    report_ = report[0];
  }
  // Lets the child look, and returns what it saw.
  std::string Look() {
    char byte = 0;
    EXPECT_EQ(write(go_, &byte, 1), 1);
    close(go_);
    std::string seen;
    char buffer[512];
    for (ssize_t n; (n = read(report_, buffer, sizeof buffer)) > 0;) seen.append(buffer, n);
    close(report_);
    int status = 0;
    EXPECT_EQ(waitpid(pid_, &status, 0), pid_);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return seen;
  }

 private:
  pid_t pid_ = -1;
  int go_ = -1;
  int report_ = -1;
};

TEST_F(BindMountTest, EveryPropagatedCopyIsReadOnlyAndLockedDown) {
  CERTMOUNT_REQUIRE_ROOT();
  MountDataAndWrite("a");
  // The pods directory as in the DaemonSet: a shared mount (Bidirectional),
  // whose copy in another namespace receives every mount made below it.
  const std::string pods = base_ + "/pods";
  ASSERT_EQ(mount(pods.c_str(), pods.c_str(), nullptr, MS_BIND, nullptr), 0) << errno;
  ASSERT_EQ(mount(nullptr, pods.c_str(), nullptr, MS_SHARED, nullptr), 0) << errno;
  PeerNamespace host(target_);

  ASSERT_TRUE(BindMountReadOnly(volume_dir_, target_, env_).ok());
  const std::string seen = host.Look();
  EXPECT_TRUE(Unmount(target_, env_).ok());
  EXPECT_TRUE(Unmount(pods, env_).ok());
  for (const char* option : {"ro", "nosuid", "nodev", "noexec"}) {
    EXPECT_TRUE(HasMountOption(seen, option)) << "the other namespace sees " << seen;
  }
}

TEST_F(BindMountTest, FallsBackToBindAndRemountOnAnOldKernel) {
  CERTMOUNT_REQUIRE_ROOT();
  MountDataAndWrite("a");
  OldKernelEnv old_kernel;
  ASSERT_TRUE(BindMountReadOnly(volume_dir_, target_, &old_kernel).ok());
  MountTable table = CurrentMounts();
  const MountInfoEntry* bound = table.TopMountAt(target_);
  ASSERT_NE(bound, nullptr);
  for (const char* option : {"ro", "nosuid", "nodev", "noexec"}) {
    EXPECT_TRUE(HasMountOption(bound->mount_options, option)) << bound->mount_options;
  }
}

TEST_F(BindMountTest, NewGenerationsShowThroughTheExistingMount) {
  CERTMOUNT_REQUIRE_ROOT();
  MountDataAndWrite("a");
  ASSERT_TRUE(BindMountReadOnly(volume_dir_, target_, env_).ok());
  std::vector<FileEntry> files = {{"tls.crt", "cert-b", 0644}, {"tls.key", "key-b", 0600}};
  ASSERT_TRUE(WriteFileSet(volume_dir_, files, {}, env_).ok());
  EXPECT_EQ(ReadThrough(target_ + "/tls.crt"), "cert-b");
  EXPECT_EQ(ReadThrough(target_ + "/tls.key"), "key-b");
}

TEST_F(BindMountTest, AFailedRemountLeavesNoWritableMount) {
  CERTMOUNT_REQUIRE_ROOT();
  MountDataAndWrite("a");
  FailingRemountEnv faulty;
  Status status = BindMountReadOnly(volume_dir_, target_, &faulty);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("read-only"), std::string::npos) << status.message();
  EXPECT_FALSE(CurrentMounts().IsMountPoint(target_));
}

TEST_F(BindMountTest, UnmountIsIdempotentAndRemovesStackedMounts) {
  CERTMOUNT_REQUIRE_ROOT();
  MountDataAndWrite("a");
  ASSERT_TRUE(BindMountReadOnly(volume_dir_, target_, env_).ok());
  ASSERT_TRUE(BindMountReadOnly(volume_dir_, target_, env_).ok());
  ASSERT_EQ(CurrentMounts().MountCountAt(target_), 2u);

  ASSERT_TRUE(Unmount(target_, env_).ok());
  EXPECT_FALSE(CurrentMounts().IsMountPoint(target_));
  EXPECT_TRUE(Unmount(target_, env_).ok());
  EXPECT_TRUE(Unmount(base_ + "/pods/does-not-exist", env_).ok());
  // The volume's files are untouched by unmounting.
  EXPECT_EQ(ReadThrough(volume_dir_ + "/tls.key"), "key-a");
}

TEST_F(BindMountTest, UnmountOfABusyMountIsUnavailable) {
  CERTMOUNT_REQUIRE_ROOT();
  MountDataAndWrite("a");
  ASSERT_TRUE(BindMountReadOnly(volume_dir_, target_, env_).ok());
  {
    // A process with its working directory inside keeps the mount busy.
    int dir_fd = open(".", O_RDONLY | O_DIRECTORY);
    ASSERT_GE(dir_fd, 0);
    ASSERT_EQ(chdir(target_.c_str()), 0);
    Status busy = Unmount(target_, env_);
    EXPECT_EQ(fchdir(dir_fd), 0);
    close(dir_fd);
    EXPECT_EQ(busy.code(), Code::kUnavailable) << busy.ToString();
  }
  EXPECT_TRUE(CurrentMounts().IsMountPoint(target_));
}

TEST_F(BindMountTest, RemoveVolumeDirRefusesToEnterAMount) {
  CERTMOUNT_REQUIRE_ROOT();
  MountDataAndWrite("a");
  // Something mounted inside a volume dir must not have its contents removed.
  std::string inner = base_ + "/inner";
  fs::create_directories(inner);
  std::ofstream(inner + "/precious") << "keep";
  fs::create_directory(volume_dir_ + "/sub");
  ASSERT_EQ(mount(inner.c_str(), (volume_dir_ + "/sub").c_str(), nullptr, MS_BIND, nullptr), 0);
  Status status = RemoveVolumeDir(volume_dir_, env_);
  EXPECT_EQ(status.code(), Code::kFailedPrecondition) << status.ToString();
  EXPECT_EQ(ReadThrough(inner + "/precious"), "keep");
  ASSERT_TRUE(Unmount(volume_dir_ + "/sub", env_).ok());
  EXPECT_TRUE(RemoveVolumeDir(volume_dir_, env_).ok());
  EXPECT_FALSE(fs::exists(volume_dir_));
}

}  // namespace
}  // namespace certmount
