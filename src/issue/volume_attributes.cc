#include "issue/volume_attributes.h"

#include "issue/attributes.h"
#include "issue/csi_driver_parser.h"

namespace certmount {

Result<CertificateSpec> ParseVolumeAttributes(
    const std::map<std::string, std::string>& volume_context, const AttributeRules& rules) {
  if (!rules.spiffe.enabled()) return ParseAttributes(volume_context);
  CERTMOUNT_ASSIGN_OR_RETURN(auto context, SpiffeAttributeContext(volume_context, rules.spiffe));
  CERTMOUNT_ASSIGN_OR_RETURN(CertificateSpec spec, ParseAttributes(context));
  CERTMOUNT_RETURN_IF_ERROR(MakeSvid(volume_context, rules.spiffe, spec));
  return spec;
}

Status CheckSpiffeSettings(const SpiffeSettings& settings) {
  AttributeRules rules;
  rules.spiffe = settings;
  // Whether the signer needs an issuer name is the pod's to answer.
  rules.spiffe.issuer_required = false;
  const std::map<std::string, std::string> pod = {
      {std::string(kPodName), "pod"},
      {std::string(kPodNamespace), "default"},
      {std::string(kPodUid), "00000000-0000-0000-0000-000000000000"},
      {std::string(kServiceAccountName), "default"}};
  return ParseVolumeAttributes(pod, rules).status();
}

}  // namespace certmount
