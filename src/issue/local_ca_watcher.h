// Notices when the local CA's files change and reloads them. A Kubernetes
// Secret volume replaces its files all at once by swapping a `..data`
// symlink; FileFingerprint tells when any of the certificate, key and
// bundle paths resolves to something new.
//
// Poll is synchronous (tests call it directly); certmountd's Node calls it
// every --ca-reload-interval and on SIGHUP (docs/ca-rotation.md).
#pragma once

#include "common/env.h"
#include "common/file_fingerprint.h"
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
  FileFingerprint Take() const;

  LocalCa* ca_;
  const LocalCaFiles files_;
  Env* env_;
  FileFingerprint last_;
};

}  // namespace certmount
