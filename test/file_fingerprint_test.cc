#include "common/file_fingerprint.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "support/temp_dir.h"

namespace certmount {
namespace {

namespace fs = std::filesystem;
using ::certmount::testing::TempDir;

void Write(const fs::path& path, const std::string& contents) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << contents;
}

class FileFingerprintTest : public ::testing::Test {
 protected:
  FileFingerprint Of(const std::vector<std::string>& paths) {
    return FileFingerprint::Take(paths, Env::Default());
  }

  TempDir dir_;
};

TEST_F(FileFingerprintTest, UnchangedFilesGiveTheSameFingerprint) {
  Write(dir_.path() / "a", "one");
  Write(dir_.path() / "b", "two");
  const std::vector<std::string> paths = {dir_.Sub("a"), dir_.Sub("b")};
  EXPECT_EQ(Of(paths), Of(paths));
  EXPECT_EQ(Of({dir_.Sub("a"), "", dir_.Sub("b")}), Of(paths)) << "an empty path is skipped";
  EXPECT_EQ(FileFingerprint(), Of({}));
}

TEST_F(FileFingerprintTest, SizeAndModificationTimeAreChanges) {
  const fs::path file = dir_.path() / "a";
  Write(file, "one");
  const FileFingerprint before = Of({file.string()});
  Write(file, "three");
  EXPECT_NE(Of({file.string()}), before);

  // Same inode and size, only the modification time moved.
  const FileFingerprint same_size = Of({file.string()});
  fs::last_write_time(file, fs::last_write_time(file) - std::chrono::seconds(10));
  EXPECT_NE(Of({file.string()}), same_size);
}

TEST_F(FileFingerprintTest, ASwappedDataLinkIsAChangeEvenWithEqualContents) {
  const fs::path volume = dir_.path() / "configmap";
  fs::create_directories(volume / "..v1");
  fs::create_directories(volume / "..v2");
  Write(volume / "..v1" / "ca.crt", "same");
  Write(volume / "..v2" / "ca.crt", "same");
  fs::create_directory_symlink("..v1", volume / "..data");
  fs::create_symlink("..data/ca.crt", volume / "ca.crt");
  const std::string path = (volume / "ca.crt").string();
  const FileFingerprint before = Of({path});

  fs::create_directory_symlink("..v2", volume / "..data_next");
  fs::rename(volume / "..data_next", volume / "..data");
  EXPECT_NE(Of({path}), before);
}

TEST_F(FileFingerprintTest, AFileThatAppearsOrVanishesIsAChange) {
  const std::string path = dir_.Sub("later");
  const FileFingerprint absent = Of({path});
  EXPECT_EQ(Of({path}), absent);
  Write(path, "now");
  const FileFingerprint present = Of({path});
  EXPECT_NE(present, absent);
  fs::remove(path);
  EXPECT_EQ(Of({path}), absent);
}

}  // namespace
}  // namespace certmount
