// Size bounds on a volume context, checked before anything else looks at it.
// A pod author controls every value; without these a 1 MB dns-names or a
// common-name of ${POD_NAME} repeated 100,000 times costs the daemon seconds
// of CPU, hundreds of MB of memory and a log line as large.
#pragma once

#include <cstddef>
#include <map>
#include <string>

#include "common/status.h"

namespace certmount {

// The sum of every key's and value's length in the volume context.
inline constexpr std::size_t kMaxVolumeContextBytes = 128 * 1024;
// One value. kubelet's csi.storage.k8s.io/serviceAccount.tokens (several
// JWTs) counts only toward the total.
inline constexpr std::size_t kMaxAttributeValueBytes = 16 * 1024;
// One templated value (subject fields and SAN lists) after ${...} expansion,
// counting each variable as the raw value it stands for.
inline constexpr std::size_t kMaxExpandedValueBytes = 16 * 1024;
// Entries of dns-names, ip-sans, uri-sans and email-sans together.
inline constexpr std::size_t kMaxSubjectAltNames = 1000;

// OK when `volume_context` is within every bound above; otherwise
// INVALID_ARGUMENT whose message starts with the offending key (or "volume
// context" for the total) and names the limit. Linear in the context's size
// and allocates nothing proportional to it, so it is safe on any input.
Status CheckAttributeBounds(const std::map<std::string, std::string>& volume_context);

}  // namespace certmount
