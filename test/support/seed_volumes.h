// Fills a store with mounted rows for benchmarks that need many volumes.
#pragma once

#include <string>

#include "common/status.h"
#include "state/store.h"

namespace certmount::testing {

// Writes `count` mounted rows ("csi-bench-<i>", pod "pod-<i>" in namespace
// "bench"), all with `target` as their target path and the attributes a
// csi-driver pod would declare, certificates valid from now for 90 days, and
// renewals spread evenly over the next 60 days (so none is due for a day).
Status SeedMountedVolumes(Store& store, const std::string& target, int count);

}  // namespace certmount::testing
