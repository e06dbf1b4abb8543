#include "issue/certificate_info.h"
#include "issue/certificate_info_x509.h"

#include <arpa/inet.h>
#include <openssl/pem.h>

#include <ctime>

#include "issue/openssl_ptr.h"

namespace certmount {
namespace {

Result<int64_t> UnixTime(const ASN1_TIME* time) {
  struct tm broken_down = {};
  if (time == nullptr || ASN1_TIME_to_tm(time, &broken_down) != 1) {
    return Status::InvalidArgument(OpensslFailure("certificate has an invalid validity time"));
  }
  return static_cast<int64_t>(timegm(&broken_down));
}

Result<std::string> SerialHex(const ASN1_INTEGER* serial) {
  BignumPtr number(ASN1_INTEGER_to_BN(serial, nullptr));
  if (number == nullptr) {
    return Status::InvalidArgument(OpensslFailure("certificate has an invalid serial"));
  }
  char* hex = BN_bn2hex(number.get());
  if (hex == nullptr) return Status::Internal(OpensslFailure("cannot format serial"));
  std::string text(hex);
  OPENSSL_free(hex);
  // BN_bn2hex writes upper case in whole bytes, as `openssl x509 -serial`
  // prints; only zero comes out as a single digit.
  if (text == "0") return std::string("00");
  return text;
}

Result<std::string> SubjectText(const X509_NAME* name) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  // XN_FLAG_RFC2253 without ASN1_STRFLGS_ESC_MSB keeps UTF-8 readable.
  const unsigned long flags = XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB;
  if (bio == nullptr || X509_NAME_print_ex(bio.get(), name, 0, flags) < 0) {
    return Status::Internal(OpensslFailure("cannot format subject"));
  }
  return BioContents(bio.get());
}

}  // namespace

Result<CertificateInfo> DescribeCertificate(X509* cert) {
  CertificateInfo info;
  CERTMOUNT_ASSIGN_OR_RETURN(info.serial_hex, SerialHex(X509_get0_serialNumber(cert)));
  CERTMOUNT_ASSIGN_OR_RETURN(info.not_before, UnixTime(X509_get0_notBefore(cert)));
  CERTMOUNT_ASSIGN_OR_RETURN(info.not_after, UnixTime(X509_get0_notAfter(cert)));
  CERTMOUNT_ASSIGN_OR_RETURN(info.subject, SubjectText(X509_get_subject_name(cert)));

  int critical = 0;
  GeneralNamesPtr names(static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(cert, NID_subject_alt_name, &critical, nullptr)));
  if (names == nullptr && critical != -1) {
    // -1 means absent; anything else is a malformed or duplicated extension.
    return Status::InvalidArgument(OpensslFailure("certificate has an invalid subjectAltName"));
  }
  for (int i = 0; names != nullptr && i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names.get(), i);
    if (name->type == GEN_IPADD) {
      const ASN1_OCTET_STRING* ip = name->d.iPAddress;
      const int length = ASN1_STRING_length(ip);
      char text[INET6_ADDRSTRLEN];
      if ((length == 4 || length == 16) &&
          inet_ntop(length == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(ip), text,
                    sizeof(text)) != nullptr) {
        info.ip_addresses.emplace_back(text);
      }
      continue;
    }
    if (name->type != GEN_DNS) continue;
    const ASN1_IA5STRING* dns = name->d.dNSName;
    info.dns_names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(dns)),
                                static_cast<size_t>(ASN1_STRING_length(dns)));
  }
  DrainOpensslErrors();
  return info;
}

Result<CertificateInfo> ParseLeafCertificate(std::string_view chain_pem) {
  if (chain_pem.empty()) return Status::InvalidArgument("empty certificate chain");
  BioPtr bio = MemoryBio(chain_pem.data(), chain_pem.size());
  if (bio == nullptr) return Status::Internal(OpensslFailure("cannot allocate BIO"));
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (cert == nullptr) {
    return Status::InvalidArgument(OpensslFailure("no PEM certificate in chain"));
  }
  return DescribeCertificate(cert.get());
}

}  // namespace certmount
