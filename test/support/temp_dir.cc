#include "support/temp_dir.h"

#include "support/mounts.h"

#include <sys/mount.h>

#include <cstdlib>
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
  // removal never crosses into a mount's contents. Children first.
  std::vector<std::string> mounts = MountPointsUnder(path_.string());
  for (auto it = mounts.rbegin(); it != mounts.rend(); ++it) umount2(it->c_str(), MNT_DETACH);
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace certmount::testing
