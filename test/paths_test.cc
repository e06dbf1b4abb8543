#include "volume/paths.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/temp_dir.h"

namespace certmount {
namespace {

namespace fs = std::filesystem;

TEST(ValidateVolumeIdTest, AcceptsKubeletEphemeralIds) {
  EXPECT_TRUE(ValidateVolumeId("csi-" + std::string(64, 'a')).ok());
  EXPECT_TRUE(
      ValidateVolumeId("csi-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
          .ok());
  EXPECT_TRUE(ValidateVolumeId("My_vol.1-x").ok());
  EXPECT_TRUE(ValidateVolumeId(std::string(kMaxVolumeIdLength, 'x')).ok());
  EXPECT_TRUE(ValidateVolumeId(".hidden").ok());
}

TEST(ValidateVolumeIdTest, RejectsUnsafeIdsSayingWhichRule) {
  struct Case {
    std::string id;
    std::string rule;
  };
  for (const Case& c : std::vector<Case>{
           {"", "empty"},
           {std::string(kMaxVolumeIdLength + 1, 'x'), "longer than 128"},
           {"a/b", "may contain only"},
           {"a b", "may contain only"},
           {std::string("a\0b", 3), "may contain only"},
           {"caf\xc3\xa9", "may contain only"},
           {".", "is \".\" or \"..\""},
           {"..", "is \".\" or \"..\""},
           {"a..b", "contains \"..\""},
           {"..data", "contains \"..\""},
       }) {
    Status status = ValidateVolumeId(c.id);
    EXPECT_EQ(status.code(), Code::kInvalidArgument) << c.id;
    EXPECT_NE(status.message().find(c.rule), std::string::npos) << status.message();
  }
}

class ValidateTargetPathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = temp_.Sub("pods");
    fs::create_directories(root_ + "/uid/volumes/kubernetes.io~csi/vol");
    parent_ = root_ + "/uid/volumes/kubernetes.io~csi/vol";
  }
  testing::TempDir temp_;
  std::string root_;
  std::string parent_;
};

TEST_F(ValidateTargetPathTest, AcceptsAMissingTargetWhoseParentExists) {
  EXPECT_TRUE(ValidateTargetPath(parent_ + "/mount", root_).ok());
}

TEST_F(ValidateTargetPathTest, AcceptsAnExistingTargetDirectory) {
  fs::create_directory(parent_ + "/mount");
  EXPECT_TRUE(ValidateTargetPath(parent_ + "/mount", root_).ok());
}

TEST_F(ValidateTargetPathTest, RejectsPathsThatAreNotNormalised) {
  for (const std::string& target :
       {std::string("relative/mount"), root_ + "//uid/mount", root_ + "/uid/./mount",
        root_ + "/uid/../uid/volumes/mount", parent_ + "/mount/", std::string("")}) {
    Status status = ValidateTargetPath(target, root_);
    EXPECT_EQ(status.code(), Code::kInvalidArgument) << target << ": " << status.ToString();
  }
}

TEST_F(ValidateTargetPathTest, QuotesAHostilePathShortAndOnOneLine) {
  const std::string forged = root_ + "/uid\nlevel=error msg=forged/" + std::string(3500, 'x') + "/";
  Status status = ValidateTargetPath(forged, root_);
  EXPECT_EQ(status.code(), Code::kInvalidArgument);
  EXPECT_EQ(status.message().find('\n'), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("\\n"), std::string::npos) << status.message();
  EXPECT_LT(status.message().size(), 1024u);
  EXPECT_NE(status.message().find("bytes)"), std::string::npos) << status.message();
}

TEST(ValidateVolumeIdTest, QuotesAHostileIdShortAndOnOneLine) {
  Status status = ValidateVolumeId("vol\nlevel=error" + std::string(100000, 'x'));
  EXPECT_EQ(status.code(), Code::kInvalidArgument);
  EXPECT_EQ(status.message().find('\n'), std::string::npos) << status.message();
  EXPECT_LT(status.message().size(), 512u);
}

TEST_F(ValidateTargetPathTest, RejectsPathsNotStrictlyBelowTheRoot) {
  fs::create_directories(root_ + "x/uid");
  for (const std::string& target :
       {root_, root_ + "x/uid/mount", temp_.Sub("elsewhere"), std::string("/etc/passwd")}) {
    Status status = ValidateTargetPath(target, root_);
    EXPECT_EQ(status.code(), Code::kInvalidArgument) << target;
    EXPECT_NE(status.message().find("not below"), std::string::npos) << status.message();
  }
}

TEST_F(ValidateTargetPathTest, RejectsASymlinkAnywhereBelowTheRoot) {
  fs::create_directory(temp_.Sub("outside"));
  fs::create_directory_symlink(temp_.Sub("outside"), root_ + "/evil");
  Status through = ValidateTargetPath(root_ + "/evil/mount", root_);
  EXPECT_EQ(through.code(), Code::kInvalidArgument);
  EXPECT_NE(through.message().find("symlink"), std::string::npos) << through.message();

  fs::create_directory_symlink(temp_.Sub("outside"), parent_ + "/mount");
  EXPECT_EQ(ValidateTargetPath(parent_ + "/mount", root_).code(), Code::kInvalidArgument);
}

TEST_F(ValidateTargetPathTest, RejectsANonDirectoryOnThePath) {
  std::ofstream(parent_ + "/file") << "x";
  EXPECT_EQ(ValidateTargetPath(parent_ + "/file", root_).code(), Code::kInvalidArgument);
  EXPECT_EQ(ValidateTargetPath(parent_ + "/file/mount", root_).code(), Code::kInvalidArgument);
}

TEST_F(ValidateTargetPathTest, MissingParentIsAFailedPrecondition) {
  Status status = ValidateTargetPath(root_ + "/other-uid/volumes/mount", root_);
  EXPECT_EQ(status.code(), Code::kFailedPrecondition) << status.ToString();
}

TEST_F(ValidateTargetPathTest, AcceptsTheRootAsWrittenOrResolved) {
  // kubelet's root may itself be reached through a symlink (/var/lib/kubelet
  // on another disk); targets may be spelled either way.
  std::string link = temp_.Sub("kubelet-link");
  fs::create_directory_symlink(root_, link);
  EXPECT_TRUE(ValidateTargetPath(link + "/uid/volumes/kubernetes.io~csi/vol/mount", link).ok());
  EXPECT_TRUE(ValidateTargetPath(parent_ + "/mount", link).ok());
}

TEST_F(ValidateTargetPathTest, MissingRootIsAnError) {
  EXPECT_FALSE(ValidateTargetPath(temp_.Sub("nope/a/b"), temp_.Sub("nope")).ok());
}

TEST(VolumePathsTest, BuildsTheVolumeDirFromAValidId) {
  Result<VolumePaths> paths = VolumePaths::Make("/run/certmount", "csi-abc");
  ASSERT_TRUE(paths.ok());
  EXPECT_EQ(paths->volume_dir, "/run/certmount/volumes/csi-abc");
  EXPECT_EQ(VolumesRoot("/run/certmount"), "/run/certmount/volumes");
  EXPECT_EQ(VolumePaths::Make("/run/certmount", "../etc").status().code(), Code::kInvalidArgument);
}

TEST(EnsureTargetDirectoryTest, CreatesOnceAndReportsIt) {
  testing::TempDir temp;
  std::string target = temp.Sub("mount");
  Result<bool> first = EnsureTargetDirectory(target, Env::Default());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(*first);
  EXPECT_TRUE(fs::is_directory(target));
  Result<bool> second = EnsureTargetDirectory(target, Env::Default());
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(*second);

  std::ofstream(temp.Sub("file")) << "x";
  EXPECT_EQ(EnsureTargetDirectory(temp.Sub("file"), Env::Default()).status().code(),
            Code::kFailedPrecondition);
  EXPECT_EQ(EnsureTargetDirectory(temp.Sub("missing/mount"), Env::Default()).status().code(),
            Code::kNotFound);
}

}  // namespace
}  // namespace certmount
