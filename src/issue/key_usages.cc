#include "issue/key_usages.h"

#include <openssl/obj_mac.h>
#include <strings.h>

#include <array>
#include <string>

namespace certmount {
namespace {

constexpr KeyUsageKind kBit = KeyUsageKind::kKeyUsage;
constexpr KeyUsageKind kExtended = KeyUsageKind::kExtendedKeyUsage;

constexpr std::array<KeyUsageName, 23> kKeyUsageNames = {{
    {"signing", kBit, 0},
    {"digital signature", kBit, 0},
    {"content commitment", kBit, 1},
    {"key encipherment", kBit, 2},
    {"key agreement", kBit, 4},
    {"data encipherment", kBit, 3},
    {"cert sign", kBit, 5},
    {"crl sign", kBit, 6},
    {"encipher only", kBit, 7},
    {"decipher only", kBit, 8},
    {"any", kExtended, NID_anyExtendedKeyUsage},
    {"server auth", kExtended, NID_server_auth},
    {"client auth", kExtended, NID_client_auth},
    {"code signing", kExtended, NID_code_sign},
    {"email protection", kExtended, NID_email_protect},
    {"s/mime", kExtended, NID_email_protect},
    {"ipsec end system", kExtended, NID_ipsecEndSystem},
    {"ipsec tunnel", kExtended, NID_ipsecTunnel},
    {"ipsec user", kExtended, NID_ipsecUser},
    {"timestamping", kExtended, NID_time_stamp},
    {"ocsp signing", kExtended, NID_OCSP_sign},
    {"microsoft sgc", kExtended, NID_ms_sgc},
    {"netscape sgc", kExtended, NID_ns_sgc},
}};

bool NamesMatch(std::string_view known, std::string_view name, NameMatch match) {
  if (match == NameMatch::kExact) return known == name;
  return known.size() == name.size() && strncasecmp(known.data(), name.data(), known.size()) == 0;
}

}  // namespace

std::span<const KeyUsageName> KnownKeyUsages() { return kKeyUsageNames; }

const KeyUsageName* FindKeyUsage(std::string_view name, NameMatch match) {
  for (const KeyUsageName& usage : kKeyUsageNames) {
    if (NamesMatch(usage.name, name, match)) return &usage;
  }
  return nullptr;
}

}  // namespace certmount
