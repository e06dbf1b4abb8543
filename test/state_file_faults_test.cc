// The state layer's own files under I/O errors, through the fault-injecting
// Env: the data-root lock and the database file. Each failure is reported
// with the errno's code, holds nothing and creates nothing.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string>

#include "state/data_root_lock.h"
#include "state/private_file.h"
#include "support/fault_env.h"
#include "support/temp_dir.h"

namespace certmount::testing {
namespace {

TEST(DataRootLockTest, SecondHolderIsRefusedWithTheFirstOnesPid) {
  TempDir dir;
  Result<std::unique_ptr<DataRootLock>> first = DataRootLock::Acquire(dir.path(), Env::Default());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  Result<std::unique_ptr<DataRootLock>> second = DataRootLock::Acquire(dir.path(), Env::Default());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(second.status().message().find("another certmountd (pid " + std::to_string(getpid())),
            std::string::npos)
      << second.status().ToString();

  first->reset();  // released with its holder
  EXPECT_TRUE(DataRootLock::Acquire(dir.path(), Env::Default()).ok());
}

TEST(DataRootLockTest, FailingToLockReportsTheErrorAndHoldsNothing) {
  TempDir dir;
  FaultInjectionEnv env;
  env.FailNth("LockFile", 1, ENOSPC);
  Result<std::unique_ptr<DataRootLock>> lock = DataRootLock::Acquire(dir.path(), &env);
  ASSERT_FALSE(lock.ok());
  EXPECT_EQ(lock.status().code(), Code::kFailedPrecondition) << lock.status().ToString();
  EXPECT_NE(lock.status().message().find("certmountd.lock"), std::string::npos);
  EXPECT_NE(lock.status().message().find("ENOSPC"), std::string::npos);
  EXPECT_EQ(lock.status().message().find("another certmountd"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir.Sub("certmountd.lock")));

  // Nothing was left holding the lock.
  EXPECT_TRUE(DataRootLock::Acquire(dir.path(), &env).ok());
}

TEST(PrivateFileTest, CreatesTheDatabaseFile0600AndNarrowsAnExistingOne) {
  TempDir dir;
  const std::string path = dir.Sub("state.db");
  ::umask(0);  // would make a plain create 0666
  ASSERT_TRUE(EnsurePrivateFile(path, Env::Default()).ok());
  ::umask(022);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_size, 0);

  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  ASSERT_TRUE(EnsurePrivateFile(path, Env::Default()).ok());
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

TEST(PrivateFileTest, FailingToCreateTheDatabaseFileLeavesNone) {
  TempDir dir;
  const std::string path = dir.Sub("state.db");
  FaultInjectionEnv env;
  env.FailNth("EnsureFile", 1, ENOSPC);
  Status created = EnsurePrivateFile(path, &env);
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.code(), Code::kResourceExhausted) << created.ToString();
  EXPECT_NE(created.message().find("state database " + path), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(PrivateFileTest, RefusesASymlinkAtTheDatabasePath) {
  TempDir dir;
  const std::string elsewhere = dir.Sub("elsewhere");
  const std::string path = dir.Sub("state.db");
  std::filesystem::create_symlink(elsewhere, path);
  Status created = EnsurePrivateFile(path, Env::Default());
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.code(), Code::kInternal) << created.ToString();
  EXPECT_FALSE(std::filesystem::exists(elsewhere));
}

}  // namespace
}  // namespace certmount::testing
