// Validation of the two names kubelet hands the driver, before either is used
// to build a path or a mount: the volume id becomes a directory name under
// the data root, the target path is where a bind mount goes.
#pragma once

#include <string>
#include <string_view>

#include "common/env.h"
#include "common/status.h"

namespace certmount {

inline constexpr size_t kMaxVolumeIdLength = 128;

// OK when `id` is safe as a single path component: non-empty, at most 128
// bytes, only [A-Za-z0-9._-], not "." or "..", and containing no "..".
// INVALID_ARGUMENT naming the broken rule otherwise. kubelet's ephemeral ids
// look like "csi-" followed by 64 hex digits.
Status ValidateVolumeId(std::string_view id);

// OK when `target` is an absolute, normalised path (no empty, "." or ".."
// components, no trailing "/") strictly below `target_root` (accepted as
// written or as its realpath), and no existing component from below the root
// down to `target` is a symlink or a non-directory (checked with lstat, so a
// pod cannot redirect the mount). INVALID_ARGUMENT for any of those.
// `target` itself may be missing, but its parent must exist:
// FAILED_PRECONDITION otherwise, because kubelet creates the parent before
// NodePublishVolume and a missing one means the pod is being torn down or
// the request does not come from kubelet; retrying later can succeed.
Status ValidateTargetPath(const std::string& target, const std::string& target_root,
                          Env* env = Env::Default());

// Creates the target directory (mode 0750, as kubelet makes its mount
// dirs; the bind mount hides it anyway) when missing, and returns whether it
// did, so a failed publish removes only what it created. OK(false) when it is
// already a directory; FAILED_PRECONDITION when something else (a file, a
// symlink) is there. Run ValidateTargetPath first.
Result<bool> EnsureTargetDirectory(const std::string& target, Env* env);

// Where a volume's files live on the data tmpfs.
struct VolumePaths {
  std::string volume_dir;  // <data_root>/volumes/<volume_id>

  // Builds the paths for `volume_id` after ValidateVolumeId, so a path is
  // never made from an unchecked id.
  static Result<VolumePaths> Make(const std::string& data_root, std::string_view volume_id);
};

// "<data_root>/volumes": the parent of every volume_dir.
std::string VolumesRoot(const std::string& data_root);

}  // namespace certmount
