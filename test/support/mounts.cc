#include "support/mounts.h"

#include "volume/mountinfo.h"

namespace certmount::testing {

bool IsMountPoint(const std::string& path) {
  Result<MountTable> table = MountTable::Read();
  return table.ok() && table->IsMountPoint(path);
}

std::vector<std::string> MountPointsUnder(const std::string& prefix) {
  std::vector<std::string> out;
  Result<std::vector<MountInfoEntry>> entries = ReadMountInfo();
  if (!entries.ok()) return out;
  for (const MountInfoEntry& entry : *entries) {
    const std::string& point = entry.mount_point;
    if (point == prefix || point.rfind(prefix + "/", 0) == 0) out.push_back(point);
  }
  return out;
}

}  // namespace certmount::testing
