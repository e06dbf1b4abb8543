#include "volume/publisher.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <set>

#include "common/metrics.h"
#include "issue/attributes.h"
#include "issue/certificate_info.h"
#include "issue/renewal_time.h"
#include "issue/volume_attributes.h"
#include "volume/atomic_writer.h"
#include "volume/issuance.h"
#include "volume/issuance_metrics.h"
#include "volume/mount.h"
#include "volume/mountinfo.h"
#include "volume/paths.h"
#include "volume/volume_layout.h"

namespace certmount {

// How long before --publish-timeout a publish's work must stop (at most a
// twentieth of the timeout).
constexpr std::chrono::milliseconds kAnswerMargin{100};

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

}  // namespace

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
    : options_(std::move(options)),
      store_(store),
      issuer_(issuer),
      env_(env),
      clock_(clock),
      canonical_volumes_root_(VolumesRoot(options_.data_root)),
      canonical_target_root_(options_.target_root) {}

std::string Publisher::VolumeDir(const std::string& volume_id) const {
  return VolumeLayout::For(options_.data_root, volume_id).root;
}

std::string Publisher::MountSourceDir(const std::string& volume_id) const {
  return canonical_volumes_root_ + "/" + volume_id + "/data";
}

std::string Publisher::CanonicalTarget(const std::string& target) const {
  // Targets are validated to hold no symlink below the target root, so only
  // the root itself may differ from its canonical form.
  const std::string& root = options_.target_root;
  if (target.size() > root.size() && target.compare(0, root.size(), root) == 0 &&
      target[root.size()] == '/') {
    return canonical_target_root_ + target.substr(root.size());
  }
  return target;
}

void Publisher::Step(PublishStep step, const std::string& volume_id) const {
  if (options_.step_hook) options_.step_hook(step, volume_id);
}

Result<StartupSummary> Publisher::Startup() {
  const auto started = clock_->SteadyNow();
  CERTMOUNT_RETURN_IF_ERROR(PrepareVolumesRoot());
  CERTMOUNT_ASSIGN_OR_RETURN(MountTable mounts, MountTable::Read(env_));
  bool reattached = false;
  CERTMOUNT_ASSIGN_OR_RETURN(StartupCleanupResult cleanup, DeleteUnprovenRows(mounts, &reattached));

  // The rows are gone and committed: from here on nothing will renew them, so
  // removing their mounts and files can fail or crash without consequence;
  // the orphan sweep below (next start at the latest) finishes the job.
  StartupSummary summary;
  summary.kept = cleanup.kept;
  summary.deleted = static_cast<int64_t>(cleanup.deleted.size());
  summary.unmounted_by_check = cleanup.unmounted_by_check;
  const std::map<std::string, std::vector<std::string>> shown =
      MountPointsByVolume(mounts, canonical_volumes_root_);
  for (const DeletedVolume& deleted : cleanup.deleted) RemoveDeleted(deleted, mounts, shown);

  // Directories without a row (the deleted ones above, a crash between a
  // row's deletion and its files', or a database moved aside), decided by
  // a fresh look at the mount table when the steps above changed it (on a
  // node of 10,000 volumes each read is about 1.5 MB of text to parse).
  std::optional<MountTable> reread;
  if (!cleanup.deleted.empty() || reattached) {
    CERTMOUNT_ASSIGN_OR_RETURN(reread, MountTable::Read(env_));
  }
  const MountTable& now_mounted = reread.has_value() ? *reread : mounts;
  // The signer's objects of volumes that have no row now (adopted ones have
  // one) go too, in the background. Without a list of rows nothing is
  // retired: the next start sweeps again.
  std::optional<std::set<std::string>> with_rows = SweepOrAdopt(now_mounted, summary);
  if (with_rows.has_value()) issuer_->RetireAllExcept(*with_rows);
  summary.milliseconds =
      std::chrono::duration_cast<std::chrono::milliseconds>(clock_->SteadyNow() - started).count();
  RecordStartupMetrics(summary, clock_->SteadyNow() - started);
  return summary;
}

Status Publisher::PrepareVolumesRoot() {
  const std::string volumes_root = VolumesRoot(options_.data_root);
  if (options_.mount_tmpfs) {
    CERTMOUNT_RETURN_IF_ERROR(MountTmpfsIfNeeded(volumes_root, env_));
  } else {
    CERTMOUNT_RETURN_IF_ERROR(env_->CreateDirectories(volumes_root, 0711));
  }
  CERTMOUNT_ASSIGN_OR_RETURN(canonical_volumes_root_, env_->RealPath(volumes_root));
  if (Result<std::string> targets = env_->RealPath(options_.target_root); targets.ok()) {
    canonical_target_root_ = *targets;
  }
  return Status::Ok();
}

Result<StartupCleanupResult> Publisher::DeleteUnprovenRows(const MountTable& mounts,
                                                           bool* reattached) {
  // A row is proven mounted only by a bind of its own data directory at its
  // target; any other mount point there proves nothing (docs/design.md).
  std::vector<std::pair<std::string, std::string>> lost;
  CERTMOUNT_ASSIGN_OR_RETURN(
      StartupCleanupResult cleanup,
      store_->StartupCleanupProven([&](const std::string& volume_id, const std::string& target) {
        const std::string canonical = CanonicalTarget(target);
        TargetHolder holder = WhoHolds(mounts, canonical, MountSourceDir(volume_id));
        if (holder == TargetHolder::kOther &&
            ShowsLostVolumesTmpfs(mounts, canonical, volume_id, canonical_volumes_root_)) {
          lost.emplace_back(volume_id, canonical);
          return true;
        }
        return holder == TargetHolder::kThisVolume || holder == TargetHolder::kThisVolumeCovered;
      }));
  for (const auto& [volume_id, target] : lost) ReattachOrReport(volume_id, target);
  *reattached = !lost.empty();
  return cleanup;
}

void Publisher::RemoveDeleted(const DeletedVolume& deleted, const MountTable& mounts,
                              const std::map<std::string, std::vector<std::string>>& shown) {
  const std::string target = CanonicalTarget(deleted.target_path);
  if (WhoHolds(mounts, target, MountSourceDir(deleted.volume_id)) == TargetHolder::kThisVolume) {
    Status unmounted = UnmountTop(target, env_);
    if (!unmounted.ok()) {
      // Its directory stays (the sweep sees the mount); the next start tries
      // again.
      spdlog::warn("startup cleanup: {}", unmounted.ToString());
      return;
    }
  }
  // Its files go unless a mount other than the one just removed shows them.
  auto points = shown.find(deleted.volume_id);
  if (points == shown.end() || (points->second.size() == 1 && points->second[0] == target)) {
    Status removed = RemoveVolumeDir(VolumeDir(deleted.volume_id), env_);
    if (!removed.ok()) {
      spdlog::warn("startup cleanup: cannot remove files of {}: {}", deleted.volume_id,
                   removed.ToString());
    }
  }
  // The target directory goes when it is empty (rmdir refuses anything
  // else, a mount point included) and lies below the target root.
  if (ValidateTargetPath(deleted.target_path, options_.target_root, env_).ok()) {
    (void)env_->RemoveEmptyDirectory(deleted.target_path);
  }
  // The signer's leftovers (a pending CertificateRequest) go too, in the
  // background: an unreachable API server delays nothing here.
  issuer_->Retire(deleted.pod_namespace, deleted.volume_id, std::nullopt);
}

void Publisher::RecordStartupMetrics(const StartupSummary& summary,
                                     std::chrono::steady_clock::duration took) {
  PublisherMetrics& m = Metrics();
  m.startup_volumes.WithLabels({"kept"}).Set(static_cast<double>(summary.kept));
  m.startup_volumes.WithLabels({"deleted"}).Set(static_cast<double>(summary.deleted));
  m.startup_volumes.WithLabels({"unmounted"}).Set(static_cast<double>(summary.unmounted_by_check));
  m.startup_volumes.WithLabels({"orphans_removed"})
      .Set(static_cast<double>(summary.orphans_removed));
  m.startup_volumes.WithLabels({"adopted"}).Set(static_cast<double>(summary.adopted));
  m.startup_volumes.WithLabels({"kept_unadoptable"})
      .Set(static_cast<double>(summary.kept_unadoptable));
  m.startup_seconds.Set(std::chrono::duration<double>(took).count());
}

std::optional<std::set<std::string>> Publisher::SweepOrAdopt(const MountTable& mounts,
                                                             StartupSummary& summary) {
  // After the cleanup every row is mounted, so the lean schedule query names
  // them all without parsing 100k attribute objects.
  std::set<std::string> known;
  Result<std::vector<ScheduledVolume>> rows = store_->ListRenewalSchedule();
  Result<std::vector<std::string>> entries = env_->ListDirectory(canonical_volumes_root_);
  if (!rows.ok() || !entries.ok()) {
    spdlog::warn("startup cleanup: cannot list volumes: {}",
                 (rows.ok() ? entries.status() : rows.status()).ToString());
    return std::nullopt;
  }
  for (const ScheduledVolume& row : *rows) known.insert(row.volume_id);
  const std::map<std::string, std::vector<std::string>> shown =
      MountPointsByVolume(mounts, canonical_volumes_root_);
  for (const std::string& name : *entries) {
    if (known.count(name) != 0) continue;
    auto points = shown.find(name);
    if (points == shown.end()) {
      Status removed = RemoveVolumeDir(canonical_volumes_root_ + "/" + name, env_);
      if (removed.ok()) {
        ++summary.orphans_removed;
      } else {
        spdlog::warn("startup cleanup: cannot remove {}: {}", name, removed.ToString());
      }
      continue;
    }
    // Still shown by a mount: a pod may be reading it. Never delete it.
    std::string target;
    for (const std::string& point : points->second) {
      if (point.rfind(canonical_target_root_ + "/", 0) == 0 &&
          WhoHolds(mounts, point, MountSourceDir(name)) == TargetHolder::kThisVolume) {
        target = point;
      }
    }
    Status adopted = target.empty()
                         ? Status::FailedPrecondition("it is mounted at " + points->second.front() +
                                                      ", which is not a kubelet target")
                         : Adopt(name, target);
    if (adopted.ok()) {
      ++summary.adopted;
      known.insert(name);
      spdlog::info("startup: adopted volume {} mounted at {}", name, target);
    } else {
      ++summary.kept_unadoptable;
      spdlog::warn(
          "startup: volume directory {} has no row and is still mounted, so it is kept, but it "
          "cannot be adopted and will not be renewed: {}. Unmount it, or delete the pod, then "
          "restart certmountd",
          name, adopted.ToString());
    }
  }
  return known;
}

void Publisher::ReattachOrReport(const std::string& volume_id, const std::string& target) {
  const VolumeLayout layout = VolumeLayout::For(options_.data_root, volume_id);
  Status reattached = ReattachThroughTarget(target, layout.data, env_);
  Result<std::optional<VolumeRecord>> row = store_->GetVolume(volume_id);
  if (reattached.ok() && row.ok() && row->has_value()) {
    reattached = SaveVolumeDescription(layout, **row, env_);
  }
  if (reattached.ok()) {
    spdlog::warn(
        "startup: volume {} at {} is served by a volumes tmpfs that is no longer mounted at {} "
        "(certmountd restarted without the host's tmpfs); reattached it through the pod's mount, "
        "so renewals reach the pod again",
        volume_id, target, canonical_volumes_root_);
    return;
  }
  const std::string message =
      "the volumes tmpfs serving " + target + " is no longer mounted at " +
      canonical_volumes_root_ +
      " (certmountd restarted without the host's tmpfs) and could not be reattached (" +
      reattached.ToString() +
      "): the certificate will not be renewed; delete the pod so that kubelet publishes a new "
      "volume, and mount " +
      canonical_volumes_root_ + " from the host";
  spdlog::error("startup: volume {}: {}", volume_id, message);
  if (!row.ok() || !row->has_value()) return;
  const int64_t retry_at = clock_->NowUnix() + 24 * 3600;
  Status recorded =
      store_->RecordRenewalFailure(volume_id, (*row)->renewal_attempts + 1, retry_at, message);
  if (!recorded.ok()) spdlog::warn("startup: volume {}: {}", volume_id, recorded.ToString());
}

Status Publisher::Adopt(const std::string& volume_id, const std::string& target) {
  CERTMOUNT_RETURN_IF_ERROR(ValidateVolumeId(volume_id));
  const VolumeLayout layout = VolumeLayout::For(options_.data_root, volume_id);
  CERTMOUNT_ASSIGN_OR_RETURN(VolumeRecord volume, LoadVolumeDescription(layout, volume_id, env_));
  if (CanonicalTarget(volume.target_path) != target) {
    return Status::FailedPrecondition("its volume.json names target " + volume.target_path +
                                      ", not " + target);
  }
  std::map<std::string, std::string> attributes = volume.attributes;
  CERTMOUNT_ASSIGN_OR_RETURN(auto secrets, LoadSecretAttributes(layout, env_));
  attributes.insert(secrets.begin(), secrets.end());
  CERTMOUNT_ASSIGN_OR_RETURN(CertificateSpec spec,
                             ParseVolumeAttributes(attributes, options_.attribute_rules));
  CERTMOUNT_ASSIGN_OR_RETURN(std::string pem,
                             env_->ReadFile(layout.data + "/" + spec.certificate_file));
  CERTMOUNT_ASSIGN_OR_RETURN(CertificateInfo info, ParseLeafCertificate(pem));
  IssuedCertificateFields fields;
  fields.serial = info.serial_hex;
  fields.not_before = info.not_before;
  fields.not_after = info.not_after;
  fields.next_issuance_at = NextIssuanceAt(info.not_before, info.not_after, spec.renew_before);
  return store_->AdoptVolume(volume, fields);
}

Status Publisher::Publish(const PublishRequest& request) {
  const auto started = clock_->SteadyNow();
  // The work stops a little before the timeout, so that undoing it and
  // answering fit inside the timeout too, even with every core busy
  // generating other pods' keys.
  const auto margin =
      std::min<std::chrono::steady_clock::duration>(kAnswerMargin, options_.publish_timeout / 20);
  Status result = PublishOnce(request, started + options_.publish_timeout - margin);
  const double seconds = std::chrono::duration<double>(clock_->SteadyNow() - started).count();
  (result.ok() ? Metrics().publish_ok : Metrics().publish_error).Observe(seconds);
  return result;
}

Status Publisher::PublishOnce(const PublishRequest& request,
                              std::chrono::steady_clock::time_point deadline) {
  CERTMOUNT_RETURN_IF_ERROR(ValidateVolumeId(request.volume_id));
  CERTMOUNT_RETURN_IF_ERROR(ValidateTargetPath(request.target_path, options_.target_root, env_));
  CERTMOUNT_ASSIGN_OR_RETURN(CertificateSpec spec, ParseVolumeAttributes(request.volume_context,
                                                                         options_.attribute_rules));
  CERTMOUNT_RETURN_IF_ERROR(
      ApplyKnownPodIps(spec, PodInfoFromContext(request.volume_context).uid, options_.pod_ips));
  if (options_.tokens != nullptr) {
    // Every publish, a repeat of a mounted volume included (kubelet
    // republishes to hand over fresh tokens), refreshes the token renewals use.
    Result<std::string> token = ServiceAccountToken(request.volume_context);
    if (!token.ok()) {
      return Status::FailedPrecondition(token.status().message());
    }
    options_.tokens->Set(request.volume_id, std::move(*token));
  }

  CERTMOUNT_ASSIGN_OR_RETURN(std::shared_ptr<InFlight> flight, ClaimForPublish(request, deadline));
  if (flight == nullptr) return Status::Ok();
  Status result = PublishNew(request, spec, deadline, flight->stop.get_token());
  Release(request.volume_id, flight, result);
  return result;
}

Result<std::shared_ptr<Publisher::InFlight>> Publisher::ClaimForPublish(
    const PublishRequest& request, std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mu_);
  for (auto it = in_flight_.find(request.volume_id); it != in_flight_.end();
       it = in_flight_.find(request.volume_id)) {
    std::shared_ptr<InFlight> running = it->second;
    if (!running->unpublish && running->target_path != request.target_path) {
      return Status::AlreadyExists("volume " + request.volume_id + " is being published at " +
                                   running->target_path);
    }
    // A retry from kubelet while the first attempt is still issuing shares
    // its outcome rather than start a second issuance; after an unpublish
    // the publish starts over. The wait is part of this publish's time.
    if (!WaitUntilDone(lock, *running, deadline)) {
      return Status::DeadlineExceeded(
          "the publish timeout ran out while waiting behind " +
          std::string(running->unpublish ? "an unpublish" : "another publish") + " of volume " +
          request.volume_id + ", still in progress; retry later");
    }
    if (!running->unpublish) {
      if (!running->result.ok()) return running->result;
      return std::shared_ptr<InFlight>();
    }
  }
  auto flight = std::make_shared<InFlight>();
  flight->target_path = request.target_path;
  in_flight_[request.volume_id] = flight;
  return flight;
}

bool Publisher::WaitUntilDone(std::unique_lock<std::mutex>& lock, InFlight& running,
                              std::chrono::steady_clock::time_point deadline) const {
  while (!running.done) {
    const auto remaining = deadline - clock_->SteadyNow();
    if (remaining <= std::chrono::steady_clock::duration::zero()) return false;
    // Slices, so that an injected clock moved by hand is noticed too.
    running.finished.wait_for(lock, std::min<std::chrono::steady_clock::duration>(
                                        remaining, std::chrono::milliseconds(20)));
  }
  return true;
}

void Publisher::Release(const std::string& volume_id, const std::shared_ptr<InFlight>& flight,
                        const Status& result) {
  std::lock_guard lock(mu_);
  flight->done = true;
  flight->result = result;
  flight->finished.notify_all();
  in_flight_.erase(volume_id);
}

std::shared_ptr<Publisher::InFlight> Publisher::ClaimForUnpublish(const std::string& volume_id) {
  std::unique_lock lock(mu_);
  for (auto it = in_flight_.find(volume_id); it != in_flight_.end();
       it = in_flight_.find(volume_id)) {
    // An unpublish overtaking its own publish stops the issuance and waits
    // for the rollback, leaving nothing for the publish to finish later.
    std::shared_ptr<InFlight> running = it->second;
    if (!running->unpublish) running->stop.request_stop();
    running->finished.wait(lock, [&] { return running->done; });
  }
  auto flight = std::make_shared<InFlight>();
  flight->unpublish = true;
  in_flight_[volume_id] = flight;
  return flight;
}

Result<Publisher::TargetState> Publisher::InspectTarget(const std::string& target,
                                                        const std::string& volume_id) {
  TargetState state;
  // Inside another volume's mounted directory (its ..data generation, say):
  // that directory is on the volumes filesystem, so its device tells.
  CERTMOUNT_ASSIGN_OR_RETURN(FileStat volumes, env_->LStat(canonical_volumes_root_));
  Result<FileStat> volumes_parent =
      env_->LStat(canonical_volumes_root_.substr(0, canonical_volumes_root_.rfind('/') + 1));
  const bool volumes_is_own_fs = volumes_parent.ok() && volumes_parent->device != volumes.device;
  const std::string parent = target.substr(0, target.rfind('/'));
  for (std::string dir = parent; dir.size() > options_.target_root.size();
       dir = dir.substr(0, dir.rfind('/'))) {
    Result<FileStat> stat = env_->LStat(dir);
    if (volumes_is_own_fs && stat.ok() && stat->device == volumes.device) {
      return Status::InvalidArgument("target path " + target + " lies inside " + dir +
                                     ", a directory of another certmount volume");
    }
  }
  Result<FileStat> stat = env_->LStat(target);
  if (!stat.ok()) {
    if (stat.status().code() == Code::kNotFound) return state;
    return stat.status();
  }
  state.exists = true;
  if (stat->type != FileStat::Type::kDirectory) {
    return Status::FailedPrecondition("target path " + target + " exists and is not a directory");
  }
  state.canonical = CanonicalTarget(target);
  CERTMOUNT_ASSIGN_OR_RETURN(MountTable mounts, MountTable::Read(env_));
  state.holder = WhoHolds(mounts, state.canonical, MountSourceDir(volume_id));
  if (state.holder == TargetHolder::kOther || state.holder == TargetHolder::kThisVolumeCovered) {
    const MountInfoEntry& top = *mounts.TopMountAt(state.canonical);
    return Status::FailedPrecondition("target path " + target + " is already a mount point (" +
                                      top.fstype + " " + top.source + ", root " + top.root +
                                      ") that is not volume " + volume_id +
                                      "'s; refusing to mount over it. Nothing was written");
  }
  if (state.holder == TargetHolder::kNothing) {
    CERTMOUNT_ASSIGN_OR_RETURN(std::vector<std::string> names, env_->ListDirectory(target));
    if (!names.empty()) {
      return Status::FailedPrecondition("target path " + target + " is a directory holding " +
                                        std::to_string(names.size()) +
                                        " entries; refusing to mount over them. Nothing was "
                                        "written");
    }
  }
  return state;
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

// The publish step an issuance step is.
PublishStep PublishStepOf(IssuanceStep step) {
  switch (step) {
    case IssuanceStep::kKeyGenerated:
      return PublishStep::kKeyGenerated;
    case IssuanceStep::kIssued:
      return PublishStep::kIssued;
    case IssuanceStep::kFilesWritten:
      break;
  }
  return PublishStep::kFilesWritten;
}

}  // namespace

// Undoes a new publish unless it committed: its mount, files and row
// (Publisher::RollBack), then, unless the pending request is kept for
// kubelet's retry, the issuer's requests of the volume.
class Publisher::NewPublishRollback {
 public:
  NewPublishRollback(Publisher* publisher, const PublishRequest& request, std::string namespace_)
      : publisher_(publisher), request_(request), namespace_(std::move(namespace_)) {}
  NewPublishRollback(const NewPublishRollback&) = delete;
  NewPublishRollback& operator=(const NewPublishRollback&) = delete;
  ~NewPublishRollback() {
    if (committed_) return;
    publisher_->RollBack(request_.volume_id, request_.target_path, mounted_, created_target_,
                         keep_pending_);
    if (!keep_pending_) publisher_->issuer_->Retire(namespace_, request_.volume_id, std::nullopt);
  }

  void CreatedTarget(bool created) { created_target_ = created; }
  void Mounted() { mounted_ = true; }
  void KeepPending() { keep_pending_ = true; }
  void Committed() { committed_ = true; }

 private:
  Publisher* publisher_;
  const PublishRequest& request_;
  std::string namespace_;
  bool mounted_ = false;
  bool created_target_ = false;
  bool keep_pending_ = false;
  bool committed_ = false;
};

VolumeRecord Publisher::NewRecord(const PublishRequest& request, const PodInfo& pod,
                                  std::optional<gid_t> gid) const {
  VolumeRecord record;
  record.volume_id = request.volume_id;
  record.target_path = request.target_path;
  record.pod_namespace = pod.namespace_;
  record.pod_name = pod.name;
  record.pod_uid = pod.uid;
  record.service_account = pod.service_account;
  record.attributes = StorableAttributes(request.volume_context);
  record.issuer = issuer_->Name();
  record.file_group = gid;
  if (issuer_->Resumable()) record.request_name = issuer_->RequestName(request.volume_id, 0);
  return record;
}

std::optional<Status> Publisher::Register(const PublishRequest& request, const VolumeRecord& record,
                                          const TargetState& target,
                                          std::chrono::steady_clock::time_point deadline,
                                          std::stop_token stop) {
  const std::string& volume_id = request.volume_id;
  // Registering first and looking only on a conflict keeps a new volume,
  // the common case, at one transaction.
  Result<std::optional<RegisteredVolume>> existing = store_->TryRegisterVolume(record);
  if (!existing.ok()) return existing.status();
  if (!existing->has_value()) return std::nullopt;
  if ((*existing)->target_path != request.target_path) {
    return Status::AlreadyExists("volume " + volume_id + " is already published at " +
                                 (*existing)->target_path);
  }
  if ((*existing)->mounted) return Republish(request, record, target, deadline, stop);
  // An unmounted row that is not in flight is the remains of a rollback
  // that could not finish; clear it and start over.
  RollBack(volume_id, request.target_path, /*mounted=*/true, /*created_target=*/false,
           /*keep_pending=*/false);
  existing = store_->TryRegisterVolume(record);
  if (!existing.ok()) return existing.status();
  if (!existing->has_value()) return std::nullopt;
  // Only a second writer of the database could have put it back.
  return Status::Aborted("volume " + volume_id + " was registered again while its stale row " +
                         "was being cleared; retry");
}

Result<IssuedCertificateFields> Publisher::IssueNew(const PublishRequest& request,
                                                    const CertificateSpec& spec,
                                                    const VolumeRecord& record,
                                                    std::chrono::steady_clock::time_point deadline,
                                                    std::stop_token stop,
                                                    NewPublishRollback& rollback) {
  const std::string& volume_id = request.volume_id;
  const VolumeLayout layout = VolumeLayout::For(options_.data_root, volume_id);
  IssuanceRequest issuance;
  issuance.volume_id = volume_id;
  issuance.purpose = IssuePurpose::kPublish;
  issuance.spec = &spec;
  issuance.pod = PodInfoFromContext(request.volume_context);
  if (options_.tokens != nullptr) {
    issuance.bearer_token_override = options_.tokens->Get(volume_id).value_or("");
  }
  issuance.layout = layout;
  issuance.ownership = FileOwnership{record.file_group};
  issuance.request_name = record.request_name;
  issuance.resumable = issuer_->Resumable();
  issuance.now_unix = clock_->NowUnix();
  issuance.on_step = [&](IssuanceStep step) { Step(PublishStepOf(step), volume_id); };
  const auto started = clock_->SteadyNow();
  Result<IssuedCertificateFields> fields = IssueIntoVolume(issuance, issuer_, env_, deadline, stop);
  RecordIssuanceMetrics(issuer_->Name(), IssuanceKind::kPublish, fields.ok(),
                        std::chrono::duration<double>(clock_->SteadyNow() - started).count());
  if (!fields.ok() && issuer_->Resumable() && fields.status().code() == Code::kDeadlineExceeded) {
    // The request is still pending at the signer. Everything is rolled
    // back but the pending key and CSR, so kubelet's retry of this publish
    // resumes that request instead of replacing it. The issuer answers
    // DEADLINE_EXCEEDED only while the pod runs; if it goes later, kubelet's
    // unpublish (or the next start's sweeps) removes the files and request.
    rollback.KeepPending();
  }
  return fields;
}

Status Publisher::MountNew(const PublishRequest& request, const TargetState& target,
                           NewPublishRollback& rollback) {
  // A bind of this very directory already there (its row was lost while it
  // stayed mounted) is reused, never stacked on.
  if (target.holder == TargetHolder::kThisVolume) return Status::Ok();
  CERTMOUNT_ASSIGN_OR_RETURN(bool created_target, EnsureTargetDirectory(request.target_path, env_));
  rollback.CreatedTarget(created_target);
  const VolumeLayout layout = VolumeLayout::For(options_.data_root, request.volume_id);
  CERTMOUNT_RETURN_IF_ERROR(BindMountReadOnly(layout.data, request.target_path, env_));
  rollback.Mounted();
  return Status::Ok();
}

Status Publisher::PublishNew(const PublishRequest& request, const CertificateSpec& spec,
                             std::chrono::steady_clock::time_point deadline, std::stop_token stop) {
  const std::string& volume_id = request.volume_id;
  CERTMOUNT_ASSIGN_OR_RETURN(std::optional<gid_t> gid, FileGroup(spec, request.volume_mount_group));
  CERTMOUNT_ASSIGN_OR_RETURN(TargetState target, InspectTarget(request.target_path, volume_id));
  const PodInfo pod = PodInfoFromContext(request.volume_context);
  const VolumeRecord record = NewRecord(request, pod, gid);
  if (std::optional<Status> done = Register(request, record, target, deadline, stop)) {
    return *done;
  }
  Step(PublishStep::kRegistered, volume_id);

  NewPublishRollback rollback(this, request, pod.namespace_);
  const VolumeLayout layout = VolumeLayout::For(options_.data_root, volume_id);
  CERTMOUNT_RETURN_IF_ERROR(
      SaveSecretAttributes(layout, SecretAttributes(request.volume_context), env_));
  CERTMOUNT_RETURN_IF_ERROR(SaveVolumeDescription(layout, record, env_));
  const auto issue_started = clock_->SteadyNow();
  CERTMOUNT_ASSIGN_OR_RETURN(IssuedCertificateFields fields,
                             IssueNew(request, spec, record, deadline, stop, rollback));
  CERTMOUNT_RETURN_IF_ERROR(MountNew(request, target, rollback));
  Step(PublishStep::kMounted, volume_id);

  IssuanceAttempt attempt;
  attempt.issuer = issuer_->Name();
  attempt.duration_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(clock_->SteadyNow() - issue_started)
          .count();
  CERTMOUNT_RETURN_IF_ERROR(
      store_->MarkMountedWithHistory(volume_id, fields, attempt, options_.history_limit));
  rollback.Committed();
  Step(PublishStep::kCommitted, volume_id);
  issuer_->Retire(pod.namespace_, volume_id, 0);

  if (observer_ != nullptr) observer_->OnMounted({volume_id, fields.next_issuance_at});
  spdlog::info("published volume {} at {} serial {} not_after {}", volume_id, request.target_path,
               fields.serial, fields.not_after);
  return Status::Ok();
}

Status Publisher::Republish(const PublishRequest& request, const VolumeRecord& wanted,
                            const TargetState& target,
                            std::chrono::steady_clock::time_point deadline, std::stop_token stop) {
  const std::string& volume_id = request.volume_id;
  CERTMOUNT_ASSIGN_OR_RETURN(std::optional<VolumeRecord> row, store_->GetVolume(volume_id));
  if (!row.has_value() || !row->mounted) {
    return Status::Aborted("volume " + volume_id + " changed during the publish; retry");
  }
  const VolumeLayout layout = VolumeLayout::For(options_.data_root, volume_id);
  Result<std::map<std::string, std::string>> secrets = LoadSecretAttributes(layout, env_);
  if (row->attributes != wanted.attributes || row->file_group != wanted.file_group ||
      !secrets.ok() || *secrets != SecretAttributes(request.volume_context)) {
    return Status::AlreadyExists("volume " + volume_id + " is already published at " +
                                 request.target_path +
                                 " with other volume attributes or volume_mount_group");
  }
  // kubelet republishes (requiresRepublish, or a retry after a lost reply).
  // A working volume is never torn down here (kubernetes#121271); what is
  // checked is that the pod really sees it.
  CERTMOUNT_ASSIGN_OR_RETURN(CertificateSpec spec, ParseVolumeAttributes(request.volume_context,
                                                                         options_.attribute_rules));
  for (const std::string& name : {spec.certificate_file, spec.private_key_file, spec.ca_file}) {
    Result<std::string> contents = env_->ReadFile(layout.data + "/" + name);
    if (!contents.ok() || contents->empty()) {
      spdlog::warn("republish of volume {}: its file {} is missing from {}; issuing it again",
                   volume_id, name, layout.data);
      CERTMOUNT_RETURN_IF_ERROR(ReissueNow(*row, deadline, stop));
      break;
    }
  }
  if (target.holder == TargetHolder::kThisVolume) return Status::Ok();
  // The mount went away (an admin's umount, a failed unpublish): put it back.
  CERTMOUNT_RETURN_IF_ERROR(EnsureTargetDirectory(request.target_path, env_).status());
  CERTMOUNT_RETURN_IF_ERROR(BindMountReadOnly(layout.data, request.target_path, env_));
  spdlog::info("republish of volume {}: mount at {} was gone and is re-established", volume_id,
               request.target_path);
  return Status::Ok();
}

Status Publisher::ReissueNow(const VolumeRecord& row,
                             std::chrono::steady_clock::time_point deadline, std::stop_token stop) {
  if (!reissue_) {
    return Status::Unavailable("volume " + row.volume_id +
                               " is published but its files are missing; the next renewal "
                               "rewrites them");
  }
  // No scheduled renewal of the volume may run alongside (they would write
  // the same file set); the schedule is put back whatever the outcome.
  if (observer_ != nullptr) observer_->OnRemoved(row.volume_id);
  const auto started = clock_->SteadyNow();
  Result<IssuedCertificateFields> fields = reissue_(row, deadline, std::move(stop));
  const auto elapsed = clock_->SteadyNow() - started;
  RecordIssuanceMetrics(issuer_->Name(), IssuanceKind::kRenewal, fields.ok(),
                        std::chrono::duration<double>(elapsed).count());
  Status recorded = fields.status();
  if (fields.ok()) {
    IssuanceAttempt attempt;
    attempt.issuer = issuer_->Name();
    attempt.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count();
    recorded =
        store_->RecordRenewalWithHistory(row.volume_id, *fields, attempt, options_.history_limit);
  }
  const std::optional<int64_t> next =
      recorded.ok() ? std::optional<int64_t>(fields->next_issuance_at) : row.next_issuance_at;
  if (observer_ != nullptr) observer_->OnMounted({row.volume_id, next});
  if (!recorded.ok()) return recorded.WithContext("volume " + row.volume_id + ": reissue");
  spdlog::info("republish of volume {}: files issued again, serial {} not_after {}", row.volume_id,
               fields->serial, fields->not_after);
  return Status::Ok();
}

void Publisher::RollBack(const std::string& volume_id, const std::string& target_path, bool mounted,
                         bool created_target, bool keep_pending) {
  if (mounted) {
    // Only our own bind, one layer: whatever else is there stays.
    Result<TargetHolder> holder =
        WhoHoldsTarget(CanonicalTarget(target_path), MountSourceDir(volume_id), env_);
    if (!holder.ok()) {
      spdlog::warn("rollback {}: {}", volume_id, holder.status().ToString());
    } else if (*holder == TargetHolder::kThisVolume) {
      Status s = UnmountTop(target_path, env_);
      if (!s.ok()) spdlog::warn("rollback {}: {}", volume_id, s.ToString());
    }
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
  std::shared_ptr<InFlight> flight = ClaimForUnpublish(volume_id);
  Status result = UnpublishClaimed(volume_id, target_path);
  Release(volume_id, flight, result);
  return result;
}

Status Publisher::UnpublishClaimed(const std::string& volume_id, const std::string& target_path) {
  CERTMOUNT_ASSIGN_OR_RETURN(std::optional<VolumeRecord> existing, store_->GetVolume(volume_id));
  if (existing.has_value() && existing->target_path != target_path) {
    // CSI: a volume not published at target_path is unpublished there
    // already (0 OK). Neither its own mount nor that path is touched.
    spdlog::info("unpublish {} at {}: the volume is published at {}, not there; nothing to do",
                 volume_id, target_path, existing->target_path);
    return Status::Ok();
  }
  const std::string data_dir = MountSourceDir(volume_id);
  // A target that is already gone needs no unmount; anything else must be
  // below the target root before it is touched, and is touched only when
  // the kernel shows our own bind there: proven per path in the common case,
  // from the mount table otherwise (WhoHoldsTarget), so an unpublish on a
  // node with many volumes does not read them all.
  if (env_->LStat(target_path).ok()) {
    CERTMOUNT_RETURN_IF_ERROR(ValidateTargetPath(target_path, options_.target_root, env_));
    const std::string target = CanonicalTarget(target_path);
    CERTMOUNT_ASSIGN_OR_RETURN(const TargetHolder holder, WhoHoldsTarget(target, data_dir, env_));
    if (holder == TargetHolder::kThisVolumeCovered) {
      return Status::FailedPrecondition(
          "volume " + volume_id + "'s mount at " + target_path +
          " is covered by another mount; unmount that one first. The volume stays published");
    }
    if (holder == TargetHolder::kThisVolume) CERTMOUNT_RETURN_IF_ERROR(UnmountTop(target, env_));
    if (existing.has_value() && holder != TargetHolder::kOther) {
      // rmdir: never a directory holding anything, never a mount point.
      Status removed = env_->RemoveEmptyDirectory(target_path);
      if (!removed.ok())
        spdlog::info("unpublish {}: target kept: {}", volume_id, removed.ToString());
    }
  }
  if (!existing.has_value()) {
    if (KeepsPendingForRetry(volume_id, target_path)) return Status::Ok();
    // Unknown to the database (a publish that failed or timed out leaves no
    // row): the signer still finds the volume's objects by their labels.
    issuer_->Retire("", volume_id, std::nullopt);
    // Its files, if any, go only when no mount shows them any more.
    CERTMOUNT_ASSIGN_OR_RETURN(MountTable mounts, MountTable::Read(env_));
    if (!MountPointsShowing(mounts, data_dir).empty()) return Status::Ok();
    return RemoveVolumeDir(VolumeDir(volume_id), env_);
  }
  // The row goes before the files: a crash in between leaves an orphan
  // directory, which startup removes, never a row without its files.
  CERTMOUNT_RETURN_IF_ERROR(store_->DeleteVolume(volume_id).status());
  // Only now, with mount and row gone, does the scheduler forget it; this
  // also waits out a renewal still writing its files.
  if (observer_ != nullptr) observer_->OnRemoved(volume_id);
  if (options_.tokens != nullptr) options_.tokens->Erase(volume_id);
  issuer_->Retire(existing->pod_namespace, volume_id, std::nullopt);
  CERTMOUNT_RETURN_IF_ERROR(
      DetachReattached(VolumeLayout::For(options_.data_root, volume_id).data, env_));
  return RemoveVolumeDir(VolumeDir(volume_id), env_);
}

bool Publisher::KeepsPendingForRetry(const std::string& volume_id, const std::string& target_path) {
  const VolumeLayout layout = VolumeLayout::For(options_.data_root, volume_id);
  if (!HasPendingIssuance(layout, env_)) return false;
  Result<VolumeRecord> described = LoadVolumeDescription(layout, volume_id, env_);
  if (!described.ok() || described->target_path != target_path) return false;
  PodInfo pod;
  pod.namespace_ = described->pod_namespace;
  pod.name = described->pod_name;
  pod.uid = described->pod_uid;
  if (!issuer_->KnowsPodRunning(pod)) return false;
  spdlog::info(
      "unpublish {}: its publish timed out with a request pending at the signer and pod {}/{} "
      "runs; the pending key and request are kept for kubelet's retry",
      volume_id, pod.namespace_, pod.name);
  return true;
}

void Publisher::CancelAll() {
  std::lock_guard lock(mu_);
  for (auto& [id, flight] : in_flight_) flight->stop.request_stop();
}

}  // namespace certmount
