#include "volume/mountinfo.h"

#include <gtest/gtest.h>

#include <string>

#include "volume/mount.h"

namespace certmount {
namespace {

constexpr char kSample[] =
    "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro\n"
    "36 22 98:0 /mnt1 /mnt\\0402 rw,noatime master:1 shared:7 - ext3 /dev/root rw,errors=continue\n"
    "40 22 0:50 / /var/lib/cert\\134mount rw,nosuid,nodev,noexec - tmpfs tmpfs rw,mode=700\n"
    "41 22 0:51 / /tab\\011dir ro - proc none rw\n";

TEST(ParseMountInfoTest, ParsesFieldsAndDecodesEscapes) {
  Result<std::vector<MountInfoEntry>> parsed = ParseMountInfo(kSample);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->size(), 4u);

  const MountInfoEntry& second = (*parsed)[1];
  EXPECT_EQ(second.mount_id, 36);
  EXPECT_EQ(second.parent_id, 22);
  EXPECT_EQ(second.major, 98u);
  EXPECT_EQ(second.minor, 0u);
  EXPECT_EQ(second.root, "/mnt1");
  EXPECT_EQ(second.mount_point, "/mnt 2");
  EXPECT_EQ(second.mount_options, "rw,noatime");
  EXPECT_EQ(second.fstype, "ext3");
  EXPECT_EQ(second.source, "/dev/root");
  EXPECT_EQ(second.super_options, "rw,errors=continue");

  EXPECT_EQ((*parsed)[2].mount_point, "/var/lib/cert\\mount");
  EXPECT_EQ((*parsed)[2].fstype, "tmpfs");
  EXPECT_EQ((*parsed)[2].super_options, "rw,mode=700");
  EXPECT_EQ((*parsed)[3].mount_point, "/tab\tdir");
  EXPECT_EQ((*parsed)[3].source, "none");
}

TEST(ParseMountInfoTest, LeavesIncompleteEscapesAlone) {
  Result<std::vector<MountInfoEntry>> parsed =
      ParseMountInfo("1 0 0:1 / /a\\04 rw - tmpfs tmpfs rw\n2 0 0:2 / /b\\ rw - tmpfs tmpfs rw");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->size(), 2u);
  EXPECT_EQ((*parsed)[0].mount_point, "/a\\04");
  EXPECT_EQ((*parsed)[1].mount_point, "/b\\");
}

TEST(ParseMountInfoTest, RejectsMalformedLinesNamingThem) {
  for (const char* bad :
       {"22 1 8:1 / / rw,relatime shared:1 ext4 /dev/sda1 rw\n",
        "x 1 8:1 / / rw - ext4 /dev/sda1 rw\n", "22 1 81 / / rw - ext4 a rw\n", "22 1 8:1 /\n"}) {
    Result<std::vector<MountInfoEntry>> parsed = ParseMountInfo(std::string(kSample) + bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), Code::kInternal);
    EXPECT_NE(parsed.status().message().find("line 5"), std::string::npos)
        << parsed.status().message();
  }
}

TEST(ParseMountInfoTest, EmptyTextIsAnEmptyTable) {
  Result<std::vector<MountInfoEntry>> parsed = ParseMountInfo("");
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->empty());
}

TEST(ReadMountInfoTest, ReadsTheRealTable) {
  Result<std::vector<MountInfoEntry>> entries = ReadMountInfo();
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  ASSERT_FALSE(entries->empty());
  EXPECT_TRUE(IsMountPoint(*entries, "/"));
  EXPECT_TRUE(IsMountPoint(*entries, "/proc"));
  EXPECT_FALSE(IsMountPoint(*entries, "/proc/self"));
}

TEST(ReadMountInfoTest, MissingFileIsNotFound) {
  Result<std::vector<MountInfoEntry>> entries = ReadMountInfo("/nonexistent/mountinfo");
  ASSERT_FALSE(entries.ok());
  EXPECT_EQ(entries.status().code(), Code::kNotFound);
  EXPECT_NE(entries.status().message().find("/nonexistent/mountinfo"), std::string::npos);
}

TEST(HasMountOptionTest, MatchesWholeOptionsOnly) {
  EXPECT_TRUE(HasMountOption("ro,nosuid,nodev", "ro"));
  EXPECT_TRUE(HasMountOption("ro,nosuid,nodev", "nodev"));
  EXPECT_FALSE(HasMountOption("ro,nosuid,nodev", "dev"));
  EXPECT_FALSE(HasMountOption("rw,relatime", "ro"));
  EXPECT_FALSE(HasMountOption("", "ro"));
}

MountInfoEntry Entry(int id, int parent, unsigned minor, std::string root, std::string point,
                     std::string fstype = "tmpfs") {
  MountInfoEntry entry;
  entry.mount_id = id;
  entry.parent_id = parent;
  entry.minor = minor;
  entry.root = std::move(root);
  entry.mount_point = std::move(point);
  entry.fstype = std::move(fstype);
  return entry;
}

TEST(MountTableTest, FindsTheTopOfStackedMountsWhateverTheOrder) {
  // 12 sits on 11 which sits on 10, all at /data; listed out of order.
  MountTable table({Entry(1, 0, 1, "/", "/", "ext4"), Entry(12, 11, 3, "/", "/data"),
                    Entry(10, 1, 1, "/data", "/data", "ext4"), Entry(11, 10, 2, "/", "/data")});
  EXPECT_TRUE(table.IsMountPoint("/data"));
  EXPECT_FALSE(table.IsMountPoint("/dat"));
  EXPECT_FALSE(table.IsMountPoint("/data/x"));
  EXPECT_EQ(table.MountCountAt("/data"), 3u);
  EXPECT_EQ(table.MountCountAt("/elsewhere"), 0u);
  ASSERT_NE(table.TopMountAt("/data"), nullptr);
  EXPECT_EQ(table.TopMountAt("/data")->mount_id, 12);
  EXPECT_EQ(table.TopMountAt("/nothing"), nullptr);
}

TEST(MountTableTest, HandlesAHundredThousandMounts) {
  std::vector<MountInfoEntry> entries;
  constexpr int kCount = 100000;
  for (int i = 0; i < kCount; ++i) {
    entries.push_back(Entry(i + 2, 1, 50, "/volumes/v" + std::to_string(i),
                            "/var/lib/kubelet/pods/p" + std::to_string(i) + "/mount"));
  }
  MountTable table(std::move(entries));
  int found = 0;
  for (int i = 0; i < kCount; ++i) {
    found += table.IsMountPoint("/var/lib/kubelet/pods/p" + std::to_string(i) + "/mount");
  }
  EXPECT_EQ(found, kCount);
  EXPECT_FALSE(table.IsMountPoint("/var/lib/kubelet/pods/p100000/mount"));
}

class MountedFromTest : public ::testing::Test {
 protected:
  // /run/certmount is the data tmpfs (0:50); two pods bind volume dirs from
  // it, a third binds a directory of a different tmpfs with the same path.
  MountTable table_{{
      Entry(1, 0, 1, "/", "/", "ext4"),
      Entry(20, 1, 50, "/", "/run/certmount"),
      Entry(21, 1, 50, "/volumes/v1", "/pods/a/mount"),
      Entry(22, 1, 50, "/volumes/v10", "/pods/b/mount"),
      Entry(23, 1, 60, "/volumes/v1", "/pods/c/mount"),
      Entry(24, 1, 1, "/run/certmount/volumes/v1", "/pods/d/mount", "ext4"),
  }};
};

TEST_F(MountedFromTest, RecognisesBindsOfTheDataDirectory) {
  EXPECT_TRUE(IsMountedFrom(table_, "/pods/a/mount", "/run/certmount"));
  EXPECT_EQ(BindSourceUnder(table_, "/pods/a/mount", "/run/certmount"),
            "/run/certmount/volumes/v1");
  EXPECT_TRUE(IsMountedFrom(table_, "/pods/a/mount", "/run/certmount/volumes"));
  EXPECT_TRUE(IsMountedFrom(table_, "/pods/a/mount", "/run/certmount/volumes/v1"));
  EXPECT_EQ(BindSourceUnder(table_, "/pods/a/mount", "/run/certmount/volumes/v1"),
            "/run/certmount/volumes/v1");
}

TEST_F(MountedFromTest, RejectsOtherSourcesAndPrefixLookalikes) {
  EXPECT_FALSE(IsMountedFrom(table_, "/pods/b/mount", "/run/certmount/volumes/v1"));
  EXPECT_TRUE(IsMountedFrom(table_, "/pods/b/mount", "/run/certmount/volumes/v10"));
  EXPECT_FALSE(IsMountedFrom(table_, "/pods/c/mount", "/run/certmount"));  // other device
  // Bound from the root filesystem's directory hidden under the tmpfs.
  EXPECT_FALSE(IsMountedFrom(table_, "/pods/d/mount", "/run/certmount"));
  EXPECT_FALSE(IsMountedFrom(table_, "/pods/none/mount", "/run/certmount"));
  EXPECT_FALSE(IsMountedFrom(table_, "/run/certmount", "/run/certmount"));
}

}  // namespace
}  // namespace certmount
