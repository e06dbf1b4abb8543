#include "volume/issuance.h"

#include "issue/certificate_info.h"
#include "issue/csr.h"
#include "issue/pkcs12.h"
#include "issue/private_key.h"
#include "issue/renewal_time.h"

namespace certmount {

namespace {

Result<PrivateKey> KeyFor(const IssuanceRequest& request, Env* env) {
  const CertificateSpec& spec = *request.spec;
  if (request.reuse_existing_key) {
    Result<std::string> pem = env->ReadFile(request.layout.data + "/" + spec.private_key_file);
    if (pem.ok()) {
      Result<PrivateKey> key = PrivateKey::FromPem(*pem);
      if (key.ok()) return key;
    }
    // A missing or unreadable key cannot be reused; a new one keeps the
    // volume working, which is what the pod needs most.
  }
  return PrivateKey::Generate(spec.key_algorithm, spec.key_size);
}

void Notify(const IssuanceRequest& request, IssuanceStep step) {
  if (request.on_step) request.on_step(step);
}

}  // namespace

Result<IssuedCertificateFields> IssueIntoVolume(const IssuanceRequest& request, Issuer* issuer,
                                                Env* env,
                                                std::chrono::steady_clock::time_point deadline,
                                                std::stop_token stop) {
  const CertificateSpec& spec = *request.spec;
  CERTMOUNT_ASSIGN_OR_RETURN(PrivateKey key, KeyFor(request, env));
  CERTMOUNT_ASSIGN_OR_RETURN(std::string key_pem, key.ToPem(spec.key_encoding));
  CERTMOUNT_ASSIGN_OR_RETURN(std::string csr, BuildCsrPem(key, spec));
  Notify(request, IssuanceStep::kKeyGenerated);

  IssueInput input;
  input.volume_id = request.volume_id;
  input.csr_pem = std::move(csr);
  input.spec = &spec;
  input.pod = request.pod;
  Result<IssuedCertificate> issued = issuer->Issue(input, deadline, stop);
  if (!issued.ok()) return issued.status().WithContext("issuer " + issuer->Name());
  Result<CertificateInfo> info = ParseLeafCertificate(issued->certificate_chain_pem);
  if (!info.ok()) {
    return Status::Unavailable("issuer " + issuer->Name() +
                               " returned an unreadable certificate: " + info.status().message());
  }
  if (stop.stop_requested()) return Status::Aborted("issuance cancelled");
  Notify(request, IssuanceStep::kIssued);

  const FileOwnership& ownership = request.ownership;
  std::vector<FileEntry> files = {
      {spec.certificate_file, issued->certificate_chain_pem, CertFileMode(ownership)},
      {spec.private_key_file, std::move(key_pem), KeyFileMode(ownership)},
      {spec.ca_file, issued->ca_pem, CertFileMode(ownership)},
  };
  if (spec.pkcs12_enable) {
    CERTMOUNT_ASSIGN_OR_RETURN(
        std::string keystore,
        BuildPkcs12(key, issued->certificate_chain_pem, issued->ca_pem, spec.pkcs12_password));
    files.push_back({spec.pkcs12_filename, std::move(keystore), KeyFileMode(ownership)});
  }
  CERTMOUNT_RETURN_IF_ERROR(WriteFileSet(request.layout.data, files, ownership, env));
  Notify(request, IssuanceStep::kFilesWritten);

  IssuedCertificateFields fields;
  fields.serial = info->serial_hex;
  fields.not_before = info->not_before;
  fields.not_after = info->not_after;
  fields.next_issuance_at = NextIssuanceAt(info->not_before, info->not_after, spec.renew_before);
  return fields;
}

}  // namespace certmount
