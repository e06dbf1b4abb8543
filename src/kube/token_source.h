// The bearer token for requests: a fixed one, or a file re-read whenever it
// changes, because kubelet rotates projected service account tokens in
// place. The token is never logged and never part of a Status message.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "common/env.h"
#include "common/status.h"

namespace certmount::kube {

class TokenSource {
 public:
  // `token_file` (when non-empty) wins over `fixed_token`; it is read
  // through `env`.
  TokenSource(std::string fixed_token, std::string token_file, Env* env);

  // The current token; empty when there is none. Stats the file on each
  // call (cheap) and re-reads it when its inode, size or mtime changed.
  // FAILED_PRECONDITION when the file cannot be read; the last good token
  // is not reused then, so a revoked mount fails loudly. Thread-safe.
  Result<std::string> Token();

 private:
  const std::string fixed_token_;
  const std::string token_file_;
  std::mutex mutex_;
  Env* const env_;
  std::string cached_;
  uint64_t inode_ = 0;
  int64_t size_ = -1;
  int64_t modified_ns_ = 0;
};

}  // namespace certmount::kube
