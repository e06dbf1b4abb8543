// Mount-table questions tests ask, answered from /proc/self/mountinfo with
// the driver's own parser (tested on its own in mountinfo_test.cc).
#pragma once

#include <string>
#include <vector>

namespace certmount::testing {

// Whether something is mounted at `path` (absolute, canonical).
bool IsMountPoint(const std::string& path);

// Every mount point at or below `prefix`, parents before children.
std::vector<std::string> MountPointsUnder(const std::string& prefix);

}  // namespace certmount::testing
