#include "common/file_fingerprint.h"

namespace certmount {

FileFingerprint FileFingerprint::Take(const std::vector<std::string>& paths, Env* env) {
  FileFingerprint fingerprint;
  for (const std::string& path : paths) {
    if (path.empty()) continue;
    Result<FileStat> stat = env->Stat(path);
    if (!stat.ok()) {
      fingerprint.entries_.push_back(std::nullopt);
      continue;
    }
    fingerprint.entries_.push_back(
        Entry{static_cast<uint64_t>(stat->device), stat->inode, stat->size, stat->modified_ns});
  }
  return fingerprint;
}

}  // namespace certmount
