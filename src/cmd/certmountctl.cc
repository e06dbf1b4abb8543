// certmountctl: talks CSI to certmountd over its socket exactly as kubelet
// does, for demos, debugging and replaying pod specs by hand.
#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <iostream>
#include <map>
#include <string>
#include <vector>

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
  return kExitUsage;
}
