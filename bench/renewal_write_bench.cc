// renewal_write_bench: bytes one renewal writes to the state database, for
// volumes carrying a large annotation. Counts the frames the store's renewal
// transactions put into the WAL (emptied by a TRUNCATE checkpoint before
// each, counted by the next checkpoint); every byte SQLite writes for a
// commit goes through the WAL first, so this is the write cost, not a time.
// Renewals alternate failure and success, as a signer outage does, so each
// one changes the row's size. Needs no root. Uses only the Store's public
// calls, so the same file measures any revision (docs/performance.md).
#include <SQLiteCpp/SQLiteCpp.h>

#include <stdlib.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <string>

#include "common/clock.h"
#include "state/store.h"
#include "support/store_test_access.h"

namespace {

certmount::VolumeRecord Volume(int index, size_t annotation_bytes) {
  certmount::VolumeRecord volume;
  volume.volume_id = "csi-" + std::to_string(index);
  volume.target_path = "/var/lib/kubelet/pods/uid-" + std::to_string(index) + "/volumes/v/mount";
  volume.pod_namespace = "ns";
  volume.pod_name = "pod-" + std::to_string(index);
  volume.attributes = {{"csi.cert-manager.io/issuer-name", "ca"},
                       {"example.com/annotation", std::string(annotation_bytes, 'a')}};
  volume.issuer = "ca";
  return volume;
}

// One renewal of volume `index`: a failure on odd rounds, a success on even.
certmount::Status Renew(certmount::Store& store, int index, int round) {
  const std::string id = "csi-" + std::to_string(index);
  const int64_t t = 1'700'000'000 + round;
  if (round % 2 == 1) {
    return store.RecordRenewalFailureWithHistory(id, 1, t + 60, "signer unavailable", {"ca", 5},
                                                 10);
  }
  const std::string serial = "0A" + std::to_string(round);
  return store.RecordRenewalWithHistory(id, {serial, t, t + 3600, t + 1800}, {"ca", 5}, 10);
}

}  // namespace

int main(int argc, char** argv) {
  int volumes = 5;
  int rounds = 20;
  size_t annotation_bytes = 1024 * 1024;
  CLI::App app{"renewal_write_bench: bytes written to state.db per renewal"};
  app.add_option("--volumes", volumes, "mounted volumes")->check(CLI::PositiveNumber);
  app.add_option("--rounds", rounds, "renewals of each volume")->check(CLI::PositiveNumber);
  app.add_option("--annotation-bytes", annotation_bytes, "size of each volume's annotation");
  CLI11_PARSE(app, argc, argv);

  // Needs only the state layer (no test support), so it builds on its own
  // against any revision's libraries.
  std::string dir = std::filesystem::temp_directory_path().string() + "/renewal_write_XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) return 1;
  struct Cleanup {
    std::string dir;
    ~Cleanup() { std::filesystem::remove_all(dir); }
  } cleanup{dir};
  const std::string db_path = dir + "/state.db";
  auto store = certmount::Store::Open(db_path, certmount::SystemClock::Instance());
  if (!store.ok()) {
    std::fprintf(stderr, "open: %s\n", store.status().ToString().c_str());
    return 1;
  }
  for (int i = 0; i < volumes; ++i) {
    certmount::Status done =
        certmount::StoreTestAccess(**store).RegisterVolume(Volume(i, annotation_bytes));
    if (done.ok())
      done = certmount::StoreTestAccess(**store).MarkMounted("csi-" + std::to_string(i),
                                                             {"01", 1, 2, 3});
    if (!done.ok()) {
      std::fprintf(stderr, "mount: %s\n", done.ToString().c_str());
      return 1;
    }
  }

  SQLite::Database admin(db_path, SQLite::OPEN_READWRITE);
  const int64_t page_size = admin.execAndGet("PRAGMA page_size").getInt64();
  int64_t frames = 0;
  for (int round = 1; round <= rounds; ++round) {
    for (int i = 0; i < volumes; ++i) {
      admin.exec("PRAGMA wal_checkpoint(TRUNCATE)");
      certmount::Status renewed = Renew(**store, i, round);
      if (!renewed.ok()) {
        std::fprintf(stderr, "renew: %s\n", renewed.ToString().c_str());
        return 1;
      }
      SQLite::Statement count(admin, "PRAGMA wal_checkpoint(PASSIVE)");
      count.executeStep();
      frames += count.getColumn(1).getInt64();
    }
  }
  const int renewals = volumes * rounds;
  // A WAL frame is a page plus its 24-byte header.
  const double bytes = static_cast<double>(frames) * static_cast<double>(page_size + 24) / renewals;
  std::printf("volumes  annotation_bytes  renewals  pages_per_renewal  bytes_per_renewal\n");
  std::printf("%7d  %16zu  %8d  %17.1f  %17.0f\n", volumes, annotation_bytes, renewals,
              static_cast<double>(frames) / renewals, bytes);
  return 0;
}
