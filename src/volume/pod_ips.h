// The addresses of this node's pods, by pod UID, as the pod watch last saw
// them. In memory only: after a restart the watch's first list fills it
// again. Publishes and renewals read it to expand ${POD_IP} and ${POD_IPS}.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "issue/request.h"

namespace certmount {

class PodIps {
 public:
  // Records the pod's addresses (empty: none yet). Returns whether they
  // differ from what was recorded before.
  bool Set(const std::string& pod_uid, std::vector<std::string> ips);
  // The pod's addresses; empty when unknown or none yet.
  std::vector<std::string> Get(const std::string& pod_uid) const;
  // Forgets a pod that is gone.
  void Erase(const std::string& pod_uid);

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::vector<std::string>> ips_;
};

// For a spec that uses ${POD_IP} or ${POD_IPS} (UsesPodIps): adds what
// the addresses `pod_ips` knows for `pod_uid` make (none yet: the certificate goes out
// without them, and the pod watch has it issued again once they exist).
// FAILED_PRECONDITION when `pod_ips` is null (the driver has no cluster
// access to learn them) or the pod UID is unknown (no podInfoOnMount).
// Other specs are left as they are.
Status ApplyKnownPodIps(CertificateSpec& spec, const std::string& pod_uid, const PodIps* pod_ips);

}  // namespace certmount
