// Where the API server is and how to authenticate to it: from inside a pod
// (the service account mount) or from a kubeconfig file. Everything ends up
// in memory: inline *-data values are never written to temporary files.
// A KubeConfig holds secrets; nothing prints it.
#pragma once

#include <string>

#include "common/status.h"

namespace certmount::kube {

inline constexpr const char* kServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";

struct KubeConfig {
  // "https://host:port", without a trailing slash.
  std::string server;
  // PEM bundle that verifies the server; empty means the system trust store.
  std::string ca_pem;
  bool insecure_skip_tls_verify = false;
  // PEM client certificate and key, for certificate authentication.
  std::string client_certificate_pem;
  std::string client_key_pem;
  // A fixed bearer token.
  std::string token;
  // A file holding the bearer token, re-read whenever it changes (projected
  // service account tokens are rotated by kubelet); wins over `token`.
  std::string token_file;
};

// The in-cluster configuration: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT
// (IPv6 hosts bracketed), `service_account_dir`/ca.crt and
// `service_account_dir`/token (as token_file). FAILED_PRECONDITION when the
// variables are unset or the files cannot be read, naming what is missing.
Result<KubeConfig> LoadInClusterConfig(const std::string& service_account_dir = kServiceAccountDir);

// The cluster and user of `context` (empty: current-context) in the
// kubeconfig at `path`: server, certificate-authority(-data),
// insecure-skip-tls-verify, token / tokenFile, client-certificate(-data) and
// client-key(-data). Relative file names are relative to the kubeconfig's
// directory. INVALID_ARGUMENT for malformed YAML, a context, cluster or user
// that is not there, or bad base64; FAILED_PRECONDITION for unreadable files.
// Exec and auth-provider plugins are not supported (INVALID_ARGUMENT).
Result<KubeConfig> LoadKubeconfig(const std::string& path, const std::string& context = "");

}  // namespace certmount::kube
