#include "kube/pod.h"

#include <ctime>
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

namespace certmount::kube {
namespace {

// RFC 3339 in UTC, as Kubernetes writes metav1.Time.
std::string Rfc3339(int64_t unix_seconds) {
  std::time_t time = static_cast<std::time_t>(unix_seconds);
  std::tm utc{};
  gmtime_r(&time, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace

Result<PodAddresses> ParsePodAddresses(std::string_view pod_json) {
  nlohmann::json object = nlohmann::json::parse(pod_json, nullptr, false);
  if (!object.is_object() || !object.contains("metadata") || !object["metadata"].is_object()) {
    return Status::InvalidArgument("not a Pod object");
  }
  const nlohmann::json& metadata = object["metadata"];
  PodAddresses pod;
  pod.pod.uid = metadata.value("uid", "");
  pod.pod.namespace_ = metadata.value("namespace", "");
  pod.pod.name = metadata.value("name", "");
  if (pod.pod.uid.empty()) return Status::InvalidArgument("a Pod without metadata.uid");
  auto status = object.find("status");
  if (status == object.end() || !status->is_object()) return pod;
  if (auto ips = status->find("podIPs"); ips != status->end() && ips->is_array()) {
    for (const nlohmann::json& entry : *ips) {
      if (entry.is_object() && entry.contains("ip") && entry["ip"].is_string()) {
        pod.ips.push_back(entry["ip"].get<std::string>());
      }
    }
  }
  if (pod.ips.empty()) {
    if (auto ip = status->find("podIP");
        ip != status->end() && ip->is_string() && !ip->get<std::string>().empty()) {
      pod.ips.push_back(ip->get<std::string>());
    }
  }
  return pod;
}

Status SetPodConditionTrue(Client* client, const PodRef& pod, std::string_view type,
                           std::string_view reason, std::string_view message,
                           std::chrono::steady_clock::time_point deadline, std::stop_token stop) {
  if (pod.namespace_.empty() || pod.name.empty() || pod.uid.empty()) {
    return Status::InvalidArgument(
        "the pod's namespace, name or uid is unknown (is podInfoOnMount set on the CSIDriver?)");
  }
  nlohmann::json condition = {{"type", type},
                              {"status", "True"},
                              {"reason", reason},
                              {"message", message},
                              {"lastTransitionTime", Rfc3339(client->clock().NowUnix())}};
  nlohmann::json patch = {{"metadata", {{"uid", pod.uid}}},
                          {"status", {{"conditions", nlohmann::json::array({condition})}}}};
  const std::string path = "/api/v1/namespaces/" + QueryEscape(pod.namespace_) + "/pods/" +
                           QueryEscape(pod.name) + "/status";
  Result<Response> patched = client->Call({"PATCH", path, patch.dump(), ""}, deadline, stop);
  if (!patched.ok()) {
    return patched.status().WithContext("setting condition " + std::string(type) + " of pod " +
                                        pod.namespace_ + "/" + pod.name);
  }
  return Status::Ok();
}

}  // namespace certmount::kube
