#include "kube/config.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>

#include "common/env.h"
#include "kube/base64.h"

namespace certmount::kube {
namespace {

// A configuration file that cannot be read is a precondition of the
// driver's setup, whatever the errno (named in the message).
Result<std::string> ReadFile(const std::string& path) {
  Result<std::string> text = Env::Default()->ReadFile(path);
  if (!text.ok()) return Status::FailedPrecondition("cannot read " + text.status().message());
  return text;
}

// Finds the entry called `name` in a kubeconfig list such as `clusters`.
YAML::Node FindNamed(const YAML::Node& list, const std::string& name, const char* field) {
  if (!list || !list.IsSequence()) return YAML::Node();
  for (const YAML::Node& entry : list) {
    if (entry["name"] && entry["name"].as<std::string>() == name) return entry[field];
  }
  return YAML::Node();
}

std::string Scalar(const YAML::Node& node, const char* key) {
  const YAML::Node value = node[key];
  return value && value.IsScalar() ? value.as<std::string>() : std::string();
}

// An inline base64 value (`data_key`) or a file (`file_key`), whichever is set.
Result<std::string> DataOrFile(const YAML::Node& node, const char* data_key, const char* file_key,
                               const std::filesystem::path& base_dir) {
  std::string data = Scalar(node, data_key);
  if (!data.empty()) {
    Result<std::string> decoded = Base64Decode(data);
    if (!decoded.ok()) return Status::InvalidArgument(std::string(data_key) + " is not base64");
    return decoded;
  }
  std::string file = Scalar(node, file_key);
  if (file.empty()) return std::string();
  std::filesystem::path path(file);
  if (path.is_relative()) path = base_dir / path;
  return ReadFile(path.string());
}

Result<KubeConfig> ParseKubeconfig(const YAML::Node& root, const std::string& path,
                                   const std::string& context_override) {
  const std::filesystem::path base_dir = std::filesystem::path(path).parent_path();
  std::string context_name =
      context_override.empty() ? Scalar(root, "current-context") : context_override;
  if (context_name.empty()) return Status::InvalidArgument(path + ": no current-context");
  YAML::Node context = FindNamed(root["contexts"], context_name, "context");
  if (!context.IsMap())
    return Status::InvalidArgument(path + ": no context \"" + context_name + "\"");
  std::string cluster_name = Scalar(context, "cluster");
  YAML::Node cluster = FindNamed(root["clusters"], cluster_name, "cluster");
  if (!cluster.IsMap())
    return Status::InvalidArgument(path + ": no cluster \"" + cluster_name + "\"");
  std::string user_name = Scalar(context, "user");
  YAML::Node user = FindNamed(root["users"], user_name, "user");
  if (!user_name.empty() && !user.IsMap()) {
    return Status::InvalidArgument(path + ": no user \"" + user_name + "\"");
  }

  KubeConfig config;
  config.server = Scalar(cluster, "server");
  while (!config.server.empty() && config.server.back() == '/') config.server.pop_back();
  if (config.server.empty()) {
    return Status::InvalidArgument(path + ": cluster \"" + cluster_name + "\" has no server");
  }
  config.insecure_skip_tls_verify = Scalar(cluster, "insecure-skip-tls-verify") == "true";
  CERTMOUNT_ASSIGN_OR_RETURN(config.ca_pem, DataOrFile(cluster, "certificate-authority-data",
                                                       "certificate-authority", base_dir));
  if (user.IsMap()) {
    if (user["exec"] || user["auth-provider"]) {
      return Status::InvalidArgument(path + ": user \"" + user_name +
                                     "\" uses an exec or auth-provider plugin, which is not "
                                     "supported");
    }
    config.token = Scalar(user, "token");
    std::string token_file = Scalar(user, "tokenFile");
    if (!token_file.empty()) {
      std::filesystem::path token_path(token_file);
      if (token_path.is_relative()) token_path = base_dir / token_path;
      config.token_file = token_path.string();
    }
    CERTMOUNT_ASSIGN_OR_RETURN(
        config.client_certificate_pem,
        DataOrFile(user, "client-certificate-data", "client-certificate", base_dir));
    CERTMOUNT_ASSIGN_OR_RETURN(config.client_key_pem,
                               DataOrFile(user, "client-key-data", "client-key", base_dir));
    if (config.client_certificate_pem.empty() != config.client_key_pem.empty()) {
      return Status::InvalidArgument(path + ": user \"" + user_name +
                                     "\" needs both a client certificate and a client key");
    }
  }
  return config;
}

}  // namespace

Result<KubeConfig> LoadInClusterConfig(const std::string& service_account_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || *host == '\0' || port == nullptr || *port == '\0') {
    return Status::FailedPrecondition(
        "not running in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be "
        "set");
  }
  std::string host_text(host);
  if (host_text.find(':') != std::string::npos) host_text = "[" + host_text + "]";
  KubeConfig config;
  config.server = "https://" + host_text + ":" + port;
  const std::filesystem::path dir(service_account_dir);
  CERTMOUNT_ASSIGN_OR_RETURN(config.ca_pem, ReadFile((dir / "ca.crt").string()));
  config.token_file = (dir / "token").string();
  // Fail now rather than on the first request.
  CERTMOUNT_ASSIGN_OR_RETURN(std::string token, ReadFile(config.token_file));
  if (token.empty()) return Status::FailedPrecondition(config.token_file + " is empty");
  return config;
}

Result<KubeConfig> LoadKubeconfig(const std::string& path, const std::string& context) {
  CERTMOUNT_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  try {
    return ParseKubeconfig(YAML::Load(text), path, context);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(path + ": " + e.what());
  }
}

}  // namespace certmount::kube
