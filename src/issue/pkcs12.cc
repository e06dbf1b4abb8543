#include "issue/pkcs12.h"

#include <openssl/provider.h>

#include "issue/openssl_ptr.h"
#include "issue/pem_certificates.h"

namespace certmount {
namespace {

// OpenSSL's own default; costs ~1ms per operation and matches what
// `openssl pkcs12 -export` writes.
constexpr int kIterations = PKCS12_DEFAULT_ITER;

// A library context with the default and legacy providers, for RC2 and
// 3DES-based PBEs; null when the legacy provider is not installed.
OSSL_LIB_CTX* LegacyContext() {
  static OSSL_LIB_CTX* const context = [] {
    OSSL_LIB_CTX* created = OSSL_LIB_CTX_new();
    if (created == nullptr || OSSL_PROVIDER_load(created, "default") == nullptr ||
        OSSL_PROVIDER_load(created, "legacy") == nullptr) {
      DrainOpensslErrors();
      OSSL_LIB_CTX_free(created);
      return static_cast<OSSL_LIB_CTX*>(nullptr);
    }
    return created;
  }();
  return context;
}

struct ProfileParameters {
  int key_pbe;
  int certificate_pbe;
  const EVP_MD* mac_digest;
  OSSL_LIB_CTX* context;  // null: the default one
};

Result<ProfileParameters> ParametersFor(Pkcs12Profile profile) {
  switch (profile) {
    case Pkcs12Profile::kModern2023:
      return ProfileParameters{NID_aes_256_cbc, NID_aes_256_cbc, Sha256Digest(), nullptr};
    case Pkcs12Profile::kLegacyRc2:
    case Pkcs12Profile::kLegacyDes:
      break;
  }
  OSSL_LIB_CTX* context = LegacyContext();
  if (context == nullptr) {
    return Status::Internal(
        "OpenSSL's legacy provider (ossl-modules/legacy.so) is not available for the legacy "
        "PKCS#12 profiles; choose csi.cert-manager.io/pkcs12-profile: Modern2023");
  }
  int certificate_pbe = profile == Pkcs12Profile::kLegacyRc2
                            ? NID_pbe_WithSHA1And40BitRC2_CBC
                            : NID_pbe_WithSHA1And3_Key_TripleDES_CBC;
  return ProfileParameters{NID_pbe_WithSHA1And3_Key_TripleDES_CBC, certificate_pbe, EVP_sha1(),
                           context};
}

}  // namespace

Result<std::string> BuildPkcs12(const PrivateKey& key, std::string_view chain_pem,
                                const std::string& password, Pkcs12Profile profile) {
  CERTMOUNT_ASSIGN_OR_RETURN(ProfileParameters parameters, ParametersFor(profile));
  X509StackPtr chain(sk_X509_new_null());
  X509StackPtr extra(sk_X509_new_null());
  if (chain == nullptr || extra == nullptr) return Status::Internal("out of memory");
  if (chain_pem.empty()) return Status::InvalidArgument("empty certificate chain");
  CERTMOUNT_RETURN_IF_ERROR(AppendPemCertificates(chain_pem, chain.get(), "certificate chain"));
  X509Ptr leaf(sk_X509_shift(chain.get()));
  while (X509* cert = sk_X509_shift(chain.get())) {
    sk_X509_push(extra.get(), cert);
  }
  if (X509_check_private_key(leaf.get(), key.get()) != 1) {
    return Status::InvalidArgument(OpensslFailure("private key does not match the certificate"));
  }
  // mac_iter -1 skips PKCS12_create's own MAC so the profile's is set below.
  Pkcs12Ptr p12(PKCS12_create_ex(password.c_str(), nullptr, key.get(), leaf.get(), extra.get(),
                                 parameters.key_pbe, parameters.certificate_pbe, kIterations, -1, 0,
                                 parameters.context, nullptr));
  if (p12 == nullptr) return Status::Internal(OpensslFailure("cannot build PKCS#12"));
  if (PKCS12_set_mac(p12.get(), password.c_str(), static_cast<int>(password.size()), nullptr, 0,
                     kIterations, parameters.mac_digest) != 1) {
    return Status::Internal(OpensslFailure("cannot add PKCS#12 MAC"));
  }
  return EncodeDer(i2d_PKCS12, p12.get(), "PKCS#12");
}

}  // namespace certmount
