// Private keys: generation, PEM encoding and decoding. Generation goes
// through a KeyGenerator that keeps initialised OpenSSL contexts, because in
// OpenSSL 3 setting a context up costs far more than generating an EC key.
#pragma once

#include <openssl/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "issue/request.h"

namespace certmount {

// Frees an EVP_PKEY; defined in private_key.cc so this header needs only
// OpenSSL's forward declarations.
struct EvpPkeyFree {
  void operator()(EVP_PKEY* key) const;
};

class PrivateKey {
 public:
  PrivateKey(PrivateKey&&) noexcept = default;
  PrivateKey& operator=(PrivateKey&&) noexcept = default;

  // A fresh key. RSA takes 2048..8192 bits, ECDSA 256/384/521 (P-256, P-384,
  // P-521), Ed25519 ignores `key_size`; a size of 0 means the default (RSA
  // 2048, ECDSA 256). Other sizes are INVALID_ARGUMENT. Thread-safe.
  static Result<PrivateKey> Generate(KeyAlgorithm algorithm, int key_size);

  // The same, but given up when `deadline` passes (DEADLINE_EXCEEDED) or
  // `stop` is requested (ABORTED), checked from OpenSSL's generation
  // callback; an RSA-8192 key can take many seconds and must not outlast a
  // publish timeout or the shutdown grace.
  static Result<PrivateKey> Generate(KeyAlgorithm algorithm, int key_size,
                                     std::chrono::steady_clock::time_point deadline,
                                     std::stop_token stop);

  // Parses a PEM private key in any unencrypted form (PKCS#1, SEC1 or PKCS#8).
  // Only RSA, ECDSA on P-256/P-384/P-521 and Ed25519 keys are accepted;
  // anything else is INVALID_ARGUMENT.
  static Result<PrivateKey> FromPem(std::string_view pem);

  // Takes ownership of `key` (must be non-null and one of the supported
  // kinds, else INVALID_ARGUMENT).
  static Result<PrivateKey> Adopt(EVP_PKEY* key);

  // The unencrypted PEM. kPkcs1 gives the traditional "RSA PRIVATE KEY" /
  // "EC PRIVATE KEY" forms; Ed25519 has none, so it is always PKCS#8
  // ("PRIVATE KEY"), as is kPkcs8 for every algorithm.
  Result<std::string> ToPem(KeyEncoding encoding) const;

  // The public half as a PEM "PUBLIC KEY" (SubjectPublicKeyInfo).
  Result<std::string> PublicKeyPem() const;

  KeyAlgorithm algorithm() const { return algorithm_; }
  // RSA modulus bits or the curve size (256/384/521); 256 for Ed25519.
  int key_size() const { return key_size_; }

  // The digest this key signs certificates and CSRs with: SHA-256 for RSA
  // and P-256, SHA-384 for P-384, SHA-512 for P-521, nullptr for Ed25519
  // (which hashes internally). Fetched once per process; never freed.
  const EVP_MD* SigningDigest() const;

  // The underlying key, still owned by this object. OpenSSL 3 keys may be
  // used by several threads at once for signing.
  EVP_PKEY* get() const { return key_.get(); }

 private:
  PrivateKey(std::unique_ptr<EVP_PKEY, EvpPkeyFree> key, KeyAlgorithm algorithm, int key_size)
      : key_(std::move(key)), algorithm_(algorithm), key_size_(key_size) {}

  std::unique_ptr<EVP_PKEY, EvpPkeyFree> key_;
  KeyAlgorithm algorithm_;
  int key_size_;
};

// Checks an algorithm/size pair the way Generate does and returns the
// effective size (0 replaced by the default). INVALID_ARGUMENT names the
// accepted values.
Result<int> ValidateKeyParameters(KeyAlgorithm algorithm, int key_size);

// The process-wide SHA-256/384/512 implementations, fetched once and never
// freed so callers may keep the pointers.
const EVP_MD* Sha256Digest();
const EVP_MD* Sha384Digest();
const EVP_MD* Sha512Digest();

// Generates keys from pools of ready keygen contexts, one pool per
// (algorithm, size). A call takes an idle context (or makes one when all are
// busy), generates, and gives it back, so concurrent callers never share a
// context and never wait for each other's RSA generation. Thread-safe.
class KeyGenerator {
 public:
  KeyGenerator() = default;
  ~KeyGenerator();
  KeyGenerator(const KeyGenerator&) = delete;
  KeyGenerator& operator=(const KeyGenerator&) = delete;

  // A fresh key; same contract as PrivateKey::Generate (with a deadline:
  // time_point::max() and an empty stop_token never give up).
  Result<PrivateKey> Generate(
      KeyAlgorithm algorithm, int key_size,
      std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max(),
      std::stop_token stop = {});

  // The instance PrivateKey::Generate uses; never destroyed.
  static KeyGenerator& Shared();

 private:
  using PoolKey = std::pair<KeyAlgorithm, int>;
  struct CtxFree {
    void operator()(EVP_PKEY_CTX* ctx) const;
  };
  using CtxPtr = std::unique_ptr<EVP_PKEY_CTX, CtxFree>;

  Result<CtxPtr> TakeContext(KeyAlgorithm algorithm, int key_size);
  void ReturnContext(KeyAlgorithm algorithm, int key_size, CtxPtr ctx);

  std::mutex mutex_;
  std::map<PoolKey, std::vector<CtxPtr>> idle_;  // guarded by mutex_
};

}  // namespace certmount
