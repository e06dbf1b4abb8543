#include "kube/pod.h"

#include <nlohmann/json.hpp>

namespace certmount::kube {

const char* PodLivenessName(PodLiveness liveness) {
  switch (liveness) {
    case PodLiveness::kRunning:
      return "running";
    case PodLiveness::kTerminating:
      return "terminating";
    case PodLiveness::kFinished:
      return "finished";
    case PodLiveness::kGone:
      return "gone";
  }
  return "unknown";
}

Result<PodLiveness> ReadPodLiveness(Client* client, const PodRef& pod,
                                    std::chrono::steady_clock::time_point deadline,
                                    std::stop_token stop) {
  if (pod.namespace_.empty() || pod.name.empty() || pod.uid.empty()) {
    return Status::InvalidArgument(
        "the pod's namespace, name or uid is unknown (is podInfoOnMount set on the CSIDriver?)");
  }
  const std::string what = "reading pod " + pod.namespace_ + "/" + pod.name;
  Result<Response> read = client->Call(
      {"GET",
       "/api/v1/namespaces/" + QueryEscape(pod.namespace_) + "/pods/" + QueryEscape(pod.name), "",
       ""},
      deadline, stop);
  if (read.status().code() == Code::kNotFound) return PodLiveness::kGone;
  if (!read.ok()) return read.status().WithContext(what);
  nlohmann::json object = nlohmann::json::parse(read->body, nullptr, false);
  if (!object.is_object() || !object.contains("metadata") || !object["metadata"].is_object()) {
    return Status::Internal(what + ": the answer is not a Pod");
  }
  const nlohmann::json& metadata = object["metadata"];
  if (metadata.value("uid", "") != pod.uid) return PodLiveness::kGone;
  if (metadata.contains("deletionTimestamp") && !metadata["deletionTimestamp"].is_null()) {
    return PodLiveness::kTerminating;
  }
  std::string phase;
  if (auto status = object.find("status"); status != object.end() && status->is_object()) {
    phase = status->value("phase", "");
  }
  if (phase == "Succeeded" || phase == "Failed") return PodLiveness::kFinished;
  return PodLiveness::kRunning;
}

}  // namespace certmount::kube
