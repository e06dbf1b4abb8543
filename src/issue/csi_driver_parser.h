// The csi-driver rules alone: the first half of ParseVolumeAttributes
// (volume_attributes.h), which is the one entry point for everything else.
// Only volume_attributes.cc and attributes.cc include this.
#pragma once

#include <map>
#include <string>

#include "common/status.h"
#include "issue/request.h"

namespace certmount {

// Validates every csi.cert-manager.io/ and certmount.io/ attribute, applies
// csi-driver's defaults, expands ${POD_NAME}-style variables from kubelet's
// entries and copies attributes of other domains into `annotations`. Any
// problem is INVALID_ARGUMENT whose message starts with the offending
// attribute key.
Result<CertificateSpec> ParseAttributes(const std::map<std::string, std::string>& volume_context);

}  // namespace certmount
