#include "support/fake_kube_api.h"

#include <httplib.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "issue/csr.h"
#include "issue/go_duration.h"
#include "issue/private_key.h"
#include "kube/base64.h"

namespace certmount::testing {
namespace {

using nlohmann::json;

constexpr const char* kCollection = "/apis/cert-manager.io/v1/certificaterequests";

json StatusBody(int code, const std::string& reason, const std::string& message) {
  return {{"kind", "Status"},   {"apiVersion", "v1"}, {"status", "Failure"},
          {"message", message}, {"reason", reason},   {"code", code}};
}

void Reply(httplib::Response& response, int code, const json& body) {
  response.status = code;
  response.set_content(body.dump(), "application/json");
}

void ReplyList(httplib::Response& response, const char* api_version, const char* kind, json items,
               int64_t resource_version) {
  Reply(response, 200,
        {{"apiVersion", api_version},
         {"kind", kind},
         {"metadata", {{"resourceVersion", std::to_string(resource_version)}}},
         {"items", std::move(items)}});
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

std::string Param(const httplib::Request& request, const char* name) {
  return request.has_param(name) ? request.get_param_value(name) : "";
}

bool MatchesSelector(const json& object, const std::string& selector) {
  if (selector.empty()) return true;
  std::stringstream terms(selector);
  std::string term;
  while (std::getline(terms, term, ',')) {
    size_t equals = term.find('=');
    if (equals == std::string::npos) return false;
    std::string key = term.substr(0, equals);
    std::string value = term.substr(equals + 1);
    const json& labels = object["metadata"].value("labels", json::object());
    if (!labels.contains(key) || labels[key] != value) return false;
  }
  return true;
}

// The one field selector the pods collection is asked for here; the real
// server refuses fields it does not index for pods with 400.
std::optional<std::string> NodeOfFieldSelector(const std::string& selector) {
  constexpr std::string_view kNodeName = "spec.nodeName=";
  if (selector.empty()) return std::string();
  if (selector.rfind(kNodeName, 0) != 0) return std::nullopt;
  return selector.substr(kNodeName.size());
}

bool OnNode(const json& pod, const std::string& node) {
  if (node.empty()) return true;
  auto spec = pod.find("spec");
  return spec != pod.end() && spec->is_object() && spec->value("nodeName", "") == node;
}

json Condition(const std::string& type, const std::string& status, const std::string& reason,
               const std::string& message) {
  return {{"type", type}, {"status", status}, {"reason", reason}, {"message", message}};
}

}  // namespace

FakeKubeApi::FakeKubeApi() : tokens_{{kToken, kDriverUsername}} {
  const Clock& clock = SystemClock::Instance();
  Result<CaMaterial> server_ca =
      GenerateSelfSignedCa("fake kube-apiserver CA", std::chrono::hours(24), clock);
  Result<CaMaterial> signer_ca =
      GenerateSelfSignedCa("fake cert-manager CA", std::chrono::hours(24), clock);
  if (!server_ca.ok() || !signer_ca.ok()) throw std::runtime_error("cannot make the fake CAs");
  server_ca_pem_ = server_ca->certificate_pem;
  Result<std::unique_ptr<LocalCa>> server_signer =
      LocalCa::FromPem(server_ca->certificate_pem, server_ca->private_key_pem, clock);
  Result<std::unique_ptr<LocalCa>> signer =
      LocalCa::FromPem(signer_ca->certificate_pem, signer_ca->private_key_pem, clock);
  if (!server_signer.ok() || !signer.ok()) throw std::runtime_error("cannot load the fake CAs");
  signer_ = std::move(*signer);

  Result<PrivateKey> key = PrivateKey::Generate(KeyAlgorithm::kEcdsa, 256);
  if (!key.ok()) throw std::runtime_error("cannot make the server key");
  CertificateSpec spec;
  spec.subject.common_name = "127.0.0.1";
  spec.ip_addresses = {"127.0.0.1"};
  spec.dns_names = {"localhost"};
  spec.duration = std::chrono::hours(24);
  spec.usages = {"digital signature", "key encipherment", "server auth"};
  Result<std::string> csr = BuildCsrPem(*key, spec);
  if (!csr.ok()) throw std::runtime_error("cannot make the server CSR: " + csr.status().ToString());
  IssueInput input;
  input.csr_pem = *csr;
  input.spec = &spec;
  Result<IssuedCertificate> issued =
      (*server_signer)
          ->Issue(input, std::chrono::steady_clock::now() + std::chrono::seconds(30), {});
  Result<std::string> key_pem = key->ToPem(KeyEncoding::kPkcs8);
  if (!issued.ok() || !key_pem.ok()) throw std::runtime_error("cannot sign the server cert");
  WriteFile(dir_.Sub("server.crt"), issued->certificate_chain_pem);
  WriteFile(dir_.Sub("server.key"), *key_pem);

  server_ = std::make_unique<httplib::SSLServer>(dir_.Sub("server.crt").c_str(),
                                                 dir_.Sub("server.key").c_str());
  server_->set_keep_alive_timeout(1);
  // Open watches each hold a worker.
  server_->new_task_queue = [] { return new httplib::ThreadPool(16); };
  const std::string ns = "/apis/cert-manager.io/v1/namespaces/([^/]+)/certificaterequests";
  server_->Post(ns, [this](const httplib::Request& request, httplib::Response& response) {
    if (Admit(request, response, false)) Create(request.matches[1], request, response);
  });
  server_->Get(ns, [this](const httplib::Request& request, httplib::Response& response) {
    const bool watch = Param(request, "watch") == "1" || Param(request, "watch") == "true";
    if (!Admit(request, response, watch)) return;
    if (watch) {
      Watch(request.matches[1], request, response);
    } else {
      List(request.matches[1], request, response);
    }
  });
  server_->Get(kCollection, [this](const httplib::Request& request, httplib::Response& response) {
    const bool watch = Param(request, "watch") == "1" || Param(request, "watch") == "true";
    if (!Admit(request, response, watch)) return;
    if (watch) {
      Watch("", request, response);
    } else {
      List("", request, response);
    }
  });
  server_->Get(
      ns + "/([^/]+)", [this](const httplib::Request& request, httplib::Response& response) {
        if (!Admit(request, response, false)) return;
        std::lock_guard lock(mutex_);
        auto it =
            objects_.find(std::string(request.matches[1]) + "/" + std::string(request.matches[2]));
        if (it == objects_.end()) {
          Reply(response, 404,
                StatusBody(404, "NotFound",
                           "certificaterequests.cert-manager.io \"" +
                               std::string(request.matches[2]) + "\" not found"));
          return;
        }
        Reply(response, 200, it->second);
      });
  server_->Delete(
      ns + "/([^/]+)", [this](const httplib::Request& request, httplib::Response& response) {
        if (!Admit(request, response, false)) return;
        std::lock_guard lock(mutex_);
        auto it =
            objects_.find(std::string(request.matches[1]) + "/" + std::string(request.matches[2]));
        if (it == objects_.end()) {
          Reply(response, 404,
                StatusBody(404, "NotFound",
                           "certificaterequests.cert-manager.io \"" +
                               std::string(request.matches[2]) + "\" not found"));
          return;
        }
        json object = it->second;
        objects_.erase(it);
        object["metadata"]["resourceVersion"] = std::to_string(++resource_version_);
        events_.push_back({resource_version_, "DELETED", object});
        changed_.notify_all();
        Reply(response, 200, object);
      });

  server_->Get("/api/v1/namespaces/([^/]+)/pods/([^/]+)", [this](const httplib::Request& request,
                                                                 httplib::Response& response) {
    if (!Admit(request, response, false)) return;
    std::lock_guard lock(mutex_);
    auto it = pods_.find(std::string(request.matches[1]) + "/" + std::string(request.matches[2]));
    if (it == pods_.end()) {
      Reply(response, 404,
            StatusBody(404, "NotFound",
                       "pods \"" + std::string(request.matches[2]) + "\" not found"));
      return;
    }
    Reply(response, 200, it->second);
  });

  server_->Get(
      "/api/v1/pods", [this](const httplib::Request& request, httplib::Response& response) {
        const bool watch = Param(request, "watch") == "1" || Param(request, "watch") == "true";
        if (!Admit(request, response, watch)) return;
        if (!NodeOfFieldSelector(Param(request, "fieldSelector"))) {
          Reply(response, 400,
                StatusBody(400, "BadRequest",
                           "field label not supported: " + Param(request, "fieldSelector")));
          return;
        }
        if (watch) {
          Watch("", request, response, "pods");
        } else {
          ListPods(request, response);
        }
      });
  server_->Patch("/api/v1/namespaces/([^/]+)/pods/([^/]+)/status",
                 [this](const httplib::Request& request, httplib::Response& response) {
                   if (!Admit(request, response, false)) return;
                   PatchPodStatus(
                       std::string(request.matches[1]) + "/" + std::string(request.matches[2]),
                       request, response);
                 });

  port_ = server_->bind_to_any_port("127.0.0.1");
  if (port_ <= 0) throw std::runtime_error("cannot bind the fake API server");
  server_thread_ = std::thread([this] { server_->listen_after_bind(); });
  while (!server_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

FakeKubeApi::~FakeKubeApi() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    changed_.notify_all();
  }
  server_->stop();
  if (server_thread_.joinable()) server_thread_.join();
  if (delayed_signer_.joinable()) delayed_signer_.join();
}

std::string FakeKubeApi::url() const { return "https://127.0.0.1:" + std::to_string(port_); }

std::string FakeKubeApi::signer_ca_pem() const { return signer_->certificate_pem(); }

void FakeKubeApi::AcceptToken(const std::string& token, const std::string& username) {
  std::lock_guard lock(mutex_);
  tokens_[token] = username;
}

void FakeKubeApi::RevokeToken(const std::string& token) {
  std::lock_guard lock(mutex_);
  tokens_.erase(token);
}

void FakeKubeApi::PutPod(const std::string& namespace_, const std::string& name,
                         const std::string& uid, const std::string& node) {
  std::lock_guard lock(mutex_);
  const std::string key = namespace_ + "/" + name;
  const bool replaced = pods_.count(key) != 0;
  if (replaced) {
    json old = pods_[key];
    old["metadata"]["resourceVersion"] = std::to_string(++resource_version_);
    events_.push_back({resource_version_, "DELETED", old, "pods"});
  }
  pods_[key] = {{"apiVersion", "v1"},
                {"kind", "Pod"},
                {"metadata", {{"name", name}, {"namespace", namespace_}, {"uid", uid}}},
                {"spec", {{"nodeName", node}}},
                {"status", {{"phase", "Running"}}}};
  PodChangedLocked(key, "ADDED");
}

void FakeKubeApi::SetPodIps(const std::string& namespace_, const std::string& name,
                            const std::vector<std::string>& ips) {
  std::lock_guard lock(mutex_);
  const std::string key = namespace_ + "/" + name;
  auto it = pods_.find(key);
  if (it == pods_.end()) return;
  json pod_ips = json::array();
  for (const std::string& ip : ips) pod_ips.push_back({{"ip", ip}});
  it->second["status"]["podIP"] = ips.empty() ? "" : ips.front();
  it->second["status"]["podIPs"] = pod_ips;
  PodChangedLocked(key, "MODIFIED");
}

std::optional<json> FakeKubeApi::Pod(const std::string& namespace_, const std::string& name) const {
  std::lock_guard lock(mutex_);
  auto it = pods_.find(namespace_ + "/" + name);
  if (it == pods_.end()) return std::nullopt;
  return it->second;
}

void FakeKubeApi::PodChangedLocked(const std::string& key, const std::string& type) {
  json& pod = pods_[key];
  pod["metadata"]["resourceVersion"] = std::to_string(++resource_version_);
  events_.push_back({resource_version_, type, pod, "pods"});
  changed_.notify_all();
}

void FakeKubeApi::ListPods(const httplib::Request& request, httplib::Response& response) {
  const std::string node = NodeOfFieldSelector(Param(request, "fieldSelector")).value_or("");
  std::lock_guard lock(mutex_);
  json items = json::array();
  for (const auto& [key, pod] : pods_) {
    if (OnNode(pod, node)) items.push_back(pod);
  }
  ReplyList(response, "v1", "PodList", std::move(items), resource_version_);
}

void FakeKubeApi::PatchPodStatus(const std::string& key, const httplib::Request& request,
                                 httplib::Response& response) {
  const std::string type = request.get_header_value("Content-Type");
  const bool strategic = type == "application/strategic-merge-patch+json";
  if (!strategic && type != "application/merge-patch+json") {
    Reply(response, 415,
          StatusBody(415, "UnsupportedMediaType",
                     "the body of the request was in an unknown format - accepted media types "
                     "include: application/json-patch+json, application/merge-patch+json, "
                     "application/apply-patch+yaml, application/strategic-merge-patch+json"));
    return;
  }
  json patch = json::parse(request.body, nullptr, false);
  std::lock_guard lock(mutex_);
  auto it = pods_.find(key);
  if (it == pods_.end()) {
    Reply(response, 404, StatusBody(404, "NotFound", "pods \"" + key + "\" not found"));
    return;
  }
  if (!patch.is_object()) {
    Reply(response, 400, StatusBody(400, "BadRequest", "the patch is not a JSON object"));
    return;
  }
  json& pod = it->second;
  const std::string uid = pod["metadata"].value("uid", "");
  if (patch.contains("metadata") && patch["metadata"].contains("uid") &&
      patch["metadata"]["uid"] != uid) {
    Reply(response, 409,
          StatusBody(409, "Conflict",
                     "Precondition failed: UID in precondition: " +
                         patch["metadata"]["uid"].dump() + ", UID in object meta: " + uid));
    return;
  }
  // pods/status takes only the status; a strategic merge keys conditions by type.
  json status = patch.value("status", json::object());
  if (strategic && status.contains("conditions") && status["conditions"].is_array()) {
    json merged = pod["status"].value("conditions", json::array());
    for (const json& condition : status["conditions"]) {
      auto same = std::find_if(merged.begin(), merged.end(), [&](const json& existing) {
        return existing.value("type", "") == condition.value("type", "");
      });
      if (same != merged.end()) {
        same->merge_patch(condition);
      } else {
        merged.push_back(condition);
      }
    }
    status["conditions"] = merged;
  }
  pod["status"].merge_patch(status);
  PodChangedLocked(key, "MODIFIED");
  Reply(response, 200, pod);
}

void FakeKubeApi::TerminatePod(const std::string& namespace_, const std::string& name) {
  std::lock_guard lock(mutex_);
  auto it = pods_.find(namespace_ + "/" + name);
  if (it == pods_.end()) return;
  it->second["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:30Z";
  it->second["metadata"]["deletionGracePeriodSeconds"] = 30;
  PodChangedLocked(it->first, "MODIFIED");
}

void FakeKubeApi::SetPodPhase(const std::string& namespace_, const std::string& name,
                              const std::string& phase) {
  std::lock_guard lock(mutex_);
  auto it = pods_.find(namespace_ + "/" + name);
  if (it == pods_.end()) return;
  it->second["status"]["phase"] = phase;
  PodChangedLocked(it->first, "MODIFIED");
}

void FakeKubeApi::DeletePod(const std::string& namespace_, const std::string& name) {
  std::lock_guard lock(mutex_);
  auto it = pods_.find(namespace_ + "/" + name);
  if (it == pods_.end()) return;
  json pod = it->second;
  pods_.erase(it);
  pod["metadata"]["resourceVersion"] = std::to_string(++resource_version_);
  events_.push_back({resource_version_, "DELETED", pod, "pods"});
  changed_.notify_all();
}

void FakeKubeApi::BindToken(const std::string& token, const std::string& namespace_,
                            const std::string& name, const std::string& service_account) {
  std::lock_guard lock(mutex_);
  bound_tokens_[token] = {namespace_ + "/" + name,
                          "system:serviceaccount:" + namespace_ + ":" + service_account};
}

std::optional<std::string> FakeKubeApi::UsernameLocked(const std::string& authorization) const {
  for (const auto& [token, username] : tokens_) {
    if (authorization == "Bearer " + token) return username;
  }
  for (const auto& [token, bound] : bound_tokens_) {
    if (authorization == "Bearer " + token && pods_.count(bound.pod) != 0) return bound.username;
  }
  return std::nullopt;
}

int FakeKubeApi::creates_for_gone_pods() const {
  std::lock_guard lock(mutex_);
  return creates_for_gone_pods_;
}

int FakeKubeApi::RequestsOwnedBy(const std::string& uid) const {
  std::lock_guard lock(mutex_);
  int count = 0;
  for (const auto& [key, object] : objects_) {
    for (const json& owner : object["metadata"].value("ownerReferences", json::array())) {
      if (owner.value("uid", "") == uid) ++count;
    }
  }
  return count;
}

void FakeKubeApi::BeforeNext(const std::string& method, std::function<void()> action) {
  std::lock_guard lock(mutex_);
  before_next_.emplace_back(method, std::move(action));
}

void FakeKubeApi::SetPolicy(SignerPolicy policy, std::string message) {
  std::lock_guard lock(mutex_);
  policy_ = policy;
  policy_message_ = std::move(message);
}

void FakeKubeApi::SetApprover(
    std::function<std::optional<std::string>(const nlohmann::json& request)> approver) {
  std::lock_guard lock(mutex_);
  approver_ = std::move(approver);
}

void FakeKubeApi::SetOmitCa(bool omit) {
  std::lock_guard lock(mutex_);
  omit_ca_ = omit;
}

void FakeKubeApi::SetSignDelay(std::chrono::milliseconds delay) {
  std::lock_guard lock(mutex_);
  sign_delay_ = delay;
  if (delay.count() > 0 && !delayed_signer_.joinable()) {
    delayed_signer_ = std::thread([this] { SignDelayedLoop(); });
  }
}

void FakeKubeApi::SignDelayedLoop() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    const auto now = std::chrono::steady_clock::now();
    while (!delayed_.empty() && delayed_.front().due <= now) {
      DelayedOutcome outcome = std::move(delayed_.front());
      delayed_.erase(delayed_.begin());
      // The client may have deleted it meanwhile.
      if (objects_.count(outcome.key) != 0) {
        ApplyPolicyLocked(outcome.key, outcome.policy, outcome.message);
      }
    }
    if (delayed_.empty()) {
      changed_.wait(lock);
    } else {
      // A copy: wait_until reads the time again after waking, when a create
      // may have moved the vector's elements.
      const auto due = delayed_.front().due;
      changed_.wait_until(lock, due);
    }
  }
}

void FakeKubeApi::SetGoneAsEvent(bool as_event) {
  std::lock_guard lock(mutex_);
  gone_as_event_ = as_event;
}

bool FakeKubeApi::Resolve(const std::string& namespace_, const std::string& name,
                          SignerPolicy policy, std::string message) {
  std::lock_guard lock(mutex_);
  const std::string key = namespace_ + "/" + name;
  if (objects_.count(key) == 0) return false;
  ApplyPolicyLocked(key, policy, message);
  return true;
}

void FakeKubeApi::FailNext(const std::string& method, int count, int http_status,
                           int retry_after_seconds) {
  std::lock_guard lock(mutex_);
  failures_.push_back({method, count, http_status, retry_after_seconds});
}

void FakeKubeApi::DropWatches() {
  std::lock_guard lock(mutex_);
  ++drop_generation_;
  changed_.notify_all();
}

void FakeKubeApi::Compact() {
  std::lock_guard lock(mutex_);
  compacted_before_ = ++resource_version_;
  events_.clear();
}

void FakeKubeApi::DeleteUnseen(const std::string& namespace_, const std::string& name) {
  std::lock_guard lock(mutex_);
  objects_.erase(namespace_ + "/" + name);
  compacted_before_ = ++resource_version_;
  events_.clear();
  changed_.notify_all();
}

std::vector<RecordedRequest> FakeKubeApi::Requests() const {
  std::lock_guard lock(mutex_);
  return requests_;
}

std::vector<nlohmann::json> FakeKubeApi::PostedBodies() const {
  std::vector<nlohmann::json> bodies;
  for (const RecordedRequest& request : Requests()) {
    if (request.method == "POST") bodies.push_back(nlohmann::json::parse(request.body));
  }
  return bodies;
}

int FakeKubeApi::Count(const std::string& method, const std::string& path_prefix,
                       bool watch) const {
  std::lock_guard lock(mutex_);
  return static_cast<int>(std::count_if(requests_.begin(), requests_.end(), [&](const auto& r) {
    return (method.empty() || r.method == method) && r.path.rfind(path_prefix, 0) == 0 &&
           (r.params.count("watch") > 0) == watch;
  }));
}

std::optional<json> FakeKubeApi::Object(const std::string& namespace_,
                                        const std::string& name) const {
  std::lock_guard lock(mutex_);
  auto it = objects_.find(namespace_ + "/" + name);
  if (it == objects_.end()) return std::nullopt;
  return it->second;
}

size_t FakeKubeApi::ObjectCount() const {
  std::lock_guard lock(mutex_);
  return objects_.size();
}

void FakeKubeApi::Put(const json& object) {
  std::lock_guard lock(mutex_);
  StoreLocked(object, "ADDED");
}

int FakeKubeApi::open_watches() const {
  std::lock_guard lock(mutex_);
  return open_watches_;
}

bool FakeKubeApi::WaitUntil(const std::function<bool()>& predicate,
                            std::chrono::milliseconds timeout) {
  auto until = std::chrono::steady_clock::now() + timeout;
  while (!predicate()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    // Woken by the server's own changes; the short slice covers predicates
    // on client-side state, which does not notify.
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, std::chrono::milliseconds(20));
  }
  return true;
}

bool FakeKubeApi::Admit(const httplib::Request& request, httplib::Response& response, bool watch) {
  std::function<void()> action;
  {
    std::lock_guard lock(mutex_);
    auto it = std::find_if(before_next_.begin(), before_next_.end(),
                           [&](const auto& entry) { return entry.first == request.method; });
    if (it != before_next_.end() && !watch) {
      action = std::move(it->second);
      before_next_.erase(it);
    }
  }
  if (action) action();
  std::lock_guard lock(mutex_);
  RecordedRequest record{
      request.method, request.path, {}, request.body, request.get_header_value("Authorization")};
  for (const auto& [name, value] : request.params) record.params[name] = value;
  requests_.push_back(std::move(record));
  changed_.notify_all();
  const std::string authorization = request.get_header_value("Authorization");
  if (!UsernameLocked(authorization)) {
    Reply(response, 401, StatusBody(401, "Unauthorized", "Unauthorized"));
    return false;
  }
  if (watch) return true;
  for (auto it = failures_.begin(); it != failures_.end(); ++it) {
    if (!it->method.empty() && it->method != request.method) continue;
    if (it->retry_after >= 0) response.set_header("Retry-After", std::to_string(it->retry_after));
    Reply(response, it->http_status,
          StatusBody(it->http_status, it->http_status == 429 ? "TooManyRequests" : "InternalError",
                     "injected failure " + std::to_string(it->http_status)));
    if (--it->count <= 0) failures_.erase(it);
    return false;
  }
  return true;
}

void FakeKubeApi::StoreLocked(json object, const std::string& type) {
  object["metadata"]["resourceVersion"] = std::to_string(++resource_version_);
  const std::string key =
      object["metadata"].value("namespace", "") + "/" + object["metadata"].value("name", "");
  objects_[key] = object;
  events_.push_back({resource_version_, type, object});
  changed_.notify_all();
}

void FakeKubeApi::Create(const std::string& namespace_, const httplib::Request& request,
                         httplib::Response& response) {
  json object = json::parse(request.body, nullptr, false);
  if (!object.is_object() || !object.contains("metadata") || !object.contains("spec")) {
    Reply(response, 400, StatusBody(400, "BadRequest", "body is not a CertificateRequest"));
    return;
  }
  std::lock_guard lock(mutex_);
  json& metadata = object["metadata"];
  if (!metadata.contains("name")) {
    metadata["name"] = metadata.value("generateName", "x-") + std::to_string(++name_counter_);
  }
  const std::string name = metadata["name"];
  if (metadata.value("namespace", namespace_) != namespace_) {
    Reply(response, 400, StatusBody(400, "BadRequest", "namespace does not match the path"));
    return;
  }
  metadata["namespace"] = namespace_;
  const std::string key = namespace_ + "/" + name;
  if (objects_.count(key) > 0) {
    Reply(response, 409,
          StatusBody(409, "AlreadyExists",
                     "certificaterequests.cert-manager.io \"" + name + "\" already exists"));
    return;
  }
  metadata["uid"] = "uid-" + std::to_string(++name_counter_);
  metadata["creationTimestamp"] = "2024-01-01T00:00:00Z";
  if (object["spec"].is_object()) {
    object["spec"]["username"] =
        UsernameLocked(request.get_header_value("Authorization")).value_or("");
  }
  StoreLocked(object, "ADDED");
  json created = objects_[key];
  for (const json& owner : metadata.value("ownerReferences", json::array())) {
    const std::string uid = owner.value("uid", "");
    bool running = std::any_of(pods_.begin(), pods_.end(), [&](const auto& entry) {
      const json& pod_metadata = entry.second["metadata"];
      return pod_metadata.value("uid", "") == uid && !pod_metadata.contains("deletionTimestamp");
    });
    if (!running) ++creates_for_gone_pods_;
  }
  SignerPolicy policy = policy_;
  std::string message = policy_message_;
  if (approver_) {
    if (std::optional<std::string> denial = approver_(created)) {
      policy = SignerPolicy::kDeny;
      message = *denial;
    }
  }
  if (policy != SignerPolicy::kPending && sign_delay_.count() > 0) {
    DelayedOutcome outcome{std::chrono::steady_clock::now() + sign_delay_, key, policy, message};
    auto at = std::upper_bound(delayed_.begin(), delayed_.end(), outcome.due,
                               [](auto due, const DelayedOutcome& d) { return due < d.due; });
    delayed_.insert(at, std::move(outcome));
    changed_.notify_all();
  } else if (policy != SignerPolicy::kPending) {
    ApplyPolicyLocked(key, policy, message);
  }
  Reply(response, 201, created);
}

void FakeKubeApi::ApplyPolicyLocked(const std::string& key, SignerPolicy policy,
                                    const std::string& message) {
  json object = objects_[key];
  json status = json::object();
  switch (policy) {
    case SignerPolicy::kPending:
      return;
    case SignerPolicy::kDeny:
      status["conditions"] = json::array({Condition("Denied", "True", "policy.example", message),
                                          Condition("Ready", "False", "Denied", message)});
      break;
    case SignerPolicy::kFail:
      status["conditions"] = json::array({Condition("Approved", "True", "approver", "ok"),
                                          Condition("Ready", "False", "Failed", message)});
      status["failureTime"] = "2024-01-01T00:00:01Z";
      break;
    case SignerPolicy::kInvalid:
      status["conditions"] = json::array({Condition("InvalidRequest", "True", "BadConfig", message),
                                          Condition("Ready", "False", "Failed", message)});
      break;
    case SignerPolicy::kApprove: {
      const json& spec = object["spec"];
      CertificateSpec cert_spec;
      Result<std::chrono::nanoseconds> duration = ParseGoDuration(spec.value("duration", "2160h"));
      if (duration.ok()) {
        cert_spec.duration = std::chrono::duration_cast<std::chrono::seconds>(*duration);
      }
      cert_spec.is_ca = spec.value("isCA", false);
      cert_spec.usages = spec.value("usages", std::vector<std::string>{});
      Result<std::string> csr = kube::Base64Decode(spec.value("request", ""));
      IssueInput input;
      input.csr_pem = csr.ok() ? *csr : "";
      input.spec = &cert_spec;
      Result<IssuedCertificate> issued =
          signer_->Issue(input, std::chrono::steady_clock::now() + std::chrono::seconds(30), {});
      if (!issued.ok()) {
        status["conditions"] =
            json::array({Condition("Approved", "True", "approver", "ok"),
                         Condition("Ready", "False", "Failed",
                                   "signing failed: " + issued.status().ToString())});
        break;
      }
      std::string chain = issued->certificate_chain_pem;
      std::string ca = signer_->certificate_pem();
      if (omit_ca_) {
        chain += ca;
        ca.clear();
      }
      status["conditions"] = json::array({Condition("Approved", "True", "approver", "ok"),
                                          Condition("Ready", "True", "Issued", "issued")});
      status["certificate"] = kube::Base64Encode(chain);
      status["ca"] = kube::Base64Encode(ca);
      break;
    }
  }
  object["status"] = status;
  StoreLocked(object, "MODIFIED");
}

void FakeKubeApi::List(const std::string& namespace_, const httplib::Request& request,
                       httplib::Response& response) {
  const std::string selector = Param(request, "labelSelector");
  std::lock_guard lock(mutex_);
  json items = json::array();
  for (const auto& [key, object] : objects_) {
    if (!namespace_.empty() && object["metadata"].value("namespace", "") != namespace_) continue;
    if (MatchesSelector(object, selector)) items.push_back(object);
  }
  ReplyList(response, "cert-manager.io/v1", "CertificateRequestList", std::move(items),
            resource_version_);
}

void FakeKubeApi::Watch(const std::string& namespace_, const httplib::Request& request,
                        httplib::Response& response, const std::string& resource) {
  const std::string selector = Param(request, "labelSelector");
  const std::string node = NodeOfFieldSelector(Param(request, "fieldSelector")).value_or("");
  const std::string version_text = Param(request, "resourceVersion");
  const int timeout_seconds = std::atoi(Param(request, "timeoutSeconds").c_str());
  int64_t from = 0;
  bool gone_event = false;
  {
    std::lock_guard lock(mutex_);
    from = version_text.empty() ? resource_version_ : std::atoll(version_text.c_str());
    if (from < compacted_before_) {
      const json gone = StatusBody(410, "Expired", "too old resource version: " + version_text);
      if (!gone_as_event_) {
        Reply(response, 410, gone);
        return;
      }
      gone_event = true;
    }
  }
  if (gone_event) {
    json event = {
        {"type", "ERROR"},
        {"object", StatusBody(410, "Expired", "too old resource version: " + version_text)}};
    response.status = 200;
    response.set_content(event.dump() + "\n", "application/json");
    return;
  }
  struct Stream {
    int64_t sent_through;
    int generation;
    std::chrono::steady_clock::time_point ends;
  };
  auto stream = std::make_shared<Stream>();
  {
    std::lock_guard lock(mutex_);
    stream->sent_through = from;
    stream->generation = drop_generation_;
    ++open_watches_;
    changed_.notify_all();
  }
  stream->ends = std::chrono::steady_clock::now() +
                 std::chrono::seconds(timeout_seconds > 0 ? timeout_seconds : 3600);
  response.status = 200;
  response.set_chunked_content_provider(
      "application/json",
      [this, stream, namespace_, selector, resource, node](size_t, httplib::DataSink& sink) {
        std::unique_lock lock(mutex_);
        changed_.wait_for(lock, std::chrono::milliseconds(100), [&] {
          return stopping_ || drop_generation_ != stream->generation ||
                 (!events_.empty() && events_.back().resource_version > stream->sent_through);
        });
        if (stopping_ || drop_generation_ != stream->generation ||
            std::chrono::steady_clock::now() >= stream->ends) {
          lock.unlock();
          sink.done();
          return true;
        }
        std::string lines;
        for (const Event& event : events_) {
          if (event.resource_version <= stream->sent_through) continue;
          stream->sent_through = event.resource_version;
          if (event.resource != resource || !OnNode(event.object, node)) continue;
          if (!namespace_.empty() &&
              event.object["metadata"].value("namespace", "") != namespace_) {
            continue;
          }
          if (!MatchesSelector(event.object, selector)) continue;
          lines += json{{"type", event.type}, {"object", event.object}}.dump() + "\n";
        }
        lock.unlock();
        if (!lines.empty() && !sink.write(lines.data(), lines.size())) return false;
        return sink.is_writable();
      },
      [this](bool) {
        std::lock_guard lock(mutex_);
        --open_watches_;
        changed_.notify_all();
      });
}

std::string WriteKubeconfig(const std::string& path, const std::string& server,
                            const std::string& ca_pem) {
  std::ofstream out(path);
  out << "apiVersion: v1\nkind: Config\n"
      << "clusters:\n- name: fake\n  cluster:\n    server: " << server
      << "\n    certificate-authority-data: " << kube::Base64Encode(ca_pem) << "\n"
      << "users:\n- name: driver\n  user:\n    token: " << FakeKubeApi::kToken << "\n"
      << "contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: driver\n"
      << "current-context: fake\n";
  return path;
}

}  // namespace certmount::testing
