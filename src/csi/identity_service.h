// CSI Identity service: who the plugin is and whether it is ready.
#pragma once

#include <atomic>
#include <string>

#include "csi.grpc.pb.h"

namespace certmount {

class IdentityService final : public csi::v1::Identity::Service {
 public:
  // `ready` is read on every Probe; the daemon sets it once the database is
  // open and the startup cleanup is done.
  IdentityService(std::string driver_name, std::string version, const std::atomic<bool>* ready);

  grpc::Status GetPluginInfo(grpc::ServerContext* context,
                             const csi::v1::GetPluginInfoRequest* request,
                             csi::v1::GetPluginInfoResponse* response) override;
  grpc::Status GetPluginCapabilities(grpc::ServerContext* context,
                                     const csi::v1::GetPluginCapabilitiesRequest* request,
                                     csi::v1::GetPluginCapabilitiesResponse* response) override;
  grpc::Status Probe(grpc::ServerContext* context, const csi::v1::ProbeRequest* request,
                     csi::v1::ProbeResponse* response) override;

 private:
  std::string driver_name_;
  std::string version_;
  const std::atomic<bool>* ready_;
};

}  // namespace certmount
