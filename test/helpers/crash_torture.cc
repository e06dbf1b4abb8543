// Crash torture: random SIGKILLs of the real certmountd under publish,
// unpublish and renewal traffic, with the node's invariants checked after
// every restart. Run by scripts/torture.sh (docs/verification.md).
//
//   crash_torture [--kills N] [--seed S] [--root DIR]
//
// Each round starts certmountd on the same data root (its startup cleanup
// runs), checks the invariants, lets four kubelet-like clients publish and
// unpublish ten volumes with 2-second certificates (so renewals run all the
// time) for a random 0.1 to 1.5 s, and SIGKILLs the daemon. The invariants,
// read from state.db, the mount table and the volumes directory:
//   - no row has mounted = 0 (startup deleted them all);
//   - every mounted row's target is a mount point and shows tls.crt, tls.key
//     and ca.crt;
//   - every directory in <data-root>/volumes has a row, and every mount below
//     the target root is a mounted row's target;
//   - PRAGMA integrity_check is ok.
// Prints one line per violation and a summary; exits 1 on any violation.
#include <SQLiteCpp/SQLiteCpp.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support/daemon.h"
#include "support/mounts.h"
#include "support/temp_dir.h"

namespace certmount::testing {
namespace {

namespace fs = std::filesystem;

constexpr int kVolumes = 10;
constexpr int kClients = 4;

struct Totals {
  std::atomic<int> publish_ok{0}, publish_failed{0}, unpublish_ok{0}, unpublish_failed{0};
};

std::string VolumeId(int i) { return "csi-torture-" + std::to_string(i); }

// One kubelet-like client: random publishes and unpublishes until `stop`.
void Client(Daemon& daemon, unsigned seed, const std::atomic<bool>& stop, Totals& totals) {
  std::mt19937 random(seed);
  const std::map<std::string, std::string> attributes = {
      {"csi.cert-manager.io/issuer-name", "ca"},
      {"csi.cert-manager.io/common-name", "${POD_NAME}"},
      {"csi.cert-manager.io/duration", "2s"},
  };
  while (!stop.load()) {
    const int i = static_cast<int>(random() % kVolumes);
    const std::string target = daemon.PodTarget("pod-" + std::to_string(i));
    if (random() % 3 != 0) {
      csi::v1::NodePublishVolumeResponse response;
      grpc::Status s = daemon.node().NodePublishVolume(
          CallContext(std::chrono::seconds(5)).get(),
          KubeletPublishRequest(VolumeId(i), target, attributes), &response);
      (s.ok() ? totals.publish_ok : totals.publish_failed)++;
    } else {
      csi::v1::NodeUnpublishVolumeRequest request;
      request.set_volume_id(VolumeId(i));
      request.set_target_path(target);
      csi::v1::NodeUnpublishVolumeResponse response;
      grpc::Status s = daemon.node().NodeUnpublishVolume(CallContext(std::chrono::seconds(5)).get(),
                                                         request, &response);
      (s.ok() ? totals.unpublish_ok : totals.unpublish_failed)++;
    }
  }
}

// Every invariant violation, one line each.
std::vector<std::string> CheckInvariants(const Daemon& daemon) {
  std::vector<std::string> violations;
  std::set<std::string> row_ids, mounted_targets;
  SQLite::Database db(daemon.data_root() + "/state.db", SQLite::OPEN_READONLY);
  const std::string integrity = db.execAndGet("PRAGMA integrity_check").getString();
  if (integrity != "ok") violations.push_back("integrity_check: " + integrity);
  SQLite::Statement rows(db, "SELECT volume_id, target_path, mounted FROM volumes");
  while (rows.executeStep()) {
    const std::string id = rows.getColumn(0).getString();
    const std::string target = rows.getColumn(1).getString();
    row_ids.insert(id);
    if (rows.getColumn(2).getInt() == 0) {
      violations.push_back("unmounted row after startup: " + id);
      continue;
    }
    mounted_targets.insert(target);
    if (!IsMountPoint(target)) violations.push_back("mounted row without mount: " + id);
    for (const char* file : {"tls.crt", "tls.key", "ca.crt"}) {
      if (!fs::exists(target + "/" + file)) {
        violations.push_back("mounted row " + id + " lacks " + file);
      }
    }
  }
  for (const auto& entry : fs::directory_iterator(daemon.data_root() + "/volumes")) {
    if (row_ids.count(entry.path().filename().string()) == 0) {
      violations.push_back("directory without row: " + entry.path().string());
    }
  }
  for (const std::string& mount : MountPointsUnder(daemon.target_root())) {
    if (mounted_targets.count(mount) == 0) violations.push_back("mount without row: " + mount);
  }
  return violations;
}

// Renewal rows in the (pruned) history: evidence that renewals ran.
int RenewalRows(const Daemon& daemon) {
  SQLite::Database db(daemon.data_root() + "/state.db", SQLite::OPEN_READONLY);
  return db.execAndGet("SELECT count(*) FROM issuances WHERE kind = 'renewal'").getInt();
}

int Run(int kills, unsigned seed, const std::string& root) {
  std::mt19937 random(seed);
  Daemon daemon(root);
  Totals totals;
  int violations = 0;
  int renewals = 0;
  const std::vector<std::string> flags = {"--publish-timeout=5s", "--renewal-backoff-initial=1s",
                                          "--renewal-backoff-max=2s"};
  for (int round = 0; round <= kills; ++round) {
    if (!daemon.Start(flags)) {
      std::printf("round %d: certmountd did not start:\n%s\n", round, daemon.log().c_str());
      return 1;
    }
    for (const std::string& violation : CheckInvariants(daemon)) {
      std::printf("round %d: %s\n", round, violation.c_str());
      ++violations;
    }
    renewals += RenewalRows(daemon);
    if (round == kills) break;
    std::atomic<bool> stop{false};
    std::vector<std::thread> clients;
    for (int c = 0; c < kClients; ++c) {
      clients.emplace_back(Client, std::ref(daemon), static_cast<unsigned>(random()),
                           std::cref(stop), std::ref(totals));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100 + random() % 1400));
    daemon.Kill();
    stop = true;
    for (std::thread& client : clients) client.join();
  }
  daemon.Terminate();
  std::printf(
      "crash_torture: seed %u, %d kills, %d violations; publishes %d ok %d failed, unpublishes "
      "%d ok %d failed; renewal history rows seen at the restarts %d\n",
      seed, kills, violations, totals.publish_ok.load(), totals.publish_failed.load(),
      totals.unpublish_ok.load(), totals.unpublish_failed.load(), renewals);
  return violations == 0 ? 0 : 1;
}

}  // namespace
}  // namespace certmount::testing

int main(int argc, char** argv) {
  int kills = 20;
  unsigned seed = static_cast<unsigned>(time(nullptr));
  std::string root;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--kills")
      kills = std::stoi(argv[i + 1]);
    else if (flag == "--seed")
      seed = static_cast<unsigned>(std::stoul(argv[i + 1]));
    else if (flag == "--root")
      root = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: crash_torture [--kills N] [--seed S] [--root DIR]\n");
      return 2;
    }
  }
  if (root.empty()) {
    certmount::testing::TempDir dir;
    return certmount::testing::Run(kills, seed, dir.path().string());
  }
  return certmount::testing::Run(kills, seed, root);
}
