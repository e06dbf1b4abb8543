// Crash torture: random SIGKILLs of the real certmountd under publish,
// unpublish and renewal traffic, with the node's invariants checked after
// every restart. Run by scripts/torture.sh (docs/verification.md).
//
//   crash_torture [--kills N] [--seed S] [--root DIR] [--issuer local|cert-manager]
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
//   - no volume_attributes or issuances row without its volumes row;
//   - PRAGMA integrity_check is ok.
// With --issuer cert-manager the daemon signs through the fake API server
// (test/support/fake_kube_api.h), which lives in this process and so
// outlives every kill, and two more hold:
//   - every CertificateRequest belongs to a volume with a mounted row, once
//     the startup's sweep (RetireAllExcept, in the background) has had up to
//     10 s to delete the others: a request of a deleted volume is allowed
//     only while the driver is still retiring it;
//   - no CertificateRequest was created (POSTed) for a volume after an
//     unpublish of it had succeeded and before its next publish began. In
//     this mode each volume's calls are serialised, as kubelet does.
// Prints one line per violation and a summary; exits 1 on any violation.
#include <SQLiteCpp/SQLiteCpp.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "issue/cert_manager_issuer.h"
#include "kube/client.h"
#include "support/daemon.h"
#include "support/fake_kube_api.h"
#include "support/mounts.h"
#include "support/temp_dir.h"

namespace certmount::testing {
namespace {

namespace fs = std::filesystem;

constexpr int kVolumes = 10;
constexpr int kClients = 4;
constexpr char kPodUid[] = "0b5c1c8e-8f5e-4c4e-9d3a-2f9a4f0e6b11";  // KubeletPublishRequest's
constexpr char kRequestsPath[] = "/apis/cert-manager.io/v1/namespaces/default/certificaterequests";

struct Totals {
  std::atomic<int> publish_ok{0}, publish_failed{0}, unpublish_ok{0}, unpublish_failed{0};
};

std::string VolumeId(int i) { return "csi-torture-" + std::to_string(i); }

// The string at `path` in `object`; "" when a step is missing or of another
// type.
std::string StringAt(const nlohmann::json& object, std::initializer_list<const char*> path) {
  const nlohmann::json* at = &object;
  for (const char* key : path) {
    if (!at->is_object()) return "";
    auto it = at->find(key);
    if (it == at->end()) return "";
    at = &*it;
  }
  return at->is_string() ? at->get<std::string>() : "";
}

// The fake API server playing cert-manager, and what the kubelet-like
// clients did to each volume, for the two cert-manager invariants.
class SignerWorld {
 public:
  explicit SignerWorld(const std::string& root) {
    api_.PutPod("default", "web-0", kPodUid);
    kubeconfig_ = WriteKubeconfig(root + "/kubeconfig", api_.url(), api_.server_ca_pem());
    kube::KubeConfig config;
    config.server = api_.url();
    config.ca_pem = api_.server_ca_pem();
    config.token = FakeKubeApi::kToken;
    auto client = kube::Client::Create(config);
    if (client.ok()) client_ = std::move(*client);
    for (int i = 0; i < kVolumes; ++i) volume_of_label_[IdLabelValue(VolumeId(i))] = i;
  }

  bool ready() const { return client_ != nullptr; }
  std::vector<std::string> DaemonFlags() const {
    return {"--issuer=cert-manager", "--kubeconfig=" + kubeconfig_};
  }
  std::map<std::string, std::string> Attributes() const {
    return {{"csi.cert-manager.io/issuer-name", "ca"},
            {"csi.cert-manager.io/issuer-kind", "ClusterIssuer"},
            {"csi.cert-manager.io/common-name", "${POD_NAME}"},
            {"csi.cert-manager.io/duration", "2s"}};
  }
  // Serialises the calls for volume `i`, as kubelet does.
  std::mutex& VolumeLock(int i) { return volume_locks_[i]; }

  // Called with VolumeLock(i) held: before a publish is sent, and after an
  // unpublish succeeded. The mark is the number of creates seen so far.
  void NotePublishing(int i) { Note(i, false); }
  void NoteUnpublished(int i) { Note(i, true); }

  // The violations of both invariants; `mounted_ids` are the mounted rows.
  std::vector<std::string> Check(const std::set<std::string>& mounted_ids) {
    std::vector<std::string> violations = CreatesAfterUnpublish();
    std::set<std::string> live_labels;
    for (const std::string& id : mounted_ids) live_labels.insert(IdLabelValue(id));
    std::vector<std::string> stray;
    api_.WaitUntil([&] { return (stray = StrayRequests(live_labels)).empty(); },
                   std::chrono::seconds(10));
    for (const std::string& name : stray) {
      violations.push_back(
          "CertificateRequest of a volume without a mounted row, 10 s after "
          "startup: " +
          name);
    }
    return violations;
  }

  int creates() const { return api_.Count("POST", kRequestsPath); }

 private:
  struct Mark {
    int creates;       // creates recorded before the event
    bool unpublished;  // else a publish began
  };

  void Note(int i, bool unpublished) {
    const int mark = creates();
    std::lock_guard lock(mutex_);
    marks_[i].push_back({mark, unpublished});
  }

  // Creates (POSTs, in arrival order) since the last check whose volume's
  // latest event before them was a successful unpublish.
  std::vector<std::string> CreatesAfterUnpublish() {
    std::vector<std::string> violations;
    int index = 0;
    for (const RecordedRequest& request : api_.Requests()) {
      if (request.method != "POST" || request.path != kRequestsPath) continue;
      const int create = index++;
      if (create < creates_checked_) continue;
      const std::string label = StringAt(nlohmann::json::parse(request.body, nullptr, false),
                                         {"metadata", "labels", kVolumeLabel});
      auto volume = volume_of_label_.find(label);
      if (volume == volume_of_label_.end()) {
        violations.push_back("CertificateRequest created for an unknown volume label '" + label +
                             "'");
        continue;
      }
      std::lock_guard lock(mutex_);
      std::optional<Mark> latest;
      for (const Mark& mark : marks_[volume->second]) {
        if (mark.creates > create) break;
        latest = mark;
      }
      if (latest.has_value() && latest->unpublished) {
        violations.push_back("CertificateRequest created for " + VolumeId(volume->second) +
                             " after its unpublish succeeded (create #" + std::to_string(create) +
                             ")");
      }
    }
    creates_checked_ = index;
    return violations;
  }

  // "namespace/name" of every CertificateRequest whose volume label is not
  // in `live_labels`, listed through the API as kubectl would.
  std::vector<std::string> StrayRequests(const std::set<std::string>& live_labels) {
    auto listed = client_->Call({"GET", "/apis/cert-manager.io/v1/certificaterequests", "", ""},
                                std::chrono::steady_clock::now() + std::chrono::seconds(5), {});
    if (!listed.ok()) return {"(cannot list: " + listed.status().ToString() + ")"};
    const nlohmann::json list = nlohmann::json::parse(listed->body, nullptr, false);
    std::vector<std::string> stray;
    if (!list.is_object() || !list.contains("items") || !list["items"].is_array()) {
      return {"(unreadable list)"};
    }
    for (const nlohmann::json& item : list["items"]) {
      const std::string label = StringAt(item, {"metadata", "labels", kVolumeLabel});
      if (live_labels.count(label) == 0) {
        stray.push_back(StringAt(item, {"metadata", "namespace"}) + "/" +
                        StringAt(item, {"metadata", "name"}) + " (volume label " + label + ")");
      }
    }
    return stray;
  }

  FakeKubeApi api_;
  std::string kubeconfig_;
  std::unique_ptr<kube::Client> client_;
  std::map<std::string, int> volume_of_label_;
  std::array<std::mutex, kVolumes> volume_locks_;
  std::mutex mutex_;
  std::array<std::vector<Mark>, kVolumes> marks_;
  int creates_checked_ = 0;
};

// One kubelet-like client: random publishes and unpublishes until `stop`.
// `world` (cert-manager mode, else null) serialises each volume's calls and
// hears about them.
void Client(Daemon& daemon, unsigned seed, const std::atomic<bool>& stop, Totals& totals,
            SignerWorld* world) {
  std::mt19937 random(seed);
  const std::map<std::string, std::string> attributes =
      world != nullptr ? world->Attributes()
                       : std::map<std::string, std::string>{
                             {"csi.cert-manager.io/issuer-name", "ca"},
                             {"csi.cert-manager.io/common-name", "${POD_NAME}"},
                             {"csi.cert-manager.io/duration", "2s"},
                         };
  // Longer than --publish-timeout in cert-manager mode, so the daemon, not
  // the client, ends a publish, as with kubelet's longer deadline.
  const auto timeout = std::chrono::seconds(world != nullptr ? 10 : 5);
  while (!stop.load()) {
    const int i = static_cast<int>(random() % kVolumes);
    const std::string target = daemon.PodTarget("pod-" + std::to_string(i));
    std::unique_lock<std::mutex> serial;
    if (world != nullptr) serial = std::unique_lock(world->VolumeLock(i));
    if (random() % 3 != 0) {
      if (world != nullptr) world->NotePublishing(i);
      csi::v1::NodePublishVolumeResponse response;
      grpc::Status s = daemon.node().NodePublishVolume(
          CallContext(timeout).get(), KubeletPublishRequest(VolumeId(i), target, attributes),
          &response);
      (s.ok() ? totals.publish_ok : totals.publish_failed)++;
    } else {
      csi::v1::NodeUnpublishVolumeRequest request;
      request.set_volume_id(VolumeId(i));
      request.set_target_path(target);
      csi::v1::NodeUnpublishVolumeResponse response;
      grpc::Status s =
          daemon.node().NodeUnpublishVolume(CallContext(timeout).get(), request, &response);
      (s.ok() ? totals.unpublish_ok : totals.unpublish_failed)++;
      if (s.ok() && world != nullptr) world->NoteUnpublished(i);
    }
  }
}

// Every invariant violation, one line each; `mounted_ids` gets the mounted
// rows.
std::vector<std::string> CheckInvariants(const Daemon& daemon, std::set<std::string>& mounted_ids) {
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
    mounted_ids.insert(id);
    mounted_targets.insert(target);
    if (!IsMountPoint(target)) violations.push_back("mounted row without mount: " + id);
    for (const char* file : {"tls.crt", "tls.key", "ca.crt"}) {
      if (!fs::exists(target + "/" + file)) {
        violations.push_back("mounted row " + id + " lacks " + file);
      }
    }
  }
  for (const char* table : {"volume_attributes", "issuances"}) {
    SQLite::Statement orphans(db, std::string("SELECT DISTINCT volume_id FROM ") + table +
                                      " WHERE volume_id NOT IN (SELECT volume_id FROM volumes)");
    while (orphans.executeStep()) {
      violations.push_back(std::string(table) +
                           " row without its volume: " + orphans.getColumn(0).getString());
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

int Run(int kills, unsigned seed, const std::string& root, bool cert_manager) {
  std::mt19937 random(seed);
  std::unique_ptr<SignerWorld> world;
  if (cert_manager) {
    world = std::make_unique<SignerWorld>(root);
    if (!world->ready()) {
      std::printf("cannot make a client for the fake API server\n");
      return 1;
    }
  }
  Daemon daemon(root);
  Totals totals;
  int violations = 0;
  int renewals = 0;
  std::vector<std::string> flags = {"--publish-timeout=5s", "--renewal-backoff-initial=1s",
                                    "--renewal-backoff-max=2s"};
  if (world != nullptr) {
    for (const std::string& flag : world->DaemonFlags()) flags.push_back(flag);
  }
  for (int round = 0; round <= kills; ++round) {
    if (!daemon.Start(flags)) {
      // Its stdout too: a refusal before logging is set up lands there.
      std::ifstream out(root + "/certmountd.out");
      const std::string stdout_text((std::istreambuf_iterator<char>(out)),
                                    std::istreambuf_iterator<char>());
      std::printf("round %d: certmountd did not start (%s); stdout:\n%s\nlog:\n%s\n", round,
                  daemon.running() ? "no socket within 30 s" : "it exited", stdout_text.c_str(),
                  daemon.log().c_str());
      return 1;
    }
    std::set<std::string> mounted_ids;
    std::vector<std::string> found = CheckInvariants(daemon, mounted_ids);
    if (world != nullptr) {
      for (std::string& violation : world->Check(mounted_ids)) found.push_back(violation);
    }
    for (const std::string& violation : found) {
      std::printf("round %d: %s\n", round, violation.c_str());
      ++violations;
    }
    renewals += RenewalRows(daemon);
    if (round == kills) break;
    std::atomic<bool> stop{false};
    std::vector<std::thread> clients;
    for (int c = 0; c < kClients; ++c) {
      clients.emplace_back(Client, std::ref(daemon), static_cast<unsigned>(random()),
                           std::cref(stop), std::ref(totals), world.get());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100 + random() % 1400));
    daemon.Kill();
    stop = true;
    for (std::thread& client : clients) client.join();
  }
  daemon.Terminate();
  std::printf(
      "crash_torture: issuer %s, seed %u, %d kills, %d violations; publishes %d ok %d failed, "
      "unpublishes %d ok %d failed; renewal history rows seen at the restarts %d",
      cert_manager ? "cert-manager" : "local", seed, kills, violations, totals.publish_ok.load(),
      totals.publish_failed.load(), totals.unpublish_ok.load(), totals.unpublish_failed.load(),
      renewals);
  if (world != nullptr) std::printf("; CertificateRequests created %d", world->creates());
  std::printf("\n");
  return violations == 0 ? 0 : 1;
}

}  // namespace
}  // namespace certmount::testing

int main(int argc, char** argv) {
  int kills = 20;
  unsigned seed = static_cast<unsigned>(time(nullptr));
  std::string root;
  std::string issuer = "local";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--kills")
      kills = std::stoi(argv[i + 1]);
    else if (flag == "--seed")
      seed = static_cast<unsigned>(std::stoul(argv[i + 1]));
    else if (flag == "--root")
      root = argv[i + 1];
    else if (flag == "--issuer")
      issuer = argv[i + 1];
    else
      issuer = "?";
  }
  if (issuer != "local" && issuer != "cert-manager") {
    std::fprintf(stderr,
                 "usage: crash_torture [--kills N] [--seed S] [--root DIR] "
                 "[--issuer local|cert-manager]\n");
    return 2;
  }
  const bool cert_manager = issuer == "cert-manager";
  if (root.empty()) {
    certmount::testing::TempDir dir;
    return certmount::testing::Run(kills, seed, dir.path().string(), cert_manager);
  }
  return certmount::testing::Run(kills, seed, root, cert_manager);
}
