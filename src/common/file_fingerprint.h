// Whether files changed since they were last looked at, without reading them:
// a Kubernetes ConfigMap or Secret volume replaces its files by swapping a
// `..data` symlink, so a path keeps its name while what it resolves to
// changes. Env::Stat follows the links; another device, inode, size or
// modification time of any of the files means "read them again".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/env.h"

namespace certmount {

class FileFingerprint {
 public:
  // No files.
  FileFingerprint() = default;

  // The fingerprint of `paths`, in order, read through `env` (Env::Stat).
  // An empty path names no file and is skipped; a path Stat cannot see
  // counts as absent, so its appearing later is a change too.
  static FileFingerprint Take(const std::vector<std::string>& paths, Env* env);

  bool operator==(const FileFingerprint& other) const = default;

 private:
  struct Entry {
    uint64_t device = 0;
    uint64_t inode = 0;
    int64_t size = 0;
    int64_t modified_ns = 0;
    bool operator==(const Entry& other) const = default;
  };

  std::vector<std::optional<Entry>> entries_;  // nullopt: Stat failed
};

}  // namespace certmount
