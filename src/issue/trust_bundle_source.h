// A driver-wide trust bundle read from a file: every volume's CA file gets
// these CA certificates instead of its signer's. The file is typically a key
// of a mounted ConfigMap or Secret, which kubelet replaces by swapping a
// `..data` symlink; Poll notices that through FileFingerprint and reads the
// file again.
//
// Load and Poll are synchronous; the caller decides when to poll (an
// interval, a signal). Pem is what issuances read meanwhile.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "common/env.h"
#include "common/file_fingerprint.h"
#include "common/status.h"

namespace certmount {

class TrustBundleSource {
 public:
  // The bundle in the file at `path`, read through `env`, which must outlive
  // the source. Nothing is read before Load or Poll.
  TrustBundleSource(std::string path, Env* env);

  TrustBundleSource(const TrustBundleSource&) = delete;
  TrustBundleSource& operator=(const TrustBundleSource&) = delete;

  // Reads the file and checks it with ValidateCaBundle (src/issue/local_ca.h);
  // only when it passes does it become the bundle. FAILED_PRECONDITION when
  // the file cannot be read, INVALID_ARGUMENT naming the file (and the
  // offending block) when it is not a bundle of CA certificates; either way
  // the bundle stays as it was. Remembers the file's state for Poll.
  Status Load();

  // Loads the file again when it changed since the last Load or Poll (its
  // device, inode, size or mtime, links followed). Returns whether the
  // bundle changed: false when the file did not, or holds the same
  // certificates. A load that fails keeps the bundle and returns the error
  // once per state of the file: until it changes again, polls return false,
  // so a bad edit is reported once, not every interval. With `force` (an
  // admin's SIGHUP) the file is read whether or not it looks changed.
  Result<bool> Poll(bool force = false);

  // The bundle: the file's certificates re-encoded, one PEM block each, in
  // file order, duplicates dropped. Empty until a Load or Poll succeeded.
  // Thread-safe, also while Load or Poll runs.
  std::string Pem() const;

  const std::string& path() const { return path_; }

 private:
  // Reads and checks the file; on success makes it the bundle and returns
  // whether the bundle changed. Called with load_mu_ held.
  Result<bool> Read();

  const std::string path_;
  Env* const env_;

  std::mutex load_mu_;    // one Load or Poll at a time
  FileFingerprint last_;  // guarded by load_mu_

  mutable std::mutex pem_mu_;
  std::shared_ptr<const std::string> pem_;  // guarded by pem_mu_; null until loaded
};

}  // namespace certmount
