#include "csi/identity_service.h"

#include "csi/rpc_log.h"

namespace certmount {

IdentityService::IdentityService(std::string driver_name, std::string version,
                                 const std::atomic<bool>* ready)
    : driver_name_(std::move(driver_name)), version_(std::move(version)), ready_(ready) {}

grpc::Status IdentityService::GetPluginInfo(grpc::ServerContext*,
                                            const csi::v1::GetPluginInfoRequest*,
                                            csi::v1::GetPluginInfoResponse* response) {
  return RunRpc("GetPluginInfo", "", [&] {
    response->set_name(driver_name_);
    response->set_vendor_version(version_);
    return Status::Ok();
  });
}

grpc::Status IdentityService::GetPluginCapabilities(grpc::ServerContext*,
                                                    const csi::v1::GetPluginCapabilitiesRequest*,
                                                    csi::v1::GetPluginCapabilitiesResponse*) {
  // A node-only plugin: no CONTROLLER_SERVICE, no topology constraints.
  return RunRpc("GetPluginCapabilities", "", [] { return Status::Ok(); });
}

grpc::Status IdentityService::Probe(grpc::ServerContext*, const csi::v1::ProbeRequest*,
                                    csi::v1::ProbeResponse* response) {
  return RunRpc("Probe", "", [&] {
    response->mutable_ready()->set_value(ready_->load());
    return Status::Ok();
  });
}

}  // namespace certmount
