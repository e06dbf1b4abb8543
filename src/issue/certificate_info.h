// The few facts about an issued certificate the rest of the driver records
// (database, metrics, renewal scheduling).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace certmount {

struct CertificateInfo {
  // As `openssl x509 -serial` prints it: upper-case hex in whole bytes, so a
  // leading zero stays ("0A1B", "00" for zero).
  std::string serial_hex;
  // Validity bounds in unix seconds.
  int64_t not_before = 0;
  int64_t not_after = 0;
  // RFC 4514 form, most specific RDN first, e.g. "CN=web,O=Example".
  std::string subject;
  // The dNSName entries of subjectAltName, in certificate order.
  std::vector<std::string> dns_names;
  // The iPAddress entries, as inet_ntop writes them ("10.1.2.3", "fd00::5").
  std::vector<std::string> ip_addresses;
};

// Parses the first certificate of a PEM chain. INVALID_ARGUMENT when there is
// no parsable certificate; never crashes on arbitrary input.
Result<CertificateInfo> ParseLeafCertificate(std::string_view chain_pem);

}  // namespace certmount
