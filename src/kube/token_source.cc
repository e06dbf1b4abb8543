#include "kube/token_source.h"

#include <utility>

namespace certmount::kube {

TokenSource::TokenSource(std::string fixed_token, std::string token_file, Env* env)
    : fixed_token_(std::move(fixed_token)), token_file_(std::move(token_file)), env_(env) {}

Result<std::string> TokenSource::Token() {
  if (token_file_.empty()) return fixed_token_;
  std::lock_guard lock(mutex_);
  Result<FileStat> info = env_->Stat(token_file_);
  if (!info.ok()) {
    return Status::FailedPrecondition("cannot stat token file " + token_file_ + ": " +
                                      info.status().message());
  }
  if (info->inode == inode_ && info->size == size_ && info->modified_ns == modified_ns_) {
    return cached_;
  }
  Result<std::string> text = env_->ReadFile(token_file_);
  if (!text.ok()) {
    return Status::FailedPrecondition("cannot read token file " + token_file_ + ": " +
                                      text.status().message());
  }
  std::string token = std::move(*text);
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) {
    token.pop_back();
  }
  cached_ = std::move(token);
  inode_ = info->inode;
  size_ = info->size;
  modified_ns_ = info->modified_ns;
  return cached_;
}

}  // namespace certmount::kube
