// The publish and unpublish sequences, and the startup cleanup that makes a
// crash at any point harmless. This is where "a volume counts only once it is
// published" is enforced: the row is registered unmounted first, and only the
// final transaction, after the bind mount exists, marks it mounted.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <string>

#include "common/clock.h"
#include "common/env.h"
#include "common/status.h"
#include "issue/issuer.h"
#include "issue/request.h"
#include "issue/volume_attributes.h"
#include "state/store.h"
#include "volume/mount.h"
#include "volume/pod_ips.h"
#include "volume/service_account_tokens.h"
#include "volume/volume_observer.h"

namespace certmount {

struct PublishRequest {
  std::string volume_id;
  std::string target_path;
  std::map<std::string, std::string> volume_context;
  // kubelet's VolumeCapability.mount.volume_mount_group (fsGroup delegation).
  std::string volume_mount_group;
};

struct StartupSummary {
  int64_t kept = 0;
  int64_t deleted = 0;
  int64_t unmounted_by_check = 0;
  int64_t orphans_removed = 0;
  // Directories without a row that a live bind mount at a kubelet target
  // still shows: their rows were rebuilt from volume.json and the files.
  int64_t adopted = 0;
  // Directories without a row that a live mount shows but that could not be
  // adopted (no readable description or certificate): kept, not renewed.
  int64_t kept_unadoptable = 0;
  int64_t milliseconds = 0;
};

// The named points of the publish sequence, in order. Tests hold the
// sequence at one of them (see PublisherOptions::step_hook) to crash there.
enum class PublishStep { kRegistered, kKeyGenerated, kIssued, kFilesWritten, kMounted, kCommitted };
const char* PublishStepName(PublishStep step);

struct PublisherOptions {
  std::string data_root;
  std::string target_root = "/var/lib/kubelet/pods";
  std::chrono::milliseconds publish_timeout{std::chrono::seconds(60)};
  bool mount_tmpfs = true;
  // With --use-token-request: where the pods' tokens are kept for renewals;
  // each publish then signs with the pod's own token. Null: the driver's.
  ServiceAccountTokens* tokens = nullptr;
  // The pods' addresses for ${POD_IP} and ${POD_IPS} (volume/pod_ips.h);
  // null when the driver cannot watch pods, which refuses such volumes.
  const PodIps* pod_ips = nullptr;
  // Rows of issuance history kept per volume (the publish writes the first).
  int history_limit = 10;
  // The node's attribute rules (ParseVolumeAttributes).
  AttributeRules attribute_rules;
  // Called after each step; the default does nothing.
  std::function<void(PublishStep, const std::string& volume_id)> step_hook;
};

class Publisher {
 public:
  Publisher(PublisherOptions options, Store* store, Issuer* issuer, Env* env, const Clock* clock);

  // Mounts the volumes tmpfs if needed, then runs the startup cleanup: rows
  // whose target does not show a bind of their own data directory are
  // unmarked, every unmounted row is deleted in one statement, and after the
  // commit their mounts (only ours), files and empty target directories are
  // removed. A directory without a row is removed only when no mount shows
  // it; one still bind-mounted at a kubelet target is adopted (its row
  // rebuilt as mounted from volume.json and its certificate). Must finish
  // before the socket is served and before any renewal starts.
  Result<StartupSummary> Startup();

  // Publishes a volume. OK when it is (now or already) mounted at the target;
  // a repeat re-establishes a bind mount that went away. FAILED_PRECONDITION,
  // with nothing written, when the target is a mount point that is not this
  // volume's or a non-empty directory; INVALID_ARGUMENT when it lies inside
  // another volume's mounted directory; ALREADY_EXISTS for a repeat with
  // other attributes or group. Every failure of a new publish leaves no row,
  // no files and no mount behind. Operations on one volume id never overlap.
  Status Publish(const PublishRequest& request);

  // Removes this volume's own bind mount at the target (one layer, never a
  // foreign mount), the target directory when empty, the row and the files.
  // Idempotent: OK for an unknown volume or a target that is gone. When the
  // unmount fails the row stays mounted and the volume stays scheduled.
  Status Unpublish(const std::string& volume_id, const std::string& target_path);

  // Cancels in-flight publishes; used at shutdown.
  void CancelAll();

  void set_observer(VolumeObserver* observer) { observer_ = observer; }

  // Writes a new file set into a mounted volume's data directory, the way a
  // renewal does (certmountd passes Renewer::Renew), within the publish's
  // deadline. A republish of a volume whose files are gone uses it; without
  // one it answers UNAVAILABLE.
  using Reissuer = std::function<Result<IssuedCertificateFields>(
      const VolumeRecord&, std::chrono::steady_clock::time_point deadline, std::stop_token)>;
  void set_reissuer(Reissuer reissue) { reissue_ = std::move(reissue); }

  std::string VolumeDir(const std::string& volume_id) const;

 private:
  struct InFlight {
    bool unpublish = false;
    std::string target_path;
    std::stop_source stop;
    bool done = false;
    Status result;
    std::condition_variable finished;
  };

  // What the mount table and the directory say about a target.
  struct TargetState {
    bool exists = false;
    std::string canonical;  // as mountinfo prints it
    TargetHolder holder = TargetHolder::kNothing;
    std::string description;  // of the foreign mount, for messages
  };

  // Publish without the timing. Everything it does, waiting behind another
  // operation on the volume included, counts against `deadline`.
  Status PublishOnce(const PublishRequest& request, std::chrono::steady_clock::time_point deadline);
  // Waits until no other operation of the volume runs, then registers this
  // publish. Returns the flight to Release, or the publish's outcome: the
  // result of the same publish already running, ALREADY_EXISTS for one at
  // another target, DEADLINE_EXCEEDED when `deadline` passes while waiting.
  Result<std::shared_ptr<InFlight>> ClaimForPublish(const PublishRequest& request,
                                                    std::chrono::steady_clock::time_point deadline);
  // Refuses a target the volume may not use; describes it otherwise.
  Result<TargetState> InspectTarget(const std::string& target, const std::string& volume_id);
  // A publish of a volume whose row is mounted: checks the request matches,
  // then verifies files and mount, re-mounting when the mount is gone.
  Status Republish(const PublishRequest& request, const VolumeRecord& wanted,
                   const TargetState& target, std::chrono::steady_clock::time_point deadline,
                   std::stop_token stop);
  // Issues a mounted volume's files again through the reissuer, with no
  // scheduled renewal of it running meanwhile, and records the new
  // certificate. On failure returns its error; row and mount stay as they
  // were and the volume stays scheduled at its old time.
  Status ReissueNow(const VolumeRecord& row, std::chrono::steady_clock::time_point deadline,
                    std::stop_token stop);
  // Waits on `lock` (of mu_) until `running` is done: false when `deadline`
  // (on clock_) passes first.
  bool WaitUntilDone(std::unique_lock<std::mutex>& lock, InFlight& running,
                     std::chrono::steady_clock::time_point deadline) const;
  // An unpublish of a volume without a row (its publish failed) whose
  // resumable issuance is pending, at the target it was published for,
  // while the signer knows its pod running: kubelet will retry the publish,
  // so the pending key, CSR and request stay for that retry (true) instead
  // of being removed. Startup sweeps them if no retry comes before a
  // restart; an unpublish once the pod is going removes them.
  bool KeepsPendingForRetry(const std::string& volume_id, const std::string& target_path);
  Status UnpublishClaimed(const std::string& volume_id, const std::string& target_path);
  // Waits until no other operation of `volume_id` runs (cancelling a
  // publish), then registers an unpublish.
  std::shared_ptr<InFlight> ClaimForUnpublish(const std::string& volume_id);
  void Release(const std::string& volume_id, const std::shared_ptr<InFlight>& flight,
               const Status& result);
  // Startup's steps: mount (or create) the volumes tmpfs and learn the
  // canonical roots; delete every row whose mount is not proven (one
  // transaction, reattaching lost tmpfs views); remove one deleted row's
  // mount, files, empty target and signer objects, each failure logged and
  // left for the next start; publish the startup gauges.
  Status PrepareVolumesRoot();
  // Sets `reattached` when it mounted anything (a lost tmpfs view).
  Result<StartupCleanupResult> DeleteUnprovenRows(const MountTable& mounts, bool* reattached);
  void RemoveDeleted(const DeletedVolume& deleted, const MountTable& mounts,
                     const std::map<std::string, std::vector<std::string>>& shown);
  void RecordStartupMetrics(const StartupSummary& summary,
                            std::chrono::steady_clock::duration took);
  // Removes directories without a row unless a mount shows them; adopts
  // those bind-mounted at a kubelet target. Returns the ids that have a row
  // afterwards (adopted ones included), or nullopt when the rows or the
  // directory could not be listed (logged; nothing was removed).
  std::optional<std::set<std::string>> SweepOrAdopt(const MountTable& mounts,
                                                    StartupSummary& summary);
  Status Adopt(const std::string& volume_id, const std::string& target);
  // A mounted row whose target shows its directory on a volumes tmpfs that
  // is no longer the driver's: reattach that directory through the target,
  // or record why not so the volume reports abnormal.
  void ReattachOrReport(const std::string& volume_id, const std::string& target);
  // The volume's data directory and a target path as mountinfo prints them.
  std::string MountSourceDir(const std::string& volume_id) const;
  std::string CanonicalTarget(const std::string& target) const;
  // A publish of a volume without a mounted row: register, issue, mount,
  // commit; a failure before the commit rolls back (NewPublishRollback).
  Status PublishNew(const PublishRequest& request, const CertificateSpec& spec,
                    std::chrono::steady_clock::time_point deadline, std::stop_token stop);
  class NewPublishRollback;
  // The row a new publish registers.
  VolumeRecord NewRecord(const PublishRequest& request, const PodInfo& pod,
                         std::optional<gid_t> gid) const;
  // Registers `record` unmounted. Returns nullopt when it did; otherwise the
  // publish's outcome (a republish of the mounted volume, or an error).
  std::optional<Status> Register(const PublishRequest& request, const VolumeRecord& record,
                                 const TargetState& target,
                                 std::chrono::steady_clock::time_point deadline,
                                 std::stop_token stop);
  // Issues into the new volume's data directory; a timed-out resumable
  // issuance tells `rollback` to keep its pending key and CSR.
  Result<IssuedCertificateFields> IssueNew(const PublishRequest& request,
                                           const CertificateSpec& spec, const VolumeRecord& record,
                                           std::chrono::steady_clock::time_point deadline,
                                           std::stop_token stop, NewPublishRollback& rollback);
  // Bind-mounts the data directory at the target unless a bind of it is
  // there already, telling `rollback` what it created.
  Status MountNew(const PublishRequest& request, const TargetState& target,
                  NewPublishRollback& rollback);
  // Undoes a failed publish: unmount, files, row. Keeps the first error.
  // With `keep_pending`, a resumable issuance's pending key and CSR stay
  // for kubelet's retry of the publish.
  void RollBack(const std::string& volume_id, const std::string& target_path, bool mounted,
                bool created_target, bool keep_pending);
  void Step(PublishStep step, const std::string& volume_id) const;

  PublisherOptions options_;
  Store* store_;
  Issuer* issuer_;
  Env* env_;
  const Clock* clock_;
  VolumeObserver* observer_ = nullptr;
  Reissuer reissue_;

  // Canonical forms of the volumes root and the target root (Startup
  // resolves them; until then the configured paths).
  std::string canonical_volumes_root_;
  std::string canonical_target_root_;

  std::mutex mu_;
  std::map<std::string, std::shared_ptr<InFlight>> in_flight_;
};

}  // namespace certmount
