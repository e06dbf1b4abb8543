// /proc/self/mountinfo as a hostile mount (any path a pod or admin can
// create ends up in it, octal escapes included).
#include "fuzz_input.h"
#include "volume/mountinfo.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace certmount;
  Result<std::vector<MountInfoEntry>> entries = ParseMountInfo(fuzz::AsText(data, size));
  if (!entries.ok()) return 0;
  for (const MountInfoEntry& entry : *entries) {
    (void)IsMountPoint(*entries, entry.mount_point);
    (void)HasMountOption(entry.mount_options, "ro");
  }
  return 0;
}
