// The JKS layout, all integers big-endian (Java's DataOutputStream):
//   u32 magic 0xFEEDFEED, u32 version 2, u32 entry count, then per entry
//   u32 tag (1 private key, 2 trusted certificate), alias (u16 length +
//   modified UTF-8), u64 creation time in ms, and
//     tag 1: u32 length + EncryptedPrivateKeyInfo, u32 chain length, and per
//            certificate its type ("X.509", u16-prefixed) and u32 length + DER;
//     tag 2: one certificate as above;
//   then SHA-1(password UTF-16BE || "Mighty Aphrodite" || every byte before).
// The key protector (the JDK's, OID 1.3.6.1.4.1.42.2.17.1.1) XORs the
// PKCS#8 key with a keystream of SHA-1(password || previous block), the
// first block seeded with a 20-byte random salt, and stores
// salt || encrypted key || SHA-1(password || plain key).
#include "issue/jks.h"

#include <openssl/objects.h>
#include <openssl/rand.h>

#include <array>
#include <initializer_list>
#include <set>
#include <vector>

#include "issue/dn.h"
#include "issue/openssl_ptr.h"
#include "issue/pem_certificates.h"

namespace certmount {
namespace {

constexpr uint32_t kMagic = 0xFEEDFEED;
constexpr uint32_t kVersion = 2;
constexpr uint32_t kPrivateKeyTag = 1;
constexpr uint32_t kTrustedCertificateTag = 2;
constexpr char kKeyProtectorOid[] = "1.3.6.1.4.1.42.2.17.1.1";
constexpr std::string_view kIntegrityWhitener = "Mighty Aphrodite";
constexpr std::string_view kCertificateType = "X.509";
constexpr std::string_view kKeyAlias = "certificate";
constexpr size_t kSha1Bytes = 20;

using Sha1 = std::array<unsigned char, kSha1Bytes>;
using X509SigPtr = std::unique_ptr<X509_SIG, OpensslFree<&X509_SIG_free>>;
using Pkcs8Ptr = std::unique_ptr<PKCS8_PRIV_KEY_INFO, OpensslFree<&PKCS8_PRIV_KEY_INFO_free>>;

// A string holding key material or a password: wiped before it is freed.
struct SecretBytes {
  std::string bytes;
  SecretBytes() = default;
  SecretBytes(const SecretBytes&) = delete;
  SecretBytes& operator=(const SecretBytes&) = delete;
  ~SecretBytes() { OPENSSL_cleanse(bytes.data(), bytes.size()); }
};

// Big-endian output as Java's DataOutputStream writes it.
class JavaDataWriter {
 public:
  void U16(uint32_t v) { Big(v, 2); }
  void U32(uint32_t v) { Big(v, 4); }
  void U64(uint64_t v) { Big(v, 8); }
  // writeUTF of an ASCII string (aliases and the certificate type are ours).
  void Utf(std::string_view ascii) {
    U16(static_cast<uint32_t>(ascii.size()));
    out_.append(ascii);
  }
  // A u32 length, then the bytes.
  void Sized(std::string_view bytes) {
    U32(static_cast<uint32_t>(bytes.size()));
    out_.append(bytes);
  }
  void Certificate(std::string_view der) {
    Utf(kCertificateType);
    Sized(der);
  }
  std::string& bytes() { return out_; }

 private:
  void Big(uint64_t v, int width) {
    for (int shift = 8 * (width - 1); shift >= 0; shift -= 8) {
      out_.push_back(static_cast<char>((v >> shift) & 0xff));
    }
  }
  std::string out_;
};

Result<Sha1> Sha1Of(std::initializer_list<std::string_view> parts) {
  EvpMdCtxPtr ctx(EVP_MD_CTX_new());
  if (ctx == nullptr || EVP_DigestInit_ex(ctx.get(), EVP_sha1(), nullptr) != 1) {
    return Status::Internal(OpensslFailure("cannot start SHA-1"));
  }
  for (std::string_view part : parts) {
    if (EVP_DigestUpdate(ctx.get(), part.data(), part.size()) != 1) {
      return Status::Internal(OpensslFailure("SHA-1 failed"));
    }
  }
  Sha1 digest;
  if (EVP_DigestFinal_ex(ctx.get(), digest.data(), nullptr) != 1) {
    return Status::Internal(OpensslFailure("SHA-1 failed"));
  }
  return digest;
}

std::string_view View(const Sha1& digest) {
  return {reinterpret_cast<const char*>(digest.data()), digest.size()};
}

// The password as the JDK hashes a Java String: UTF-16 big-endian.
Status PasswordBytes(std::string_view password, SecretBytes& out) {
  if (password.empty()) return Status::InvalidArgument("JKS password is empty");
  if (password.size() > kJksMaxPasswordBytes) {
    return Status::InvalidArgument("JKS password is longer than " +
                                   std::to_string(kJksMaxPasswordBytes) + " bytes");
  }
  // OpenSSL's conversion below falls back to Latin-1 for input that is not
  // UTF-8; refuse it instead.
  if (!IsValidUtf8(password)) return Status::InvalidArgument("JKS password is not UTF-8");
  unsigned char* utf16 = nullptr;
  int length = 0;
  // OpenSSL's PKCS#12 password conversion: UTF-16BE plus a two-byte 0 end.
  if (OPENSSL_utf82uni(password.data(), static_cast<int>(password.size()), &utf16, &length) ==
          nullptr ||
      length < 2) {
    DrainOpensslErrors();
    return Status::InvalidArgument("JKS password is not UTF-8");
  }
  out.bytes.assign(reinterpret_cast<const char*>(utf16), static_cast<size_t>(length - 2));
  OPENSSL_clear_free(utf16, static_cast<size_t>(length));
  return Status::Ok();
}

Status Pkcs8Der(const PrivateKey& key, SecretBytes& out) {
  Pkcs8Ptr info(EVP_PKEY2PKCS8(key.get()));
  if (info == nullptr) return Status::Internal(OpensslFailure("cannot convert key to PKCS#8"));
  unsigned char* der = nullptr;
  int length = i2d_PKCS8_PRIV_KEY_INFO(info.get(), &der);
  if (length <= 0) return Status::Internal(OpensslFailure("cannot encode PKCS#8 key"));
  out.bytes.assign(reinterpret_cast<const char*>(der), static_cast<size_t>(length));
  OPENSSL_clear_free(der, static_cast<size_t>(length));
  return Status::Ok();
}

// DER EncryptedPrivateKeyInfo { key protector OID with NULL parameters,
// OCTET STRING `protected_key` }.
Result<std::string> EncryptedPrivateKeyInfo(const std::string& protected_key) {
  X509SigPtr info(X509_SIG_new());
  if (info == nullptr) return Status::Internal(OpensslFailure("out of memory"));
  X509_ALGOR* algorithm = nullptr;
  ASN1_OCTET_STRING* octets = nullptr;
  X509_SIG_getm(info.get(), &algorithm, &octets);
  ASN1_OBJECT* oid = OBJ_txt2obj(kKeyProtectorOid, /*no_name=*/1);
  if (oid == nullptr || X509_ALGOR_set0(algorithm, oid, V_ASN1_NULL, nullptr) != 1) {
    ASN1_OBJECT_free(oid);
    return Status::Internal(OpensslFailure("cannot set the key protector OID"));
  }
  if (ASN1_OCTET_STRING_set(octets, reinterpret_cast<const unsigned char*>(protected_key.data()),
                            static_cast<int>(protected_key.size())) != 1) {
    return Status::Internal(OpensslFailure("out of memory"));
  }
  return EncodeDer(i2d_X509_SIG, info.get(), "the protected key");
}

// The JDK key protector over `plain` (PKCS#8 DER).
Result<std::string> ProtectKey(const std::string& plain, const std::string& password) {
  Sha1 block;
  if (RAND_bytes(block.data(), static_cast<int>(block.size())) != 1) {
    return Status::Internal(OpensslFailure("no random salt"));
  }
  std::string protected_key(View(block));  // the salt
  for (size_t offset = 0; offset < plain.size(); offset += kSha1Bytes) {
    CERTMOUNT_ASSIGN_OR_RETURN(block, Sha1Of({password, View(block)}));
    for (size_t i = 0; i < kSha1Bytes && offset + i < plain.size(); ++i) {
      protected_key.push_back(static_cast<char>(plain[offset + i] ^ block[i]));
    }
  }
  CERTMOUNT_ASSIGN_OR_RETURN(Sha1 check, Sha1Of({password, plain}));
  protected_key.append(View(check));
  return EncryptedPrivateKeyInfo(protected_key);
}

// The DER of every certificate in `pem`, in order, duplicates dropped;
// INVALID_ARGUMENT beyond `max_count` or kJksMaxCertificateBytes each.
Result<std::vector<std::string>> CertificatesDer(std::string_view pem, const char* what,
                                                 size_t max_count) {
  std::vector<std::string> ders;
  if (pem.empty()) return ders;
  X509StackPtr stack(sk_X509_new_null());
  if (stack == nullptr) return Status::Internal("out of memory");
  CERTMOUNT_RETURN_IF_ERROR(AppendPemCertificates(pem, stack.get(), what));
  std::set<std::string> seen;
  for (int i = 0; i < sk_X509_num(stack.get()); ++i) {
    CERTMOUNT_ASSIGN_OR_RETURN(std::string bytes,
                               EncodeDer(i2d_X509, sk_X509_value(stack.get(), i), "a certificate"));
    if (bytes.size() > kJksMaxCertificateBytes) {
      return Status::InvalidArgument(std::string("a certificate in the ") + what +
                                     " is larger than " + std::to_string(kJksMaxCertificateBytes) +
                                     " bytes");
    }
    if (!seen.insert(bytes).second) continue;
    if (ders.size() == max_count) {
      return Status::InvalidArgument(std::string("the ") + what + " holds more than " +
                                     std::to_string(max_count) + " certificates");
    }
    ders.push_back(std::move(bytes));
  }
  return ders;
}

Status CheckCreated(int64_t created_unix_ms) {
  if (created_unix_ms < 0) return Status::InvalidArgument("JKS entry date is before 1970");
  return Status::Ok();
}

// "ca", "ca-1", "ca-2", ... as cert-manager names them.
void AppendTrustedEntries(const std::vector<std::string>& cas, int64_t created_unix_ms,
                          JavaDataWriter& out) {
  for (size_t i = 0; i < cas.size(); ++i) {
    out.U32(kTrustedCertificateTag);
    out.Utf(i == 0 ? std::string("ca") : "ca-" + std::to_string(i));
    out.U64(static_cast<uint64_t>(created_unix_ms));
    out.Certificate(cas[i]);
  }
}

// Appends the integrity digest and returns the finished store.
Result<std::string> Seal(JavaDataWriter& out, const std::string& password) {
  CERTMOUNT_ASSIGN_OR_RETURN(Sha1 digest, Sha1Of({password, kIntegrityWhitener, out.bytes()}));
  out.bytes().append(View(digest));
  return std::move(out.bytes());
}

void AppendHeader(uint32_t entries, JavaDataWriter& out) {
  out.U32(kMagic);
  out.U32(kVersion);
  out.U32(entries);
}

}  // namespace

Result<std::string> BuildJksKeystore(const PrivateKey& key, std::string_view chain_pem,
                                     std::string_view ca_pem, std::string_view password,
                                     int64_t created_unix_ms) {
  CERTMOUNT_RETURN_IF_ERROR(CheckCreated(created_unix_ms));
  SecretBytes password_bytes;
  CERTMOUNT_RETURN_IF_ERROR(PasswordBytes(password, password_bytes));
  if (chain_pem.empty()) return Status::InvalidArgument("empty certificate chain");
  CERTMOUNT_ASSIGN_OR_RETURN(
      std::vector<std::string> chain,
      CertificatesDer(chain_pem, "certificate chain", kJksMaxChainCertificates));
  CERTMOUNT_ASSIGN_OR_RETURN(std::vector<std::string> cas,
                             CertificatesDer(ca_pem, "CA bundle", kJksMaxCaCertificates));
  const auto* leaf_der = reinterpret_cast<const unsigned char*>(chain.front().data());
  X509Ptr leaf(d2i_X509(nullptr, &leaf_der, static_cast<long>(chain.front().size())));
  if (leaf == nullptr || X509_check_private_key(leaf.get(), key.get()) != 1) {
    return Status::InvalidArgument(OpensslFailure("private key does not match the certificate"));
  }
  SecretBytes plain;
  CERTMOUNT_RETURN_IF_ERROR(Pkcs8Der(key, plain));
  CERTMOUNT_ASSIGN_OR_RETURN(std::string protected_key,
                             ProtectKey(plain.bytes, password_bytes.bytes));

  JavaDataWriter out;
  AppendHeader(static_cast<uint32_t>(1 + cas.size()), out);
  out.U32(kPrivateKeyTag);
  out.Utf(kKeyAlias);
  out.U64(static_cast<uint64_t>(created_unix_ms));
  out.Sized(protected_key);
  out.U32(static_cast<uint32_t>(chain.size()));
  for (const std::string& der : chain) out.Certificate(der);
  AppendTrustedEntries(cas, created_unix_ms, out);
  return Seal(out, password_bytes.bytes);
}

Result<std::string> BuildJksTruststore(std::string_view ca_pem, std::string_view password,
                                       int64_t created_unix_ms) {
  CERTMOUNT_RETURN_IF_ERROR(CheckCreated(created_unix_ms));
  SecretBytes password_bytes;
  CERTMOUNT_RETURN_IF_ERROR(PasswordBytes(password, password_bytes));
  CERTMOUNT_ASSIGN_OR_RETURN(std::vector<std::string> cas,
                             CertificatesDer(ca_pem, "CA bundle", kJksMaxCaCertificates));
  JavaDataWriter out;
  AppendHeader(static_cast<uint32_t>(cas.size()), out);
  AppendTrustedEntries(cas, created_unix_ms, out);
  return Seal(out, password_bytes.bytes);
}

}  // namespace certmount
