#include "volume/issuance.h"

#include <iterator>
#include <vector>

#include "issue/certificate_info.h"
#include "issue/csr.h"
#include "issue/jks.h"
#include "issue/pkcs12.h"
#include "issue/private_key.h"
#include "issue/renewal_time.h"

namespace certmount {

namespace {

// When key generation must give up: the issuance's deadline or its stop.
struct KeyDeadline {
  std::chrono::steady_clock::time_point deadline;
  std::stop_token stop;
};

Result<PrivateKey> KeyFor(const IssuanceRequest& request, Env* env, const KeyDeadline& limits) {
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
  return PrivateKey::Generate(spec.key_algorithm, spec.key_size, limits.deadline, limits.stop);
}

void Notify(const IssuanceRequest& request, IssuanceStep step) {
  if (request.on_step) request.on_step(step);
}

std::string PendingKeyPath(const VolumeLayout& layout) {
  return layout.private_dir + "/pending.key";
}
std::string PendingCsrPath(const VolumeLayout& layout) {
  return layout.private_dir + "/pending.csr";
}

struct KeyAndCsr {
  PrivateKey key;
  std::string key_pem;
  std::string csr_pem;
};

Result<KeyAndCsr> FreshKeyAndCsr(const IssuanceRequest& request, Env* env,
                                 const KeyDeadline& limits) {
  const CertificateSpec& spec = *request.spec;
  CERTMOUNT_ASSIGN_OR_RETURN(PrivateKey key, KeyFor(request, env, limits));
  CERTMOUNT_ASSIGN_OR_RETURN(std::string key_pem, key.ToPem(spec.key_encoding));
  CERTMOUNT_ASSIGN_OR_RETURN(std::string csr, BuildCsrPem(key, spec));
  return KeyAndCsr{std::move(key), std::move(key_pem), std::move(csr)};
}

Status WritePrivate(const std::string& path, const std::string& contents, Env* env) {
  const std::string staging = path + ".tmp";
  (void)env->Remove(staging);
  CERTMOUNT_RETURN_IF_ERROR(env->WriteNewFile(staging, contents, 0600, std::nullopt));
  return env->Rename(staging, path);
}

void RemovePending(const VolumeLayout& layout, Env* env) {
  (void)env->Remove(PendingCsrPath(layout));
  (void)env->Remove(PendingKeyPath(layout));
}

// The pending key and CSR when a previous attempt left both readable, else
// new ones, saved as pending before they are used.
Result<KeyAndCsr> ResumableKeyAndCsr(const IssuanceRequest& request, Env* env,
                                     const KeyDeadline& limits) {
  Result<std::string> key_pem = env->ReadFile(PendingKeyPath(request.layout));
  Result<std::string> csr_pem = env->ReadFile(PendingCsrPath(request.layout));
  if (key_pem.ok() && csr_pem.ok()) {
    Result<PrivateKey> key = PrivateKey::FromPem(*key_pem);
    if (key.ok()) return KeyAndCsr{std::move(*key), std::move(*key_pem), std::move(*csr_pem)};
  }
  CERTMOUNT_ASSIGN_OR_RETURN(KeyAndCsr fresh, FreshKeyAndCsr(request, env, limits));
  CERTMOUNT_RETURN_IF_ERROR(env->CreateDirectories(request.layout.private_dir, 0700));
  // The key first: a CSR without its key could never be completed.
  CERTMOUNT_RETURN_IF_ERROR(WritePrivate(PendingKeyPath(request.layout), fresh.key_pem, env));
  CERTMOUNT_RETURN_IF_ERROR(WritePrivate(PendingCsrPath(request.layout), fresh.csr_pem, env));
  CERTMOUNT_RETURN_IF_ERROR(env->SyncDir(request.layout.private_dir));
  return fresh;
}

// The JKS keystore (mode of the key) and truststore (only certificates: the
// mode of ca.crt), dated `now_unix`.
Status AddJksFiles(const CertificateSpec& spec, const PrivateKey& key, const std::string& chain_pem,
                   const std::string& ca_pem, int64_t now_unix, const FileOwnership& ownership,
                   std::vector<FileEntry>& files) {
  const int64_t created_ms = now_unix * 1000;
  CERTMOUNT_ASSIGN_OR_RETURN(std::string keystore, BuildJksKeystore(key, chain_pem, ca_pem,
                                                                    spec.jks_password, created_ms));
  CERTMOUNT_ASSIGN_OR_RETURN(std::string truststore,
                             BuildJksTruststore(ca_pem, spec.jks_password, created_ms));
  files.push_back({spec.jks_filename, std::move(keystore), KeyFileMode(ownership)});
  files.push_back({spec.jks_truststore_filename, std::move(truststore), CertFileMode(ownership)});
  return Status::Ok();
}

// The credential bundle (spec.credential_bundle_file, when set): the key as
// PKCS#8 whatever spec.key_encoding says, then `chain_pem`, in one file with
// the key's mode, so that one read gives a key and its certificate.
Status AddCredentialBundle(const CertificateSpec& spec, const PrivateKey& key,
                           const std::string& chain_pem, const FileOwnership& ownership,
                           std::vector<FileEntry>& files) {
  if (spec.credential_bundle_file.empty()) return Status::Ok();
  CERTMOUNT_ASSIGN_OR_RETURN(std::string bundle, key.ToPem(KeyEncoding::kPkcs8));
  if (!bundle.ends_with('\n')) bundle.push_back('\n');
  bundle += chain_pem;
  files.push_back({spec.credential_bundle_file, std::move(bundle), KeyFileMode(ownership)});
  return Status::Ok();
}

// The contents of `name` among `files`; null when it is not there.
const std::string* FindFile(const std::vector<FileEntry>& files, const std::string& name) {
  for (const FileEntry& file : files) {
    if (file.name == name) return &file.contents;
  }
  return nullptr;
}

// Both JKS stores hold ca.crt's certificates: rebuilt from the volume's
// current key and chain around the new bundle, replacing their old copies.
Status RebuildJksFiles(const CertificateSpec& spec, const std::string& bundle_pem, int64_t now_unix,
                       const FileOwnership& ownership, std::vector<FileEntry>& files) {
  const std::string* key_pem = FindFile(files, spec.private_key_file);
  const std::string* chain_pem = FindFile(files, spec.certificate_file);
  if (key_pem == nullptr || chain_pem == nullptr) {
    return Status::FailedPrecondition("the volume's current files lack " + spec.private_key_file +
                                      " or " + spec.certificate_file);
  }
  CERTMOUNT_ASSIGN_OR_RETURN(PrivateKey key, PrivateKey::FromPem(*key_pem));
  std::vector<FileEntry> rebuilt;
  CERTMOUNT_RETURN_IF_ERROR(
      AddJksFiles(spec, key, *chain_pem, bundle_pem, now_unix, ownership, rebuilt));
  std::erase_if(files, [&](const FileEntry& file) {
    return file.name == spec.jks_filename || file.name == spec.jks_truststore_filename;
  });
  files.insert(files.end(), std::make_move_iterator(rebuilt.begin()),
               std::make_move_iterator(rebuilt.end()));
  return Status::Ok();
}

}  // namespace

bool HasPendingIssuance(const VolumeLayout& layout, Env* env) {
  return env->LStat(PendingKeyPath(layout)).ok() && env->LStat(PendingCsrPath(layout)).ok();
}

bool IsFinalIssuanceFailure(Code code) {
  return code == Code::kInvalidArgument || code == Code::kFailedPrecondition ||
         code == Code::kPermissionDenied;
}

Result<IssuedCertificateFields> IssueIntoVolume(const IssuanceRequest& request, Issuer* issuer,
                                                Env* env,
                                                std::chrono::steady_clock::time_point deadline,
                                                std::stop_token stop) {
  const CertificateSpec& spec = *request.spec;
  const KeyDeadline limits{deadline, stop};
  CERTMOUNT_ASSIGN_OR_RETURN(KeyAndCsr made, request.resumable
                                                 ? ResumableKeyAndCsr(request, env, limits)
                                                 : FreshKeyAndCsr(request, env, limits));
  PrivateKey& key = made.key;
  std::string& key_pem = made.key_pem;
  Notify(request, IssuanceStep::kKeyGenerated);

  IssueInput input;
  input.volume_id = request.volume_id;
  input.purpose = request.purpose;
  input.csr_pem = std::move(made.csr_pem);
  input.spec = &spec;
  input.pod = request.pod;
  input.request_name = request.request_name;
  input.bearer_token_override = request.bearer_token_override;
  Result<IssuedCertificate> issued = issuer->Issue(input, deadline, stop);
  if (!issued.ok()) {
    // A final answer will not change on retry: the next attempt starts a
    // new issuance (new key, CSR and number). Anything else is resumed.
    if (request.resumable && IsFinalIssuanceFailure(issued.status().code())) {
      RemovePending(request.layout, env);
    }
    return issued.status().WithContext("issuer " + issuer->Name());
  }
  Result<CertificateInfo> info = issued->leaf.has_value()
                                     ? Result<CertificateInfo>(*issued->leaf)
                                     : ParseLeafCertificate(issued->certificate_chain_pem);
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
  CERTMOUNT_RETURN_IF_ERROR(
      AddCredentialBundle(spec, key, issued->certificate_chain_pem, ownership, files));
  if (spec.pkcs12_enable) {
    CERTMOUNT_ASSIGN_OR_RETURN(
        std::string keystore,
        BuildPkcs12(key, issued->certificate_chain_pem, spec.pkcs12_password, spec.pkcs12_profile));
    files.push_back({spec.pkcs12_filename, std::move(keystore), KeyFileMode(ownership)});
  }
  if (spec.jks_enable) {
    CERTMOUNT_RETURN_IF_ERROR(AddJksFiles(spec, key, issued->certificate_chain_pem, issued->ca_pem,
                                          request.now_unix, ownership, files));
  }
  CERTMOUNT_RETURN_IF_ERROR(WriteFileSet(request.layout.data, files, ownership, env));
  if (request.resumable) RemovePending(request.layout, env);
  Notify(request, IssuanceStep::kFilesWritten);

  IssuedCertificateFields fields;
  fields.serial = info->serial_hex;
  fields.not_before = info->not_before;
  fields.not_after = info->not_after;
  fields.next_issuance_at = NextIssuanceAt(info->not_before, info->not_after, spec.renew_before);
  return fields;
}

Status RewriteTrustBundle(const VolumeLayout& layout, const CertificateSpec& spec,
                          const std::string& bundle_pem, const FileOwnership& ownership,
                          int64_t now_unix, Env* env) {
  const std::string current = layout.data + "/..data";
  Result<std::vector<std::string>> names = env->ListDirectory(current);
  if (!names.ok()) {
    return Status::FailedPrecondition("no current files in " + layout.data + ": " +
                                      names.status().message());
  }
  std::vector<FileEntry> files;
  bool has_ca_file = false;
  for (const std::string& name : *names) {
    const std::string path = current + "/" + name;
    CERTMOUNT_ASSIGN_OR_RETURN(FileStat stat, env->LStat(path));
    if (stat.type != FileStat::Type::kRegular) continue;
    if (name == spec.ca_file) {
      has_ca_file = true;
      Result<std::string> old = env->ReadFile(path);
      if (old.ok() && *old == bundle_pem) return Status::Ok();
      files.push_back({name, bundle_pem, stat.permissions});
      continue;
    }
    CERTMOUNT_ASSIGN_OR_RETURN(std::string contents, env->ReadFile(path));
    files.push_back({name, std::move(contents), stat.permissions});
  }
  if (!has_ca_file) files.push_back({spec.ca_file, bundle_pem, CertFileMode(ownership)});
  if (spec.jks_enable) {
    CERTMOUNT_RETURN_IF_ERROR(RebuildJksFiles(spec, bundle_pem, now_unix, ownership, files));
  }
  return WriteFileSet(layout.data, files, ownership, env);
}

}  // namespace certmount
