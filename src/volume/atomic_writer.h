// Replaces the set of files in a volume directory so that a pod reading them
// through their names never sees a half-written generation, in the layout
// kubelet's AtomicWriter uses for secret and projected volumes:
//
//   <volume_dir>/..2024_05_01_12_00_00.1a2b3c4d5e6f7081/   one generation
//   <volume_dir>/..data -> ..2024_05_01_12_00_00.1a2b3c4d5e6f7081
//   <volume_dir>/tls.crt -> ..data/tls.crt
//   <volume_dir>/tls.key -> ..data/tls.key
//
// A new generation is written completely into a fresh hidden directory, then
// ..data is swapped to it with one rename(2). Every open through a name
// resolves ..data once, so it sees either the old or the new generation,
// never a mix of the two within one file. Two separate opens that straddle a
// swap can come from different generations; a reader that needs tls.crt and
// tls.key to match must open them relative to one resolution of ..data.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "common/env.h"
#include "common/status.h"

namespace certmount {

struct FileEntry {
  std::string name;      // a plain file name: [A-Za-z0-9._-], not starting with ".."
  std::string contents;  // bytes, written as-is
  mode_t mode = 0;       // exact permission bits (see KeyFileMode/CertFileMode)
};

// The group the pod reads the files as (its fsGroup), if any. Files stay
// owned by root either way.
struct FileOwnership {
  std::optional<gid_t> gid;
};

// Mode for a private key: 0600 without a group, 0640 root:gid with one.
// Tight by default: a pod running as non-root must set fsGroup to read the
// key, the same contract as projected service-account tokens. 0644, which
// cert-manager's csi-driver uses, would let every user in the container read
// the key.
mode_t KeyFileMode(const FileOwnership& ownership);
// Mode for certificates and CA bundles, which are public: 0644 either way.
mode_t CertFileMode(const FileOwnership& ownership);
// Mode of the volume dir and of each generation dir: 0755 without a group
// (any pod user can traverse it to read the certificates), 0750 root:gid with
// one (only the pod's group can look inside).
mode_t VolumeDirMode(const FileOwnership& ownership);

// Makes `files` the complete content of `volume_dir`, creating the directory
// (and missing parents, mode 0700) if needed and applying VolumeDirMode and
// the group to it. Names from the previous set that are not in `files` are
// removed; the previous generation directory is removed after the swap, and
// so is anything left by an interrupted earlier call (stray ".." dirs, a
// ..data_tmp link). On failure before the swap the previous generation stays
// fully intact and visible and the new directory is removed. INVALID_ARGUMENT
// for bad or duplicate names, FAILED_PRECONDITION if `volume_dir` is a
// symlink or not a directory, else the Env's error (e.g. RESOURCE_EXHAUSTED
// when the tmpfs is full). Calls for one volume_dir must not overlap (each
// treats the other's unfinished generation as debris); callers serialise per
// volume.
Status WriteFileSet(const std::string& volume_dir, const std::vector<FileEntry>& files,
                    const FileOwnership& ownership, Env* env);

// Removes `volume_dir` and everything in it. OK if it does not exist. Never
// follows a symlink: if `volume_dir` itself is a symlink only the link is
// removed, and nothing below it is followed or crossed into when it is a
// mount point (FAILED_PRECONDITION then). Unmount the volume first.
Status RemoveVolumeDir(const std::string& volume_dir, Env* env);

}  // namespace certmount
