// Test-side inspection of issued files with OpenSSL, independent of the
// driver's own parsing code, so a bug there cannot hide a bug in issuance.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace certmount::testing {

struct InspectedCertificate {
  bool parsed = false;
  std::string subject;  // RFC 2253 one-line form
  std::vector<std::string> dns_names;
  std::vector<std::string> ip_addresses;
  std::vector<std::string> uris;
  std::vector<std::string> emails;
  std::vector<std::string> extended_key_usages;  // short names: serverAuth, clientAuth
  unsigned key_usage_bits = 0;                   // X509_get_key_usage() bits
  bool is_ca = false;
  std::string public_key_type;  // "RSA", "EC", "ED25519"
  int public_key_bits = 0;
  std::string serial_hex;  // as `openssl x509 -serial`: upper-case hex, whole bytes
  long long not_before = 0;
  long long not_after = 0;
};

// Parses the first certificate of a PEM file.
InspectedCertificate InspectCertificateFile(const std::string& path);

// Now in whole seconds from CLOCK_REALTIME, as the issuers stamp notBefore.
// Verification without an explicit time would use time(), which reads the
// coarse clock: up to a tick behind, so a certificate issued just after a
// second boundary looked "not yet valid" for a few milliseconds.
int64_t RealtimeNowUnix();

// Verifies `leaf_path` (leaf first, maybe intermediates) against the CA
// bundle at `ca_path` with X509_verify_cert, as of RealtimeNowUnix(). Empty
// string on success, else OpenSSL's reason.
std::string VerifyChain(const std::string& leaf_path, const std::string& ca_path);
// The same, as of `at_unix` instead of now: for certificates that live a
// second or two, whose validity a test must not race.
std::string VerifyChainAt(const std::string& leaf_path, const std::string& ca_path,
                          int64_t at_unix);

// Whether the private key file and the leaf certificate belong together.
bool KeyMatchesCertificate(const std::string& key_path, const std::string& cert_path);
// The same for PEM text: the first private key of `key_pem` and the first
// certificate of `cert_pem` (X509_check_private_key).
bool KeyMatchesCertificatePem(const std::string& key_pem, const std::string& cert_pem);

// Whether two PEM private keys, in any unencrypted form (PKCS#1, SEC1,
// PKCS#8), are the same key (EVP_PKEY_eq).
bool SamePrivateKey(const std::string& pem_a, const std::string& pem_b);

// How many PEM certificate blocks `text` holds.
int CountPemCertificates(const std::string& text);

// The PEM label of the first block in a file, e.g. "EC PRIVATE KEY".
std::string PemLabel(const std::string& path);
// The same for PEM text.
std::string PemLabelOf(const std::string& pem);

// Opens a PKCS#12 file with a password; true when it parses and holds a key
// and a certificate.
bool OpensPkcs12(const std::string& path, const std::string& password);

}  // namespace certmount::testing
