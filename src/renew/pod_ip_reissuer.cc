#include "renew/pod_ip_reissuer.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "issue/attributes.h"
#include "issue/certificate_info.h"
#include "volume/volume_layout.h"

namespace certmount {

PodIpReissuer::PodIpReissuer(PodIpReissuerOptions options, Store* store, Renewer* renewer,
                             RenewalScheduler* scheduler, PodIps* pod_ips, Env* env)
    : options_(std::move(options)),
      store_(store),
      renewer_(renewer),
      scheduler_(scheduler),
      pod_ips_(pod_ips),
      env_(env) {}

PodIpReissuer::~PodIpReissuer() { Stop(); }

void PodIpReissuer::Start() {
  Enqueue({JobKind::kIndexAll, "", {}});
  worker_ = std::jthread([this](std::stop_token stop) { Run(stop); });
}

void PodIpReissuer::Stop() {
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
    jobs_.clear();
  }
  if (worker_.joinable()) {
    worker_.request_stop();
    wake_.notify_all();
    worker_.join();
  }
}

void PodIpReissuer::Enqueue(Job job) {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    jobs_.push_back(std::move(job));
  }
  wake_.notify_one();
}

void PodIpReissuer::OnPodEvent(const kube::WatchEvent& event) {
  Result<kube::PodAddresses> pod = kube::ParsePodAddresses(event.object_json);
  if (!pod.ok()) {
    spdlog::warn("pod watch: {}", pod.status().ToString());
    return;
  }
  Enqueue({event.type == "DELETED" ? JobKind::kPodDeleted : JobKind::kPod, "", std::move(*pod)});
}

void PodIpReissuer::OnRenewed(const std::string& volume_id) {
  Enqueue({JobKind::kRenewed, volume_id, {}});
}

void PodIpReissuer::OnMounted(const ScheduledVolume& volume) {
  scheduler_->OnMounted(volume);
  Enqueue({JobKind::kMounted, volume.volume_id, {}});
}

void PodIpReissuer::OnRemoved(const std::string& volume_id) {
  scheduler_->OnRemoved(volume_id);
  Enqueue({JobKind::kRemoved, volume_id, {}});
}

void PodIpReissuer::Run(std::stop_token stop) {
  while (true) {
    Job job;
    {
      std::unique_lock lock(mu_);
      if (!wake_.wait(lock, stop, [&] { return !jobs_.empty(); })) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    Handle(job, stop);
  }
}

void PodIpReissuer::Handle(const Job& job, std::stop_token stop) {
  switch (job.kind) {
    case JobKind::kIndexAll:
      return IndexAll(stop);
    case JobKind::kPod:
      return HandlePod(job.pod, stop);
    case JobKind::kPodDeleted:
      pod_ips_->Erase(job.pod.pod.uid);
      gated_pods_.erase(job.pod.pod.uid);
      gate_retry_pods_.erase(job.pod.pod.uid);
      return;
    case JobKind::kMounted:
      return CheckVolume(job.volume_id, /*may_renew=*/true, stop);
    case JobKind::kRenewed:
      // Never renew from here: an issuer that leaves the addresses out
      // would otherwise be asked again and again.
      if (volume_pods_.count(job.volume_id) != 0) CheckVolume(job.volume_id, false, stop);
      return;
    case JobKind::kRemoved:
      volume_pods_.erase(job.volume_id);
      return;
  }
}

void PodIpReissuer::IndexAll(std::stop_token stop) {
  Result<std::vector<ScheduledVolume>> rows = store_->ListRenewalSchedule();
  if (!rows.ok()) {
    spdlog::warn("pod addresses: cannot list the mounted volumes: {}", rows.status().ToString());
    return;
  }
  for (const ScheduledVolume& row : *rows) {
    if (stop.stop_requested()) return;
    CheckVolume(row.volume_id, /*may_renew=*/true, stop);
  }
}

void PodIpReissuer::HandlePod(const kube::PodAddresses& pod, std::stop_token stop) {
  const bool changed = pod_ips_->Set(pod.pod.uid, pod.ips);
  // Unchanged addresses: only a gate that could not be set is tried again.
  if (!changed && gate_retry_pods_.count(pod.pod.uid) == 0) return;
  std::vector<std::string> volumes;
  for (const auto& [volume_id, uid] : volume_pods_) {
    if (uid == pod.pod.uid) volumes.push_back(volume_id);
  }
  for (const std::string& volume_id : volumes) CheckVolume(volume_id, /*may_renew=*/true, stop);
}

void PodIpReissuer::CheckVolume(const std::string& volume_id, bool may_renew,
                                std::stop_token stop) {
  Result<std::optional<VolumeRecord>> row = store_->GetVolume(volume_id);
  if (!row.ok() || !row->has_value() || !(*row)->mounted) {
    volume_pods_.erase(volume_id);
    return;
  }
  const VolumeRecord& volume = **row;
  Result<CertificateSpec> spec = renewer_->SpecOf(volume);
  if (!spec.ok() || !UsesPodIps(*spec)) {
    volume_pods_.erase(volume_id);
    return;
  }
  volume_pods_[volume_id] = volume.pod_uid;
  if (pod_ips_->Get(volume.pod_uid).empty()) return;  // awaits the pod's addresses
  if (!CertificateHasAddresses(volume_id, *spec)) {
    if (may_renew && scheduler_->RenewNow(volume_id)) {
      spdlog::info("volume {}: pod {}/{} has its addresses; issuing the certificate again",
                   volume_id, volume.pod_namespace, volume.pod_name);
    }
    return;
  }
  if (!spec->pod_ip_readiness_gate || gated_pods_.count(volume.pod_uid) != 0) return;
  if (!options_.set_condition) {
    spdlog::warn("volume {}: cannot set the pod's readiness gate without cluster access",
                 volume_id);
    gated_pods_.insert(volume.pod_uid);
    return;
  }
  Status set =
      options_.set_condition({volume.pod_namespace, volume.pod_name, volume.pod_uid}, stop);
  if (!set.ok()) {
    // The pod's next event or the volume's next renewal tries again.
    spdlog::warn("volume {}: {}", volume_id, set.ToString());
    gate_retry_pods_.insert(volume.pod_uid);
    return;
  }
  gate_retry_pods_.erase(volume.pod_uid);
  gated_pods_.insert(volume.pod_uid);
  spdlog::info("volume {}: pod {}/{} condition {} set", volume_id, volume.pod_namespace,
               volume.pod_name, kPodIpReadinessCondition);
}

bool PodIpReissuer::CertificateHasAddresses(const std::string& volume_id,
                                            const CertificateSpec& spec) {
  const VolumeLayout layout = VolumeLayout::For(options_.data_root, volume_id);
  Result<std::string> pem = env_->ReadFile(layout.data + "/" + spec.certificate_file);
  if (!pem.ok()) return false;
  Result<CertificateInfo> info = ParseLeafCertificate(*pem);
  if (!info.ok()) return false;
  const auto contains_all = [](const std::vector<std::string>& have,
                               const std::vector<std::string>& want) {
    return std::all_of(want.begin(), want.end(), [&](const std::string& item) {
      return std::find(have.begin(), have.end(), item) != have.end();
    });
  };
  return contains_all(info->ip_addresses, spec.ip_addresses) &&
         contains_all(info->dns_names, spec.dns_names);
}

}  // namespace certmount
