// A re-implementation, for tests, of the decision cert-manager's
// csi-driver-spiffe approver makes on a CertificateRequest, so that the
// requests certmount creates in SPIFFE mode can be checked against it (and
// the fake API server can play that approver: FakeKubeApi::SetApprover).
//
// Which requests it decides (anything else is kNotForThisApprover, which is
// not an approval: nobody approves such a request here):
//   - neither approved nor denied yet (no condition Approved=True or
//     Denied=True), and
//   - spec.issuerRef's name, kind and group equal the configured ones (an
//     absent kind or group is "" and so differs), and
//   - metadata.annotations holds "spiffe.csi.cert-manager.io/identity" (any
//     value).
//
// Such a request is approved when it keeps every rule below, checked in this
// order; the first one broken denies it, and the outcome names that rule.
//   1. spec.request is base64 of a PEM block (the first one, whatever its
//      label) whose bytes parse as a PKCS#10 request. Part of parsing, as in
//      Go's crypto/x509: the extension request's extensions decode, no
//      extension appears twice, a subjectAltName decodes, its DNS names,
//      email addresses and URIs are ASCII, and each IP address is 4 or 16
//      bytes.
//   2. spec.duration is present and, read as a Go duration, equals the
//      configured duration exactly ("60m" equals "1h"; a shorter one is
//      denied too: it is not a maximum).
//   3. The CSR's signature verifies with the CSR's own public key.
//   4. The CSR has no DNS name, no IP address, no email address and an empty
//      subject common name (the last CN attribute, as Go reads it). The
//      subject's other attributes are not checked.
//   5. (No rule: the key's type and size are not checked. An early version
//      of the approver required ECDSA P-521 keys; later ones dropped that.)
//   6. Every extension in the CSR's extension request is one of:
//      - subjectAltName whose every GeneralName is a URI;
//      - keyUsage whose value (the DER of the BIT STRING) is exactly 4
//        bytes with no bit set outside the union of the encodings of
//        digitalSignature alone (03 02 07 80) and keyEncipherment alone
//        (03 02 05 20): so digitalSignature, keyEncipherment, both, or
//        neither;
//      - extendedKeyUsage that decodes and holds only serverAuth and
//        clientAuth OIDs (either, both, or none).
//      Any other extension (basicConstraints, for one) is forbidden.
//   7. spec.isCA is false (absent is false).
//   8. spec.usages equals {"key encipherment", "digital signature",
//      "client auth", "server auth"} in any order, with nothing missing,
//      added or repeated.
//   9. The identity, by mode:
//      - default ("the pod's own service account"): spec.username splits on
//        ':' into exactly four parts "system", "serviceaccount", <ns>, <sa>;
//        the CSR has exactly one URI SAN; its scheme is "spiffe"; and its
//        text equals "spiffe://<trust domain>/ns/<ns>/sa/<sa>".
//      - use_own_service_account: exactly one URI SAN, scheme "spiffe",
//        host equal to the trust domain, and spec.username equal to
//        driver_service_account (the path is not checked).
//
// Not checked, by the approver or here: that the request's namespace is the
// service account's namespace; that the identity annotation's value is the
// CSR's URI.
//
// Where this differs from the Go original, only the denial's wording can
// differ, never the decision: a URI's text is compared as Go's
// url.ParseRequestURI(...).String() gives it (issue/go_url.h) where Go uses
// url.Parse (they differ for fragments and relative references, which never
// equal a spiffe:// ID anyway), and a URI with an invalid host, which Go
// already refuses to parse (rule 1), is denied here by rule 9; Go's size
// limit on the PEM input is not applied; an unparsable spec.duration, which
// the Go approver could not even decode, is denied by rule 2.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "issue/request.h"

namespace certmount::testing {

inline constexpr const char* kSpiffeApproverIdentityAnnotation =
    "spiffe.csi.cert-manager.io/identity";

// The approver's settings, with its defaults.
struct SpiffeApproverConfig {
  std::string trust_domain = "cluster.local";
  std::chrono::nanoseconds certificate_request_duration = std::chrono::hours(1);
  IssuerRef issuer_ref{"my-spiffe-ca", "ClusterIssuer", "cert-manager.io"};
  // The "use own service account" mode: requests are created by the
  // driver's service account, whose full username
  // ("system:serviceaccount:<ns>:<name>") is driver_service_account.
  bool use_own_service_account = false;
  std::string driver_service_account;
};

enum class SpiffeApproverDecision { kApproved, kDenied, kNotForThisApprover };

struct SpiffeApproverOutcome {
  SpiffeApproverDecision decision = SpiffeApproverDecision::kNotForThisApprover;
  // The rule (1-9 above) that denied it; 0 unless kDenied.
  int rule = 0;
  // Why it was denied or is not for this approver; empty when approved.
  std::string reason;
};

// Decides `certificate_request` (a cert-manager.io/v1 CertificateRequest as
// the API server holds it, spec.username included) as the approver
// configured by `config` would. Never throws, whatever the JSON holds.
SpiffeApproverOutcome Evaluate(const nlohmann::json& certificate_request,
                               const SpiffeApproverConfig& config);

}  // namespace certmount::testing
