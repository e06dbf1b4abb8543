// The one way to read a volume's attributes: every caller that needs a
// volume's CertificateSpec (publish, renewal, volume health, adoption) parses
// through ParseVolumeAttributes with the node's rules, so a volume means the
// same thing to each of them.
#pragma once

#include <map>
#include <string>

#include "common/status.h"
#include "issue/request.h"
#include "issue/spiffe.h"

namespace certmount {

// The rules of the node's mode.
struct AttributeRules {
  // SPIFFE mode (certmountd --spiffe-trust-domain); off when its trust
  // domain is empty.
  SpiffeSettings spiffe;
};

// The pod's attributes as cert-manager's csi-driver reads them (every
// csi.cert-manager.io/ attribute validated, its defaults applied, ${POD_NAME}
// style variables expanded, keys of other domains copied into
// `annotations`), then, in SPIFFE mode, made into the pod's X.509-SVID
// (spiffe.h). Any problem with an attribute is INVALID_ARGUMENT whose message
// starts with the attribute's key; a missing kubelet entry the mode needs is
// FAILED_PRECONDITION. Pure: no I/O.
Result<CertificateSpec> ParseVolumeAttributes(
    const std::map<std::string, std::string>& volume_context, const AttributeRules& rules);

// Whether SPIFFE `settings` make a valid volume on their own: a pod that
// sets no attribute, only kubelet's entries, parses under them. Checked once
// at startup, so a bad file name or two files of one name is a usage error,
// not a refusal of every publish. INVALID_ARGUMENT naming the attribute the
// setting stands for otherwise.
Status CheckSpiffeSettings(const SpiffeSettings& settings);

}  // namespace certmount
