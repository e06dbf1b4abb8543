// PKCS#12 keystores for applications (mostly JVM ones) that want the key and
// chain in a single password-protected file.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "issue/private_key.h"
#include "issue/request.h"

namespace certmount {

// DER bytes of a PKCS#12 holding `key`, the first certificate of `chain_pem`
// as its certificate and the rest of the chain (the intermediates) as extra
// certificates, as csi-driver writes keystore.p12: the CA bundle (ca.crt) is
// not included. Protected by `password` as `profile` says (cert-manager's
// profiles, see request.h: LegacyRC2, csi-driver's format, needs OpenSSL's
// legacy provider, which this loads into a private library context so the
// rest of the process keeps the default algorithms only). INVALID_ARGUMENT
// when the chain is empty or does not parse or the key does not match the
// leaf.
Result<std::string> BuildPkcs12(const PrivateKey& key, std::string_view chain_pem,
                                const std::string& password,
                                Pkcs12Profile profile = Pkcs12Profile::kLegacyRc2);

}  // namespace certmount
