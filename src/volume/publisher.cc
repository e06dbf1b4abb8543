#include "volume/publisher.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <set>

#include "common/metrics.h"
#include "issue/attributes.h"
#include "issue/cert_manager_issuer.h"
#include "volume/atomic_writer.h"
#include "volume/issuance.h"
#include "volume/mount.h"
#include "volume/mountinfo.h"
#include "volume/paths.h"
#include "volume/volume_layout.h"

namespace certmount {

namespace {

// The publisher's metric families, registered while the program starts so
// that each renders (at zero) before its first update.
struct PublisherMetrics {
  metrics::HistogramFamily& publish_seconds = metrics::DefaultRegistry().AddHistogram(
      "certmount_publish_duration_seconds",
      "Time NodePublishVolume spent in the publisher, by result (ok or error).", {"result"},
      metrics::DurationBuckets());
  metrics::Histogram& publish_ok = publish_seconds.WithLabels({"ok"});
  metrics::Histogram& publish_error = publish_seconds.WithLabels({"error"});
  metrics::CounterFamily& issuances = metrics::DefaultRegistry().AddCounter(
      "certmount_issuances_total",
      "Issuances that ran to an outcome, by issuer, kind (publish or renewal) and result (ok or "
      "error).",
      {"issuer", "kind", "result"});
  metrics::HistogramFamily& issuance_seconds = metrics::DefaultRegistry().AddHistogram(
      "certmount_issuance_duration_seconds",
      "Time one issuance took (key, CSR, issuer, files), by issuer and kind.", {"issuer", "kind"},
      metrics::DurationBuckets());
  metrics::GaugeFamily& startup_volumes = metrics::DefaultRegistry().AddGauge(
      "certmount_startup_cleanup_volumes",
      "What the startup cleanup did, by outcome: kept (mounted rows), deleted (rows removed), "
      "unmounted (of the deleted, rows whose target was no longer mounted), orphans_removed "
      "(directories without a row).",
      {"outcome"});
  metrics::Gauge& startup_seconds = metrics::DefaultRegistry()
                                        .AddGauge("certmount_startup_cleanup_duration_seconds",
                                                  "How long the startup cleanup took.")
                                        .WithLabels({});
};

PublisherMetrics& Metrics() {
  static PublisherMetrics publisher_metrics;
  return publisher_metrics;
}

[[maybe_unused]] const PublisherMetrics& registered_at_startup = Metrics();

const char* KindLabel(IssuanceKind kind) {
  return kind == IssuanceKind::kPublish ? "publish" : "renewal";
}

}  // namespace

void RecordIssuanceMetrics(const std::string& issuer, IssuanceKind kind, bool ok, double seconds) {
  PublisherMetrics& m = Metrics();
  const std::string kind_label = KindLabel(kind);
  m.issuances.WithLabels({issuer, kind_label, ok ? "ok" : "error"}).Increment();
  m.issuance_seconds.WithLabels({issuer, kind_label}).Observe(seconds);
}

const char* PublishStepName(PublishStep step) {
  switch (step) {
    case PublishStep::kRegistered:
      return "registered";
    case PublishStep::kKeyGenerated:
      return "key-generated";
    case PublishStep::kIssued:
      return "issued";
    case PublishStep::kFilesWritten:
      return "files-written";
    case PublishStep::kMounted:
      return "mounted";
    case PublishStep::kCommitted:
      return "committed";
  }
  return "unknown";
}

Publisher::Publisher(PublisherOptions options, Store* store, Issuer* issuer, Env* env,
                     const Clock* clock)
    : options_(std::move(options)), store_(store), issuer_(issuer), env_(env), clock_(clock) {}

std::string Publisher::VolumeDir(const std::string& volume_id) const {
  return VolumeLayout::For(options_.data_root, volume_id).root;
}

void Publisher::Step(PublishStep step, const std::string& volume_id) const {
  if (options_.step_hook) options_.step_hook(step, volume_id);
}

Result<StartupSummary> Publisher::Startup() {
  const auto started = clock_->SteadyNow();
  const std::string volumes_root = VolumesRoot(options_.data_root);
  if (options_.mount_tmpfs) {
    CERTMOUNT_RETURN_IF_ERROR(MountTmpfsIfNeeded(volumes_root, env_));
  } else {
    CERTMOUNT_RETURN_IF_ERROR(env_->CreateDirectories(volumes_root, 0711));
  }

  CERTMOUNT_ASSIGN_OR_RETURN(MountTable mounts, MountTable::Read(env_));
  CERTMOUNT_ASSIGN_OR_RETURN(StartupCleanupResult cleanup,
                             store_->StartupCleanup([&](const std::string& target) {
                               return mounts.IsMountPoint(target);
                             }));

  // The rows are gone and committed: from here on nothing will renew them, so
  // removing their mounts and files can fail or crash without consequence;
  // the orphan sweep below (next start at the latest) finishes the job.
  StartupSummary summary;
  summary.kept = cleanup.kept;
  summary.deleted = static_cast<int64_t>(cleanup.deleted.size());
  summary.unmounted_by_check = cleanup.unmounted_by_check;
  for (const DeletedVolume& deleted : cleanup.deleted) {
    if (IsMountedFrom(mounts, deleted.target_path, VolumeDir(deleted.volume_id))) {
      Status unmounted = Unmount(deleted.target_path, env_);
      if (!unmounted.ok()) {
        spdlog::warn("startup cleanup: cannot unmount {}: {}", deleted.target_path,
                     unmounted.ToString());
      }
    }
    Status removed = RemoveVolumeDir(VolumeDir(deleted.volume_id), env_);
    if (!removed.ok()) {
      spdlog::warn("startup cleanup: cannot remove files of {}: {}", deleted.volume_id,
                   removed.ToString());
    }
    // The signer's leftovers (a pending CertificateRequest) go too, in the
    // background: an unreachable API server delays nothing here.
    issuer_->Retire(deleted.pod_namespace, deleted.volume_id, std::nullopt);
  }

  // Directories without a row: left by a crash between a commit that
  // deleted the row and the removal of its files.
  // After the cleanup every row is mounted, so the lean schedule query names
  // them all without parsing 100k attribute objects.
  CERTMOUNT_ASSIGN_OR_RETURN(std::vector<ScheduledVolume> rows, store_->ListRenewalSchedule());
  std::set<std::string> known;
  for (const ScheduledVolume& row : rows) known.insert(row.volume_id);
  // The signer's objects of volumes without a row go too (in the background).
  issuer_->RetireAllExcept(known);
  CERTMOUNT_ASSIGN_OR_RETURN(std::vector<std::string> entries, env_->ListDirectory(volumes_root));
  for (const std::string& name : entries) {
    if (known.count(name) != 0) continue;
    Status removed = RemoveVolumeDir(volumes_root + "/" + name, env_);
    if (removed.ok()) {
      ++summary.orphans_removed;
    } else {
      spdlog::warn("startup cleanup: cannot remove {}: {}", name, removed.ToString());
    }
  }
  summary.milliseconds =
      std::chrono::duration_cast<std::chrono::milliseconds>(clock_->SteadyNow() - started).count();
  PublisherMetrics& m = Metrics();
  m.startup_volumes.WithLabels({"kept"}).Set(static_cast<double>(summary.kept));
  m.startup_volumes.WithLabels({"deleted"}).Set(static_cast<double>(summary.deleted));
  m.startup_volumes.WithLabels({"unmounted"}).Set(static_cast<double>(summary.unmounted_by_check));
  m.startup_volumes.WithLabels({"orphans_removed"})
      .Set(static_cast<double>(summary.orphans_removed));
  m.startup_seconds.Set(std::chrono::duration<double>(clock_->SteadyNow() - started).count());
  return summary;
}

Status Publisher::Publish(const PublishRequest& request) {
  const auto started = clock_->SteadyNow();
  Status result = PublishOnce(request);
  const double seconds = std::chrono::duration<double>(clock_->SteadyNow() - started).count();
  (result.ok() ? Metrics().publish_ok : Metrics().publish_error).Observe(seconds);
  return result;
}

Status Publisher::PublishOnce(const PublishRequest& request) {
  CERTMOUNT_RETURN_IF_ERROR(ValidateVolumeId(request.volume_id));
  CERTMOUNT_RETURN_IF_ERROR(ValidateTargetPath(request.target_path, options_.target_root, env_));
  CERTMOUNT_ASSIGN_OR_RETURN(CertificateSpec spec, ParseAttributes(request.volume_context));
  if (options_.tokens != nullptr) {
    // Every publish, a repeat of a mounted volume included (kubelet
    // republishes to hand over fresh tokens), refreshes the token renewals use.
    Result<std::string> token = ServiceAccountToken(request.volume_context);
    if (!token.ok()) {
      return Status::FailedPrecondition(token.status().message());
    }
    options_.tokens->Set(request.volume_id, std::move(*token));
  }

  const auto deadline = clock_->SteadyNow() + options_.publish_timeout;
  std::shared_ptr<InFlight> flight;
  {
    std::unique_lock lock(mu_);
    auto it = in_flight_.find(request.volume_id);
    if (it != in_flight_.end()) {
      // A retry from kubelet while the first attempt is still issuing: share
      // its outcome rather than start a second issuance.
      std::shared_ptr<InFlight> first = it->second;
      if (first->target_path != request.target_path) {
        return Status::AlreadyExists("volume " + request.volume_id + " is being published at " +
                                     first->target_path);
      }
      if (!first->finished.wait_until(lock, deadline, [&] { return first->done; })) {
        return Status::Aborted("a publish of volume " + request.volume_id +
                               " is still in progress; retry later");
      }
      return first->result;
    }
    flight = std::make_shared<InFlight>();
    flight->target_path = request.target_path;
    in_flight_[request.volume_id] = flight;
  }

  Status result = PublishNew(request, spec, flight->stop.get_token());

  std::lock_guard lock(mu_);
  flight->done = true;
  flight->result = result;
  flight->finished.notify_all();
  in_flight_.erase(request.volume_id);
  return result;
}

namespace {

// Picks the group the files belong to: the pod's explicit fs-group attribute
// wins over kubelet's volume_mount_group.
Result<std::optional<gid_t>> FileGroup(const CertificateSpec& spec,
                                       const std::string& volume_mount_group) {
  if (spec.fs_group.has_value()) return std::optional<gid_t>(*spec.fs_group);
  if (volume_mount_group.empty()) return std::optional<gid_t>();
  char* end = nullptr;
  errno = 0;
  unsigned long gid = std::strtoul(volume_mount_group.c_str(), &end, 10);
  if (errno != 0 || end == volume_mount_group.c_str() || *end != '\0' || gid >= 0xffffffffUL) {
    return Status::InvalidArgument("volume_mount_group \"" + volume_mount_group +
                                   "\" is not a numeric group id");
  }
  return std::optional<gid_t>(static_cast<gid_t>(gid));
}

}  // namespace

Status Publisher::PublishNew(const PublishRequest& request, const CertificateSpec& spec,
                             std::stop_token stop) {
  const std::string& volume_id = request.volume_id;
  const auto deadline = clock_->SteadyNow() + options_.publish_timeout;
  CERTMOUNT_ASSIGN_OR_RETURN(std::optional<gid_t> gid, FileGroup(spec, request.volume_mount_group));

  PodInfo pod = PodInfoFromContext(request.volume_context);
  VolumeRecord record;
  record.volume_id = volume_id;
  record.target_path = request.target_path;
  record.pod_namespace = pod.namespace_;
  record.pod_name = pod.name;
  record.pod_uid = pod.uid;
  record.service_account = pod.service_account;
  record.attributes = StorableAttributes(request.volume_context);
  record.issuer = issuer_->Name();
  record.file_group = gid;
  if (options_.resumable_issuance) record.request_name = CertificateRequestName(volume_id, 0);
  // Registering first and looking only on a conflict keeps a new volume,
  // the common case, at one transaction.
  CERTMOUNT_ASSIGN_OR_RETURN(std::optional<RegisteredVolume> existing,
                             store_->TryRegisterVolume(record));
  if (existing.has_value()) {
    if (existing->target_path != request.target_path) {
      return Status::AlreadyExists("volume " + volume_id + " is already published at " +
                                   existing->target_path);
    }
    if (existing->mounted) {
      // kubelet republishes (requiresRepublish, or a retry after a lost
      // reply). Tearing a working volume down here is the failure
      // kubernetes#121271 describes, so a repeat is a no-op.
      return Status::Ok();
    }
    // An unmounted row that is not in flight is the remains of a rollback
    // that could not finish; clear it and start over.
    RollBack(volume_id, request.target_path, /*mounted=*/true, /*created_target=*/false,
             /*keep_pending=*/false);
    CERTMOUNT_ASSIGN_OR_RETURN(existing, store_->TryRegisterVolume(record));
    if (existing.has_value()) {
      // Only a second writer of the database could have put it back.
      return Status::Aborted("volume " + volume_id + " was registered again while its stale row " +
                             "was being cleared; retry");
    }
  }
  Step(PublishStep::kRegistered, volume_id);

  bool mounted = false;
  bool created_target = false;
  bool keep_pending = false;
  auto fail = [&](const Status& status) {
    RollBack(volume_id, request.target_path, mounted, created_target, keep_pending);
    // The volume is gone, unless its pending request is kept for kubelet's retry.
    if (!keep_pending) issuer_->Retire(pod.namespace_, volume_id, std::nullopt);
    return status;
  };

  const VolumeLayout layout = VolumeLayout::For(options_.data_root, volume_id);
  Status secrets = SaveSecretAttributes(layout, SecretAttributes(request.volume_context), env_);
  if (!secrets.ok()) return fail(secrets);
  IssuanceRequest issuance;
  issuance.volume_id = volume_id;
  issuance.spec = &spec;
  issuance.pod = pod;
  if (options_.tokens != nullptr) {
    issuance.bearer_token_override = options_.tokens->Get(volume_id).value_or("");
  }
  issuance.layout = layout;
  issuance.ownership = FileOwnership{gid};
  issuance.request_name = record.request_name;
  issuance.resumable = options_.resumable_issuance;
  issuance.on_step = [&](IssuanceStep step) {
    switch (step) {
      case IssuanceStep::kKeyGenerated:
        Step(PublishStep::kKeyGenerated, volume_id);
        break;
      case IssuanceStep::kIssued:
        Step(PublishStep::kIssued, volume_id);
        break;
      case IssuanceStep::kFilesWritten:
        Step(PublishStep::kFilesWritten, volume_id);
        break;
    }
  };
  const auto issue_started = clock_->SteadyNow();
  Result<IssuedCertificateFields> fields = IssueIntoVolume(issuance, issuer_, env_, deadline, stop);
  RecordIssuanceMetrics(issuer_->Name(), IssuanceKind::kPublish, fields.ok(),
                        std::chrono::duration<double>(clock_->SteadyNow() - issue_started).count());
  if (!fields.ok()) {
    if (options_.resumable_issuance && fields.status().code() == Code::kDeadlineExceeded) {
      // The request is still pending at the signer. Everything is rolled
      // back but the pending key and CSR, so kubelet's retry of this publish
      // resumes that request instead of replacing it. The issuer answers
      // DEADLINE_EXCEEDED only while the pod runs; if it goes later, kubelet's
      // unpublish (or the next start's sweeps) removes the files and request.
      keep_pending = true;
    }
    return fail(fields.status());
  }

  Result<bool> target_created = EnsureTargetDirectory(request.target_path, env_);
  if (!target_created.ok()) return fail(target_created.status());
  created_target = *target_created;
  Status bound = BindMountReadOnly(layout.data, request.target_path, env_);
  if (!bound.ok()) return fail(bound);
  mounted = true;
  Step(PublishStep::kMounted, volume_id);

  IssuanceAttempt attempt;
  attempt.issuer = issuer_->Name();
  attempt.duration_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(clock_->SteadyNow() - issue_started)
          .count();
  Status committed =
      store_->MarkMountedWithHistory(volume_id, *fields, attempt, options_.history_limit);
  if (!committed.ok()) return fail(committed);
  Step(PublishStep::kCommitted, volume_id);
  issuer_->Retire(pod.namespace_, volume_id, 0);

  if (observer_ != nullptr) observer_->OnMounted({volume_id, fields->next_issuance_at});
  spdlog::info("published volume {} at {} serial {} not_after {}", volume_id, request.target_path,
               fields->serial, fields->not_after);
  return Status::Ok();
}

void Publisher::RollBack(const std::string& volume_id, const std::string& target_path, bool mounted,
                         bool created_target, bool keep_pending) {
  if (mounted) {
    Status s = Unmount(target_path, env_);
    if (!s.ok()) spdlog::warn("rollback {}: unmount: {}", volume_id, s.ToString());
  }
  if (created_target) {
    Status s = env_->RemoveEmptyDirectory(target_path);
    if (!s.ok()) spdlog::warn("rollback {}: remove target: {}", volume_id, s.ToString());
  }
  const VolumeLayout layout = VolumeLayout::For(options_.data_root, volume_id);
  Status files = keep_pending && HasPendingIssuance(layout, env_)
                     ? RemoveVolumeDir(layout.data, env_)
                     : RemoveVolumeDir(layout.root, env_);
  if (!files.ok()) spdlog::warn("rollback {}: files: {}", volume_id, files.ToString());
  Result<bool> row = store_->DeleteVolume(volume_id);
  if (!row.ok()) spdlog::warn("rollback {}: row: {}", volume_id, row.status().ToString());
}

Status Publisher::Unpublish(const std::string& volume_id, const std::string& target_path) {
  CERTMOUNT_RETURN_IF_ERROR(ValidateVolumeId(volume_id));
  {
    // An unpublish overtaking its own publish: stop the issuance, wait for
    // the rollback, and leave nothing for the publish to finish later.
    std::unique_lock lock(mu_);
    auto it = in_flight_.find(volume_id);
    if (it != in_flight_.end()) {
      std::shared_ptr<InFlight> flight = it->second;
      flight->stop.request_stop();
      flight->finished.wait(lock, [&] { return flight->done; });
    }
  }
  if (observer_ != nullptr) observer_->OnRemoved(volume_id);

  CERTMOUNT_ASSIGN_OR_RETURN(std::optional<VolumeRecord> existing, store_->GetVolume(volume_id));
  if (existing.has_value() && existing->target_path != target_path) {
    return Status::InvalidArgument("volume " + volume_id + " is published at " +
                                   existing->target_path + ", not at " + target_path);
  }
  // A target that is already gone needs no unmount; anything else must be
  // below the target root before it is touched.
  if (env_->LStat(target_path).ok()) {
    CERTMOUNT_RETURN_IF_ERROR(ValidateTargetPath(target_path, options_.target_root, env_));
    CERTMOUNT_RETURN_IF_ERROR(Unmount(target_path, env_));
    CERTMOUNT_RETURN_IF_ERROR(env_->RemoveEmptyDirectory(target_path));
  }
  // The row goes before the files: a crash in between leaves an orphan
  // directory, which startup removes, never a row without its files.
  CERTMOUNT_RETURN_IF_ERROR(store_->DeleteVolume(volume_id).status());
  if (options_.tokens != nullptr) options_.tokens->Erase(volume_id);
  // With or without a row (a publish that failed or timed out leaves none):
  // the signer finds the volume's objects by their labels.
  issuer_->Retire(existing.has_value() ? existing->pod_namespace : "", volume_id, std::nullopt);
  return RemoveVolumeDir(VolumeDir(volume_id), env_);
}

void Publisher::CancelAll() {
  std::lock_guard lock(mu_);
  for (auto& [id, flight] : in_flight_) flight->stop.request_stop();
}

}  // namespace certmount
