// Volume attributes as a hostile pod author writes them: the size bounds,
// then parsing with ${...} expansion (csi-driver's rules, then SPIFFE mode's), the pod's addresses
// filled into
// ${POD_IP} templates, then what is stored and kept secret.
// Input: key NUL value NUL key NUL value ... (fuzz_input.h).
#include "fuzz_input.h"
#include "issue/attribute_bounds.h"
#include "issue/attributes.h"
#include "issue/volume_attributes.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace certmount;
  const std::map<std::string, std::string> context =
      fuzz::VolumeContextFrom(fuzz::AsText(data, size));
  if (!CheckAttributeBounds(context).ok()) return 0;
  Result<CertificateSpec> spec = ParseVolumeAttributes(context, {});
  AttributeRules spiffe;
  spiffe.spiffe.trust_domain = "example.org";
  (void)ParseVolumeAttributes(context, spiffe);
  if (spec.ok()) (void)ApplyPodIps(*spec, {"10.244.1.7", "fd00::7"});
  (void)StorableAttributes(context);
  (void)SecretAttributes(context);
  (void)ServiceAccountToken(context);
  return 0;
}
