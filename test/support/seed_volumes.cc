#include "support/seed_volumes.h"
#include "support/store_test_access.h"

#include "common/clock.h"

namespace certmount::testing {

std::string SeededVolumeId(int index) { return "csi-bench-" + std::to_string(index); }

Status SeedMountedVolumes(Store& store, int count,
                          const std::function<std::string(int index)>& target_of) {
  const int64_t now = SystemClock::Instance().NowUnix();
  for (int i = 0; i < count; ++i) {
    VolumeRecord record;
    record.volume_id = SeededVolumeId(i);
    record.target_path = target_of(i);
    record.pod_namespace = "bench";
    record.pod_name = "pod-" + std::to_string(i);
    record.pod_uid = "uid-" + std::to_string(i);
    record.service_account = "default";
    record.attributes = {{"csi.cert-manager.io/issuer-name", "local"},
                         {"csi.cert-manager.io/dns-names", record.pod_name + ".bench.svc"},
                         {"csi.storage.k8s.io/ephemeral", "true"}};
    record.issuer = "local-ca";
    IssuedCertificateFields cert{std::to_string(100000 + i), now, now + 90 * 86400,
                                 now + 86400 + (i * 60LL * 86400) / count};
    CERTMOUNT_RETURN_IF_ERROR(
        StoreTestAccess(store).WriteInOneTransaction(record, record.volume_id, cert, [] {}));
  }
  return Status::Ok();
}

Status SeedMountedVolumes(Store& store, const std::string& target, int count) {
  return SeedMountedVolumes(store, count, [&target](int) { return target; });
}

}  // namespace certmount::testing
