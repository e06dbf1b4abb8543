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

Status CheckPodRef(const PodRef& pod) {
  if (pod.namespace_.empty() || pod.name.empty() || pod.uid.empty()) {
    return Status::InvalidArgument(
        "the pod's namespace, name or uid is unknown (is podInfoOnMount set on the CSIDriver?)");
  }
  return Status::Ok();
}

PodLiveness LivenessOf(const PodState& state) {
  if (state.terminating) return PodLiveness::kTerminating;
  if (state.phase == "Succeeded" || state.phase == "Failed") return PodLiveness::kFinished;
  return PodLiveness::kRunning;
}

Result<PodLiveness> ReadPodLiveness(Client* client, const PodRef& pod,
                                    std::chrono::steady_clock::time_point deadline,
                                    std::stop_token stop, ApiBudget* budget) {
  CERTMOUNT_RETURN_IF_ERROR(CheckPodRef(pod));
  const std::string what = "reading pod " + pod.namespace_ + "/" + pod.name;
  Result<Response> read = client->Call(
      {"GET",
       "/api/v1/namespaces/" + QueryEscape(pod.namespace_) + "/pods/" + QueryEscape(pod.name), "",
       ""},
      deadline, stop, budget);
  if (read.status().code() == Code::kNotFound) return PodLiveness::kGone;
  if (!read.ok()) return read.status().WithContext(what);
  Result<PodState> state = ParsePodState(read->body);
  if (!state.ok()) return Status::Internal(what + ": the answer is not a Pod");
  if (state->addresses.pod.uid != pod.uid) return PodLiveness::kGone;
  return LivenessOf(*state);
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

// `object`'s string `field`; "" when it is absent or not a string (json's
// value() would throw on another type, and watch events are input, not
// trusted).
std::string StringField(const nlohmann::json& object, const char* field) {
  auto found = object.find(field);
  if (found == object.end() || !found->is_string()) return "";
  return found->get<std::string>();
}

}  // namespace

Result<PodState> ParsePodState(std::string_view pod_json) {
  nlohmann::json object = nlohmann::json::parse(pod_json, nullptr, false);
  if (!object.is_object() || !object.contains("metadata") || !object["metadata"].is_object()) {
    return Status::InvalidArgument("not a Pod object");
  }
  const nlohmann::json& metadata = object["metadata"];
  PodState state;
  PodAddresses& pod = state.addresses;
  pod.pod.uid = StringField(metadata, "uid");
  pod.pod.namespace_ = StringField(metadata, "namespace");
  pod.pod.name = StringField(metadata, "name");
  if (pod.pod.uid.empty()) return Status::InvalidArgument("a Pod without metadata.uid");
  auto deletion = metadata.find("deletionTimestamp");
  state.terminating = deletion != metadata.end() && !deletion->is_null();
  auto status = object.find("status");
  if (status == object.end() || !status->is_object()) return state;
  state.phase = StringField(*status, "phase");
  if (auto ips = status->find("podIPs"); ips != status->end() && ips->is_array()) {
    for (const nlohmann::json& entry : *ips) {
      if (entry.is_object() && entry.contains("ip") && entry["ip"].is_string()) {
        pod.ips.push_back(entry["ip"].get<std::string>());
      }
    }
  }
  if (pod.ips.empty()) {
    if (std::string ip = StringField(*status, "podIP"); !ip.empty()) pod.ips.push_back(ip);
  }
  return state;
}

Result<PodAddresses> ParsePodAddresses(std::string_view pod_json) {
  CERTMOUNT_ASSIGN_OR_RETURN(PodState state, ParsePodState(pod_json));
  return std::move(state.addresses);
}

Status SetPodConditionTrue(Client* client, const PodRef& pod, std::string_view type,
                           std::string_view reason, std::string_view message,
                           std::chrono::steady_clock::time_point deadline, std::stop_token stop) {
  CERTMOUNT_RETURN_IF_ERROR(CheckPodRef(pod));
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
