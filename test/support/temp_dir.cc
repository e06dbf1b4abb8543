#include "support/temp_dir.h"

#include <sys/mount.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace certmount::testing {

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "certmount-test-XXXXXX").string();
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (mkdtemp(buffer.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = buffer.data();
}

TempDir::~TempDir() {
  // Tests mount below their temporary directory; detach whatever is left so
  // removal never crosses into a mount's contents.
  std::ifstream mountinfo("/proc/self/mountinfo");
  std::vector<std::string> mounts;
  for (std::string line; std::getline(mountinfo, line);) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, mount_point;
    fields >> id >> parent >> dev >> root >> mount_point;
    if (mount_point.rfind(path_.string(), 0) == 0) mounts.push_back(mount_point);
  }
  for (auto it = mounts.rbegin(); it != mounts.rend(); ++it) umount2(it->c_str(), MNT_DETACH);
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace certmount::testing
