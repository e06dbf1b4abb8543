#include "volume/atomic_writer.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "support/fault_env.h"
#include "support/root.h"
#include "support/temp_dir.h"

namespace certmount {
namespace {

namespace fs = std::filesystem;
using certmount::testing::FaultInjectionEnv;

// Fails the Nth call (1-based) of a named operation with a chosen errno,
// after letting the earlier ones through to the real filesystem.
std::string ReadThrough(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

std::vector<std::string> HiddenEntries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    if (name.starts_with("..")) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<FileEntry> Generation(const std::string& tag, const FileOwnership& ownership = {}) {
  return {
      {"tls.crt", "cert-" + tag, CertFileMode(ownership)},
      {"tls.key", "key-" + tag, KeyFileMode(ownership)},
      {"ca.crt", "ca-" + tag, CertFileMode(ownership)},
  };
}

class AtomicWriterTest : public ::testing::Test {
 protected:
  testing::TempDir temp_;
  std::string volume_dir_ = temp_.Sub("volumes/csi-1");
  Env* env_ = Env::Default();
};

TEST_F(AtomicWriterTest, WritesTheKubeletLayout) {
  ASSERT_TRUE(WriteFileSet(volume_dir_, Generation("a"), {}, env_).ok());
  EXPECT_EQ(ReadThrough(volume_dir_ + "/tls.crt"), "cert-a");
  EXPECT_EQ(ReadThrough(volume_dir_ + "/tls.key"), "key-a");
  EXPECT_EQ(ReadThrough(volume_dir_ + "/ca.crt"), "ca-a");
  EXPECT_EQ(fs::read_symlink(volume_dir_ + "/tls.key"), "..data/tls.key");
  std::string generation = fs::read_symlink(volume_dir_ + "/..data").string();
  EXPECT_TRUE(generation.starts_with("..")) << generation;
  EXPECT_TRUE(fs::is_directory(volume_dir_ + "/" + generation));
  EXPECT_EQ(HiddenEntries(volume_dir_), (std::vector<std::string>{generation, "..data"}));
}

TEST_F(AtomicWriterTest, SwapsGenerationsAndRemovesTheOldOne) {
  ASSERT_TRUE(WriteFileSet(volume_dir_, Generation("a"), {}, env_).ok());
  std::string first = fs::read_symlink(volume_dir_ + "/..data").string();
  ASSERT_TRUE(WriteFileSet(volume_dir_, Generation("b"), {}, env_).ok());
  std::string second = fs::read_symlink(volume_dir_ + "/..data").string();

  EXPECT_NE(first, second);
  EXPECT_EQ(ReadThrough(volume_dir_ + "/tls.crt"), "cert-b");
  EXPECT_EQ(ReadThrough(volume_dir_ + "/tls.key"), "key-b");
  EXPECT_FALSE(fs::exists(volume_dir_ + "/" + first));
  EXPECT_EQ(HiddenEntries(volume_dir_), (std::vector<std::string>{second, "..data"}));
}

TEST_F(AtomicWriterTest, AnOpenFileKeepsItsGenerationAcrossASwap) {
  ASSERT_TRUE(WriteFileSet(volume_dir_, Generation("a"), {}, env_).ok());
  std::ifstream held(volume_dir_ + "/tls.key");
  ASSERT_TRUE(WriteFileSet(volume_dir_, Generation("b"), {}, env_).ok());
  std::string contents((std::istreambuf_iterator<char>(held)), std::istreambuf_iterator<char>());
  EXPECT_EQ(contents, "key-a");
  EXPECT_EQ(ReadThrough(volume_dir_ + "/tls.key"), "key-b");
}

TEST_F(AtomicWriterTest, RemovesNamesThatLeftTheSet) {
  std::vector<FileEntry> with_keystore = Generation("a");
  with_keystore.push_back({"keystore.p12", "p12", 0600});
  ASSERT_TRUE(WriteFileSet(volume_dir_, with_keystore, {}, env_).ok());
  ASSERT_TRUE(fs::is_symlink(volume_dir_ + "/keystore.p12"));

  ASSERT_TRUE(WriteFileSet(volume_dir_, Generation("b"), {}, env_).ok());
  EXPECT_FALSE(fs::exists(fs::symlink_status(volume_dir_ + "/keystore.p12")));
  EXPECT_EQ(ReadThrough(volume_dir_ + "/ca.crt"), "ca-b");
}

TEST_F(AtomicWriterTest, AppliesTightModesWithoutAGroup) {
  ASSERT_TRUE(WriteFileSet(volume_dir_, Generation("a"), {}, env_).ok());
  struct stat st {};
  ASSERT_EQ(stat((volume_dir_ + "/tls.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ASSERT_EQ(stat((volume_dir_ + "/tls.crt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  ASSERT_EQ(stat(volume_dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  ASSERT_EQ(stat((volume_dir_ + "/..data").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
}

TEST_F(AtomicWriterTest, GivesTheGroupReadAccessWhenAGidIsSet) {
  CERTMOUNT_REQUIRE_ROOT();
  FileOwnership ownership{1234};
  ASSERT_TRUE(WriteFileSet(volume_dir_, Generation("a", ownership), ownership, env_).ok());
  struct stat st {};
  ASSERT_EQ(stat((volume_dir_ + "/tls.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_gid, 1234u);
  ASSERT_EQ(stat((volume_dir_ + "/tls.crt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  EXPECT_EQ(st.st_gid, 1234u);
  for (const std::string& dir : {volume_dir_, volume_dir_ + "/..data"}) {
    ASSERT_EQ(stat(dir.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0750u) << dir;
    EXPECT_EQ(st.st_gid, 1234u) << dir;
  }

  // Dropping the group later opens the directory again for any pod user.
  ASSERT_TRUE(WriteFileSet(volume_dir_, Generation("b"), {}, env_).ok());
  ASSERT_EQ(stat(volume_dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  ASSERT_EQ(stat((volume_dir_ + "/tls.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

TEST_F(AtomicWriterTest, AFailedWriteLeavesThePreviousGenerationIntact) {
  ASSERT_TRUE(WriteFileSet(volume_dir_, Generation("a"), {}, env_).ok());
  std::vector<std::string> before = HiddenEntries(volume_dir_);

  FaultInjectionEnv faulty;
  faulty.FailNth("WriteNewFile", 2, ENOSPC);  // the key of generation b
  Status status = WriteFileSet(volume_dir_, Generation("b"), {}, &faulty);
  EXPECT_EQ(status.code(), Code::kResourceExhausted) << status.ToString();
  EXPECT_NE(status.message().find("tls.key"), std::string::npos) << status.message();
  EXPECT_EQ(faulty.calls("WriteNewFile"), 2);

  EXPECT_EQ(ReadThrough(volume_dir_ + "/tls.crt"), "cert-a");
  EXPECT_EQ(ReadThrough(volume_dir_ + "/tls.key"), "key-a");
  EXPECT_EQ(ReadThrough(volume_dir_ + "/ca.crt"), "ca-a");
  EXPECT_EQ(HiddenEntries(volume_dir_), before);
}

TEST_F(AtomicWriterTest, AFailedSwapLeavesThePreviousGenerationIntact) {
  ASSERT_TRUE(WriteFileSet(volume_dir_, Generation("a"), {}, env_).ok());
  std::vector<std::string> before = HiddenEntries(volume_dir_);

  FaultInjectionEnv faulty;
  faulty.FailNth("Rename", 1, EIO);
  Status status = WriteFileSet(volume_dir_, Generation("b"), {}, &faulty);
  EXPECT_EQ(status.code(), Code::kInternal) << status.ToString();
  EXPECT_EQ(ReadThrough(volume_dir_ + "/tls.key"), "key-a");
  EXPECT_EQ(HiddenEntries(volume_dir_), before);
}

TEST_F(AtomicWriterTest, AFailedFirstWriteLeavesNoGeneration) {
  FaultInjectionEnv faulty;
  faulty.FailNth("WriteNewFile", 1, ENOSPC);
  EXPECT_FALSE(WriteFileSet(volume_dir_, Generation("a"), {}, &faulty).ok());
  EXPECT_TRUE(HiddenEntries(volume_dir_).empty());
  // And the next attempt works from that state.
  ASSERT_TRUE(WriteFileSet(volume_dir_, Generation("a"), {}, env_).ok());
  EXPECT_EQ(ReadThrough(volume_dir_ + "/tls.key"), "key-a");
}

TEST_F(AtomicWriterTest, TheNextWriteCleansUpAfterACrash) {
  ASSERT_TRUE(WriteFileSet(volume_dir_, Generation("a"), {}, env_).ok());
  // What a crash between writing and swapping leaves: a half-written
  // generation and a ..data_tmp link.
  fs::create_directory(volume_dir_ + "/..2020_01_01_00_00_00.deadbeef");
  std::ofstream(volume_dir_ + "/..2020_01_01_00_00_00.deadbeef/tls.key") << "partial";
  fs::create_symlink("..2020_01_01_00_00_00.deadbeef", volume_dir_ + "/..data_tmp");
  fs::create_directory(volume_dir_ + "/..tmp");

  ASSERT_TRUE(WriteFileSet(volume_dir_, Generation("b"), {}, env_).ok());
  std::string live = fs::read_symlink(volume_dir_ + "/..data").string();
  EXPECT_EQ(HiddenEntries(volume_dir_), (std::vector<std::string>{live, "..data"}));
  EXPECT_EQ(ReadThrough(volume_dir_ + "/tls.key"), "key-b");
}

TEST_F(AtomicWriterTest, ReplacesSomethingInTheWayOfAName) {
  fs::create_directories(volume_dir_);
  std::ofstream(volume_dir_ + "/tls.crt") << "stale file";
  fs::create_symlink("/etc/passwd", volume_dir_ + "/tls.key");
  ASSERT_TRUE(WriteFileSet(volume_dir_, Generation("a"), {}, env_).ok());
  EXPECT_EQ(fs::read_symlink(volume_dir_ + "/tls.crt"), "..data/tls.crt");
  EXPECT_EQ(ReadThrough(volume_dir_ + "/tls.key"), "key-a");
}

TEST_F(AtomicWriterTest, RejectsBadAndDuplicateNames) {
  for (std::string name : {"", "..data", "a/b", ".", "..x", "x y"}) {
    Status status = WriteFileSet(volume_dir_, {{name, "x", 0644}}, {}, env_);
    EXPECT_EQ(status.code(), Code::kInvalidArgument) << name;
  }
  EXPECT_EQ(WriteFileSet(volume_dir_, {{"a", "x", 0644}, {"a", "y", 0644}}, {}, env_).code(),
            Code::kInvalidArgument);
  EXPECT_FALSE(fs::exists(volume_dir_));
}

TEST_F(AtomicWriterTest, RefusesAVolumeDirThatIsASymlink) {
  fs::create_directories(temp_.Sub("volumes"));
  fs::create_directory(temp_.Sub("elsewhere"));
  fs::create_directory_symlink(temp_.Sub("elsewhere"), volume_dir_);
  EXPECT_EQ(WriteFileSet(volume_dir_, Generation("a"), {}, env_).code(), Code::kFailedPrecondition);
  EXPECT_TRUE(fs::is_empty(temp_.Sub("elsewhere")));
}

TEST_F(AtomicWriterTest, RemoveVolumeDirIsIdempotent) {
  ASSERT_TRUE(WriteFileSet(volume_dir_, Generation("a"), {}, env_).ok());
  ASSERT_TRUE(RemoveVolumeDir(volume_dir_, env_).ok());
  EXPECT_FALSE(fs::exists(fs::symlink_status(volume_dir_)));
  EXPECT_TRUE(RemoveVolumeDir(volume_dir_, env_).ok());
}

TEST_F(AtomicWriterTest, RemoveVolumeDirNeverFollowsSymlinksOut) {
  std::string outside = temp_.Sub("outside");
  fs::create_directory(outside);
  std::ofstream(outside + "/precious") << "keep";
  fs::create_directories(volume_dir_);
  fs::create_directory_symlink(outside, volume_dir_ + "/link-to-outside");
  ASSERT_TRUE(RemoveVolumeDir(volume_dir_, env_).ok());
  EXPECT_FALSE(fs::exists(volume_dir_));
  EXPECT_EQ(ReadThrough(outside + "/precious"), "keep");

  // The volume dir itself being a link: only the link goes.
  fs::create_directory_symlink(outside, volume_dir_);
  ASSERT_TRUE(RemoveVolumeDir(volume_dir_, env_).ok());
  EXPECT_FALSE(fs::exists(fs::symlink_status(volume_dir_)));
  EXPECT_EQ(ReadThrough(outside + "/precious"), "keep");
}

}  // namespace
}  // namespace certmount
