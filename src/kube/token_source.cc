#include "kube/token_source.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

namespace certmount::kube {

TokenSource::TokenSource(std::string fixed_token, std::string token_file)
    : fixed_token_(std::move(fixed_token)), token_file_(std::move(token_file)) {}

Result<std::string> TokenSource::Token() {
  if (token_file_.empty()) return fixed_token_;
  std::lock_guard lock(mutex_);
  struct stat info {};
  // stat follows kubelet's ..data symlink swap, so a rotation shows up as a
  // new inode.
  if (::stat(token_file_.c_str(), &info) != 0) {
    return Status::FailedPrecondition("cannot stat token file " + token_file_);
  }
  if (info.st_ino == inode_ && info.st_size == size_ && info.st_mtim.tv_sec == mtime_.tv_sec &&
      info.st_mtim.tv_nsec == mtime_.tv_nsec) {
    return cached_;
  }
  std::ifstream in(token_file_, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) return Status::FailedPrecondition("cannot read token file " + token_file_);
  std::string token = text.str();
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) {
    token.pop_back();
  }
  cached_ = std::move(token);
  inode_ = info.st_ino;
  size_ = info.st_size;
  mtime_ = info.st_mtim;
  return cached_;
}

}  // namespace certmount::kube
