// CSI Node service: checks kubelet's arguments in the order CSI prescribes,
// then hands the domain call to the Publisher (publish, unpublish) or the
// VolumeHealthChecker (volume stats and condition).
#pragma once

#include <string>
#include <vector>

#include "csi.grpc.pb.h"
#include "renew/volume_health.h"
#include "volume/publisher.h"

namespace certmount {

class NodeService final : public csi::v1::Node::Service {
 public:
  // `publisher` and `health` must outlive the service.
  NodeService(std::string node_id, Publisher* publisher, VolumeHealthChecker* health);

  grpc::Status NodePublishVolume(grpc::ServerContext* context,
                                 const csi::v1::NodePublishVolumeRequest* request,
                                 csi::v1::NodePublishVolumeResponse* response) override;
  grpc::Status NodeUnpublishVolume(grpc::ServerContext* context,
                                   const csi::v1::NodeUnpublishVolumeRequest* request,
                                   csi::v1::NodeUnpublishVolumeResponse* response) override;
  grpc::Status NodeGetCapabilities(grpc::ServerContext* context,
                                   const csi::v1::NodeGetCapabilitiesRequest* request,
                                   csi::v1::NodeGetCapabilitiesResponse* response) override;
  grpc::Status NodeGetInfo(grpc::ServerContext* context, const csi::v1::NodeGetInfoRequest* request,
                           csi::v1::NodeGetInfoResponse* response) override;
  grpc::Status NodeStageVolume(grpc::ServerContext* context,
                               const csi::v1::NodeStageVolumeRequest* request,
                               csi::v1::NodeStageVolumeResponse* response) override;
  grpc::Status NodeUnstageVolume(grpc::ServerContext* context,
                                 const csi::v1::NodeUnstageVolumeRequest* request,
                                 csi::v1::NodeUnstageVolumeResponse* response) override;
  grpc::Status NodeExpandVolume(grpc::ServerContext* context,
                                const csi::v1::NodeExpandVolumeRequest* request,
                                csi::v1::NodeExpandVolumeResponse* response) override;
  grpc::Status NodeGetVolumeStats(grpc::ServerContext* context,
                                  const csi::v1::NodeGetVolumeStatsRequest* request,
                                  csi::v1::NodeGetVolumeStatsResponse* response) override;

 private:
  std::string node_id_;
  Publisher* publisher_;
  VolumeHealthChecker* health_;
};

// The CSI-level checks of a publish request, in the order kubelet's errors
// should be reported: missing fields first, then what the pod spec must
// change, then the volume id's shape. Exposed for tests.
Status CheckPublishArguments(const csi::v1::NodePublishVolumeRequest& request);

// The capabilities NodeGetCapabilities advertises, in order: fsGroup
// delegation (VOLUME_MOUNT_GROUP), GET_VOLUME_STATS and VOLUME_CONDITION.
std::vector<csi::v1::NodeServiceCapability::RPC::Type> NodeCapabilities();

}  // namespace certmount
