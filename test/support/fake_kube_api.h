// An in-process Kubernetes API server for tests, playing cert-manager too:
// HTTPS on 127.0.0.1 with a certificate from its own CA, bearer-token
// authentication, CertificateRequests per namespace with increasing
// resourceVersions, create/get/list/delete, and watches (chunked
// newline-delimited JSON) that can be dropped or expired (410 Gone). Each
// created request is answered per the current SignerPolicy, signing with a
// LocalCa. Pods with UIDs, nodes, addresses and deletion timestamps: GET,
// list and watch of /api/v1/pods with fieldSelector spec.nodeName=<node>
// (resourceVersions and events shared with the requests, as in etcd), and
// strategic-merge or merge PATCH of pods/<name>/status (conditions merge by
// type under a strategic merge, with a metadata.uid precondition); service
// account tokens bound to a pod that turn 401 once it is deleted. Each
// created request's spec.username is the user its token authenticates, as
// cert-manager's webhook sets it (whatever the client sent), and an
// approver hook may deny it before the policy applies. No garbage
// collector: owned requests stay unless a client deletes them. Every request
// is recorded so tests can check exact bodies.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "issue/local_ca.h"
#include "support/temp_dir.h"

namespace httplib {
class SSLServer;
struct Request;
struct Response;
}  // namespace httplib

namespace certmount::testing {

enum class SignerPolicy {
  kApprove,  // Approved, Ready=True, signed by signer()
  kDeny,     // Denied=True with the message
  kFail,     // Approved, Ready=False reason Failed with the message
  kInvalid,  // InvalidRequest=True with the message
  kPending,  // no status until Resolve()
};

struct RecordedRequest {
  std::string method;
  std::string path;
  std::map<std::string, std::string> params;
  std::string body;
  std::string authorization;  // the Authorization header as received
};

class FakeKubeApi {
 public:
  static constexpr const char* kToken = "fake-api-token-0123456789";
  // The user kToken authenticates: certmountd's service account in the
  // shipped manifests.
  static constexpr const char* kDriverUsername = "system:serviceaccount:certmount:certmount";

  FakeKubeApi();
  ~FakeKubeApi();
  FakeKubeApi(const FakeKubeApi&) = delete;
  FakeKubeApi& operator=(const FakeKubeApi&) = delete;

  // "https://127.0.0.1:<port>".
  std::string url() const;
  int port() const { return port_; }
  // The CA that verifies the server's certificate.
  const std::string& server_ca_pem() const { return server_ca_pem_; }
  // The CA cert-manager signs with (status.ca).
  std::string signer_ca_pem() const;

  // Accept `token` as well as kToken, authenticating `username` (by
  // default the same user as kToken: another credential of the driver's);
  // RevokeToken stops accepting one.
  void AcceptToken(const std::string& token, const std::string& username = kDriverUsername);
  void RevokeToken(const std::string& token);

  // Pods as GET /api/v1/namespaces/<ns>/pods/<name> shows them: Running,
  // with `uid`, on `node`, without addresses yet. PutPod replaces one of
  // the same name (a new UID).
  void PutPod(const std::string& namespace_, const std::string& name, const std::string& uid,
              const std::string& node = "test-node");
  // Sets status.podIP (the first) and status.podIPs, as the kubelet does
  // once the sandbox has its network.
  void SetPodIps(const std::string& namespace_, const std::string& name,
                 const std::vector<std::string>& ips);
  // The pod as the server holds it now.
  std::optional<nlohmann::json> Pod(const std::string& namespace_, const std::string& name) const;
  // Sets metadata.deletionTimestamp: the pod is terminating.
  void TerminatePod(const std::string& namespace_, const std::string& name);
  // Sets status.phase ("Succeeded" or "Failed": every container has ended).
  void SetPodPhase(const std::string& namespace_, const std::string& name,
                   const std::string& phase);
  // Removes the pod; tokens bound to it are refused (401) from now on.
  void DeletePod(const std::string& namespace_, const std::string& name);
  // Accepts `token` as long as pod namespace_/name exists (a bound token),
  // authenticating "system:serviceaccount:<namespace_>:<service_account>".
  // The default is the account Kubernetes gives a pod that names none.
  void BindToken(const std::string& token, const std::string& namespace_, const std::string& name,
                 const std::string& service_account = "default");
  // CertificateRequests created while their owner pod (by UID) was already
  // terminating or gone.
  int creates_for_gone_pods() const;
  // CertificateRequests that exist now owned by the pod with `uid`.
  int RequestsOwnedBy(const std::string& uid) const;
  // Runs `action` once, when the next request with `method` arrives, before
  // it is authorized and handled (to change the world between two calls).
  void BeforeNext(const std::string& method, std::function<void()> action);

  // How requests created from now on are answered.
  void SetPolicy(SignerPolicy policy, std::string message = "");
  // An approver for requests created from now on (an empty function removes
  // it): each one, as stored (spec.username set, no status), is given to
  // `approver` first. nullopt approves it, and the policy applies as
  // without an approver (kPending leaves it pending); a message denies it
  // as SignerPolicy::kDeny does, after the sign delay if one is set,
  // whatever the policy. Called with the server's lock held: it must not
  // call this FakeKubeApi. Resolve() does not consult it.
  void SetApprover(
      std::function<std::optional<std::string>(const nlohmann::json& request)> approver);
  // Answer with an empty status.ca and the signer CA appended to the chain.
  void SetOmitCa(bool omit);
  // Requests created from now on get their outcome `delay` after the create
  // (a signer that takes time) instead of in the create's own answer; zero
  // goes back to answering at once. kPending is not affected.
  void SetSignDelay(std::chrono::milliseconds delay);
  // Gives the pending request namespace_/name its outcome. False if unknown.
  bool Resolve(const std::string& namespace_, const std::string& name, SignerPolicy policy,
               std::string message = "");

  // The next `count` requests with `method` ("" for any, watches excluded)
  // get `http_status`, with Retry-After when `retry_after_seconds` >= 0.
  void FailNext(const std::string& method, int count, int http_status,
                int retry_after_seconds = -1);

  // Ends every open watch stream (cleanly; clients must resume).
  void DropWatches();
  // Forgets history: a watch from any resourceVersion so far gets 410; a
  // list now returns a newer one.
  void Compact();
  // Deletes request namespace_/name with its event lost, as when a watch
  // was away while history was compacted past the deletion: a watch that
  // resumes gets 410 and must list again to learn of it.
  void DeleteUnseen(const std::string& namespace_, const std::string& name);
  // 410 as an ERROR event in a 200 stream (true) or as HTTP 410 (false).
  void SetGoneAsEvent(bool as_event);

  std::vector<RecordedRequest> Requests() const;
  // The bodies of the recorded POSTs (the created objects), in order.
  std::vector<nlohmann::json> PostedBodies() const;
  // Recorded requests with `method` whose path starts with `path_prefix`;
  // `watch` selects watch or non-watch requests.
  int Count(const std::string& method, const std::string& path_prefix, bool watch = false) const;
  std::optional<nlohmann::json> Object(const std::string& namespace_,
                                       const std::string& name) const;
  size_t ObjectCount() const;
  // Inserts an object directly (as if someone else created it).
  void Put(const nlohmann::json& object);
  int open_watches() const;

  // Waits (real time, up to `timeout`) until `predicate` holds; it is
  // re-checked after every change the server sees and every 20 ms. False
  // on timeout.
  bool WaitUntil(const std::function<bool()>& predicate,
                 std::chrono::milliseconds timeout = std::chrono::seconds(10));

 private:
  struct Event {
    int64_t resource_version;
    std::string type;
    nlohmann::json object;
    std::string resource = "certificaterequests";  // or "pods"
  };
  struct Failure {
    std::string method;
    int count;
    int http_status;
    int retry_after;
  };

  // Returns false after writing an error answer.
  bool Admit(const httplib::Request& request, httplib::Response& response, bool watch);
  void Create(const std::string& namespace_, const httplib::Request& request,
              httplib::Response& response);
  void List(const std::string& namespace_, const httplib::Request& request,
            httplib::Response& response);
  void Watch(const std::string& namespace_, const httplib::Request& request,
             httplib::Response& response, const std::string& resource = "certificaterequests");
  void ListPods(const httplib::Request& request, httplib::Response& response);
  void PatchPodStatus(const std::string& key, const httplib::Request& request,
                      httplib::Response& response);
  // Must hold mutex_. Bumps the pod's resourceVersion and records the event.
  void PodChangedLocked(const std::string& key, const std::string& type);
  // Must hold mutex_. Stores `object` with a new resourceVersion and records the event.
  void StoreLocked(nlohmann::json object, const std::string& type);
  void ApplyPolicyLocked(const std::string& key, SignerPolicy policy, const std::string& message);
  // Must hold mutex_. The user `authorization` (the header) authenticates;
  // nullopt when it authenticates none.
  std::optional<std::string> UsernameLocked(const std::string& authorization) const;
  // Applies the delayed outcomes as they fall due, until stopping_.
  void SignDelayedLoop();

  TempDir dir_;
  std::string server_ca_pem_;
  std::unique_ptr<LocalCa> signer_;
  std::unique_ptr<httplib::SSLServer> server_;
  std::thread server_thread_;
  int port_ = 0;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool stopping_ = false;
  std::map<std::string, std::string> tokens_;  // token -> username
  SignerPolicy policy_ = SignerPolicy::kApprove;
  std::string policy_message_;
  std::function<std::optional<std::string>(const nlohmann::json&)> approver_;
  bool omit_ca_ = false;
  bool gone_as_event_ = false;
  std::vector<Failure> failures_;
  std::vector<RecordedRequest> requests_;
  std::map<std::string, nlohmann::json> objects_;  // "namespace/name"
  std::map<std::string, nlohmann::json> pods_;     // "namespace/name"
  struct BoundToken {
    std::string pod;  // "namespace/name"
    std::string username;
  };
  std::map<std::string, BoundToken> bound_tokens_;
  std::vector<std::pair<std::string, std::function<void()>>> before_next_;
  int creates_for_gone_pods_ = 0;
  std::vector<Event> events_;
  int64_t resource_version_ = 1000;
  int64_t compacted_before_ = 0;
  int drop_generation_ = 0;
  int open_watches_ = 0;
  int name_counter_ = 0;

  struct DelayedOutcome {
    std::chrono::steady_clock::time_point due;
    std::string key;
    SignerPolicy policy;
    std::string message;
  };
  std::chrono::milliseconds sign_delay_{0};
  std::vector<DelayedOutcome> delayed_;  // in order of `due`
  std::thread delayed_signer_;           // started by the first SetSignDelay
};

// Writes a kubeconfig at `path` for `server`, trusting `ca_pem`, with the
// fake's token; returns `path`.
std::string WriteKubeconfig(const std::string& path, const std::string& server,
                            const std::string& ca_pem);

}  // namespace certmount::testing
