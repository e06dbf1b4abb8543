// certmountctl: talks CSI to certmountd over its socket exactly as kubelet
// does, for demos, debugging and replaying pod specs by hand; and reads the
// node's state.db read-only (status, history) without going through the
// driver, so it works while certmountd is down or stuck.
#include <grpcpp/grpcpp.h>
#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cmd/cli_parse.h"
#include "common/clock.h"
#include "common/env.h"
#include "csi.grpc.pb.h"
#include "state/state_reader.h"

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
      csi::v1::VolumeCapability::AccessMode::SINGLE_NODE_WRITER);
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
  int rc = Report("NodePublishVolume",
                  node->NodePublishVolume(Context(common).get(), request, &response));
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

struct PodFlags {
  std::string manifest;
  std::string driver_name = "csi.certmount.io";
  std::string target_root = "/var/lib/kubelet/pods";
  bool unpublish = false;
};

// A stable, path-safe id for an inline volume of a pod, shaped like
// kubelet's ("csi-" and hex); FNV-1a because only stability matters here.
std::string InlineVolumeId(const std::string& pod_uid, const std::string& volume_name) {
  uint64_t hash = 1469598103934665603ULL;
  for (char c : pod_uid + "/" + volume_name) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ULL;
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(hash));
  return std::string("csi-") + hex;
}

std::string Scalar(const YAML::Node& node, const std::string& fallback = "") {
  return node && node.IsScalar() ? node.as<std::string>() : fallback;
}

// Replays a Pod manifest as kubelet would: every inline CSI volume of
// `driver_name` is published (or unpublished) at the path kubelet would use.
int ReplayPod(const CommonFlags& common, const PodFlags& flags) {
  YAML::Node pod;
  try {
    pod = YAML::LoadFile(flags.manifest);
  } catch (const YAML::Exception& e) {
    std::cerr << "certmountctl: " << flags.manifest << ": " << e.what() << "\n";
    return kExitUsage;
  }
  if (Scalar(pod["kind"]) != "Pod") {
    std::cerr << "certmountctl: " << flags.manifest
              << " is not a Pod manifest (kind: " << Scalar(pod["kind"], "missing") << ")\n";
    return kExitUsage;
  }
  const std::string name = Scalar(pod["metadata"]["name"], "pod");
  const std::string namespace_ = Scalar(pod["metadata"]["namespace"], "default");
  const std::string uid =
      Scalar(pod["metadata"]["uid"], InlineVolumeId(namespace_, name).substr(4) + "-replayed");
  PublishFlags publish;
  publish.pod_name = name;
  publish.pod_namespace = namespace_;
  publish.pod_uid = uid;
  publish.service_account = Scalar(pod["spec"]["serviceAccountName"], "default");
  publish.volume_mount_group = Scalar(pod["spec"]["securityContext"]["fsGroup"]);
  int published = 0;
  for (const YAML::Node& volume : pod["spec"]["volumes"]) {
    const YAML::Node csi = volume["csi"];
    if (!csi || Scalar(csi["driver"]) != flags.driver_name) continue;
    const std::string volume_name = Scalar(volume["name"]);
    publish.volume_id = InlineVolumeId(uid, volume_name);
    const std::string parent =
        flags.target_root + "/" + uid + "/volumes/kubernetes.io~csi/" + volume_name;
    publish.target_path = parent + "/mount";
    int rc = 0;
    if (flags.unpublish) {
      rc = Unpublish(common, publish.volume_id, publish.target_path);
    } else {
      // kubelet makes the parent; a failure shows in the publish's answer.
      (void)certmount::Env::Default()->CreateDirectories(parent, 0755);
      publish.attributes.clear();
      for (const auto& attribute : csi["volumeAttributes"]) {
        publish.attributes.push_back(attribute.first.as<std::string>() + "=" +
                                     attribute.second.as<std::string>());
      }
      rc = Publish(common, publish);
    }
    if (rc != 0) return rc;
    ++published;
  }
  if (published == 0) {
    std::cerr << "certmountctl: " << flags.manifest << " has no inline csi volume of driver "
              << flags.driver_name << "\n";
    return kExitUsage;
  }
  return 0;
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

// --- Node state, read from <data-root>/state.db --------------------------------

struct StateFlags {
  std::string data_root = "/var/lib/certmount";  // certmountd's flag and default
  bool json = false;
};

// Widest a table cell may be; longer values end in "...". The volume id limit
// fits kubelet's inline ids ("csi-" and 64 hex digits) whole, since `history`
// needs them.
constexpr size_t kVolumeIdWidth = 68;
constexpr size_t kPodWidth = 40;
constexpr size_t kSerialWidth = 40;
constexpr size_t kErrorWidth = 60;
constexpr char kEllipsis[] = "...";

// Display width counted in code points, so UTF-8 in error messages lines up.
size_t DisplayWidth(const std::string& text) {
  return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

// One line, at most `width` code points, never cut inside a UTF-8 sequence.
std::string Cell(std::string text, size_t width) {
  std::replace_if(
      text.begin(), text.end(), [](char c) { return c == '\n' || c == '\r' || c == '\t'; }, ' ');
  if (DisplayWidth(text) <= width) return text;
  const size_t keep = width - (sizeof(kEllipsis) - 1);
  size_t points = 0;
  size_t end = 0;
  for (; end < text.size(); ++end) {
    if ((static_cast<unsigned char>(text[end]) & 0xC0) != 0x80 && points++ == keep) break;
  }
  return text.substr(0, end) + kEllipsis;
}

// Left-aligned columns two spaces apart, sized to their widest cell.
void PrintTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], DisplayWidth(row[i]));
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - DisplayWidth(row[i]) + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    std::cout << line << "\n";
  }
}

std::string FormatUtc(int64_t unix_seconds, const char* format) {
  const std::time_t time = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  if (gmtime_r(&time, &tm) == nullptr) return std::to_string(unix_seconds);
  char text[64];
  return std::strftime(text, sizeof(text), format, &tm) > 0 ? text : std::to_string(unix_seconds);
}

std::string Rfc3339(int64_t unix_seconds) { return FormatUtc(unix_seconds, "%Y-%m-%dT%H:%M:%SZ"); }

// The two largest units, as the volume_status view shows them: "3d 4h",
// "5h 20m", "4m 10s".
std::string FormatDuration(int64_t seconds) {
  if (seconds >= 86400) {
    return std::to_string(seconds / 86400) + "d " + std::to_string(seconds % 86400 / 3600) + "h";
  }
  if (seconds >= 3600) {
    return std::to_string(seconds / 3600) + "h " + std::to_string(seconds % 3600 / 60) + "m";
  }
  return std::to_string(seconds / 60) + "m " + std::to_string(seconds % 60) + "s";
}

// "2024-05-01 12:00Z (in 3d 4h)", or for a past time "... (expired 2h 3m ago)"
// with `past_prefix` "expired ".
std::string WhenCell(const std::optional<int64_t>& unix_seconds, int64_t now,
                     const std::string& past_prefix = "") {
  if (!unix_seconds.has_value()) return "-";
  const int64_t delta = *unix_seconds - now;
  const std::string relative =
      delta > 0 ? "in " + FormatDuration(delta) : past_prefix + FormatDuration(-delta) + " ago";
  return FormatUtc(*unix_seconds, "%Y-%m-%d %H:%MZ") + " (" + relative + ")";
}

void PutTime(nlohmann::ordered_json& object, const std::string& name,
             const std::optional<int64_t>& unix_seconds) {
  if (unix_seconds.has_value()) {
    object[name] = *unix_seconds;
    object[name + "_rfc3339"] = Rfc3339(*unix_seconds);
  } else {
    object[name] = nullptr;
    object[name + "_rfc3339"] = nullptr;
  }
}

// The store keeps SQL NULL as "" in these fields; JSON says null.
nlohmann::ordered_json NullIfEmpty(const std::string& text) {
  return text.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(text);
}

nlohmann::ordered_json VolumeJson(const certmount::VolumeRecord& volume) {
  nlohmann::ordered_json object;
  object["volume_id"] = volume.volume_id;
  object["pod"] = volume.pod_namespace + "/" + volume.pod_name;
  object["pod_namespace"] = volume.pod_namespace;
  object["pod_name"] = volume.pod_name;
  object["pod_uid"] = volume.pod_uid;
  object["service_account"] = volume.service_account;
  object["target_path"] = volume.target_path;
  object["issuer"] = volume.issuer;
  object["file_group"] = volume.file_group.has_value() ? nlohmann::ordered_json(*volume.file_group)
                                                       : nlohmann::ordered_json(nullptr);
  object["attributes"] = volume.attributes;
  object["mounted"] = volume.mounted;
  PutTime(object, "created_at", volume.created_at);
  PutTime(object, "mounted_at", volume.mounted_at);
  object["serial"] = NullIfEmpty(volume.serial);
  PutTime(object, "not_before", volume.not_before);
  PutTime(object, "not_after", volume.not_after);
  PutTime(object, "next_issuance_at", volume.next_issuance_at);
  object["renewal_attempts"] = volume.renewal_attempts;
  object["last_error"] = NullIfEmpty(volume.last_error);
  PutTime(object, "updated_at", volume.updated_at);
  return object;
}

nlohmann::ordered_json IssuanceJson(const certmount::IssuanceRecord& issuance) {
  nlohmann::ordered_json object;
  object["id"] = issuance.id;
  object["volume_id"] = issuance.volume_id;
  object["kind"] = issuance.kind == certmount::IssuanceKind::kPublish ? "publish" : "renewal";
  object["result"] = issuance.ok ? "ok" : "error";
  PutTime(object, "issued_at", issuance.issued_at);
  object["duration_ms"] = issuance.duration_ms;
  object["issuer"] = issuance.issuer;
  object["serial"] = NullIfEmpty(issuance.serial);
  PutTime(object, "not_before", issuance.not_before);
  PutTime(object, "not_after", issuance.not_after);
  object["error"] = NullIfEmpty(issuance.error);
  return object;
}

void PrintJson(const nlohmann::ordered_json& value) {
  // Stored text is not guaranteed UTF-8 (error messages); never throw on it.
  std::cout << value.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
}

int ReportState(const certmount::Status& status) {
  std::cerr << "certmountctl: " << status.message() << "\n";
  return kExitFailed;
}

certmount::Result<std::unique_ptr<certmount::StateReader>> OpenState(const StateFlags& flags) {
  return certmount::StateReader::Open(certmount::StateDbPath(flags.data_root));
}

int ShowStatus(const StateFlags& flags) {
  auto reader = OpenState(flags);
  if (!reader.ok()) return ReportState(reader.status());
  auto volumes = (*reader)->ListVolumes();
  if (!volumes.ok()) return ReportState(volumes.status());
  if (flags.json) {
    nlohmann::ordered_json array = nlohmann::ordered_json::array();
    for (const auto& volume : *volumes) array.push_back(VolumeJson(volume));
    PrintJson(array);
    return 0;
  }
  if (volumes->empty()) {
    std::cout << "no volumes in " << (*reader)->db_path() << "\n";
    return 0;
  }
  const int64_t now = certmount::SystemClock::Instance().NowUnix();
  std::vector<std::vector<std::string>> rows = {
      {"VOLUME", "POD", "MOUNTED", "EXPIRES", "RENEWS AT", "ATTEMPTS", "LAST ERROR"}};
  for (const auto& volume : *volumes) {
    rows.push_back({Cell(volume.volume_id, kVolumeIdWidth),
                    Cell(volume.pod_namespace + "/" + volume.pod_name, kPodWidth),
                    volume.mounted ? "yes" : "no", WhenCell(volume.not_after, now, "expired "),
                    WhenCell(volume.next_issuance_at, now, "due "),
                    std::to_string(volume.renewal_attempts),
                    volume.last_error.empty() ? "-" : Cell(volume.last_error, kErrorWidth)});
  }
  PrintTable(rows);
  return 0;
}

std::string FormatMillis(int64_t millis) {
  if (millis < 1000) return std::to_string(millis) + "ms";
  char text[32];
  std::snprintf(text, sizeof(text), "%.1fs", static_cast<double>(millis) / 1000.0);
  return text;
}

int ShowHistory(const StateFlags& flags, const std::string& volume_id) {
  auto reader = OpenState(flags);
  if (!reader.ok()) return ReportState(reader.status());
  auto issuances = (*reader)->ListIssuances(volume_id);
  if (!issuances.ok()) return ReportState(issuances.status());
  if (flags.json) {
    nlohmann::ordered_json array = nlohmann::ordered_json::array();
    for (const auto& issuance : *issuances) array.push_back(IssuanceJson(issuance));
    PrintJson(array);
    return 0;
  }
  if (issuances->empty()) {
    std::cout << "no issuances recorded for volume " << volume_id << "\n";
    return 0;
  }
  const int64_t now = certmount::SystemClock::Instance().NowUnix();
  std::vector<std::vector<std::string>> rows = {
      {"ISSUED AT", "KIND", "RESULT", "TOOK", "SERIAL", "NOT AFTER", "ERROR"}};
  for (const auto& issuance : *issuances) {
    rows.push_back(
        {WhenCell(issuance.issued_at, now),
         issuance.kind == certmount::IssuanceKind::kPublish ? "publish" : "renewal",
         issuance.ok ? "ok" : "error", FormatMillis(issuance.duration_ms),
         issuance.serial.empty() ? "-" : Cell(issuance.serial, kSerialWidth),
         issuance.not_after.has_value() ? FormatUtc(*issuance.not_after, "%Y-%m-%d %H:%MZ") : "-",
         issuance.error.empty() ? "-" : Cell(issuance.error, kErrorWidth)});
  }
  PrintTable(rows);
  return 0;
}

}  // namespace

// Over 60 lines on purpose: one flat list of CLI11 declarations, so the whole
// command line reads in one place; the work is in the functions above.
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

  PodFlags pod;
  CLI::App* pod_cmd = app.add_subcommand(
      "pod", "replay a Pod manifest: publish its inline volumes of this driver as kubelet would");
  pod_cmd->add_option("manifest", pod.manifest, "Pod YAML file")->required();
  pod_cmd->add_option("--driver-name", pod.driver_name)->capture_default_str();
  pod_cmd->add_option("--target-root", pod.target_root, "kubelet's pods directory")
      ->capture_default_str();
  pod_cmd->add_flag("--unpublish", pod.unpublish, "unpublish the pod's volumes instead");

  StateFlags state;
  CLI::App* status_cmd =
      app.add_subcommand("status", "the node's volumes, read from <data-root>/state.db");
  std::string history_volume;
  CLI::App* history_cmd = app.add_subcommand(
      "history", "a volume's issuance attempts, newest first, read from <data-root>/state.db");
  history_cmd->add_option("volume_id", history_volume, "volume id (see status)")->required();
  for (CLI::App* command : {status_cmd, history_cmd}) {
    command->add_option("--data-root", state.data_root, "certmountd's --data-root")
        ->capture_default_str();
    command->add_flag("--json", state.json, "print a JSON array instead of a table");
  }

  if (std::optional<int> exit_code = certmount::ParseOrExit(app, "certmountctl", argc, argv)) {
    return *exit_code;
  }
  if (publish_cmd->parsed()) return Publish(common, publish);
  if (unpublish_cmd->parsed()) return Unpublish(common, unpublish_volume, unpublish_target);
  if (info_cmd->parsed()) return Info(common);
  if (pod_cmd->parsed()) return ReplayPod(common, pod);
  if (status_cmd->parsed()) return ShowStatus(state);
  if (history_cmd->parsed()) return ShowHistory(state, history_volume);
  return kExitUsage;
}
