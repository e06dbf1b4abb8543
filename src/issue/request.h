// The typed form of a pod's certificate request: everything the volume
// attributes say, parsed and validated once (see attributes.h). Every later
// step (key generation, CSR, issuers, file layout) reads only this.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace certmount {

enum class KeyAlgorithm { kRsa, kEcdsa, kEd25519 };
enum class KeyEncoding { kPkcs1, kPkcs8 };
// cert-manager's PKCS#12 profiles. LegacyRC2 is what csi-driver writes (RC2-40
// certificates, 3DES key, SHA-1 MAC; read by old Java and .NET); LegacyDES
// uses 3DES for both; Modern2023 is AES-256-CBC with PBKDF2 and a SHA-256 MAC.
enum class Pkcs12Profile { kLegacyRc2, kLegacyDes, kModern2023 };

// The subject's distinguished-name fields, as cert-manager names them.
struct Subject {
  std::string common_name;
  std::vector<std::string> organizations;
  std::vector<std::string> organizational_units;
  std::vector<std::string> countries;
  std::vector<std::string> provinces;
  std::vector<std::string> localities;
  std::vector<std::string> street_addresses;
  std::vector<std::string> postal_codes;
  std::string serial_number;
};

struct IssuerRef {
  std::string name;
  std::string kind = "Issuer";
  std::string group = "cert-manager.io";
};

// The pod a volume belongs to, from the csi.storage.k8s.io/ entries kubelet
// sends when the CSIDriver has podInfoOnMount.
struct PodInfo {
  std::string name;
  std::string namespace_;
  std::string uid;
  std::string service_account;
};

struct CertificateSpec {
  IssuerRef issuer;
  Subject subject;
  // RFC 4514 subject; when set it replaces `subject` entirely.
  std::string literal_subject;
  std::vector<std::string> dns_names;
  std::vector<std::string> ip_addresses;  // canonical text form, v4 or v6
  std::vector<std::string> uris;
  std::vector<std::string> email_addresses;
  std::chrono::nanoseconds duration{std::chrono::hours(2160)};
  std::optional<std::chrono::nanoseconds> renew_before;
  bool is_ca = false;
  // cert-manager usage names ("digital signature", "server auth", ...).
  std::vector<std::string> usages{"digital signature", "key encipherment"};
  // csi-driver's defaults: RSA 2048 in PKCS#1 (ECDSA and Ed25519: PKCS#8).
  KeyAlgorithm key_algorithm = KeyAlgorithm::kRsa;
  int key_size = 2048;  // RSA bits, or the ECDSA curve's size (256, 384, 521); unused for Ed25519
  KeyEncoding key_encoding = KeyEncoding::kPkcs1;
  bool reuse_private_key = false;

  // File names inside the volume; plain names, validated.
  std::string certificate_file = "tls.crt";
  std::string private_key_file = "tls.key";
  std::string ca_file = "ca.crt";
  std::optional<uint32_t> fs_group;

  bool pkcs12_enable = false;
  std::string pkcs12_filename = "keystore.p12";
  std::string pkcs12_password;
  Pkcs12Profile pkcs12_profile = Pkcs12Profile::kLegacyRc2;

  // JKS keystore and truststore (issue/jks.h), both protected by
  // jks_password.
  bool jks_enable = false;
  std::string jks_filename = "keystore.jks";
  std::string jks_truststore_filename = "truststore.jks";
  std::string jks_password;

  // ip-sans items "${POD_IP}" (the pod's first address) and "${POD_IPS}"
  // (all of them): unknown when kubelet publishes, added to ip_addresses by
  // ApplyPodIps once the driver has seen them (attributes.h).
  bool wants_pod_ip = false;
  bool wants_pod_ips = false;
  // dns-names items that use ${POD_IP} or ${POD_IPS} (e.g.
  // "${POD_IP}.default.pod.cluster.local"), kubelet's variables already
  // expanded and each pod-address reference written as the marker
  // kPodIpMarker or kPodIpsMarker (attributes.h). ApplyPodIps adds the names
  // they make to dns_names once the addresses are known.
  std::vector<std::string> pod_ip_dns_names;
  // csi.cert-manager.io/pod-ip-readiness-gate: the driver sets the pod's
  // readiness gate condition once the certificate carries its IPs.
  bool pod_ip_readiness_gate = false;

  // Attributes of other domains (not csi.cert-manager.io/,
  // csi.storage.k8s.io/ or certmount.io/), passed to issuers that use them
  // (the cert-manager issuer turns them into CertificateRequest annotations).
  std::map<std::string, std::string> annotations;

  // certmount.io/credential-bundle-file: a file in the volume holding the
  // private key as PKCS#8 ("PRIVATE KEY", whatever key_encoding says)
  // followed by the certificate file's chain, written with the other files,
  // mode as the key. Empty: no such file.
  std::string credential_bundle_file;
};

}  // namespace certmount
