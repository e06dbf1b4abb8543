// Decoding a CertificateRequest object as the API server returns it (create,
// get or watch event): whether cert-manager signed, refused or is still
// working on it. Part of the cert-manager issuer; its own header so the
// fuzz target (fuzz/certificate_request_fuzz.cc) and tests can reach it.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "common/status.h"
#include "issue/issuer.h"

namespace certmount {

// What `object` (any JSON value; the server's answer is untrusted input)
// says about the request's outcome:
//   InvalidRequest=True            INVALID_ARGUMENT with its message;
//   Denied=True                    FAILED_PRECONDITION with reason, message;
//   Ready=False, reason Failed     FAILED_PRECONDITION with its message;
//   Ready=True, status.certificate the chain (base64 of PEM) and status.ca;
//                                  FAILED_PRECONDITION when either is not
//                                  base64 or the chain holds no certificate.
// nullopt while pending; then `pending_state` (if not null) says why, for
// the deadline's message. Fields of the wrong JSON type count as absent;
// never throws. `key` (namespace/name) names the request in messages.
std::optional<Result<IssuedCertificate>> CertificateRequestOutcome(const nlohmann::json& object,
                                                                   const std::string& key,
                                                                   std::string* pending_state);

}  // namespace certmount
