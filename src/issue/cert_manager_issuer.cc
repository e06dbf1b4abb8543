#include "issue/cert_manager_issuer.h"

#include <openssl/evp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "issue/certificate_request_outcome.h"
#include "issue/go_duration.h"
#include "kube/base64.h"
#include "kube/http_status.h"
#include "kube/pod.h"

namespace certmount {
namespace {

using nlohmann::json;

constexpr const char* kApiPrefix = "/apis/cert-manager.io/v1";

// A try's calls must be granted this long (or a quarter of the time it has,
// if less) before its deadline: a create granted later could hardly reach
// the API server in time, and the call would be spent on nothing.
constexpr std::chrono::milliseconds kCreateHeadroom{250};

std::string Sha256Hex(std::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(text.data(), text.size(), digest, &length, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 0xf]);
  }
  return hex;
}

std::string Collection(const std::string& namespace_) {
  return std::string(kApiPrefix) + "/namespaces/" + kube::QueryEscape(namespace_) +
         "/certificaterequests";
}

std::string KeyOf(const std::string& namespace_, const std::string& name) {
  return namespace_ + "/" + name;
}

// `object`'s string `field`; "" when it is absent or not a string (json's
// value() would throw on another type, and the API server's answers are
// input, not trusted).
std::string StringField(const json& object, const char* field) {
  auto found = object.find(field);
  if (found == object.end() || !found->is_string()) return "";
  return found->get<std::string>();
}

std::string MetadataField(const json& object, const char* field) {
  auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return "";
  return StringField(*metadata, field);
}

std::string SpecRequest(const json& object) {
  auto spec = object.find("spec");
  if (spec == object.end() || !spec->is_object()) return "";
  return StringField(*spec, "request");
}

struct Condition {
  std::string status;
  std::string reason;
  std::string message;
};

std::map<std::string, Condition> ConditionsOf(const json& object) {
  std::map<std::string, Condition> conditions;
  auto status = object.find("status");
  if (status == object.end() || !status->is_object()) return conditions;
  auto list = status->find("conditions");
  if (list == status->end() || !list->is_array()) return conditions;
  for (const json& entry : *list) {
    if (!entry.is_object()) continue;
    conditions[StringField(entry, "type")] = {
        StringField(entry, "status"), StringField(entry, "reason"), StringField(entry, "message")};
  }
  return conditions;
}

// The certificates of a PEM bundle, each with its BEGIN and END lines.
std::vector<std::string> SplitPemCertificates(const std::string& pem) {
  static constexpr std::string_view kBegin = "-----BEGIN CERTIFICATE-----";
  static constexpr std::string_view kEnd = "-----END CERTIFICATE-----";
  std::vector<std::string> certificates;
  size_t position = 0;
  while ((position = pem.find(kBegin, position)) != std::string::npos) {
    size_t end = pem.find(kEnd, position);
    if (end == std::string::npos) break;
    end += kEnd.size();
    certificates.push_back(pem.substr(position, end - position) + "\n");
    position = end;
  }
  return certificates;
}

}  // namespace

std::optional<Result<IssuedCertificate>> CertificateRequestOutcome(const json& object,
                                                                   const std::string& key,
                                                                   std::string* pending_state) {
  std::map<std::string, Condition> conditions = ConditionsOf(object);
  const std::string what = "CertificateRequest " + key;
  if (auto it = conditions.find("InvalidRequest");
      it != conditions.end() && it->second.status == "True") {
    return Result<IssuedCertificate>(
        Status::InvalidArgument(what + " is invalid: " + it->second.message));
  }
  if (auto it = conditions.find("Denied"); it != conditions.end() && it->second.status == "True") {
    return Result<IssuedCertificate>(Status::FailedPrecondition(
        what + " was denied (" + it->second.reason + "): " + it->second.message));
  }
  auto ready = conditions.find("Ready");
  if (ready != conditions.end() && ready->second.status == "False" &&
      ready->second.reason == "Failed") {
    return Result<IssuedCertificate>(
        Status::FailedPrecondition(what + " failed: " + ready->second.message));
  }
  std::string certificate_b64;
  std::string ca_b64;
  if (auto status = object.find("status"); status != object.end() && status->is_object()) {
    certificate_b64 = StringField(*status, "certificate");
    ca_b64 = StringField(*status, "ca");
  }
  if (ready != conditions.end() && ready->second.status == "True" && !certificate_b64.empty()) {
    Result<std::string> chain = kube::Base64Decode(certificate_b64);
    Result<std::string> ca = kube::Base64Decode(ca_b64);
    if (!chain.ok() || !ca.ok()) {
      return Result<IssuedCertificate>(
          Status::FailedPrecondition(what + ": status.certificate or status.ca is not base64"));
    }
    std::vector<std::string> certificates = SplitPemCertificates(*chain);
    if (certificates.empty()) {
      return Result<IssuedCertificate>(
          Status::FailedPrecondition(what + ": status.certificate holds no PEM certificate"));
    }
    IssuedCertificate issued;
    issued.certificate_chain_pem = std::move(*chain);
    issued.ca_pem = std::move(*ca);
    if (issued.ca_pem.empty() && certificates.size() > 1) issued.ca_pem = certificates.back();
    return Result<IssuedCertificate>(std::move(issued));
  }
  if (pending_state != nullptr) {
    auto approved = conditions.find("Approved");
    *pending_state =
        std::string("Approved=") +
        (approved == conditions.end() ? "unset" : approved->second.status) + ", Ready=" +
        (ready == conditions.end()
             ? std::string("unset")
             : ready->second.status + " " + ready->second.reason + ": " + ready->second.message);
  }
  return std::nullopt;
}

namespace {

json RequestBody(const IssueInput& input, const std::string& csr_b64,
                 const std::string& node_label_value) {
  const CertificateSpec& spec = *input.spec;
  json metadata = {
      {"namespace", input.pod.namespace_},
      {"labels",
       {{kNodeLabel, node_label_value},
        {kVolumeLabel, IdLabelValue(input.volume_id)},
        {"app.kubernetes.io/managed-by", "certmount"}}},
  };
  if (input.request_name.empty()) {
    metadata["generateName"] = "certmount-";
  } else {
    metadata["name"] = input.request_name;
  }
  if (!spec.annotations.empty()) metadata["annotations"] = spec.annotations;
  if (!input.pod.name.empty() && !input.pod.uid.empty()) {
    // blockOwnerDeletion stays false: true would need update rights on
    // pods/finalizers, and nothing should hold up a pod's deletion.
    metadata["ownerReferences"] = json::array({{{"apiVersion", "v1"},
                                                {"kind", "Pod"},
                                                {"name", input.pod.name},
                                                {"uid", input.pod.uid},
                                                {"controller", false},
                                                {"blockOwnerDeletion", false}}});
  }
  json body = {
      {"apiVersion", "cert-manager.io/v1"},
      {"kind", "CertificateRequest"},
      {"metadata", std::move(metadata)},
      {"spec",
       {{"request", csr_b64},
        {"issuerRef",
         {{"name", spec.issuer.name}, {"kind", spec.issuer.kind}, {"group", spec.issuer.group}}},
        {"duration", FormatGoDuration(spec.duration)},
        {"isCA", spec.is_ca},
        {"usages", spec.usages}}},
  };
  return body;
}

Result<json> ParseObject(const kube::Response& response, const std::string& what) {
  json object = json::parse(response.body, nullptr, false);
  if (!object.is_object()) return Status::Internal(what + ": the answer is not a JSON object");
  return object;
}

std::string NodeSelector(const std::string& node_label_value) {
  return std::string(kNodeLabel) + "=" + node_label_value;
}

// This node's requests matching `selector`, in `namespace_` or (empty) in
// every namespace.
Result<json> ListRequests(kube::Client* client, const std::string& namespace_,
                          const std::string& selector,
                          std::chrono::steady_clock::time_point deadline, std::stop_token stop) {
  const std::string collection = namespace_.empty()
                                     ? std::string(kApiPrefix) + "/certificaterequests"
                                     : Collection(namespace_);
  CERTMOUNT_ASSIGN_OR_RETURN(
      kube::Response listed,
      client->Call({"GET", collection + "?labelSelector=" + kube::QueryEscape(selector), "", ""},
                   deadline, stop));
  CERTMOUNT_ASSIGN_OR_RETURN(json list, ParseObject(listed, "listing CertificateRequests"));
  auto items = list.find("items");
  if (items == list.end() || !items->is_array()) return json::array();
  return *items;
}

// DELETEs one listed request with the driver's credentials; NOT_FOUND counts
// as deleted.
Status DeleteListedRequest(kube::Client* client, const json& object,
                           std::chrono::steady_clock::time_point deadline, std::stop_token stop) {
  const std::string namespace_ = MetadataField(object, "namespace");
  const std::string name = MetadataField(object, "name");
  if (namespace_.empty() || name.empty()) return Status::Ok();
  Result<kube::Response> deleted = client->Call(
      {"DELETE", Collection(namespace_) + "/" + kube::QueryEscape(name), "", ""}, deadline, stop);
  if (deleted.ok() || deleted.status().code() == Code::kNotFound) {
    spdlog::info("deleted CertificateRequest {}", KeyOf(namespace_, name));
    return Status::Ok();
  }
  return deleted.status().WithContext("deleting CertificateRequest " + KeyOf(namespace_, name));
}

std::string VolumeLabelOf(const json& object) {
  auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return "";
  auto labels = metadata->find("labels");
  if (labels == metadata->end() || !labels->is_object()) return "";
  return StringField(*labels, kVolumeLabel);
}

}  // namespace

std::string IdLabelValue(std::string_view id) { return Sha256Hex(id).substr(0, 32); }

std::string CertificateRequestName(std::string_view volume_id, uint64_t issuance) {
  return "certmount-" + Sha256Hex(volume_id).substr(0, 32) + "-" + std::to_string(issuance);
}

CertManagerIssuer::CertManagerIssuer(std::shared_ptr<kube::Client> client,
                                     CertManagerIssuerOptions options)
    : client_(std::move(client)),
      options_(std::move(options)),
      node_label_value_(IdLabelValue(options_.node_id)) {}

CertManagerIssuer::~CertManagerIssuer() {
  {
    std::lock_guard lock(mutex_);
    shutting_down_ = true;
    for (auto& [key, waiter] : waiters_) waiter->changed.notify_all();
  }
  create_thread_.request_stop();
  if (create_thread_.joinable()) create_thread_.join();
  retire_thread_.request_stop();
  if (retire_thread_.joinable()) retire_thread_.join();
  watch_thread_.request_stop();
  if (watch_thread_.joinable()) watch_thread_.join();
}

int CertManagerIssuer::watch_lists() const { return watcher_ != nullptr ? watcher_->lists() : 0; }

void CertManagerIssuer::EnsureWatching() {
  std::lock_guard lock(mutex_);
  if (watcher_ != nullptr) return;
  kube::WatcherOptions watch_options;
  watch_options.collection_path = std::string(kApiPrefix) + "/certificaterequests";
  watch_options.label_selector = std::string(kNodeLabel) + "=" + node_label_value_;
  watch_options.watch_timeout = options_.watch_timeout;
  watcher_ = std::make_unique<kube::Watcher>(
      client_.get(), std::move(watch_options),
      [this](const kube::WatchEvent& event) { OnEvent(event); },
      [this](kube::ListBoundary boundary) { OnListBoundary(boundary); });
  watch_thread_ =
      std::jthread([watcher = watcher_.get()](std::stop_token stop) { watcher->Run(stop); });
}

std::shared_ptr<CertManagerIssuer::Waiter> CertManagerIssuer::Register(
    const std::string& key, const std::string& expected_request, const std::string& volume_id) {
  const auto now = client_->clock().SteadyNow();
  std::lock_guard lock(mutex_);
  std::erase_if(waiters_, [&](const auto& entry) {
    return entry.second->users == 0 && entry.first != key && entry.second->parked_until < now;
  });
  std::shared_ptr<Waiter>& waiter = waiters_[key];
  if (waiter == nullptr) waiter = std::make_shared<Waiter>();
  if (waiter->expected_request != expected_request) {
    waiter->expected_request = expected_request;
    waiter->outcome.reset();
    waiter->created = false;
  }
  waiter->volume_id = volume_id;
  ++waiter->users;
  return waiter;
}

void CertManagerIssuer::Unregister(const std::string& key) {
  const auto now = client_->clock().SteadyNow();
  std::lock_guard lock(mutex_);
  auto it = waiters_.find(key);
  if (it == waiters_.end() || --it->second->users > 0) return;
  Waiter& waiter = *it->second;
  if ((waiter.created || waiter.queued) && !waiter.outcome.has_value() && !shutting_down_) {
    waiter.parked_until = now + options_.park_pending_for;
    return;
  }
  waiters_.erase(it);
}

void CertManagerIssuer::DropParked(const std::string& volume_id) {
  std::lock_guard lock(mutex_);
  std::erase_if(waiters_, [&](const auto& entry) {
    return entry.second->users == 0 && entry.second->volume_id == volume_id;
  });
}

void CertManagerIssuer::Offer(const std::string& key, const std::string& object_json) {
  json object = json::parse(object_json, nullptr, false);
  if (!object.is_object()) return;
  std::lock_guard lock(mutex_);
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  Waiter& waiter = *it->second;
  if (waiter.outcome.has_value() || SpecRequest(object) != waiter.expected_request) return;
  std::optional<Result<IssuedCertificate>> outcome =
      CertificateRequestOutcome(object, key, &waiter.last_state);
  if (!outcome.has_value()) return;
  waiter.outcome = std::move(outcome);
  waiter.changed.notify_all();
}

void CertManagerIssuer::OnListBoundary(kube::ListBoundary boundary) {
  std::lock_guard lock(mutex_);
  if (boundary == kube::ListBoundary::kBegin) {
    listing_ = true;
    listed_keys_.clear();
    return;
  }
  listing_ = false;
  // A request a complete list does not hold was deleted while the watch was
  // away (its DELETED event was never seen): the next try creates it again
  // rather than wait for it.
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    Waiter& waiter = *it->second;
    if (waiter.created && !waiter.outcome.has_value() && listed_keys_.count(it->first) == 0) {
      waiter.created = false;
      if (waiter.users == 0) {
        it = waiters_.erase(it);
        continue;
      }
    }
    ++it;
  }
  listed_keys_.clear();
}

void CertManagerIssuer::OnEvent(const kube::WatchEvent& event) {
  json object = json::parse(event.object_json, nullptr, false);
  if (!object.is_object()) return;
  const std::string key = KeyOf(MetadataField(object, "namespace"), MetadataField(object, "name"));
  {
    std::lock_guard lock(mutex_);
    if (listing_) listed_keys_.insert(key);
  }
  if (event.type != "DELETED") {
    Offer(key, event.object_json);
    return;
  }
  std::lock_guard lock(mutex_);
  auto it = waiters_.find(key);
  if (it == waiters_.end() || it->second->outcome.has_value() ||
      SpecRequest(object) != it->second->expected_request) {
    return;
  }
  it->second->outcome = Result<IssuedCertificate>(
      Status::Aborted("CertificateRequest " + key + " was deleted before it was signed"));
  it->second->changed.notify_all();
}

bool CertManagerIssuer::CreatedOrQueued(const Waiter& waiter) {
  std::lock_guard lock(mutex_);
  return waiter.created || waiter.queued;
}

void CertManagerIssuer::QueueCreate(const IssueInput& input) {
  QueuedCreate queued;
  queued.key = KeyOf(input.pod.namespace_, input.request_name);
  queued.csr_b64 = kube::Base64Encode(input.csr_pem);
  queued.body = RequestBody(input, queued.csr_b64, node_label_value_).dump();
  queued.input = input;
  queued.input.spec = nullptr;
  std::shared_ptr<Waiter> waiter = Register(queued.key, queued.csr_b64, input.volume_id);
  bool already_queued = false;
  {
    std::lock_guard lock(mutex_);
    already_queued = waiter->queued || waiter->created;
    waiter->queued = !waiter->created;
  }
  Unregister(queued.key);
  if (already_queued) return;
  std::lock_guard lock(create_mutex_);
  if (!create_thread_.joinable()) {
    create_thread_ = std::jthread([this](std::stop_token stop) { RunQueuedCreates(stop); });
  }
  creates_.push_back(std::move(queued));
  create_changed_.notify_all();
}

void CertManagerIssuer::RunQueuedCreates(std::stop_token stop) {
  std::unique_lock lock(create_mutex_);
  while (create_changed_.wait(lock, stop, [&] { return !creates_.empty(); })) {
    QueuedCreate next = std::move(creates_.front());
    creates_.pop_front();
    lock.unlock();
    CreateQueued(next, stop);
    lock.lock();
  }
}

void CertManagerIssuer::EndQueued(const std::string& key, const std::string& csr_b64,
                                  const Status& failure) {
  std::lock_guard lock(mutex_);
  auto it = waiters_.find(key);
  if (it == waiters_.end() || it->second->expected_request != csr_b64) return;
  Waiter& waiter = *it->second;
  waiter.queued = false;
  if (failure.ok()) {
    waiter.created = true;
  } else if (!waiter.outcome.has_value()) {
    waiter.outcome = Result<IssuedCertificate>(failure);
  }
  waiter.changed.notify_all();
  if (waiter.users == 0 && !waiter.created && !failure.ok()) waiters_.erase(it);
}

void CertManagerIssuer::CreateQueued(const QueuedCreate& queued, std::stop_token stop) {
  auto still_wanted = [&] {
    std::lock_guard lock(mutex_);
    auto it = waiters_.find(queued.key);
    return it != waiters_.end() && it->second->queued &&
           it->second->expected_request == queued.csr_b64;
  };
  if (!still_wanted()) return;
  const Clock& clock = client_->clock();
  Result<kube::ApiBudget> budget = client_->Reserve(
      1, kube::ApiPriority::kPublish, clock.SteadyNow() + options_.park_pending_for, stop);
  if (!budget.ok()) {
    EndQueued(queued.key, queued.csr_b64, budget.status().WithContext("queued create"));
    return;
  }
  // The pod must run at the moment of the create, as for any issuance; the
  // unused call goes back with the budget otherwise.
  const PodInfo& pod = queued.input.pod;
  if (!KnowsPodRunning(pod)) {
    EndQueued(queued.key, queued.csr_b64,
              Status::Aborted("pod " + pod.namespace_ + "/" + pod.name +
                              " is no longer known to run; its queued CertificateRequest was "
                              "not created"));
    return;
  }
  if (!still_wanted()) return;
  EnsureWatching();
  Status created = CreateOrResumeNamed(queued.input, queued.body, queued.csr_b64,
                                       clock.SteadyNow() + options_.delete_timeout, stop, &*budget);
  EndQueued(queued.key, queued.csr_b64, created);
}

Result<IssuedCertificate> CertManagerIssuer::Wait(const std::string& key,
                                                  const std::shared_ptr<Waiter>& waiter,
                                                  std::chrono::steady_clock::time_point deadline,
                                                  std::stop_token stop) {
  const Clock& clock = client_->clock();
  std::unique_lock lock(mutex_);
  while (!waiter->outcome.has_value()) {
    if (shutting_down_) return Status::Cancelled("the cert-manager issuer is shutting down");
    if (stop.stop_requested()) {
      return Status::Cancelled("cancelled while waiting for CertificateRequest " + key);
    }
    auto remaining = deadline - clock.SteadyNow();
    if (remaining <= std::chrono::steady_clock::duration::zero()) {
      return Status::DeadlineExceeded("CertificateRequest " + key +
                                      " still pending at the deadline (" + waiter->last_state +
                                      "); left in place for the next try");
    }
    // Slices, so that a clock moved by hand is noticed too.
    auto slice =
        std::min<std::chrono::steady_clock::duration>(remaining, std::chrono::milliseconds(50));
    waiter->changed.wait_for(lock, stop, slice, [&] { return waiter->outcome.has_value(); });
  }
  return *waiter->outcome;
}

std::optional<kube::PodLiveness> CertManagerIssuer::WatchedLiveness(
    const kube::PodRef& pod, std::chrono::steady_clock::time_point deadline, std::stop_token stop) {
  const kube::PodCache* cache = options_.pod_cache;
  if (cache == nullptr) return std::nullopt;
  const Clock& clock = client_->clock();
  const auto until = std::min(deadline, clock.SteadyNow() + options_.pod_cache_wait);
  std::optional<kube::PodLiveness> known = cache->WaitForLiveness(pod, clock, until, stop);
  if (!known.has_value()) {
    spdlog::info("pod {}/{} (uid {}): the pod watch cannot tell yet; reading the pod",
                 pod.namespace_, pod.name, pod.uid);
  }
  return known;
}

Status CertManagerIssuer::PodNotRunning(const IssueInput& input, kube::PodLiveness liveness) {
  const PodInfo& pod = input.pod;
  // Whatever this volume had at the signer is of no use now.
  Retire(pod.namespace_, input.volume_id, std::nullopt);
  return Status::Aborted("pod " + pod.namespace_ + "/" + pod.name + " (uid " + pod.uid + ") is " +
                         kube::PodLivenessName(liveness) +
                         ": no CertificateRequest is created for it, and its volume's are "
                         "deleted");
}

bool CertManagerIssuer::KnowsPodRunning(const PodInfo& pod) const {
  if (options_.pod_cache == nullptr) return false;
  return options_.pod_cache->Liveness({pod.namespace_, pod.name, pod.uid}) ==
         kube::PodLiveness::kRunning;
}

bool CertManagerIssuer::AwaitsParkedRequest(const IssueInput& input) {
  if (input.request_name.empty()) return false;
  const std::string csr_b64 = kube::Base64Encode(input.csr_pem);
  std::lock_guard lock(mutex_);
  auto it = waiters_.find(KeyOf(input.pod.namespace_, input.request_name));
  return it != waiters_.end() && (it->second->created || it->second->queued) &&
         it->second->expected_request == csr_b64;
}

Result<IssuedCertificate> CertManagerIssuer::Issue(const IssueInput& input,
                                                   std::chrono::steady_clock::time_point deadline,
                                                   std::stop_token stop) {
  if (input.spec == nullptr) return Status::InvalidArgument("no certificate spec");
  if (input.pod.namespace_.empty()) {
    return Status::InvalidArgument("the pod's namespace is unknown (is podInfoOnMount set?)");
  }
  if (input.spec->issuer.name.empty()) return Status::InvalidArgument("no issuer name");
  if (input.csr_pem.empty()) return Status::InvalidArgument("no CSR");
  const kube::PodRef pod{input.pod.namespace_, input.pod.name, input.pod.uid};
  CERTMOUNT_RETURN_IF_ERROR(kube::CheckPodRef(pod));
  NoteIssuing(input.volume_id);
  const std::optional<kube::PodLiveness> watched = WatchedLiveness(pod, deadline, stop);
  if (watched.has_value() && *watched != kube::PodLiveness::kRunning) {
    return PodNotRunning(input, *watched);
  }
  // Every call this try needs is taken from the rate limit together, before
  // any is made: a try that could not make them all in time fails now,
  // having spent nothing, instead of spending a call on a pod read whose
  // create could not follow. The grant must leave the create time to reach
  // the server; a request it creates and the watch sees signed later is
  // taken by the next try without a call (AwaitsParkedRequest).
  const int calls = (watched.has_value() ? 0 : 1) + (AwaitsParkedRequest(input) ? 0 : 1);
  const kube::ApiPriority priority = input.purpose == IssuePurpose::kPublish
                                         ? kube::ApiPriority::kPublish
                                         : kube::ApiPriority::kBackground;
  const auto left = deadline - client_->clock().SteadyNow();
  const auto headroom = std::min<std::chrono::steady_clock::duration>(kCreateHeadroom, left / 4);
  Result<kube::ApiBudget> budget = client_->Reserve(calls, priority, deadline - headroom, stop);
  if (!budget.ok()) {
    if (budget.status().code() == Code::kDeadlineExceeded &&
        input.purpose == IssuePurpose::kPublish && watched.has_value() &&
        !input.request_name.empty()) {
      QueueCreate(input);
      return budget.status().WithContext(
          "no call was made for volume " + input.volume_id +
          " in time; its CertificateRequest is created when the rate limit allows, and the next "
          "try waits for it");
    }
    return budget.status().WithContext("no call was made for volume " + input.volume_id + " (" +
                                       std::to_string(calls) + " needed)");
  }
  if (!watched.has_value()) {
    CERTMOUNT_ASSIGN_OR_RETURN(kube::PodLiveness read,
                               kube::ReadPodLiveness(client_.get(), pod, deadline, stop, &*budget));
    if (read != kube::PodLiveness::kRunning) return PodNotRunning(input, read);
  }
  EnsureWatching();
  return CheckPodAfterFailure(input, CreateAndWait(input, deadline, stop, &*budget), deadline,
                              stop);
}

Result<IssuedCertificate> CertManagerIssuer::CheckPodAfterFailure(
    const IssueInput& input, Result<IssuedCertificate> result,
    std::chrono::steady_clock::time_point deadline, std::stop_token stop) {
  const Code code = result.status().code();
  const bool token_refused =
      code == Code::kPermissionDenied && !input.bearer_token_override.empty();
  if (!token_refused && code != Code::kDeadlineExceeded) return result;
  const kube::PodRef pod{input.pod.namespace_, input.pod.name, input.pod.uid};
  std::optional<kube::PodLiveness> liveness;
  if (options_.pod_cache != nullptr) liveness = options_.pod_cache->Liveness(pod);
  // "Running" from the watch is not trusted here: a refused bound token is
  // what a pod deleted a moment ago looks like, before its event arrives.
  // The GET settles it, but only within the call's own time: the answer is
  // due at `deadline`, and a request left for a pod that did go is retired
  // by kubelet's unpublish.
  if (!liveness.has_value() || *liveness == kube::PodLiveness::kRunning) {
    if (client_->clock().SteadyNow() >= deadline) return result;
    Result<kube::PodLiveness> read = kube::ReadPodLiveness(client_.get(), pod, deadline, stop);
    if (!read.ok()) return result;
    liveness = *read;
  }
  if (*liveness == kube::PodLiveness::kRunning) return result;
  return PodNotRunning(input, *liveness).WithContext(result.status().message());
}

Result<IssuedCertificate> CertManagerIssuer::CreateAndWait(
    const IssueInput& input, std::chrono::steady_clock::time_point deadline, std::stop_token stop,
    kube::ApiBudget* budget) {
  const std::string csr_b64 = kube::Base64Encode(input.csr_pem);
  const std::string body = RequestBody(input, csr_b64, node_label_value_).dump();
  if (input.request_name.empty()) {
    return CreateUnnamedAndWait(input, body, csr_b64, deadline, stop, budget);
  }

  const std::string key = KeyOf(input.pod.namespace_, input.request_name);
  // Registered before the create, so no event about it can be missed.
  std::shared_ptr<Waiter> waiter = Register(key, csr_b64, input.volume_id);
  struct Unregisterer {
    CertManagerIssuer* issuer;
    const std::string& key;
    ~Unregisterer() { issuer->Unregister(key); }
  } unregister{this, key};
  if (!CreatedOrQueued(*waiter)) {
    CERTMOUNT_RETURN_IF_ERROR(CreateOrResumeNamed(input, body, csr_b64, deadline, stop, budget));
    std::lock_guard lock(mutex_);
    waiter->created = true;
  } else {
    // An earlier try created it and ran out of time; the watch has kept
    // its state since, so this try costs no call.
    spdlog::info("waiting again for CertificateRequest {} of volume {}", key, input.volume_id);
  }
  return Wait(key, waiter, deadline, stop);
}

Result<IssuedCertificate> CertManagerIssuer::CreateUnnamedAndWait(
    const IssueInput& input, const std::string& body, const std::string& csr_b64,
    std::chrono::steady_clock::time_point deadline, std::stop_token stop, kube::ApiBudget* budget) {
  const std::string collection = Collection(input.pod.namespace_);
  const std::string& token = input.bearer_token_override;
  CERTMOUNT_ASSIGN_OR_RETURN(
      kube::Response created,
      client_->Call({"POST", collection, body, token}, deadline, stop, budget));
  CERTMOUNT_ASSIGN_OR_RETURN(json object, ParseObject(created, "creating a CertificateRequest"));
  const std::string name = MetadataField(object, "name");
  const std::string key = KeyOf(input.pod.namespace_, name);
  std::shared_ptr<Waiter> waiter = Register(key, csr_b64, input.volume_id);
  spdlog::info("created CertificateRequest {} for volume {}", key, input.volume_id);
  // Events between the create and Register were missed; one read covers them.
  Result<kube::Response> current =
      client_->Call({"GET", collection + "/" + name, "", token}, deadline, stop, budget);
  Offer(key, current.ok() ? current->body : created.body);
  Result<IssuedCertificate> result = Wait(key, waiter, deadline, stop);
  Unregister(key);
  return result;
}

Status CertManagerIssuer::CreateOrResumeNamed(const IssueInput& input, const std::string& body,
                                              const std::string& csr_b64,
                                              std::chrono::steady_clock::time_point deadline,
                                              std::stop_token stop, kube::ApiBudget* budget) {
  const std::string collection = Collection(input.pod.namespace_);
  const std::string key = KeyOf(input.pod.namespace_, input.request_name);
  const std::string item = collection + "/" + kube::QueryEscape(input.request_name);
  const std::string& token = input.bearer_token_override;
  for (int tries = 0; tries < 3; ++tries) {
    Result<kube::Response> created =
        client_->Call({"POST", collection, body, token}, deadline, stop, budget);
    if (created.ok()) {
      spdlog::info("created CertificateRequest {} for volume {}", key, input.volume_id);
      Offer(key, created->body);
      return Status::Ok();
    }
    if (created.status().code() != Code::kAlreadyExists) {
      return created.status().WithContext("creating CertificateRequest " + key);
    }
    Result<kube::Response> existing =
        client_->Call({"GET", item, "", token}, deadline, stop, budget);
    if (existing.status().code() == Code::kNotFound) continue;
    if (!existing.ok()) {
      return existing.status().WithContext("reading CertificateRequest " + key);
    }
    CERTMOUNT_ASSIGN_OR_RETURN(json object,
                               ParseObject(*existing, "reading CertificateRequest " + key));
    if (SpecRequest(object) == csr_b64) {
      spdlog::info("resuming CertificateRequest {} for volume {}", key, input.volume_id);
      Offer(key, existing->body);
      return Status::Ok();
    }
    // Same issuance name, other CSR: left by an attempt whose key is gone.
    spdlog::info("replacing CertificateRequest {} (it holds another CSR)", key);
    // With the driver's own credentials: a pod's Role needs only create and get.
    Result<kube::Response> deleted =
        client_->Call({"DELETE", item, "", ""}, deadline, stop, budget);
    if (!deleted.ok() && deleted.status().code() != Code::kNotFound) {
      return deleted.status().WithContext("deleting stale CertificateRequest " + key);
    }
  }
  return Status::Aborted("CertificateRequest " + key + " keeps being replaced by another writer");
}

Status CertManagerIssuer::DeleteRequests(const std::string& namespace_,
                                         const std::string& volume_id,
                                         const std::set<std::string>& keep, std::stop_token stop) {
  const std::string selector =
      NodeSelector(node_label_value_) + "," + kVolumeLabel + "=" + IdLabelValue(volume_id);
  auto deadline = client_->clock().SteadyNow() + options_.delete_timeout;
  CERTMOUNT_ASSIGN_OR_RETURN(json items,
                             ListRequests(client_.get(), namespace_, selector, deadline, stop));
  Status first_failure;
  for (const json& object : items) {
    if (keep.count(MetadataField(object, "name")) != 0) continue;
    Status deleted = DeleteListedRequest(client_.get(), object, deadline, stop);
    if (first_failure.ok()) first_failure = deleted;
  }
  return first_failure;
}

Status CertManagerIssuer::DeleteOrphanRequests(const std::set<std::string>& live_volume_ids,
                                               std::stop_token stop) {
  std::set<std::string> live_labels;
  for (const std::string& id : live_volume_ids) live_labels.insert(IdLabelValue(id));
  auto deadline = client_->clock().SteadyNow() + options_.delete_timeout;
  CERTMOUNT_ASSIGN_OR_RETURN(
      json items, ListRequests(client_.get(), "", NodeSelector(node_label_value_), deadline, stop));
  Status first_failure;
  for (const json& object : items) {
    const std::string label = VolumeLabelOf(object);
    if (live_labels.count(label) != 0) continue;
    {
      std::lock_guard lock(retire_mutex_);
      if (issued_since_sweep_.count(label) != 0) continue;
    }
    Status deleted = DeleteListedRequest(client_.get(), object, deadline, stop);
    if (first_failure.ok()) first_failure = deleted;
  }
  return first_failure;
}

void CertManagerIssuer::NoteIssuing(const std::string& volume_id) {
  std::lock_guard lock(retire_mutex_);
  std::erase_if(retirements_, [&](const Retirement& queued) {
    return queued.volume_gone && queued.volume_id == volume_id;
  });
  if (sweep_pending_) issued_since_sweep_.insert(IdLabelValue(volume_id));
  retire_changed_.notify_all();
}

void CertManagerIssuer::Retire(const std::string& namespace_, const std::string& volume_id,
                               std::optional<uint64_t> current_issuance) {
  DropParked(volume_id);
  Retirement retirement;
  retirement.namespace_ = namespace_;
  retirement.volume_id = volume_id;
  retirement.volume_gone = !current_issuance.has_value();
  if (current_issuance.has_value()) {
    const uint64_t newest = *current_issuance;
    const uint64_t keep = static_cast<uint64_t>(std::max(1, options_.max_requests_per_volume));
    // Issuances 0 .. newest are all kept: there is nothing older to look
    // for, and a publish (issuance 0) spends no list call on it.
    if (newest < keep) return;
    for (uint64_t i = 0; i < keep && i <= newest; ++i) {
      retirement.keep.insert(CertificateRequestName(volume_id, newest - i));
    }
  }
  Enqueue(std::move(retirement));
}

void CertManagerIssuer::RetireAllExcept(const std::set<std::string>& live_volume_ids) {
  Retirement sweep;
  sweep.live_volume_ids = live_volume_ids;
  Enqueue(std::move(sweep));
}

void CertManagerIssuer::Enqueue(Retirement retirement) {
  std::lock_guard lock(retire_mutex_);
  if (retirement.volume_gone) {
    // One queued "volume gone" per volume is enough; it finds them all.
    for (Retirement& queued : retirements_) {
      if (queued.volume_gone && queued.volume_id == retirement.volume_id) {
        if (queued.namespace_.empty()) queued.namespace_ = retirement.namespace_;
        return;
      }
    }
  }
  if (retirement.live_volume_ids.has_value()) {
    sweep_pending_ = true;
    issued_since_sweep_.clear();
  }
  if (!retire_thread_.joinable()) {
    retire_thread_ = std::jthread([this](std::stop_token stop) { RunRetirements(stop); });
  }
  retirements_.push_back(std::move(retirement));
  retire_changed_.notify_all();
}

void CertManagerIssuer::WaitForRetirements() {
  std::unique_lock lock(retire_mutex_);
  retire_changed_.wait(lock, [&] {
    return !retiring_ && std::all_of(retirements_.begin(), retirements_.end(),
                                     [](const Retirement& queued) { return queued.attempts > 0; });
  });
}

Status CertManagerIssuer::RunOne(const Retirement& retirement, std::stop_token stop) {
  if (retirement.live_volume_ids.has_value()) {
    return DeleteOrphanRequests(*retirement.live_volume_ids, stop);
  }
  return DeleteRequests(retirement.namespace_, retirement.volume_id, retirement.keep, stop);
}

void CertManagerIssuer::RunRetirements(std::stop_token stop) {
  const Clock& clock = client_->clock();
  std::unique_lock lock(retire_mutex_);
  while (!stop.stop_requested()) {
    if (!retire_changed_.wait(lock, stop, [&] { return !retirements_.empty(); })) break;
    const auto now = clock.SteadyNow();
    auto ready = std::find_if(retirements_.begin(), retirements_.end(),
                              [&](const Retirement& queued) { return queued.not_before <= now; });
    if (ready == retirements_.end()) {
      // Slices, so that a clock moved by hand is noticed too.
      retire_changed_.wait_for(lock, stop, std::chrono::milliseconds(50), [] { return false; });
      continue;
    }
    Retirement next = std::move(*ready);
    retirements_.erase(ready);
    retiring_ = true;
    lock.unlock();
    Status done = RunOne(next, stop);
    lock.lock();
    retiring_ = false;
    if (done.ok()) {
      if (next.live_volume_ids.has_value()) {
        sweep_pending_ = false;
        issued_since_sweep_.clear();
      }
    } else if (!stop.stop_requested()) {
      auto backoff = options_.retire_backoff_initial;
      for (int i = 0; i < next.attempts && backoff < options_.retire_backoff_max; ++i) backoff *= 2;
      backoff = std::min(backoff, options_.retire_backoff_max);
      ++next.attempts;
      next.not_before = clock.SteadyNow() + backoff;
      spdlog::warn(
          "cert-manager: cleaning up requests of {}: {}; retrying in {} ms",
          next.live_volume_ids.has_value() ? "volumes without a row" : "volume " + next.volume_id,
          done.ToString(), backoff.count());
      retirements_.push_back(std::move(next));
    }
    retire_changed_.notify_all();
  }
}

}  // namespace certmount
