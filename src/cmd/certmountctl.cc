// certmountctl: talks CSI to certmountd over its socket exactly as kubelet
// does, for demos, debugging and replaying pod specs by hand.
#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <filesystem>

#include "csi.grpc.pb.h"

namespace {

constexpr int kExitUsage = 2;
constexpr int kExitFailed = 1;

struct CommonFlags {
  std::string endpoint = "unix:///csi/csi.sock";
  int timeout_seconds = 120;  // kubelet's own CSI call timeout
};

struct PublishFlags {
  std::string volume_id;
  std::string target_path;
  std::vector<std::string> attributes;  // key=value
  std::string pod_name = "demo";
  std::string pod_namespace = "default";
  std::string pod_uid = "00000000-0000-0000-0000-000000000000";
  std::string service_account = "default";
  std::string volume_mount_group;
};

std::unique_ptr<grpc::ClientContext> Context(const CommonFlags& flags) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::seconds(flags.timeout_seconds));
  return context;
}

int Report(const char* what, const grpc::Status& status) {
  if (status.ok()) return 0;
  std::cerr << "certmountctl: " << what << " failed: " << status.error_code() << " "
            << status.error_message() << "\n";
  return kExitFailed;
}

int Publish(const CommonFlags& common, const PublishFlags& flags) {
  csi::v1::NodePublishVolumeRequest request;
  request.set_volume_id(flags.volume_id);
  request.set_target_path(flags.target_path);
  request.set_readonly(true);
  auto* capability = request.mutable_volume_capability();
  capability->mutable_mount()->set_volume_mount_group(flags.volume_mount_group);
  capability->mutable_access_mode()->set_mode(
      csi::v1::VolumeCapability::AccessMode::SINGLE_NODE_READER_ONLY);
  auto& context = *request.mutable_volume_context();
  // What kubelet adds for an inline volume of a CSIDriver with podInfoOnMount.
  context["csi.storage.k8s.io/ephemeral"] = "true";
  context["csi.storage.k8s.io/pod.name"] = flags.pod_name;
  context["csi.storage.k8s.io/pod.namespace"] = flags.pod_namespace;
  context["csi.storage.k8s.io/pod.uid"] = flags.pod_uid;
  context["csi.storage.k8s.io/serviceAccount.name"] = flags.service_account;
  for (const std::string& attribute : flags.attributes) {
    auto eq = attribute.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::cerr << "certmountctl: --attribute \"" << attribute << "\" must be key=value\n";
      return kExitUsage;
    }
    context[attribute.substr(0, eq)] = attribute.substr(eq + 1);
  }
  auto channel = grpc::CreateChannel(common.endpoint, grpc::InsecureChannelCredentials());
  auto node = csi::v1::Node::NewStub(channel);
  csi::v1::NodePublishVolumeResponse response;
  int rc = Report("NodePublishVolume", node->NodePublishVolume(Context(common).get(), request,
                                                              &response));
  if (rc == 0) std::cout << "published " << flags.volume_id << " at " << flags.target_path << "\n";
  return rc;
}

int Unpublish(const CommonFlags& common, const std::string& volume_id,
              const std::string& target_path) {
  csi::v1::NodeUnpublishVolumeRequest request;
  request.set_volume_id(volume_id);
  request.set_target_path(target_path);
  auto channel = grpc::CreateChannel(common.endpoint, grpc::InsecureChannelCredentials());
  auto node = csi::v1::Node::NewStub(channel);
  csi::v1::NodeUnpublishVolumeResponse response;
  int rc = Report("NodeUnpublishVolume",
                  node->NodeUnpublishVolume(Context(common).get(), request, &response));
  if (rc == 0) std::cout << "unpublished " << volume_id << "\n";
  return rc;
}

struct PodFlags {
  std::string manifest;
  std::string driver_name = "csi.certmount.io";
  std::string target_root = "/var/lib/kubelet/pods";
  bool unpublish = false;
};

// A stable, path-safe id for an inline volume of a pod, shaped like
// kubelet's ("csi-" and hex); FNV-1a because only stability matters here.
std::string InlineVolumeId(const std::string& pod_uid, const std::string& volume_name) {
  uint64_t hash = 1469598103934665603ULL;
  for (char c : pod_uid + "/" + volume_name) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ULL;
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(hash));
  return std::string("csi-") + hex;
}

std::string Scalar(const YAML::Node& node, const std::string& fallback = "") {
  return node && node.IsScalar() ? node.as<std::string>() : fallback;
}

// Replays a Pod manifest as kubelet would: every inline CSI volume of
// `driver_name` is published (or unpublished) at the path kubelet would use.
int ReplayPod(const CommonFlags& common, const PodFlags& flags) {
  YAML::Node pod;
  try {
    pod = YAML::LoadFile(flags.manifest);
  } catch (const YAML::Exception& e) {
    std::cerr << "certmountctl: " << flags.manifest << ": " << e.what() << "\n";
    return kExitUsage;
  }
  if (Scalar(pod["kind"]) != "Pod") {
    std::cerr << "certmountctl: " << flags.manifest << " is not a Pod manifest (kind: "
              << Scalar(pod["kind"], "missing") << ")\n";
    return kExitUsage;
  }
  const std::string name = Scalar(pod["metadata"]["name"], "pod");
  const std::string namespace_ = Scalar(pod["metadata"]["namespace"], "default");
  const std::string uid =
      Scalar(pod["metadata"]["uid"], InlineVolumeId(namespace_, name).substr(4) + "-replayed");
  PublishFlags publish;
  publish.pod_name = name;
  publish.pod_namespace = namespace_;
  publish.pod_uid = uid;
  publish.service_account = Scalar(pod["spec"]["serviceAccountName"], "default");
  publish.volume_mount_group = Scalar(pod["spec"]["securityContext"]["fsGroup"]);
  int published = 0;
  for (const YAML::Node& volume : pod["spec"]["volumes"]) {
    const YAML::Node csi = volume["csi"];
    if (!csi || Scalar(csi["driver"]) != flags.driver_name) continue;
    const std::string volume_name = Scalar(volume["name"]);
    publish.volume_id = InlineVolumeId(uid, volume_name);
    const std::string parent =
        flags.target_root + "/" + uid + "/volumes/kubernetes.io~csi/" + volume_name;
    publish.target_path = parent + "/mount";
    int rc = 0;
    if (flags.unpublish) {
      rc = Unpublish(common, publish.volume_id, publish.target_path);
    } else {
      std::error_code ignored;
      std::filesystem::create_directories(parent, ignored);  // kubelet makes the parent
      publish.attributes.clear();
      for (const auto& attribute : csi["volumeAttributes"]) {
        publish.attributes.push_back(attribute.first.as<std::string>() + "=" +
                                     attribute.second.as<std::string>());
      }
      rc = Publish(common, publish);
    }
    if (rc != 0) return rc;
    ++published;
  }
  if (published == 0) {
    std::cerr << "certmountctl: " << flags.manifest << " has no inline csi volume of driver "
              << flags.driver_name << "\n";
    return kExitUsage;
  }
  return 0;
}

int Info(const CommonFlags& common) {
  auto channel = grpc::CreateChannel(common.endpoint, grpc::InsecureChannelCredentials());
  auto identity = csi::v1::Identity::NewStub(channel);
  auto node = csi::v1::Node::NewStub(channel);
  csi::v1::GetPluginInfoResponse plugin;
  if (int rc = Report("GetPluginInfo", identity->GetPluginInfo(Context(common).get(), {}, &plugin)))
    return rc;
  csi::v1::ProbeResponse probe;
  if (int rc = Report("Probe", identity->Probe(Context(common).get(), {}, &probe))) return rc;
  csi::v1::NodeGetInfoResponse info;
  if (int rc = Report("NodeGetInfo", node->NodeGetInfo(Context(common).get(), {}, &info)))
    return rc;
  csi::v1::NodeGetCapabilitiesResponse caps;
  if (int rc = Report("NodeGetCapabilities",
                      node->NodeGetCapabilities(Context(common).get(), {}, &caps)))
    return rc;
  std::cout << "driver:       " << plugin.name() << " " << plugin.vendor_version() << "\n"
            << "ready:        " << (probe.ready().value() ? "yes" : "no") << "\n"
            << "node id:      " << info.node_id() << "\n"
            << "capabilities:";
  for (const auto& cap : caps.capabilities()) {
    std::cout << " " << csi::v1::NodeServiceCapability::RPC::Type_Name(cap.rpc().type());
  }
  std::cout << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CommonFlags common;
  PublishFlags publish;
  std::string unpublish_volume;
  std::string unpublish_target;

  CLI::App app{"certmountctl: speak CSI to certmountd as kubelet does"};
  app.set_version_flag("--version", std::string("certmountctl ") + CERTMOUNT_VERSION);
  app.add_option("--endpoint", common.endpoint, "certmountd's CSI endpoint")->capture_default_str();
  app.add_option("--timeout", common.timeout_seconds, "seconds per call")->capture_default_str();
  app.require_subcommand(1);

  CLI::App* publish_cmd = app.add_subcommand("publish", "NodePublishVolume an inline volume");
  publish_cmd->add_option("--volume-id", publish.volume_id, "volume id")->required();
  publish_cmd->add_option("--target-path", publish.target_path, "mount target")->required();
  publish_cmd->add_option("--attribute,-a", publish.attributes,
                          "volume attribute key=value, repeatable");
  publish_cmd->add_option("--pod-name", publish.pod_name)->capture_default_str();
  publish_cmd->add_option("--pod-namespace", publish.pod_namespace)->capture_default_str();
  publish_cmd->add_option("--pod-uid", publish.pod_uid)->capture_default_str();
  publish_cmd->add_option("--service-account", publish.service_account)->capture_default_str();
  publish_cmd->add_option("--volume-mount-group", publish.volume_mount_group,
                          "kubelet's fsGroup delegation (a gid)");

  CLI::App* unpublish_cmd = app.add_subcommand("unpublish", "NodeUnpublishVolume");
  unpublish_cmd->add_option("--volume-id", unpublish_volume, "volume id")->required();
  unpublish_cmd->add_option("--target-path", unpublish_target, "mount target")->required();

  CLI::App* info_cmd = app.add_subcommand("info", "plugin info, readiness, node id, capabilities");

  PodFlags pod;
  CLI::App* pod_cmd = app.add_subcommand(
      "pod", "replay a Pod manifest: publish its inline volumes of this driver as kubelet would");
  pod_cmd->add_option("manifest", pod.manifest, "Pod YAML file")->required();
  pod_cmd->add_option("--driver-name", pod.driver_name)->capture_default_str();
  pod_cmd->add_option("--target-root", pod.target_root, "kubelet's pods directory")
      ->capture_default_str();
  pod_cmd->add_flag("--unpublish", pod.unpublish, "unpublish the pod's volumes instead");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::CallForVersion&) {
    std::cout << "certmountctl " << CERTMOUNT_VERSION << "\n";
    return 0;
  } catch (const CLI::ParseError& e) {
    std::cerr << "certmountctl: " << e.what() << "\n";
    return kExitUsage;
  }
  if (publish_cmd->parsed()) return Publish(common, publish);
  if (unpublish_cmd->parsed()) return Unpublish(common, unpublish_volume, unpublish_target);
  if (info_cmd->parsed()) return Info(common);
  if (pod_cmd->parsed()) return ReplayPod(common, pod);
  return kExitUsage;
}
