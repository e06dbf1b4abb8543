// Distinguished names: RFC 4514 parsing directly, and literal-subject as a
// pod author writes it, with ${POD_NAME} expanded from a hostile pod name
// and escaped. Input: pod name NUL literal subject (or just a DN).
#include "fuzz_input.h"
#include "issue/attribute_bounds.h"
#include "issue/attributes.h"
#include "issue/dn.h"
#include "issue/volume_attributes.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace certmount;
  const std::string_view text = fuzz::AsText(data, size);
  (void)ParseRfc4514(text);
  const size_t nul = text.find('\0');
  if (nul == std::string_view::npos) return 0;
  std::map<std::string, std::string> context = fuzz::VolumeContextFrom({});
  context["csi.storage.k8s.io/pod.name"] = std::string(text.substr(0, nul));
  context["csi.cert-manager.io/issuer-name"] = "ca";
  context["csi.cert-manager.io/literal-subject"] = std::string(text.substr(nul + 1));
  if (!CheckAttributeBounds(context).ok()) return 0;
  (void)ParseVolumeAttributes(context, {});
  return 0;
}
