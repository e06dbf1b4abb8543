// The cert-manager signer: each issuance is a cert-manager.io/v1
// CertificateRequest in the pod's namespace, owned by the pod and labelled
// with hashes of the node and volume ids. No request is created unless the
// node's pod watch (or, when it cannot tell, a GET of the pod) shows the pod
// running with the volume's pod UID. One watch per issuer
// (cluster-wide, filtered by the node label) reports every pending request's
// outcome; no request is polled. Requests of volumes that are gone are
// deleted in the background, retried until the API server confirms. See
// docs/cert-manager.md.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>

#include "common/status.h"
#include "issue/issuer.h"
#include "kube/client.h"
#include "kube/pod_cache.h"
#include "kube/watcher.h"

namespace certmount {

inline constexpr const char* kNodeLabel = "certmount.io/node";
inline constexpr const char* kVolumeLabel = "certmount.io/volume";

// The label value for a node or volume id: the first 32 hex digits of its
// SHA-256 (ids may be longer than 63 characters or contain characters labels
// do not allow).
std::string IdLabelValue(std::string_view id);

// The CertificateRequest name for the `issuance`-th issuance of `volume_id`:
// "certmount-<32 hex of sha256(volume_id)>-<issuance>", a valid object name.
// Callers pass it as IssueInput::request_name and keep `issuance` (and the
// key and CSR) unchanged across retries of the same issuance.
std::string CertificateRequestName(std::string_view volume_id, uint64_t issuance);

struct CertManagerIssuerOptions {
  // This node's id; its hash labels every request and selects the watch.
  std::string node_id;
  // How long one watch connection lasts before it is renewed.
  std::chrono::seconds watch_timeout{300};
  // Bound on the calls DeleteRequests makes.
  std::chrono::seconds delete_timeout{30};
  // How long a request still pending when its try ran out of time stays
  // watched for the next try (kubelet retries within about two minutes).
  std::chrono::seconds park_pending_for{600};
  // A failed retirement is tried again after this, doubling up to the max.
  std::chrono::milliseconds retire_backoff_initial{1000};
  std::chrono::milliseconds retire_backoff_max{300000};
  // Requests kept per volume after a successful issuance (the newest ones).
  int max_requests_per_volume = 1;
  // The node's pod watch, asked before the pod is read with a GET. Null:
  // every pod check is a GET. Must outlive the issuer.
  const kube::PodCache* pod_cache = nullptr;
  // How long a pod check waits for the watch to answer (its first list not
  // done yet, or a pod newer than its last event) before the GET; never
  // past the call's deadline. kubelet learns of a pod from the same kind of
  // watch, so a new pod's event is normally here before its publish; one
  // still missing after a second means the watch is behind, and the GET is
  // then the better answer. docs/cert-manager.md ("Pod liveness").
  std::chrono::milliseconds pod_cache_wait{1000};
};

class CertManagerIssuer final : public Issuer {
 public:
  // `client` is shared with whoever else talks to the API server. The watch
  // starts with the first Issue, not here, so a node that never issues
  // through cert-manager never watches.
  CertManagerIssuer(std::shared_ptr<kube::Client> client, CertManagerIssuerOptions options);
  // Stops the watch and wakes every waiting Issue (they return CANCELLED).
  ~CertManagerIssuer() override;

  std::string Name() const override { return "cert-manager"; }

  // Every issuance is a CertificateRequest named CertificateRequestName.
  bool Resumable() const override { return true; }
  std::string RequestName(std::string_view volume_id, uint64_t issuance) const override {
    return CertificateRequestName(volume_id, issuance);
  }

  // First checks the pod (input.pod): asks options.pod_cache, waiting up to
  // pod_cache_wait for it to answer, else reads the pod with the driver's
  // own credentials. One that is gone, has another UID, is terminating or
  // has finished gets
  // ABORTED (non-final for kubelet, which then unpublishes), nothing is
  // created, and the volume's requests are retired. A pod the driver may not
  // read is PERMISSION_DENIED; no pod name or UID is INVALID_ARGUMENT.
  // The calls the try needs (the pod read when the watch could not answer,
  // the create unless an earlier try of the same issuance left its request
  // pending) are taken from the client's rate limit together, at publish
  // priority for IssuePurpose::kPublish and background otherwise; when they
  // could not be granted 250 ms (at most a quarter of the time left) before
  // `deadline` the answer is
  // DEADLINE_EXCEEDED at once, with no call made. Then
  // creates the CertificateRequest input.request_name (or, when empty, one
  // named by the API server from "certmount-") in input.pod.namespace_ and
  // waits for its outcome. When the name already exists with the same CSR
  // the existing request is resumed (restarts and retries never create a
  // second one); with another CSR (its key is lost) it is deleted and
  // created again. Outcomes: Ready=True with a certificate: the chain and
  // status.ca (when status.ca is empty, the chain's last certificate if the
  // chain has more than one, else empty); Denied: FAILED_PRECONDITION;
  // Ready=False reason Failed: FAILED_PRECONDITION; InvalidRequest:
  // INVALID_ARGUMENT; deleted while waiting: ABORTED; still pending at
  // `deadline` (on the client's clock): DEADLINE_EXCEEDED, the request left
  // in place and watched for the next try of the same issuance (which then
  // makes no call; park_pending_for), unless the pod watch shows the pod gone or going (then
  // ABORTED and the request is deleted; no GET is made past `deadline`);
  // API server unreachable: UNAVAILABLE; `stop`:
  // CANCELLED. Every message names the request and carries cert-manager's
  // message. Uses input.bearer_token_override for the create/get/delete when
  // set (the watch and pod reads always use the client's own credentials);
  // when that token is refused (401/403) and the pod is gone or going (per
  // the watch, else a GET made before `deadline`), the answer is ABORTED as
  // above, else PERMISSION_DENIED. Thread-safe.
  Result<IssuedCertificate> Issue(const IssueInput& input,
                                  std::chrono::steady_clock::time_point deadline,
                                  std::stop_token stop) override;

  // True when options.pod_cache shows the pod running (no wait, no call).
  bool KnowsPodRunning(const PodInfo& pod) const override;

  // Queues DeleteRequests for the volume on a background thread: keeping the
  // newest max_requests_per_volume requests up to `current_issuance`, or
  // none when the volume is gone (`namespace_` may then be empty: the
  // requests are found cluster-wide by their labels). A failure is logged
  // and retried with backoff until it succeeds or the issuer is destroyed
  // (the next start's RetireAllExcept finishes it). A gone-volume
  // retirement still queued when the volume is issued for again is dropped.
  // Nothing is queued (no call is made) while `current_issuance` is below
  // max_requests_per_volume: no request of the volume is old enough to go.
  void Retire(const std::string& namespace_, const std::string& volume_id,
              std::optional<uint64_t> current_issuance) override;

  // Queues DeleteOrphanRequests(live_volume_ids), retried like Retire.
  // Requests of volumes issued for after this call are never deleted by it.
  void RetireAllExcept(const std::set<std::string>& live_volume_ids) override;

  // Waits until no retirement is running and every queued one has been
  // tried at least once; for tests.
  void WaitForRetirements();

  // Deletes this node's requests for `volume_id` in `namespace_` (empty:
  // any namespace, listed cluster-wide) except the ones named in `keep`
  // (empty: all of them). Tries every one and returns the first failure;
  // NOT_FOUND counts as deleted.
  Status DeleteRequests(const std::string& namespace_, const std::string& volume_id,
                        const std::set<std::string>& keep, std::stop_token stop = {});

  // Deletes every request labelled with this node whose volume label is not
  // that of one of `live_volume_ids` nor of a volume issued for since the
  // last RetireAllExcept. Same failure rules as DeleteRequests.
  Status DeleteOrphanRequests(const std::set<std::string>& live_volume_ids,
                              std::stop_token stop = {});

  // The number of watch lists so far; for tests.
  int watch_lists() const;

 private:
  struct Waiter {
    std::condition_variable_any changed;
    // Set once the request reached an outcome.
    std::optional<Result<IssuedCertificate>> outcome;
    // The spec.request (base64 CSR) this issuance sent: objects with another
    // one are an older issuance under the same name and are ignored.
    std::string expected_request;
    // What the request said last while pending, for the deadline message.
    std::string last_state = "no status yet";
    int users = 0;
    // The request is known to exist with expected_request (this issuer
    // created or resumed it): a later try of the same issuance waits for
    // its outcome without another call.
    bool created = false;
    // A create for it is queued in the background (QueueCreate): tries wait
    // for that one instead of making their own.
    bool queued = false;
    // The volume the request is for, to drop a parked waiter when the
    // volume goes.
    std::string volume_id;
    // A waiter that no try uses any more is parked until then when its
    // request is still pending, so an outcome the watch brings meanwhile
    // is there for the next try; otherwise it is dropped at once.
    std::chrono::steady_clock::time_point parked_until{};
  };

  // What the pod cache knows of the pod, waiting for an answer up to
  // pod_cache_wait (and `deadline`); nullopt without a cache or an answer.
  std::optional<kube::PodLiveness> WatchedLiveness(const kube::PodRef& pod,
                                                   std::chrono::steady_clock::time_point deadline,
                                                   std::stop_token stop);
  // ABORTED for a pod that is not running, after queueing the retirement of
  // the volume's requests.
  Status PodNotRunning(const IssueInput& input, kube::PodLiveness liveness);
  // Whether an earlier try of this very issuance (same name and CSR)
  // created its request and left it parked: this try then creates nothing.
  bool AwaitsParkedRequest(const IssueInput& input);
  // Creates (or resumes) the request and waits for its outcome; its calls
  // spend `budget` first.
  Result<IssuedCertificate> CreateAndWait(const IssueInput& input,
                                          std::chrono::steady_clock::time_point deadline,
                                          std::stop_token stop, kube::ApiBudget* budget);
  // A request named by the server (generateName): create, then wait.
  Result<IssuedCertificate> CreateUnnamedAndWait(const IssueInput& input, const std::string& body,
                                                 const std::string& csr_b64,
                                                 std::chrono::steady_clock::time_point deadline,
                                                 std::stop_token stop, kube::ApiBudget* budget);
  // A request with the issuance's own name: create it, or resume the one
  // already there when it holds the same CSR, or replace one holding another
  // CSR; ABORTED after three rounds lost to another writer. The caller has
  // registered its waiter.
  Status CreateOrResumeNamed(const IssueInput& input, const std::string& body,
                             const std::string& csr_b64,
                             std::chrono::steady_clock::time_point deadline, std::stop_token stop,
                             kube::ApiBudget* budget);
  // Turns a refused pod token or a deadline into ABORTED when the pod is
  // gone or going (the request is then retired); otherwise `result`. Asks
  // the pod cache, then (the failure hints that the watch may lag) reads
  // the pod, but only while `deadline` has not passed.
  Result<IssuedCertificate> CheckPodAfterFailure(const IssueInput& input,
                                                 Result<IssuedCertificate> result,
                                                 std::chrono::steady_clock::time_point deadline,
                                                 std::stop_token stop);
  // A volume is being issued for: drop queued gone-volume retirements of it
  // and keep a pending sweep off its requests.
  void NoteIssuing(const std::string& volume_id);
  // Starts the watch thread if it is not running.
  void EnsureWatching();
  void OnEvent(const kube::WatchEvent& event);
  // Around a list of the requests: after a complete one, waiters whose
  // request it did not hold are no longer `created`.
  void OnListBoundary(kube::ListBoundary boundary);
  // The waiter for "namespace/name", created on first use or taken over
  // from a parked one; parked waiters past their time are dropped here.
  std::shared_ptr<Waiter> Register(const std::string& key, const std::string& expected_request,
                                   const std::string& volume_id);
  // One try stopped using the waiter. The last one parks it (see
  // Waiter::parked_until) when the request exists and has no outcome yet;
  // otherwise the waiter is dropped.
  void Unregister(const std::string& key);
  // Drops the parked waiters of a volume that is gone.
  void DropParked(const std::string& volume_id);
  // Whether the waiter's request exists or its create is queued.
  bool CreatedOrQueued(const Waiter& waiter);

  // A create left for when the rate limit allows it (QueueCreate).
  struct QueuedCreate {
    std::string key;
    IssueInput input;  // without spec: `body` is the request
    std::string body;
    std::string csr_b64;
  };
  // A publish of a running pod that could not get its create's call before
  // its deadline: the create is queued, at publish priority, and made when
  // its turn comes (if the pod still runs then), and the request is parked
  // for kubelet's retry, which waits for it instead of queueing anew. So
  // the rate limit stays busy with creates that will be used while the
  // pods sit in kubelet's backoff.
  void QueueCreate(const IssueInput& input);
  void RunQueuedCreates(std::stop_token stop);
  void CreateQueued(const QueuedCreate& queued, std::stop_token stop);
  // Ends the queued state of a waiter, with `failure` as its outcome unless
  // OK (the request then exists).
  void EndQueued(const std::string& key, const std::string& csr_b64, const Status& failure);
  // Records what an object says about its request's outcome, if anything.
  void Offer(const std::string& key, const std::string& object_json);
  Result<IssuedCertificate> Wait(const std::string& key, const std::shared_ptr<Waiter>& waiter,
                                 std::chrono::steady_clock::time_point deadline,
                                 std::stop_token stop);

  const std::shared_ptr<kube::Client> client_;
  const CertManagerIssuerOptions options_;
  const std::string node_label_value_;
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<Waiter>> waiters_;
  // While the watch lists: the requests the list delivered so far.
  bool listing_ = false;
  std::set<std::string> listed_keys_;
  std::stop_source shutdown_;
  bool shutting_down_ = false;

  struct Retirement {
    std::string namespace_;
    std::string volume_id;
    std::set<std::string> keep;
    bool volume_gone = false;
    // Set for a RetireAllExcept; volume_id is then empty.
    std::optional<std::set<std::string>> live_volume_ids;
    int attempts = 0;
    std::chrono::steady_clock::time_point not_before{};
  };
  void Enqueue(Retirement retirement);
  Status RunOne(const Retirement& retirement, std::stop_token stop);
  void RunRetirements(std::stop_token stop);
  std::mutex retire_mutex_;
  std::condition_variable_any retire_changed_;
  std::deque<Retirement> retirements_;
  bool retiring_ = false;
  // While a RetireAllExcept is queued: label values of volumes issued for
  // since, which it must not touch.
  bool sweep_pending_ = false;
  std::set<std::string> issued_since_sweep_;
  std::mutex create_mutex_;
  std::condition_variable_any create_changed_;
  std::deque<QueuedCreate> creates_;
  std::unique_ptr<kube::Watcher> watcher_;
  // Declared last: joined before anything the threads use goes away.
  std::jthread retire_thread_;
  std::jthread watch_thread_;
  std::jthread create_thread_;
};

}  // namespace certmount
