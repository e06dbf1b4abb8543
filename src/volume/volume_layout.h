// Where one volume's files live on the data tmpfs:
//
//   <data_root>/volumes/<volume_id>/           mode 0700, the unit of cleanup
//   <data_root>/volumes/<volume_id>/data/      bind-mounted into the pod (AtomicWriter layout)
//   <data_root>/volumes/<volume_id>/private/   mode 0700, never mounted: what renewal needs
//                                              but the pod and the database must not hold
//   <data_root>/volumes/<volume_id>/volume.json  mode 0600: the volume's own non-secret
//                                              description, to rebuild its row from the node
#pragma once

#include <map>
#include <string>

#include "common/env.h"
#include "common/status.h"
#include "state/volume_record.h"

namespace certmount {

struct VolumeLayout {
  std::string root;
  std::string data;
  std::string private_dir;

  // The layout of `volume_id` (already validated) under `data_root`.
  static VolumeLayout For(const std::string& data_root, const std::string& volume_id);
};

// Keeps `secrets` (attribute key to value) in the private directory, mode
// 0600, replacing what was there. A no-op for an empty map.
Status SaveSecretAttributes(const VolumeLayout& layout,
                            const std::map<std::string, std::string>& secrets, Env* env);

// What SaveSecretAttributes kept; empty when nothing was. DATA_LOSS when the
// file is there but unreadable as a JSON object of strings.
Result<std::map<std::string, std::string>> LoadSecretAttributes(const VolumeLayout& layout,
                                                                Env* env);

// Keeps the non-secret identity of `volume` (id, target path, pod fields,
// service account, attributes without secrets, issuer, file group) in
// <root>/volume.json, mode 0600, written atomically (a new file renamed
// over the old). The publish writes it before the bind mount, so every
// mounted volume directory can describe itself when its row is lost.
Status SaveVolumeDescription(const VolumeLayout& layout, const VolumeRecord& volume, Env* env);

// What SaveVolumeDescription kept, as a record with only those fields set.
// NOT_FOUND when there is none; DATA_LOSS when it does not parse or names
// another volume.
Result<VolumeRecord> LoadVolumeDescription(const VolumeLayout& layout, const std::string& volume_id,
                                           Env* env);

}  // namespace certmount
