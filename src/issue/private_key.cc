#include "issue/private_key.h"

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/obj_mac.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include "issue/openssl_ptr.h"

namespace certmount {
namespace {

constexpr int kDefaultRsaBits = 2048;
constexpr int kMinRsaBits = 2048;
constexpr int kMaxRsaBits = 8192;
// Pooled contexts beyond this many per (algorithm, size) are freed on return.
constexpr size_t kMaxIdleContexts = 16;

const char* AlgorithmName(KeyAlgorithm algorithm) {
  switch (algorithm) {
    case KeyAlgorithm::kRsa:
      return "RSA";
    case KeyAlgorithm::kEcdsa:
      return "EC";
    case KeyAlgorithm::kEd25519:
      return "ED25519";
  }
  return "unknown";
}

const char* CurveName(int key_size) {
  switch (key_size) {
    case 256:
      return "P-256";
    case 384:
      return "P-384";
    case 521:
      return "P-521";
  }
  return nullptr;
}

const EVP_MD* FetchForever(const char* name) {
  // Deliberately leaked: callers across the process keep the pointer.
  EVP_MD* md = EVP_MD_fetch(nullptr, name, nullptr);
  if (md == nullptr) DrainOpensslErrors();
  return md;
}

// What OpenSSL's generation callback checks while a key is made.
struct GenerationLimits {
  std::chrono::steady_clock::time_point deadline;
  std::stop_token stop;
  bool expired() const {
    return stop.stop_requested() || std::chrono::steady_clock::now() >= deadline;
  }
};

// Called by OpenSSL for each candidate prime and test round (many times a
// second for RSA); returning 0 makes EVP_PKEY_generate fail at once.
Status GenerationGivenUp(const GenerationLimits& limits) {
  if (limits.stop.stop_requested()) return Status::Aborted("key generation cancelled");
  return Status::DeadlineExceeded("key generation did not finish before the deadline");
}

int GenerationCallback(EVP_PKEY_CTX* ctx) {
  const auto* limits = static_cast<const GenerationLimits*>(EVP_PKEY_CTX_get_app_data(ctx));
  return limits != nullptr && limits->expired() ? 0 : 1;
}

}  // namespace

void EvpPkeyFree::operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
void KeyGenerator::CtxFree::operator()(EVP_PKEY_CTX* ctx) const { EVP_PKEY_CTX_free(ctx); }

const EVP_MD* Sha256Digest() {
  static const EVP_MD* const md = FetchForever("SHA256");
  return md;
}
const EVP_MD* Sha384Digest() {
  static const EVP_MD* const md = FetchForever("SHA384");
  return md;
}
const EVP_MD* Sha512Digest() {
  static const EVP_MD* const md = FetchForever("SHA512");
  return md;
}

Result<int> ValidateKeyParameters(KeyAlgorithm algorithm, int key_size) {
  switch (algorithm) {
    case KeyAlgorithm::kRsa:
      if (key_size == 0) return kDefaultRsaBits;
      if (key_size < kMinRsaBits || key_size > kMaxRsaBits) {
        return Status::InvalidArgument("RSA key size must be between 2048 and 8192 bits, got " +
                                       std::to_string(key_size));
      }
      return key_size;
    case KeyAlgorithm::kEcdsa:
      if (key_size == 0) return 256;
      if (CurveName(key_size) == nullptr) {
        return Status::InvalidArgument("ECDSA key size must be 256, 384 or 521, got " +
                                       std::to_string(key_size));
      }
      return key_size;
    case KeyAlgorithm::kEd25519:
      return 256;
  }
  return Status::InvalidArgument("unknown key algorithm");
}

// ---- KeyGenerator -------------------------------------------------------------

KeyGenerator::~KeyGenerator() = default;

KeyGenerator& KeyGenerator::Shared() {
  static KeyGenerator* const generator = new KeyGenerator();  // never destroyed
  return *generator;
}

Result<KeyGenerator::CtxPtr> KeyGenerator::TakeContext(KeyAlgorithm algorithm, int key_size) {
  {
    std::lock_guard lock(mutex_);
    auto& idle = idle_[{algorithm, key_size}];
    if (!idle.empty()) {
      CtxPtr ctx = std::move(idle.back());
      idle.pop_back();
      return ctx;
    }
  }
  CtxPtr ctx(EVP_PKEY_CTX_new_from_name(nullptr, AlgorithmName(algorithm), nullptr));
  if (ctx == nullptr || EVP_PKEY_keygen_init(ctx.get()) <= 0) {
    return Status::Internal(OpensslFailure(std::string("cannot set up ") +
                                           AlgorithmName(algorithm) + " key generation"));
  }
  int ok = 1;
  if (algorithm == KeyAlgorithm::kRsa) {
    ok = EVP_PKEY_CTX_set_rsa_keygen_bits(ctx.get(), key_size);
  } else if (algorithm == KeyAlgorithm::kEcdsa) {
    ok = EVP_PKEY_CTX_set_group_name(ctx.get(), CurveName(key_size));
  }
  if (ok <= 0) {
    return Status::Internal(OpensslFailure("cannot set key generation parameters"));
  }
  return ctx;
}

void KeyGenerator::ReturnContext(KeyAlgorithm algorithm, int key_size, CtxPtr ctx) {
  std::lock_guard lock(mutex_);
  auto& idle = idle_[{algorithm, key_size}];
  if (idle.size() < kMaxIdleContexts) idle.push_back(std::move(ctx));
}

Result<PrivateKey> KeyGenerator::Generate(KeyAlgorithm algorithm, int key_size,
                                          std::chrono::steady_clock::time_point deadline,
                                          std::stop_token stop) {
  CERTMOUNT_ASSIGN_OR_RETURN(int size, ValidateKeyParameters(algorithm, key_size));
  GenerationLimits limits{deadline, std::move(stop)};
  if (limits.expired()) return GenerationGivenUp(limits);
  CERTMOUNT_ASSIGN_OR_RETURN(CtxPtr ctx, TakeContext(algorithm, size));
  EVP_PKEY_CTX_set_app_data(ctx.get(), &limits);
  EVP_PKEY_CTX_set_cb(ctx.get(), GenerationCallback);
  EVP_PKEY* raw = nullptr;
  const int generated = EVP_PKEY_generate(ctx.get(), &raw);
  if (generated <= 0) {
    // The context may be in an odd state after a failure; drop it.
    if (limits.expired()) {
      DrainOpensslErrors();
      return GenerationGivenUp(limits);
    }
    return Status::Internal(OpensslFailure("key generation failed"));
  }
  // A pooled context must not point at this call's limits.
  EVP_PKEY_CTX_set_cb(ctx.get(), nullptr);
  EVP_PKEY_CTX_set_app_data(ctx.get(), nullptr);
  ReturnContext(algorithm, size, std::move(ctx));
  return PrivateKey::Adopt(raw);
}

// ---- PrivateKey -----------------------------------------------------------------

Result<PrivateKey> PrivateKey::Generate(KeyAlgorithm algorithm, int key_size) {
  return KeyGenerator::Shared().Generate(algorithm, key_size);
}

Result<PrivateKey> PrivateKey::Generate(KeyAlgorithm algorithm, int key_size,
                                        std::chrono::steady_clock::time_point deadline,
                                        std::stop_token stop) {
  return KeyGenerator::Shared().Generate(algorithm, key_size, deadline, std::move(stop));
}

Result<PrivateKey> PrivateKey::Adopt(EVP_PKEY* raw) {
  std::unique_ptr<EVP_PKEY, EvpPkeyFree> key(raw);
  if (key == nullptr) return Status::InvalidArgument("no private key");
  if (EVP_PKEY_is_a(key.get(), "RSA")) {
    int bits = EVP_PKEY_get_bits(key.get());
    if (bits < 1024) return Status::InvalidArgument("RSA key is too small");
    return PrivateKey(std::move(key), KeyAlgorithm::kRsa, bits);
  }
  if (EVP_PKEY_is_a(key.get(), "EC")) {
    // OpenSSL reports the group by its short name ("prime256v1", not "P-256").
    char group[64] = {};
    size_t group_length = 0;
    int group_nid = NID_undef;
    if (EVP_PKEY_get_utf8_string_param(key.get(), OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof(group),
                                       &group_length) > 0) {
      group_nid = OBJ_txt2nid(group);
    }
    DrainOpensslErrors();
    switch (group_nid) {
      case NID_X9_62_prime256v1:
        return PrivateKey(std::move(key), KeyAlgorithm::kEcdsa, 256);
      case NID_secp384r1:
        return PrivateKey(std::move(key), KeyAlgorithm::kEcdsa, 384);
      case NID_secp521r1:
        return PrivateKey(std::move(key), KeyAlgorithm::kEcdsa, 521);
    }
    return Status::InvalidArgument("EC key is not on P-256, P-384 or P-521");
  }
  if (EVP_PKEY_is_a(key.get(), "ED25519")) {
    return PrivateKey(std::move(key), KeyAlgorithm::kEd25519, 256);
  }
  return Status::InvalidArgument("unsupported private key type (want RSA, ECDSA or Ed25519)");
}

Result<PrivateKey> PrivateKey::FromPem(std::string_view pem) {
  BioPtr bio = MemoryBio(pem.data(), pem.size());
  if (bio == nullptr) return Status::Internal(OpensslFailure("cannot allocate BIO"));
  // An empty passphrase callback result makes encrypted keys fail instead of
  // prompting on the terminal.
  auto no_password = [](char*, int, int, void*) -> int { return -1; };
  EVP_PKEY* raw = PEM_read_bio_PrivateKey(bio.get(), nullptr, no_password, nullptr);
  if (raw == nullptr) {
    return Status::InvalidArgument(OpensslFailure("not a PEM private key"));
  }
  return Adopt(raw);
}

Result<std::string> PrivateKey::ToPem(KeyEncoding encoding) const {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr) return Status::Internal(OpensslFailure("cannot allocate BIO"));
  int ok;
  if (encoding == KeyEncoding::kPkcs1 && algorithm_ != KeyAlgorithm::kEd25519) {
    ok = PEM_write_bio_PrivateKey_traditional(bio.get(), key_.get(), nullptr, nullptr, 0, nullptr,
                                              nullptr);
  } else {
    ok =
        PEM_write_bio_PKCS8PrivateKey(bio.get(), key_.get(), nullptr, nullptr, 0, nullptr, nullptr);
  }
  if (ok != 1) return Status::Internal(OpensslFailure("cannot encode private key"));
  return BioContents(bio.get());
}

Result<std::string> PrivateKey::PublicKeyPem() const {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr || PEM_write_bio_PUBKEY(bio.get(), key_.get()) != 1) {
    return Status::Internal(OpensslFailure("cannot encode public key"));
  }
  return BioContents(bio.get());
}

const EVP_MD* PrivateKey::SigningDigest() const {
  switch (algorithm_) {
    case KeyAlgorithm::kRsa:
      return Sha256Digest();
    case KeyAlgorithm::kEcdsa:
      if (key_size_ == 384) return Sha384Digest();
      if (key_size_ == 521) return Sha512Digest();
      return Sha256Digest();
    case KeyAlgorithm::kEd25519:
      return nullptr;
  }
  return nullptr;
}

}  // namespace certmount
