#include "csi/node_service.h"

#include <limits.h>

#include "csi/rpc_log.h"
#include "issue/attribute_bounds.h"
#include "issue/attributes.h"
#include "volume/paths.h"

namespace certmount {

namespace {

constexpr char kEphemeralKey[] = "csi.storage.k8s.io/ephemeral";

// A path kubelet sends is checked here for what no filesystem accepts, so
// that it is INVALID_ARGUMENT rather than whatever a system call reports.
Status CheckPathShape(std::string_view field, const std::string& path) {
  if (path.size() >= PATH_MAX) {
    return Status::InvalidArgument(std::string(field) + " is " + std::to_string(path.size()) +
                                   " bytes, longer than the system's " +
                                   std::to_string(PATH_MAX - 1));
  }
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    if (end - start > NAME_MAX) {
      return Status::InvalidArgument(std::string(field) + " has a component of " +
                                     std::to_string(end - start) + " bytes, longer than the " +
                                     "system's " + std::to_string(NAME_MAX));
    }
    start = end + 1;
  }
  return Status::Ok();
}

}  // namespace

NodeService::NodeService(std::string node_id, Publisher* publisher, VolumeHealthChecker* health)
    : node_id_(std::move(node_id)), publisher_(publisher), health_(health) {}

std::vector<csi::v1::NodeServiceCapability::RPC::Type> NodeCapabilities() {
  return {csi::v1::NodeServiceCapability::RPC::VOLUME_MOUNT_GROUP,
          csi::v1::NodeServiceCapability::RPC::GET_VOLUME_STATS,
          csi::v1::NodeServiceCapability::RPC::VOLUME_CONDITION};
}

Status CheckPublishArguments(const csi::v1::NodePublishVolumeRequest& request) {
  if (request.volume_id().empty()) return Status::InvalidArgument("volume_id is required");
  if (request.target_path().empty()) return Status::InvalidArgument("target_path is required");
  CERTMOUNT_RETURN_IF_ERROR(CheckPathShape("target_path", request.target_path()));
  if (!request.has_volume_capability()) {
    return Status::InvalidArgument("volume_capability is required");
  }
  if (request.volume_capability().has_block()) {
    return Status::InvalidArgument(
        "block volumes are not supported: use the volume as a filesystem (a `volumes:` entry "
        "with `csi:`, mounted through `volumeMounts`, not `volumeDevices`)");
  }
  if (!request.volume_capability().has_mount()) {
    return Status::InvalidArgument("volume_capability must be a mount (filesystem) capability");
  }
  // kubelet publishes every inline ephemeral volume as ReadWriteOnce, which
  // it sends as SINGLE_NODE_WRITER to a driver without the
  // SINGLE_NODE_MULTI_WRITER capability (pkg/volume/csi/csi_mounter.go).
  const auto mode = request.volume_capability().access_mode().mode();
  if (mode != csi::v1::VolumeCapability::AccessMode::SINGLE_NODE_WRITER) {
    return Status::InvalidArgument(
        "access mode " + csi::v1::VolumeCapability::AccessMode::Mode_Name(mode) +
        " is not supported: certificate volumes are inline ephemeral volumes, which kubelet "
        "publishes as SINGLE_NODE_WRITER");
  }
  if (!request.readonly()) {
    return Status::InvalidArgument(
        "certificate volumes are read-only: set `readOnly: true` in the pod's csi volume source");
  }
  auto ephemeral = request.volume_context().find(kEphemeralKey);
  if (ephemeral == request.volume_context().end() || ephemeral->second != "true") {
    return Status::InvalidArgument(
        "only ephemeral inline volumes are supported: declare the volume inline in the pod spec "
        "(`volumes: - csi: {driver: ...}`), and list `Ephemeral` in the CSIDriver's "
        "volumeLifecycleModes with podInfoOnMount: true");
  }
  CERTMOUNT_RETURN_IF_ERROR(ValidateVolumeId(request.volume_id()));
  // Before anything parses, stores or logs the attributes.
  std::map<std::string, std::string> context(request.volume_context().begin(),
                                             request.volume_context().end());
  return CheckAttributeBounds(context);
}

grpc::Status NodeService::NodePublishVolume(grpc::ServerContext*,
                                            const csi::v1::NodePublishVolumeRequest* request,
                                            csi::v1::NodePublishVolumeResponse*) {
  return RunRpc("NodePublishVolume", request->volume_id(), [&]() -> Status {
    CERTMOUNT_RETURN_IF_ERROR(CheckPublishArguments(*request));
    PublishRequest publish;
    publish.volume_id = request->volume_id();
    publish.target_path = request->target_path();
    publish.volume_context.insert(request->volume_context().begin(),
                                  request->volume_context().end());
    // KEP-5538: with the CSIDriver's serviceAccountTokenInSecrets kubelet
    // sends the pod's tokens in `secrets` instead; they win over the volume
    // context's. Like those, they are never logged or stored.
    auto tokens = request->secrets().find(std::string(kServiceAccountTokens));
    if (tokens != request->secrets().end()) {
      publish.volume_context[std::string(kServiceAccountTokens)] = tokens->second;
    }
    if (request->volume_capability().has_mount()) {
      publish.volume_mount_group = request->volume_capability().mount().volume_mount_group();
    }
    return publisher_->Publish(publish);
  });
}

grpc::Status NodeService::NodeUnpublishVolume(grpc::ServerContext*,
                                              const csi::v1::NodeUnpublishVolumeRequest* request,
                                              csi::v1::NodeUnpublishVolumeResponse*) {
  return RunRpc("NodeUnpublishVolume", request->volume_id(), [&]() -> Status {
    if (request->volume_id().empty()) return Status::InvalidArgument("volume_id is required");
    if (request->target_path().empty()) {
      return Status::InvalidArgument("target_path is required");
    }
    CERTMOUNT_RETURN_IF_ERROR(CheckPathShape("target_path", request->target_path()));
    CERTMOUNT_RETURN_IF_ERROR(ValidateVolumeId(request->volume_id()));
    return publisher_->Unpublish(request->volume_id(), request->target_path());
  });
}

grpc::Status NodeService::NodeGetCapabilities(grpc::ServerContext*,
                                              const csi::v1::NodeGetCapabilitiesRequest*,
                                              csi::v1::NodeGetCapabilitiesResponse* response) {
  return RunRpc("NodeGetCapabilities", "", [&] {
    // Only what is implemented.
    for (auto type : NodeCapabilities()) {
      response->add_capabilities()->mutable_rpc()->set_type(type);
    }
    return Status::Ok();
  });
}

grpc::Status NodeService::NodeGetInfo(grpc::ServerContext*, const csi::v1::NodeGetInfoRequest*,
                                      csi::v1::NodeGetInfoResponse* response) {
  return RunRpc("NodeGetInfo", "", [&] {
    response->set_node_id(node_id_);
    return Status::Ok();
  });
}

grpc::Status NodeService::NodeStageVolume(grpc::ServerContext*,
                                          const csi::v1::NodeStageVolumeRequest* request,
                                          csi::v1::NodeStageVolumeResponse*) {
  return RunRpc("NodeStageVolume", request->volume_id(), [] {
    return Status::Unimplemented("certmount has no STAGE_UNSTAGE_VOLUME capability");
  });
}

grpc::Status NodeService::NodeUnstageVolume(grpc::ServerContext*,
                                            const csi::v1::NodeUnstageVolumeRequest* request,
                                            csi::v1::NodeUnstageVolumeResponse*) {
  return RunRpc("NodeUnstageVolume", request->volume_id(), [] {
    return Status::Unimplemented("certmount has no STAGE_UNSTAGE_VOLUME capability");
  });
}

grpc::Status NodeService::NodeExpandVolume(grpc::ServerContext*,
                                           const csi::v1::NodeExpandVolumeRequest* request,
                                           csi::v1::NodeExpandVolumeResponse*) {
  return RunRpc("NodeExpandVolume", request->volume_id(),
                [] { return Status::Unimplemented("certificate volumes cannot be expanded"); });
}

grpc::Status NodeService::NodeGetVolumeStats(grpc::ServerContext*,
                                             const csi::v1::NodeGetVolumeStatsRequest* request,
                                             csi::v1::NodeGetVolumeStatsResponse* response) {
  return RunRpc("NodeGetVolumeStats", request->volume_id(), [&]() -> Status {
    if (request->volume_id().empty()) return Status::InvalidArgument("volume_id is required");
    if (request->volume_path().empty()) return Status::InvalidArgument("volume_path is required");
    // A malformed id names no volume of ours; CSI wants NOT_FOUND for that.
    if (!ValidateVolumeId(request->volume_id()).ok()) {
      return Status::NotFound("no published volume " + request->volume_id());
    }
    CERTMOUNT_ASSIGN_OR_RETURN(VolumeHealth health,
                               health_->Check(request->volume_id(), request->volume_path()));
    csi::v1::VolumeUsage* bytes = response->add_usage();
    bytes->set_unit(csi::v1::VolumeUsage::BYTES);
    bytes->set_used(health.bytes_used);
    csi::v1::VolumeCondition* condition = response->mutable_volume_condition();
    condition->set_abnormal(health.abnormal);
    condition->set_message(health.message);
    return Status::Ok();
  });
}

}  // namespace certmount
