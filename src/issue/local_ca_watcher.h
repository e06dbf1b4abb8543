// Notices when the local CA's files change and reloads them: a Kubernetes
// Secret volume replaces its files all at once by swapping a `..data`
// symlink, so the certificate, key and bundle paths keep their names while
// what they resolve to changes. Env::Stat follows the links; a change of
// inode, size or mtime of any of the files means "read them again".
//
// Poll is synchronous (tests call it directly); certmountd's Node calls it
// every --ca-reload-interval and on SIGHUP (docs/ca-rotation.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/env.h"
#include "common/status.h"
#include "issue/local_ca.h"

namespace certmount {

class LocalCaWatcher {
 public:
  // `ca` was loaded from `files`; `ca` and `env` must outlive the watcher.
  // Remembers the files as they are now.
  LocalCaWatcher(LocalCa* ca, LocalCaFiles files, Env* env);

  // Reloads the CA (LocalCa::Reload) when a file changed since the last
  // poll, or always when `force`. Returns what changed (nothing when no file
  // did). A reload that fails leaves the CA as it was and returns the error
  // once per state of the files: until they change again, polls return OK
  // with no change, so a bad Secret is logged once, not every interval.
  Result<LocalCa::Change> Poll(bool force);

 private:
  // inode, size and mtime of each file; nullopt for one Stat cannot see.
  using Fingerprint = std::vector<std::optional<FileStat>>;
  Fingerprint Take() const;
  static bool Same(const Fingerprint& a, const Fingerprint& b);

  LocalCa* ca_;
  const LocalCaFiles files_;
  Env* env_;
  Fingerprint last_;
};

}  // namespace certmount
