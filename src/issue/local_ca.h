// The embedded certificate authority: signs CSRs with a CA key kept on the
// node's disk. Good for development clusters and for pods that only need a
// node-local trust root.
#pragma once

#include <chrono>
#include <memory>
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

  // Same checks as FromFiles, on PEM text.
  static Result<std::unique_ptr<LocalCa>> FromPem(const std::string& cert_pem,
                                                  const std::string& key_pem, const Clock& clock);

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

  // The CA certificate, PEM; what Issue returns as ca_pem.
  const std::string& certificate_pem() const { return certificate_pem_; }
  // The CA certificate's notAfter, unix seconds.
  int64_t not_after() const { return not_after_; }

 private:
  struct X509Free {
    void operator()(X509* cert) const;
  };

  // FromPem with the names messages use for the two inputs.
  static Result<std::unique_ptr<LocalCa>> Load(const std::string& cert_pem,
                                               const std::string& cert_name,
                                               const std::string& key_pem,
                                               const std::string& key_name, const Clock& clock);

 public:
  // For the factories above only.
  LocalCa(ConstructionKey<LocalCa>, std::unique_ptr<X509, X509Free> certificate, PrivateKey key,
          std::string certificate_pem, int64_t not_after, const Clock& clock);

 private:
  const std::unique_ptr<X509, X509Free> certificate_;
  const PrivateKey key_;
  const std::string certificate_pem_;
  const int64_t not_after_;
  const Clock& clock_;
};

}  // namespace certmount
