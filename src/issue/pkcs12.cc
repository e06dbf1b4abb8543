#include "issue/pkcs12.h"

#include <openssl/pem.h>

#include "issue/openssl_ptr.h"

namespace certmount {
namespace {

// OpenSSL's own default; costs ~1ms per operation and matches what
// `openssl pkcs12 -export` writes.
constexpr int kIterations = PKCS12_DEFAULT_ITER;

// Appends every PEM certificate in `pem` to `stack`.
Status AppendCertificates(std::string_view pem, STACK_OF(X509) * stack, const char* what) {
  if (pem.empty()) return Status::Ok();
  BioPtr bio = MemoryBio(pem.data(), pem.size());
  if (bio == nullptr) return Status::Internal(OpensslFailure("cannot allocate BIO"));
  int count = 0;
  while (true) {
    X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
    if (cert == nullptr) break;
    if (sk_X509_push(stack, cert.get()) == 0) {
      return Status::Internal(OpensslFailure("out of memory"));
    }
    cert.release();  // owned by `stack`
    ++count;
  }
  // The loop ends with a "no start line" error at end of input; only a
  // failure before any certificate matters.
  std::string errors = DrainOpensslErrors();
  if (count == 0) {
    return Status::InvalidArgument(std::string("no PEM certificate in ") + what +
                                   (errors.empty() ? "" : ": " + errors));
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> BuildPkcs12(const PrivateKey& key, std::string_view chain_pem,
                                std::string_view ca_pem, const std::string& password) {
  X509StackPtr chain(sk_X509_new_null());
  X509StackPtr extra(sk_X509_new_null());
  if (chain == nullptr || extra == nullptr) return Status::Internal("out of memory");
  if (chain_pem.empty()) return Status::InvalidArgument("empty certificate chain");
  CERTMOUNT_RETURN_IF_ERROR(AppendCertificates(chain_pem, chain.get(), "certificate chain"));
  CERTMOUNT_RETURN_IF_ERROR(AppendCertificates(ca_pem, extra.get(), "CA bundle"));
  X509Ptr leaf(sk_X509_shift(chain.get()));
  while (X509* cert = sk_X509_shift(chain.get())) {
    sk_X509_push(extra.get(), cert);
  }
  if (X509_check_private_key(leaf.get(), key.get()) != 1) {
    return Status::InvalidArgument(OpensslFailure("private key does not match the certificate"));
  }
  // mac_iter -1 skips PKCS12_create's SHA-1 MAC so a SHA-256 one can be set.
  Pkcs12Ptr p12(PKCS12_create_ex(password.c_str(), nullptr, key.get(), leaf.get(), extra.get(),
                                 NID_aes_256_cbc, NID_aes_256_cbc, kIterations, -1, 0, nullptr,
                                 nullptr));
  if (p12 == nullptr) return Status::Internal(OpensslFailure("cannot build PKCS#12"));
  if (PKCS12_set_mac(p12.get(), password.c_str(), static_cast<int>(password.size()), nullptr, 0,
                     kIterations, Sha256Digest()) != 1) {
    return Status::Internal(OpensslFailure("cannot add PKCS#12 MAC"));
  }
  unsigned char* der = nullptr;
  int length = i2d_PKCS12(p12.get(), &der);
  if (length <= 0) return Status::Internal(OpensslFailure("cannot encode PKCS#12"));
  std::string bytes(reinterpret_cast<const char*>(der), static_cast<size_t>(length));
  OPENSSL_free(der);
  return bytes;
}

}  // namespace certmount
