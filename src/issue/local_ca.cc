#include "issue/local_ca.h"

#include "issue/certificate_info_x509.h"

#include <openssl/pem.h>
#include <openssl/rand.h>

#include <algorithm>
#include <ctime>
#include <utility>
#include <vector>

#include "issue/key_usages.h"
#include "issue/openssl_ptr.h"

namespace certmount {
namespace {

constexpr int kSerialBytes = 16;

// ---- files ------------------------------------------------------------------------

// A CA file named by the admin (or left by an earlier run) that cannot be
// read is a precondition of starting, whatever the errno.
Result<std::string> ReadCaFile(const std::string& path, Env* env) {
  Result<std::string> contents = env->ReadFile(path);
  if (!contents.ok())
    return Status::FailedPrecondition("cannot read " + contents.status().message());
  return contents;
}

// ---- certificate pieces --------------------------------------------------------

const EVP_MD* Sha1ForKeyIds() {
  // Key identifiers are SHA-1 of the public key (RFC 5280 4.2.1.2 method 1);
  // fetched once, deliberately never freed.
  static const EVP_MD* const md = EVP_MD_fetch(nullptr, "SHA1", nullptr);
  return md;
}

Result<int64_t> UnixTime(const ASN1_TIME* time) {
  struct tm broken_down = {};
  if (time == nullptr || ASN1_TIME_to_tm(time, &broken_down) != 1) {
    return Status::InvalidArgument(OpensslFailure("invalid certificate time"));
  }
  return static_cast<int64_t>(timegm(&broken_down));
}

Status SetRandomSerial(X509* cert) {
  unsigned char bytes[kSerialBytes];
  do {
    if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
      return Status::Internal(OpensslFailure("cannot generate serial number"));
    }
    bytes[0] &= 0x7F;  // serials must be positive
  } while (std::all_of(std::begin(bytes), std::end(bytes), [](unsigned char b) { return b == 0; }));
  BignumPtr number(BN_bin2bn(bytes, sizeof(bytes), nullptr));
  Asn1IntegerPtr serial(number ? BN_to_ASN1_INTEGER(number.get(), nullptr) : nullptr);
  if (serial == nullptr || X509_set_serialNumber(cert, serial.get()) != 1) {
    return Status::Internal(OpensslFailure("cannot set serial number"));
  }
  return Status::Ok();
}

Status SetValidity(X509* cert, int64_t not_before, int64_t not_after) {
  if (ASN1_TIME_set(X509_getm_notBefore(cert), static_cast<time_t>(not_before)) == nullptr ||
      ASN1_TIME_set(X509_getm_notAfter(cert), static_cast<time_t>(not_after)) == nullptr) {
    return Status::Internal(OpensslFailure("cannot set validity"));
  }
  return Status::Ok();
}

Status AddExtension(X509* cert, int nid, void* value, bool critical, const char* what) {
  if (X509_add1_ext_i2d(cert, nid, value, critical ? 1 : 0, X509V3_ADD_REPLACE) != 1) {
    return Status::Internal(OpensslFailure(std::string("cannot add ") + what));
  }
  return Status::Ok();
}

Status AddBasicConstraints(X509* cert, bool is_ca) {
  BasicConstraintsPtr constraints(BASIC_CONSTRAINTS_new());
  if (constraints == nullptr) return Status::Internal(OpensslFailure("out of memory"));
  constraints->ca = is_ca ? 0xFF : 0;
  return AddExtension(cert, NID_basic_constraints, constraints.get(), true, "basicConstraints");
}

Status AddKeyUsage(X509* cert, const std::vector<int>& bits) {
  if (bits.empty()) return Status::Ok();
  Asn1BitStringPtr usage(ASN1_BIT_STRING_new());
  if (usage == nullptr) return Status::Internal(OpensslFailure("out of memory"));
  for (int bit : bits) {
    if (ASN1_BIT_STRING_set_bit(usage.get(), bit, 1) != 1) {
      return Status::Internal(OpensslFailure("cannot build keyUsage"));
    }
  }
  return AddExtension(cert, NID_key_usage, usage.get(), true, "keyUsage");
}

Status AddExtendedKeyUsage(X509* cert, const std::vector<int>& nids) {
  if (nids.empty()) return Status::Ok();
  ExtendedKeyUsagePtr usage(sk_ASN1_OBJECT_new_null());
  if (usage == nullptr) return Status::Internal(OpensslFailure("out of memory"));
  for (int nid : nids) {
    // nid2obj objects are static; the stack's free leaves them alone.
    if (sk_ASN1_OBJECT_push(usage.get(), OBJ_nid2obj(nid)) == 0) {
      return Status::Internal(OpensslFailure("cannot build extendedKeyUsage"));
    }
  }
  return AddExtension(cert, NID_ext_key_usage, usage.get(), false, "extendedKeyUsage");
}

Result<Asn1OctetStringPtr> PublicKeyId(X509* cert) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  const EVP_MD* sha1 = Sha1ForKeyIds();
  if (sha1 == nullptr || X509_pubkey_digest(cert, sha1, digest, &length) != 1) {
    return Status::Internal(OpensslFailure("cannot hash public key"));
  }
  Asn1OctetStringPtr id(ASN1_OCTET_STRING_new());
  if (id == nullptr || ASN1_OCTET_STRING_set(id.get(), digest, static_cast<int>(length)) != 1) {
    return Status::Internal(OpensslFailure("out of memory"));
  }
  return id;
}

// Adds subjectKeyIdentifier and, when `issuer` is given, an
// authorityKeyIdentifier naming the issuer's key.
Status AddKeyIdentifiers(X509* cert, const X509* issuer) {
  CERTMOUNT_ASSIGN_OR_RETURN(Asn1OctetStringPtr subject_id, PublicKeyId(cert));
  CERTMOUNT_RETURN_IF_ERROR(AddExtension(cert, NID_subject_key_identifier, subject_id.get(), false,
                                         "subjectKeyIdentifier"));
  if (issuer == nullptr) return Status::Ok();
  std::unique_ptr<AUTHORITY_KEYID, OpensslFree<&AUTHORITY_KEYID_free>> authority(
      AUTHORITY_KEYID_new());
  if (authority == nullptr) return Status::Internal(OpensslFailure("out of memory"));
  // Prefer the issuer's own SKI so chains built by any client match; a CA
  // without one gets the same hash it would have had.
  const ASN1_OCTET_STRING* issuer_ski = X509_get0_subject_key_id(const_cast<X509*>(issuer));
  if (issuer_ski != nullptr) {
    authority->keyid = ASN1_OCTET_STRING_dup(issuer_ski);
  } else {
    CERTMOUNT_ASSIGN_OR_RETURN(Asn1OctetStringPtr issuer_id,
                               PublicKeyId(const_cast<X509*>(issuer)));
    authority->keyid = issuer_id.release();
  }
  if (authority->keyid == nullptr) return Status::Internal(OpensslFailure("out of memory"));
  return AddExtension(cert, NID_authority_key_identifier, authority.get(), false,
                      "authorityKeyIdentifier");
}

Result<std::string> CertificatePem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr || PEM_write_bio_X509(bio.get(), cert) != 1) {
    return Status::Internal(OpensslFailure("cannot encode certificate"));
  }
  return BioContents(bio.get());
}

// ---- usages ------------------------------------------------------------------------

struct Usages {
  std::vector<int> key_usage_bits;
  std::vector<int> extended_nids;
};

void AddUnique(std::vector<int>& values, int value) {
  if (std::find(values.begin(), values.end(), value) == values.end()) values.push_back(value);
}

Result<Usages> ParseUsages(const std::vector<std::string>& names, bool is_ca) {
  Usages usages;
  for (const std::string& name : names) {
    const KeyUsageName* usage = FindKeyUsage(name, NameMatch::kIgnoreAsciiCase);
    if (usage == nullptr)
      return Status::InvalidArgument("unknown certificate usage '" + name + "'");
    AddUnique(usage->kind == KeyUsageKind::kKeyUsage ? usages.key_usage_bits : usages.extended_nids,
              usage->value);
  }
  if (is_ca) AddUnique(usages.key_usage_bits, 5);  // keyCertSign
  return usages;
}

Result<X509ReqPtr> ParseCsr(const std::string& pem) {
  BioPtr bio = MemoryBio(pem.data(), pem.size());
  if (bio == nullptr) return Status::Internal(OpensslFailure("cannot allocate BIO"));
  X509ReqPtr request(PEM_read_bio_X509_REQ(bio.get(), nullptr, nullptr, nullptr));
  if (request == nullptr) {
    return Status::InvalidArgument(OpensslFailure("not a PEM certificate request"));
  }
  EVP_PKEY* public_key = X509_REQ_get0_pubkey(request.get());
  if (public_key == nullptr || X509_REQ_verify(request.get(), public_key) != 1) {
    return Status::InvalidArgument(OpensslFailure("certificate request signature is invalid"));
  }
  return request;
}

Status CopySubjectAltName(X509_REQ* request, X509* cert) {
  X509ExtensionStackPtr extensions(X509_REQ_get_extensions(request));
  for (int i = 0; extensions != nullptr && i < sk_X509_EXTENSION_num(extensions.get()); ++i) {
    X509_EXTENSION* extension = sk_X509_EXTENSION_value(extensions.get(), i);
    if (OBJ_obj2nid(X509_EXTENSION_get_object(extension)) != NID_subject_alt_name) continue;
    if (X509_add_ext(cert, extension, -1) != 1) {
      return Status::Internal(OpensslFailure("cannot copy subjectAltName"));
    }
  }
  DrainOpensslErrors();  // a CSR without extensions leaves a harmless error behind
  return Status::Ok();
}

// Gives `cert` the request's SubjectPublicKeyInfo by copying its fields:
// X509_set_pubkey would re-encode the key through OpenSSL 3's encoder
// machinery, the most expensive step of issuance. Falls back to it for
// algorithm parameters of unusual types.
Status CopyPublicKey(X509_REQ* request, X509* cert) {
  const ASN1_OBJECT* algorithm = nullptr;
  const unsigned char* key_bytes = nullptr;
  int key_length = 0;
  X509_ALGOR* algorithm_identifier = nullptr;
  if (X509_PUBKEY_get0_param(nullptr, &key_bytes, &key_length, &algorithm_identifier,
                             X509_REQ_get_X509_PUBKEY(request)) == 1 &&
      key_length > 0) {
    int parameter_type = V_ASN1_UNDEF;
    const void* parameter = nullptr;
    X509_ALGOR_get0(&algorithm, &parameter_type, &parameter, algorithm_identifier);
    void* parameter_copy = nullptr;
    bool copied = true;
    if (parameter_type == V_ASN1_OBJECT) {
      parameter_copy = OBJ_dup(static_cast<const ASN1_OBJECT*>(parameter));
      copied = parameter_copy != nullptr;
    } else if (parameter_type == V_ASN1_SEQUENCE) {
      parameter_copy = ASN1_STRING_dup(static_cast<const ASN1_STRING*>(parameter));
      copied = parameter_copy != nullptr;
    } else if (parameter_type != V_ASN1_NULL && parameter_type != V_ASN1_UNDEF) {
      copied = false;
    }
    ASN1_OBJECT* algorithm_copy = copied ? OBJ_dup(algorithm) : nullptr;
    unsigned char* key_copy =
        algorithm_copy ? static_cast<unsigned char*>(OPENSSL_memdup(key_bytes, key_length))
                       : nullptr;
    if (key_copy != nullptr &&
        X509_PUBKEY_set0_param(X509_get_X509_PUBKEY(cert), algorithm_copy, parameter_type,
                               parameter_copy, key_copy, key_length) == 1) {
      return Status::Ok();
    }
    OPENSSL_free(key_copy);
    ASN1_OBJECT_free(algorithm_copy);
    if (parameter_type == V_ASN1_OBJECT) {
      ASN1_OBJECT_free(static_cast<ASN1_OBJECT*>(parameter_copy));
    } else {
      ASN1_STRING_free(static_cast<ASN1_STRING*>(parameter_copy));
    }
  }
  DrainOpensslErrors();
  if (X509_set_pubkey(cert, X509_REQ_get0_pubkey(request)) != 1) {
    return Status::Internal(OpensslFailure("cannot set certificate public key"));
  }
  return Status::Ok();
}

Status CheckStillWanted(const Clock& clock, std::chrono::steady_clock::time_point deadline,
                        const std::stop_token& stop) {
  if (stop.stop_requested()) return Status::Cancelled("issuance cancelled");
  if (clock.SteadyNow() >= deadline) return Status::DeadlineExceeded("issuance deadline passed");
  return Status::Ok();
}

}  // namespace

Result<CaMaterial> GenerateSelfSignedCa(const std::string& common_name,
                                        std::chrono::seconds lifetime, const Clock& clock) {
  if (lifetime.count() <= 0) return Status::InvalidArgument("CA lifetime must be positive");
  CERTMOUNT_ASSIGN_OR_RETURN(PrivateKey key, PrivateKey::Generate(KeyAlgorithm::kEcdsa, 256));
  X509Ptr cert(X509_new());
  if (cert == nullptr) return Status::Internal(OpensslFailure("out of memory"));
  X509_NAME* name = X509_get_subject_name(cert.get());
  if (X509_set_version(cert.get(), X509_VERSION_3) != 1 ||
      X509_NAME_add_entry_by_NID(name, NID_commonName, MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(common_name.data()),
                                 static_cast<int>(common_name.size()), -1, 0) != 1 ||
      X509_set_issuer_name(cert.get(), name) != 1 || X509_set_pubkey(cert.get(), key.get()) != 1) {
    return Status::InvalidArgument(OpensslFailure("cannot build CA certificate"));
  }
  const int64_t now = clock.NowUnix();
  CERTMOUNT_RETURN_IF_ERROR(SetRandomSerial(cert.get()));
  CERTMOUNT_RETURN_IF_ERROR(SetValidity(cert.get(), now, now + lifetime.count()));
  CERTMOUNT_RETURN_IF_ERROR(AddBasicConstraints(cert.get(), true));
  CERTMOUNT_RETURN_IF_ERROR(AddKeyUsage(cert.get(), {5, 6}));  // keyCertSign, cRLSign
  CERTMOUNT_RETURN_IF_ERROR(AddKeyIdentifiers(cert.get(), nullptr));
  if (X509_sign(cert.get(), key.get(), key.SigningDigest()) <= 0) {
    return Status::Internal(OpensslFailure("cannot sign CA certificate"));
  }
  CaMaterial material;
  CERTMOUNT_ASSIGN_OR_RETURN(material.certificate_pem, CertificatePem(cert.get()));
  CERTMOUNT_ASSIGN_OR_RETURN(material.private_key_pem, key.ToPem(KeyEncoding::kPkcs8));
  return material;
}

struct LocalCa::Signer {
  X509Ptr certificate;
  PrivateKey key;
  std::string certificate_pem;  // normalised
  int64_t not_after = 0;
  std::string bundle_pem;  // what Issue returns as ca_pem
};

namespace {

X509Ptr ReadCertificate(const std::string& pem) {
  BioPtr bio = MemoryBio(pem.data(), pem.size());
  return X509Ptr(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
}

bool IsCa(X509* cert) {
  // Reading the flags also caches the parsed extensions inside the X509, so
  // concurrent Issue calls only ever read it.
  const bool ca = (X509_get_extension_flags(cert) & EXFLAG_CA) != 0;
  DrainOpensslErrors();
  return ca;
}

// Names for messages: the files' paths, or what FromPem calls its inputs.
struct PemNames {
  std::string cert = "CA certificate";
  std::string key = "CA key";
  std::string bundle = "CA bundle";
};

// A signer from PEM text; `bundle_pem` empty: the bundle is the certificate.
Result<std::shared_ptr<const LocalCa::Signer>> LoadSigner(const std::string& cert_pem,
                                                          const std::string& key_pem,
                                                          const std::string& bundle_pem,
                                                          const PemNames& names) {
  X509Ptr cert = ReadCertificate(cert_pem);
  if (cert == nullptr) {
    return Status::InvalidArgument(OpensslFailure(names.cert + ": not a PEM certificate"));
  }
  Result<PrivateKey> key = PrivateKey::FromPem(key_pem);
  if (!key.ok()) return key.status().WithContext(names.key);
  if (!IsCa(cert.get())) {
    return Status::FailedPrecondition(names.cert +
                                      ": certificate is not a CA (needs basicConstraints CA:TRUE)");
  }
  if (EVP_PKEY_eq(X509_get0_pubkey(cert.get()), key->get()) != 1) {
    DrainOpensslErrors();
    return Status::FailedPrecondition(names.key + ": key does not match the CA certificate " +
                                      names.cert);
  }
  Result<int64_t> not_after = UnixTime(X509_get0_notAfter(cert.get()));
  if (!not_after.ok()) return not_after.status().WithContext(names.cert);
  CERTMOUNT_ASSIGN_OR_RETURN(std::string normalized_pem, CertificatePem(cert.get()));
  std::string bundle = normalized_pem;
  if (!bundle_pem.empty()) {
    CERTMOUNT_ASSIGN_OR_RETURN(bundle,
                               ValidateTrustBundle(bundle_pem, names.bundle, normalized_pem));
  }
  return std::make_shared<const LocalCa::Signer>(LocalCa::Signer{
      std::move(cert), std::move(*key), std::move(normalized_pem), *not_after, std::move(bundle)});
}

Result<std::shared_ptr<const LocalCa::Signer>> LoadSignerFiles(const LocalCaFiles& files,
                                                               Env* env) {
  CERTMOUNT_ASSIGN_OR_RETURN(std::string cert_pem, ReadCaFile(files.cert, env));
  CERTMOUNT_ASSIGN_OR_RETURN(std::string key_pem, ReadCaFile(files.key, env));
  std::string bundle_pem;
  // A bundle file that does not exist is the signing CA alone: a
  // kubernetes.io/tls Secret carries ca.crt only when the admin adds it.
  if (!files.bundle.empty() && env->Stat(files.bundle).status().code() != Code::kNotFound) {
    CERTMOUNT_ASSIGN_OR_RETURN(bundle_pem, ReadCaFile(files.bundle, env));
    if (bundle_pem.empty()) {
      return Status::InvalidArgument(files.bundle + ": empty CA bundle");
    }
  }
  return LoadSigner(cert_pem, key_pem, bundle_pem, PemNames{files.cert, files.key, files.bundle});
}

// One PEM block of a bundle, read with its type name.
struct PemBlock {
  std::string name;
  std::string der;
};

// ValidateCaBundle's checks; the certificates one PEM block each.
Result<std::vector<std::string>> CaBundleCertificates(const std::string& bundle_pem,
                                                      const std::string& bundle_name) {
  if (bundle_pem.size() > kMaxTrustBundleBytes) {
    return Status::InvalidArgument(bundle_name + ": CA bundle is larger than " +
                                   std::to_string(kMaxTrustBundleBytes) + " bytes");
  }
  BioPtr bio = MemoryBio(bundle_pem.data(), bundle_pem.size());
  if (bio == nullptr) return Status::Internal(OpensslFailure("cannot allocate BIO"));
  std::vector<std::string> certificates;
  std::vector<std::string> seen;  // DER of each, to drop duplicates
  for (int index = 1;; ++index) {
    char* name = nullptr;
    char* header = nullptr;
    unsigned char* data = nullptr;
    long length = 0;
    if (PEM_read_bio(bio.get(), &name, &header, &data, &length) != 1) break;
    PemBlock block{name, std::string(reinterpret_cast<char*>(data), static_cast<size_t>(length))};
    OPENSSL_free(name);
    OPENSSL_free(header);
    OPENSSL_free(data);
    const std::string where = bundle_name + ": block " + std::to_string(index);
    if (block.name != "CERTIFICATE") {
      return Status::InvalidArgument(where + " is a \"" + block.name.substr(0, 64) +
                                     "\", not a CERTIFICATE");
    }
    if (static_cast<int>(seen.size()) >= kMaxTrustBundleCertificates) {
      return Status::InvalidArgument(bundle_name + ": more than " +
                                     std::to_string(kMaxTrustBundleCertificates) + " certificates");
    }
    const unsigned char* cursor = reinterpret_cast<const unsigned char*>(block.der.data());
    X509Ptr cert(d2i_X509(nullptr, &cursor, static_cast<long>(block.der.size())));
    if (cert == nullptr) {
      return Status::InvalidArgument(OpensslFailure(where + " is not a valid certificate"));
    }
    if (!IsCa(cert.get())) {
      return Status::InvalidArgument(where +
                                     " is not a CA certificate (needs basicConstraints "
                                     "CA:TRUE)");
    }
    if (std::find(seen.begin(), seen.end(), block.der) != seen.end()) continue;
    seen.push_back(block.der);
    CERTMOUNT_ASSIGN_OR_RETURN(std::string pem, CertificatePem(cert.get()));
    certificates.push_back(std::move(pem));
  }
  DrainOpensslErrors();  // the read that ends the loop leaves "no start line"
  if (certificates.empty()) {
    return Status::InvalidArgument(bundle_name + ": no PEM certificate in the CA bundle");
  }
  return certificates;
}

std::string Concatenate(const std::vector<std::string>& pems) {
  std::string joined;
  for (const std::string& pem : pems) joined += pem;
  return joined;
}

}  // namespace

Result<std::string> ValidateCaBundle(const std::string& bundle_pem,
                                     const std::string& bundle_name) {
  CERTMOUNT_ASSIGN_OR_RETURN(std::vector<std::string> certificates,
                             CaBundleCertificates(bundle_pem, bundle_name));
  return Concatenate(certificates);
}

Result<std::string> ValidateTrustBundle(const std::string& bundle_pem,
                                        const std::string& bundle_name,
                                        const std::string& signing_cert_pem) {
  X509Ptr signing = ReadCertificate(signing_cert_pem);
  if (signing == nullptr) return Status::InvalidArgument("signing CA certificate does not parse");
  // Re-encoded like the bundle's certificates, so equal text is the same
  // certificate.
  CERTMOUNT_ASSIGN_OR_RETURN(std::string signing_pem, CertificatePem(signing.get()));
  CERTMOUNT_ASSIGN_OR_RETURN(std::vector<std::string> certificates,
                             CaBundleCertificates(bundle_pem, bundle_name));
  if (std::find(certificates.begin(), certificates.end(), signing_pem) == certificates.end()) {
    return Status::InvalidArgument(bundle_name +
                                   ": the signing CA certificate is not in the CA bundle (pods "
                                   "could not verify the certificates it signs)");
  }
  return Concatenate(certificates);
}

LocalCa::LocalCa(ConstructionKey<LocalCa>, std::shared_ptr<const Signer> signer, const Clock& clock)
    : signer_(std::move(signer)), clock_(clock) {}

LocalCa::~LocalCa() = default;

std::shared_ptr<const LocalCa::Signer> LocalCa::current() const {
  std::lock_guard lock(mu_);
  return signer_;
}

std::string LocalCa::TrustBundlePem() const { return current()->bundle_pem; }
std::string LocalCa::certificate_pem() const { return current()->certificate_pem; }

bool LocalCa::BundleHasOtherCas() const {
  const std::shared_ptr<const Signer> signer = current();
  return signer->bundle_pem != signer->certificate_pem;
}

bool LocalCa::SignedByCurrentCa(const std::string& chain_pem) const {
  const std::shared_ptr<const Signer> signer = current();
  X509Ptr leaf = ReadCertificate(chain_pem);
  const bool signed_by = leaf != nullptr &&
                         X509_check_issued(signer->certificate.get(), leaf.get()) == X509_V_OK &&
                         X509_verify(leaf.get(), X509_get0_pubkey(signer->certificate.get())) == 1;
  DrainOpensslErrors();
  return signed_by;
}
int64_t LocalCa::not_after() const { return current()->not_after; }

Result<std::unique_ptr<LocalCa>> LocalCa::FromPem(const std::string& cert_pem,
                                                  const std::string& key_pem, const Clock& clock) {
  CERTMOUNT_ASSIGN_OR_RETURN(std::shared_ptr<const Signer> signer,
                             LoadSigner(cert_pem, key_pem, "", PemNames{}));
  return std::make_unique<LocalCa>(ConstructionKey<LocalCa>(), std::move(signer), clock);
}

Result<std::unique_ptr<LocalCa>> LocalCa::FromFiles(const std::string& cert_path,
                                                    const std::string& key_path, const Clock& clock,
                                                    Env* env) {
  return FromFiles(LocalCaFiles{cert_path, key_path, ""}, clock, env);
}

Result<std::unique_ptr<LocalCa>> LocalCa::FromFiles(const LocalCaFiles& files, const Clock& clock,
                                                    Env* env) {
  CERTMOUNT_ASSIGN_OR_RETURN(std::shared_ptr<const Signer> signer, LoadSignerFiles(files, env));
  return std::make_unique<LocalCa>(ConstructionKey<LocalCa>(), std::move(signer), clock);
}

Result<LocalCa::Change> LocalCa::Reload(const LocalCaFiles& files, Env* env) {
  CERTMOUNT_ASSIGN_OR_RETURN(std::shared_ptr<const Signer> loaded, LoadSignerFiles(files, env));
  std::lock_guard lock(mu_);
  Change change;
  change.signer = loaded->certificate_pem != signer_->certificate_pem ||
                  EVP_PKEY_eq(loaded->key.get(), signer_->key.get()) != 1;
  DrainOpensslErrors();
  change.bundle = loaded->bundle_pem != signer_->bundle_pem;
  if (change.any()) signer_ = std::move(loaded);
  return change;
}

Result<std::unique_ptr<LocalCa>> LocalCa::LoadOrCreate(const std::string& dir, const Clock& clock,
                                                       Env* env) {
  const std::string cert_path = dir + "/ca.crt";
  const std::string key_path = dir + "/ca.key";
  if (env->LStat(cert_path).ok()) {
    if (!env->LStat(key_path).ok()) {
      return Status::FailedPrecondition(cert_path + " exists but " + key_path +
                                        " does not; restore the key or remove both");
    }
    return FromFiles(LocalCaFiles{cert_path, key_path, ""}, clock, env);
  }
  CERTMOUNT_RETURN_IF_ERROR(env->CreateDirectories(dir, 0700));
  CERTMOUNT_ASSIGN_OR_RETURN(CaMaterial material,
                             GenerateSelfSignedCa(kCommonName, kDefaultLifetime, clock));
  // Key first: a ca.crt on disk always has its key next to it.
  CERTMOUNT_RETURN_IF_ERROR(env->ReplaceFile(key_path, material.private_key_pem, 0600));
  CERTMOUNT_RETURN_IF_ERROR(env->ReplaceFile(cert_path, material.certificate_pem, 0644));
  CERTMOUNT_ASSIGN_OR_RETURN(std::shared_ptr<const Signer> signer,
                             LoadSigner(material.certificate_pem, material.private_key_pem, "",
                                        PemNames{cert_path, key_path, ""}));
  return std::make_unique<LocalCa>(ConstructionKey<LocalCa>(), std::move(signer), clock);
}

Result<IssuedCertificate> LocalCa::Issue(const IssueInput& input,
                                         std::chrono::steady_clock::time_point deadline,
                                         std::stop_token stop) {
  CERTMOUNT_RETURN_IF_ERROR(CheckStillWanted(clock_, deadline, stop));
  if (input.spec == nullptr) return Status::InvalidArgument("issue request without a spec");
  const CertificateSpec& spec = *input.spec;
  if (spec.duration.count() <= 0) {
    return Status::InvalidArgument("certificate duration must be positive");
  }
  CERTMOUNT_ASSIGN_OR_RETURN(Usages usages, ParseUsages(spec.usages, spec.is_ca));
  CERTMOUNT_ASSIGN_OR_RETURN(X509ReqPtr request, ParseCsr(input.csr_pem));

  // The signer at the start of this issuance signs it, whatever a reload
  // does meanwhile.
  const std::shared_ptr<const Signer> signer = current();
  const int64_t now = clock_.NowUnix();
  if (now >= signer->not_after) return Status::FailedPrecondition("the local CA has expired");
  // X.509 times have whole seconds; a fractional duration ("1.5s") rounds up
  // so that a sub-second one still yields a certificate valid for a moment.
  const int64_t lifetime = std::chrono::ceil<std::chrono::seconds>(spec.duration).count();
  const int64_t not_after = std::min(now + lifetime, signer->not_after);

  X509Ptr cert(X509_new());
  if (cert == nullptr || X509_set_version(cert.get(), X509_VERSION_3) != 1 ||
      X509_set_issuer_name(cert.get(), X509_get_subject_name(signer->certificate.get())) != 1 ||
      X509_set_subject_name(cert.get(), X509_REQ_get_subject_name(request.get())) != 1) {
    return Status::Internal(OpensslFailure("cannot build certificate"));
  }
  CERTMOUNT_RETURN_IF_ERROR(CopyPublicKey(request.get(), cert.get()));
  CERTMOUNT_RETURN_IF_ERROR(SetRandomSerial(cert.get()));
  CERTMOUNT_RETURN_IF_ERROR(SetValidity(cert.get(), now, not_after));
  CERTMOUNT_RETURN_IF_ERROR(AddBasicConstraints(cert.get(), spec.is_ca));
  CERTMOUNT_RETURN_IF_ERROR(AddKeyUsage(cert.get(), usages.key_usage_bits));
  CERTMOUNT_RETURN_IF_ERROR(AddExtendedKeyUsage(cert.get(), usages.extended_nids));
  CERTMOUNT_RETURN_IF_ERROR(CopySubjectAltName(request.get(), cert.get()));
  CERTMOUNT_RETURN_IF_ERROR(AddKeyIdentifiers(cert.get(), signer->certificate.get()));

  CERTMOUNT_RETURN_IF_ERROR(CheckStillWanted(clock_, deadline, stop));
  if (X509_sign(cert.get(), signer->key.get(), signer->key.SigningDigest()) <= 0) {
    return Status::Internal(OpensslFailure("cannot sign certificate"));
  }
  IssuedCertificate issued;
  CERTMOUNT_ASSIGN_OR_RETURN(issued.certificate_chain_pem, CertificatePem(cert.get()));
  issued.ca_pem = signer->bundle_pem;
  CERTMOUNT_ASSIGN_OR_RETURN(issued.leaf, DescribeCertificate(cert.get()));
  return issued;
}

}  // namespace certmount
