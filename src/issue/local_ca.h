// The embedded certificate authority: signs CSRs with a CA key kept on the
// node's disk. Good for development clusters and for pods that only need a
// node-local trust root.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>

#include "common/clock.h"
#include "common/construction_key.h"
#include "common/env.h"
#include "common/status.h"
#include "issue/issuer.h"
#include "issue/private_key.h"

namespace certmount {

// A CA certificate and its key, both PEM (the key as PKCS#8).
struct CaMaterial {
  std::string certificate_pem;
  std::string private_key_pem;
};

// A new self-signed ECDSA P-256 CA named `common_name`, valid from
// clock.NowUnix() for `lifetime`, with basicConstraints critical CA:TRUE,
// keyUsage critical keyCertSign+cRLSign and a subjectKeyIdentifier.
// INVALID_ARGUMENT for a non-positive lifetime.
Result<CaMaterial> GenerateSelfSignedCa(const std::string& common_name,
                                        std::chrono::seconds lifetime, const Clock& clock);

// Where a local CA's PEM files are. `bundle` empty, or naming a file that does
// not exist: the trust bundle is the signing CA alone.
struct LocalCaFiles {
  std::string cert;
  std::string key;
  std::string bundle;
};

// Bounds on a trust bundle (docs/ca-rotation.md): an admin's file, read on
// every change, must not make the driver parse or copy into every volume
// something unbounded.
constexpr size_t kMaxTrustBundleBytes = 256 * 1024;
constexpr int kMaxTrustBundleCertificates = 32;

// Checks `bundle_pem` (named `bundle_name` in messages) as a bundle of CA
// certificates: at most kMaxTrustBundleBytes and kMaxTrustBundleCertificates;
// only CERTIFICATE PEM blocks (text between blocks is ignored), each
// parsable and a CA (basicConstraints CA:TRUE); at least one. Returns the
// bundle re-encoded (one PEM block per certificate, in file order,
// duplicates dropped). INVALID_ARGUMENT naming the bundle and the offending
// block otherwise.
Result<std::string> ValidateCaBundle(const std::string& bundle_pem, const std::string& bundle_name);

// ValidateCaBundle for the trust bundle of a CA that signs with
// `signing_cert_pem`, which must be among the bundle's certificates
// (INVALID_ARGUMENT otherwise: pods could not verify what it signs).
Result<std::string> ValidateTrustBundle(const std::string& bundle_pem,
                                        const std::string& bundle_name,
                                        const std::string& signing_cert_pem);

class LocalCa final : public Issuer {
 public:
  // The CA made by LoadOrCreate lives this long.
  static constexpr std::chrono::seconds kDefaultLifetime{std::chrono::hours(24 * 3650)};
  static constexpr const char* kCommonName = "certmount local CA";

  // Loads a PEM CA certificate and key, read through `env`. INVALID_ARGUMENT
  // when a file does not parse; FAILED_PRECONDITION when a file cannot be
  // read (whatever the errno), the key does not match the certificate, or the
  // certificate is not a CA (basicConstraints CA:TRUE). Messages name the
  // file. `clock` must outlive the CA.
  static Result<std::unique_ptr<LocalCa>> FromFiles(const std::string& cert_path,
                                                    const std::string& key_path, const Clock& clock,
                                                    Env* env);

  // FromFiles plus, when files.bundle is set, the trust bundle read from it
  // and checked by ValidateTrustBundle (its errors are INVALID_ARGUMENT;
  // an unreadable bundle FAILED_PRECONDITION).
  static Result<std::unique_ptr<LocalCa>> FromFiles(const LocalCaFiles& files, const Clock& clock,
                                                    Env* env);

  // Same checks as FromFiles, on PEM text.
  static Result<std::unique_ptr<LocalCa>> FromPem(const std::string& cert_pem,
                                                  const std::string& key_pem, const Clock& clock);

  // What Reload changed.
  struct Change {
    bool signer = false;  // another signing certificate or key
    bool bundle = false;  // another trust bundle (a new signer usually brings one)
    bool any() const { return signer || bundle; }
  };

  // Reads `files` again with every check of FromFiles and, only when all
  // pass, switches to them: issuances that start afterwards sign with the
  // new key and return the new bundle; running ones finish with the old.
  // On any error nothing changes (the working signer stays) and the error
  // is returned. Thread-safe.
  Result<Change> Reload(const LocalCaFiles& files, Env* env);

  // Loads dir/ca.crt + dir/ca.key (FromFiles) when ca.crt exists; otherwise
  // creates dir (Env::CreateDirectories, 0700), generates a CA
  // (GenerateSelfSignedCa, kCommonName, kDefaultLifetime) and writes ca.key
  // (0600) then ca.crt (0644), each with Env::ReplaceFile, so a crash or an
  // I/O error leaves either no ca.crt or a whole CA (a ca.key without ca.crt
  // is replaced: nothing was ever signed with it). I/O errors are env's
  // (ENOSPC is RESOURCE_EXHAUSTED). A ca.crt without ca.key is
  // FAILED_PRECONDITION rather than silently replacing a CA pods may trust.
  static Result<std::unique_ptr<LocalCa>> LoadOrCreate(const std::string& dir, const Clock& clock,
                                                       Env* env);

  ~LocalCa() override;

  std::string Name() const override { return "local-ca"; }

  // Signs input.csr_pem after verifying its self-signature (INVALID_ARGUMENT
  // if bad). The leaf copies the CSR's subject and subjectAltName; is valid
  // from now (no backdating: the clock is the node's, the same one that
  // schedules renewal) until now + spec.duration, capped at the CA's
  // notAfter; gets a random 127-bit positive serial, keyUsage/extendedKeyUsage
  // from spec.usages (unknown names are INVALID_ARGUMENT), critical
  // basicConstraints per spec.is_ca (a CA also gets keyCertSign), and
  // subject/authority key identifiers. CANCELLED if `stop` is requested and
  // DEADLINE_EXCEEDED if `deadline` (compared with clock.SteadyNow()) has
  // passed before signing; FAILED_PRECONDITION once the CA has expired.
  // Thread-safe.
  Result<IssuedCertificate> Issue(const IssueInput& input,
                                  std::chrono::steady_clock::time_point deadline,
                                  std::stop_token stop) override;

  // The trust bundle every issuance now returns as ca_pem.
  std::string TrustBundlePem() const override;

  // Whether the trust bundle holds CAs besides the signing one (a rotation
  // may be under way: docs/ca-rotation.md).
  bool BundleHasOtherCas() const;

  // Whether the first certificate of `chain_pem` was signed by the current
  // signing CA (its issuer name and signature); false for anything else,
  // including text that does not parse.
  bool SignedByCurrentCa(const std::string& chain_pem) const;

  // The signing CA certificate, PEM.
  std::string certificate_pem() const;
  // The signing CA certificate's notAfter, unix seconds.
  int64_t not_after() const;

  // One signing certificate, its key and the bundle that goes with them;
  // immutable, shared by the issuances that started with it.
  struct Signer;

  // For the factories above only.
  LocalCa(ConstructionKey<LocalCa>, std::shared_ptr<const Signer> signer, const Clock& clock);

 private:
  std::shared_ptr<const Signer> current() const;

  mutable std::mutex mu_;
  std::shared_ptr<const Signer> signer_;  // guarded by mu_
  const Clock& clock_;
};

}  // namespace certmount
