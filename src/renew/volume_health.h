// The node's view of one published volume's health, for NodeGetVolumeStats:
// the bytes its files take and whether it is working. kubelet shows an
// abnormal condition as an event on the pod, so the messages say what is
// wrong in terms a pod owner can act on.
#pragma once

#include <cstdint>
#include <string>

#include "common/clock.h"
#include "common/env.h"
#include "common/status.h"
#include "issue/volume_attributes.h"
#include "state/store.h"

namespace certmount {

struct VolumeHealth {
  int64_t bytes_used = 0;  // regular files below the volume's data directory (Env walk)
  bool abnormal = false;
  // Why it is abnormal (every problem found, "; "-separated), or a summary
  // of the current certificate when it is normal.
  std::string message;
};

class VolumeHealthChecker {
 public:
  // `store`, `env` and `clock` must outlive the checker. `rules` are the
  // node's, with which the publish parsed each volume's attributes.
  VolumeHealthChecker(std::string data_root, AttributeRules rules, Store* store, Env* env,
                      const Clock* clock);

  // The health of `volume_id` as published at `volume_path`. Abnormal when
  // the certificate has expired, when renewals have been failing (attempts
  // and last error), or when a file the pod expects cannot be read through
  // `volume_path` (which also catches a lost bind mount). NOT_FOUND when no
  // mounted volume `volume_id` exists or it is published elsewhere.
  // Thread-safe.
  Result<VolumeHealth> Check(const std::string& volume_id, const std::string& volume_path);

 private:
  std::string data_root_;
  const AttributeRules rules_;
  Store* store_;
  Env* env_;
  const Clock* clock_;
};

// "2024-05-01T12:00:00Z" for unix seconds.
std::string FormatUnixTime(int64_t unix_seconds);

}  // namespace certmount
