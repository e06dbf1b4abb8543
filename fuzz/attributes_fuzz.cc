// Volume attributes as a hostile pod author writes them: the size bounds,
// then parsing with ${...} expansion, the pod's addresses filled into
// ${POD_IP} templates, then what is stored and kept secret.
// Input: key NUL value NUL key NUL value ... (fuzz_input.h).
#include "fuzz_input.h"
#include "issue/attribute_bounds.h"
#include "issue/attributes.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace certmount;
  const std::map<std::string, std::string> context =
      fuzz::VolumeContextFrom(fuzz::AsText(data, size));
  if (!CheckAttributeBounds(context).ok()) return 0;
  Result<CertificateSpec> spec = ParseAttributes(context);
  if (spec.ok()) (void)ApplyPodIps(*spec, {"10.244.1.7", "fd00::7"});
  (void)StorableAttributes(context);
  (void)SecretAttributes(context);
  (void)ServiceAccountToken(context);
  return 0;
}
