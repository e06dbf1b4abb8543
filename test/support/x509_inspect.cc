#include "support/x509_inspect.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/provider.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>

namespace certmount::testing {

namespace {

template <auto fn>
struct Deleter {
  template <typename T>
  void operator()(T* p) const {
    fn(p);
  }
};
using X509Ptr = std::unique_ptr<X509, Deleter<X509_free>>;
using BioPtr = std::unique_ptr<BIO, Deleter<BIO_free_all>>;
using KeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY_free>>;
using StorePtr = std::unique_ptr<X509_STORE, Deleter<X509_STORE_free>>;
using StoreCtxPtr = std::unique_ptr<X509_STORE_CTX, Deleter<X509_STORE_CTX_free>>;
using GeneralNamesPtr = std::unique_ptr<GENERAL_NAMES, Deleter<GENERAL_NAMES_free>>;
using EkuPtr = std::unique_ptr<EXTENDED_KEY_USAGE, Deleter<EXTENDED_KEY_USAGE_free>>;
using Pkcs12Ptr = std::unique_ptr<PKCS12, Deleter<PKCS12_free>>;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<X509Ptr> ReadCertificatesPem(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  std::vector<X509Ptr> out;
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    out.emplace_back(cert);
  }
  return out;
}

std::vector<X509Ptr> ReadCertificates(const std::string& path) {
  return ReadCertificatesPem(Slurp(path));
}

KeyPtr ReadPrivateKeyPem(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return KeyPtr(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
}

std::string Asn1String(const ASN1_STRING* s) {
  return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                     static_cast<size_t>(ASN1_STRING_length(s)));
}

long long AsUnix(const ASN1_TIME* t) {
  struct tm tm {};
  ASN1_TIME_to_tm(t, &tm);
  return static_cast<long long>(timegm(&tm));
}

}  // namespace

int64_t RealtimeNowUnix() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

InspectedCertificate InspectCertificateFile(const std::string& path) {
  InspectedCertificate out;
  std::vector<X509Ptr> certs = ReadCertificates(path);
  if (certs.empty()) return out;
  X509* cert = certs.front().get();
  out.parsed = true;

  BioPtr subject(BIO_new(BIO_s_mem()));
  X509_NAME_print_ex(subject.get(), X509_get_subject_name(cert), 0, XN_FLAG_RFC2253);
  char* data = nullptr;
  long len = BIO_get_mem_data(subject.get(), &data);
  out.subject.assign(data, static_cast<size_t>(len));

  GeneralNamesPtr names(
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr)));
  for (int i = 0; names && i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names.get(), i);
    switch (name->type) {
      case GEN_DNS:
        out.dns_names.push_back(Asn1String(name->d.dNSName));
        break;
      case GEN_URI:
        out.uris.push_back(Asn1String(name->d.uniformResourceIdentifier));
        break;
      case GEN_EMAIL:
        out.emails.push_back(Asn1String(name->d.rfc822Name));
        break;
      case GEN_IPADD: {
        // GENERAL_NAME_print renders v4 dotted and v6 in colon form.
        BioPtr b(BIO_new(BIO_s_mem()));
        GENERAL_NAME_print(b.get(), const_cast<GENERAL_NAME*>(name));
        char* p = nullptr;
        long n = BIO_get_mem_data(b.get(), &p);
        std::string printed(p, static_cast<size_t>(n));
        const std::string prefix = "IP Address:";
        if (printed.rfind(prefix, 0) == 0) printed = printed.substr(prefix.size());
        out.ip_addresses.push_back(printed);
        break;
      }
      default:
        break;
    }
  }

  EkuPtr eku(static_cast<EXTENDED_KEY_USAGE*>(
      X509_get_ext_d2i(cert, NID_ext_key_usage, nullptr, nullptr)));
  for (int i = 0; eku && i < sk_ASN1_OBJECT_num(eku.get()); ++i) {
    out.extended_key_usages.push_back(OBJ_nid2sn(OBJ_obj2nid(sk_ASN1_OBJECT_value(eku.get(), i))));
  }
  const uint32_t usage = X509_get_key_usage(cert);
  out.key_usage_bits = usage == UINT32_MAX ? 0 : usage;
  out.is_ca = X509_check_ca(cert) != 0;

  EVP_PKEY* key = X509_get0_pubkey(cert);
  switch (EVP_PKEY_get_base_id(key)) {
    case EVP_PKEY_RSA:
      out.public_key_type = "RSA";
      break;
    case EVP_PKEY_EC:
      out.public_key_type = "EC";
      break;
    case EVP_PKEY_ED25519:
      out.public_key_type = "ED25519";
      break;
    default:
      out.public_key_type = "other";
      break;
  }
  out.public_key_bits = EVP_PKEY_get_bits(key);

  BIGNUM* serial = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), nullptr);
  char* hex = BN_bn2hex(serial);
  // BN_bn2hex writes whole bytes ("03AB"), as `openssl x509 -serial` prints
  // and the driver stores it; only zero comes out as one digit.
  out.serial_hex = std::string(hex) == "0" ? "00" : hex;
  OPENSSL_free(hex);
  BN_free(serial);
  out.not_before = AsUnix(X509_get0_notBefore(cert));
  out.not_after = AsUnix(X509_get0_notAfter(cert));
  return out;
}

std::string VerifyChain(const std::string& leaf_path, const std::string& ca_path) {
  return VerifyChainAt(leaf_path, ca_path, RealtimeNowUnix());
}

std::string VerifyChainAt(const std::string& leaf_path, const std::string& ca_path,
                          int64_t at_unix) {
  std::vector<X509Ptr> chain = ReadCertificates(leaf_path);
  std::vector<X509Ptr> cas = ReadCertificates(ca_path);
  if (chain.empty()) return "no certificate in " + leaf_path;
  if (cas.empty()) return "no certificate in " + ca_path;
  StorePtr store(X509_STORE_new());
  for (const X509Ptr& ca : cas) X509_STORE_add_cert(store.get(), ca.get());
  STACK_OF(X509)* intermediates = sk_X509_new_null();
  for (size_t i = 1; i < chain.size(); ++i) sk_X509_push(intermediates, chain[i].get());
  StoreCtxPtr ctx(X509_STORE_CTX_new());
  X509_STORE_CTX_init(ctx.get(), store.get(), chain.front().get(), intermediates);
  if (at_unix >= 0) X509_STORE_CTX_set_time(ctx.get(), 0, static_cast<time_t>(at_unix));
  int ok = X509_verify_cert(ctx.get());
  std::string reason =
      ok == 1 ? "" : X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get()));
  sk_X509_free(intermediates);
  return reason;
}

bool KeyMatchesCertificate(const std::string& key_path, const std::string& cert_path) {
  return KeyMatchesCertificatePem(Slurp(key_path), Slurp(cert_path));
}

bool KeyMatchesCertificatePem(const std::string& key_pem, const std::string& cert_pem) {
  KeyPtr key = ReadPrivateKeyPem(key_pem);
  std::vector<X509Ptr> certs = ReadCertificatesPem(cert_pem);
  if (!key || certs.empty()) return false;
  return X509_check_private_key(certs.front().get(), key.get()) == 1;
}

bool SamePrivateKey(const std::string& pem_a, const std::string& pem_b) {
  KeyPtr a = ReadPrivateKeyPem(pem_a);
  KeyPtr b = ReadPrivateKeyPem(pem_b);
  return a && b && EVP_PKEY_eq(a.get(), b.get()) == 1;
}

std::string PemLabel(const std::string& path) { return PemLabelOf(Slurp(path)); }

std::string PemLabelOf(const std::string& pem) {
  const std::string begin = "-----BEGIN ";
  auto start = pem.find(begin);
  if (start == std::string::npos) return "";
  start += begin.size();
  auto end = pem.find("-----", start);
  return pem.substr(start, end - start);
}

bool OpensPkcs12(const std::string& path, const std::string& password) {
  // csi-driver's LegacyRC2 keystores need OpenSSL 3's legacy provider; load
  // it (and the default one, which explicit loading would otherwise skip)
  // into this test process once.
  static const bool providers_loaded = OSSL_PROVIDER_load(nullptr, "default") != nullptr &&
                                       OSSL_PROVIDER_load(nullptr, "legacy") != nullptr;
  if (!providers_loaded) return false;
  std::string der = Slurp(path);
  BioPtr bio(BIO_new_mem_buf(der.data(), static_cast<int>(der.size())));
  Pkcs12Ptr p12(d2i_PKCS12_bio(bio.get(), nullptr));
  if (!p12) return false;
  EVP_PKEY* key = nullptr;
  X509* cert = nullptr;
  STACK_OF(X509)* ca = nullptr;
  bool ok = PKCS12_parse(p12.get(), password.c_str(), &key, &cert, &ca) == 1 && key && cert;
  EVP_PKEY_free(key);
  X509_free(cert);
  sk_X509_pop_free(ca, X509_free);
  return ok;
}

int CountPemCertificates(const std::string& text) {
  int count = 0;
  for (size_t at = text.find("BEGIN CERTIFICATE"); at != std::string::npos;
       at = text.find("BEGIN CERTIFICATE", at + 1)) {
    ++count;
  }
  return count;
}

}  // namespace certmount::testing
