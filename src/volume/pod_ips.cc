#include "volume/pod_ips.h"

#include "issue/attributes.h"

namespace certmount {

bool PodIps::Set(const std::string& pod_uid, std::vector<std::string> ips) {
  std::lock_guard lock(mu_);
  auto [it, inserted] = ips_.try_emplace(pod_uid);
  if (!inserted && it->second == ips) return false;
  const bool changed = !(inserted && ips.empty());
  it->second = std::move(ips);
  return changed;
}

std::vector<std::string> PodIps::Get(const std::string& pod_uid) const {
  std::lock_guard lock(mu_);
  auto it = ips_.find(pod_uid);
  return it == ips_.end() ? std::vector<std::string>() : it->second;
}

void PodIps::Erase(const std::string& pod_uid) {
  std::lock_guard lock(mu_);
  ips_.erase(pod_uid);
}

Status ApplyKnownPodIps(CertificateSpec& spec, const std::string& pod_uid, const PodIps* pod_ips) {
  if (!UsesPodIps(spec)) return Status::Ok();
  const std::string key = PodIpsAttributeKey(spec);
  if (pod_ips == nullptr) {
    return Status::FailedPrecondition(
        key +
        ": ${POD_IP} and ${POD_IPS} need the driver to watch its pods in the Kubernetes API, "
        "and this driver has no cluster access (the local CA without --kubeconfig); use "
        "--issuer=cert-manager or list fixed addresses");
  }
  if (pod_uid.empty()) {
    return Status::FailedPrecondition(key +
                                      ": ${POD_IP} needs the pod's UID from kubelet (set "
                                      "podInfoOnMount: true on the CSIDriver)");
  }
  return ApplyPodIps(spec, pod_ips->Get(pod_uid));
}

}  // namespace certmount
