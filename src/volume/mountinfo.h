// The kernel's view of the mount table (/proc/self/mountinfo, see proc(5)).
// Mount decisions are made from it rather than from stat() device numbers,
// because a bind mount of a directory on the same filesystem has the same
// device as its parent.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace certmount {

class Env;

// One line of mountinfo. String fields are decoded (the kernel writes space,
// tab, newline and backslash as octal escapes such as "\040").
struct MountInfoEntry {
  int mount_id = 0;
  int parent_id = 0;
  unsigned major = 0;
  unsigned minor = 0;
  std::string root;           // the path inside the source filesystem that is mounted
  std::string mount_point;    // where it is mounted, relative to this process's root
  std::string mount_options;  // per-mount options: "ro,nosuid,nodev,noexec,relatime"
  std::string fstype;         // "tmpfs", "ext4", ...
  std::string source;         // "tmpfs", "/dev/sda1", or "none"
  std::string super_options;  // per-superblock options: "rw,size=1024k,mode=700"

  bool operator==(const MountInfoEntry&) const = default;
};

// Parses mountinfo text. INTERNAL naming the line when a line is malformed.
Result<std::vector<MountInfoEntry>> ParseMountInfo(std::string_view text);

// Reads and parses a mountinfo file through `env`.
Result<std::vector<MountInfoEntry>> ReadMountInfo(Env* env,
                                                  const std::string& path = "/proc/self/mountinfo");
// Same, on the real filesystem.
Result<std::vector<MountInfoEntry>> ReadMountInfo(const std::string& path = "/proc/self/mountinfo");

// Whether `path` (absolute, canonical: as the kernel prints mount points) is
// a mount point in `entries`. Linear; use MountTable for repeated lookups.
bool IsMountPoint(const std::vector<MountInfoEntry>& entries, const std::string& path);

// Whether the comma-separated `options` contains `option` exactly.
bool HasMountOption(std::string_view options, std::string_view option);

// A snapshot of the mount table indexed by mount point, so that startup
// cleanup over 100k volumes does O(log n) lookups instead of rescanning.
// The snapshot goes stale as soon as anything mounts; re-read after changes.
class MountTable {
 public:
  explicit MountTable(std::vector<MountInfoEntry> entries);

  // Reads /proc/self/mountinfo (or `path`) through `env`.
  static Result<MountTable> Read(Env* env, const std::string& path = "/proc/self/mountinfo");
  // Same, on the real filesystem.
  static Result<MountTable> Read(const std::string& path = "/proc/self/mountinfo");

  // Whether something is mounted at `path` (absolute, canonical).
  bool IsMountPoint(const std::string& path) const;
  // The visible mount at `path`: with stacked mounts, the one mounted last
  // (the one no other mount at `path` sits on top of). nullptr if none.
  const MountInfoEntry* TopMountAt(const std::string& path) const;
  // How many mounts are stacked at `path` (0 when it is not a mount point).
  size_t MountCountAt(const std::string& path) const;
  // Every mount at `path`, in mountinfo order (empty when none).
  std::vector<const MountInfoEntry*> MountsAt(const std::string& path) const;
  // The nearest mount point at or above `path` (absolute, canonical) and the
  // visible mount there: the mount `path` lives on. nullptr if none.
  const MountInfoEntry* ContainingMount(const std::string& path) const;

  const std::vector<MountInfoEntry>& entries() const { return entries_; }

 private:
  std::vector<MountInfoEntry> entries_;
  // mount point -> index into entries_ of the top mount there, and how many.
  struct Slot {
    size_t top = 0;
    size_t count = 0;
  };
  std::map<std::string, Slot, std::less<>> by_mount_point_;
};

}  // namespace certmount
