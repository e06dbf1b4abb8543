#include "issue/local_ca_watcher.h"

#include <utility>

namespace certmount {

LocalCaWatcher::LocalCaWatcher(LocalCa* ca, LocalCaFiles files, Env* env)
    : ca_(ca), files_(std::move(files)), env_(env), last_(Take()) {}

LocalCaWatcher::Fingerprint LocalCaWatcher::Take() const {
  Fingerprint fingerprint;
  for (const std::string* path : {&files_.cert, &files_.key, &files_.bundle}) {
    if (path->empty()) continue;
    Result<FileStat> stat = env_->Stat(*path);
    fingerprint.push_back(stat.ok() ? std::optional<FileStat>(*stat) : std::nullopt);
  }
  return fingerprint;
}

bool LocalCaWatcher::Same(const Fingerprint& a, const Fingerprint& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].has_value() != b[i].has_value()) return false;
    if (!a[i].has_value()) continue;
    if (a[i]->inode != b[i]->inode || a[i]->device != b[i]->device || a[i]->size != b[i]->size ||
        a[i]->modified_ns != b[i]->modified_ns) {
      return false;
    }
  }
  return true;
}

Result<LocalCa::Change> LocalCaWatcher::Poll(bool force) {
  Fingerprint now = Take();
  if (!force && Same(now, last_)) return LocalCa::Change{};
  last_ = std::move(now);
  return ca_->Reload(files_, env_);
}

}  // namespace certmount
