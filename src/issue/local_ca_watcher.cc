#include "issue/local_ca_watcher.h"

#include <utility>

namespace certmount {

LocalCaWatcher::LocalCaWatcher(LocalCa* ca, LocalCaFiles files, Env* env)
    : ca_(ca), files_(std::move(files)), env_(env), last_(Take()) {}

FileFingerprint LocalCaWatcher::Take() const {
  return FileFingerprint::Take({files_.cert, files_.key, files_.bundle}, env_);
}

Result<LocalCa::Change> LocalCaWatcher::Poll(bool force) {
  FileFingerprint now = Take();
  if (!force && now == last_) return LocalCa::Change{};
  last_ = std::move(now);
  return ca_->Reload(files_, env_);
}

}  // namespace certmount
