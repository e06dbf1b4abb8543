// Fills a store with mounted rows for benchmarks that need many volumes.
#pragma once

#include <functional>
#include <string>

#include "common/status.h"
#include "state/store.h"

namespace certmount::testing {

// The id of the `index`th seeded volume: "csi-bench-<index>".
std::string SeededVolumeId(int index);

// Writes `count` mounted rows (SeededVolumeId(i), pod "pod-<i>" in namespace
// "bench"), the `i`th with target_of(i) as its target path and the
// attributes a csi-driver pod would declare, certificates valid from now for
// 90 days, and renewals spread evenly over the next 60 days (so none is due
// for a day). Only rows: no files, no mounts.
Status SeedMountedVolumes(Store& store, int count,
                          const std::function<std::string(int index)>& target_of);

// Same, with one `target` for every row (enough for what reads only rows).
Status SeedMountedVolumes(Store& store, const std::string& target, int count);

}  // namespace certmount::testing
