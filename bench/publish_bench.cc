// publish_bench: how long NodePublishVolume takes through the real certmountd,
// compared with the floor, the same essential work done in-process.
//
// Each round runs, in an order that alternates between rounds so drift on a
// noisy machine does not favour one side:
//   daemon   N publishes over the CSI socket at concurrency C (then N
//            unpublishes, timed separately), with the daemon's own per-RPC
//            duration_ms read back from its log;
//   floor    per volume, at the same concurrency C (and, when C > 1, also one
//            at a time): key + CSR + local CA signature, the two
//            database commits, the file set on a tmpfs, and the target
//            directory (CSI leaves creating it to the plugin) with the
//            read-only bind on it;
//   inproc   (unless --no-inprocess) Publisher::Publish called directly at
//            concurrency 1 and C, with its step hook timing each step, which
//            splits the gap between floor and daemon into publisher logic,
//            contention and gRPC.
// Figures are the medians of the per-round values. Must run as root.
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/env.h"
#include "issue/attributes.h"
#include "issue/csr.h"
#include "issue/local_ca.h"
#include "issue/private_key.h"
#include "issue/volume_attributes.h"
#include "state/store.h"
#include "support/daemon.h"
#include "support/store_test_access.h"
#include "support/temp_dir.h"
#include "volume/atomic_writer.h"
#include "volume/mount.h"
#include "volume/paths.h"
#include "volume/publisher.h"
#include "volume/volume_layout.h"

namespace certmount::bench {
namespace {

using Clock = std::chrono::steady_clock;
using testing::Daemon;
using testing::TempDir;

// One publish in flight per core but one: the last core is left to the
// benchmark's own gRPC client, gRPC's I/O threads and the kernel. With more
// in flight than cores, the daemon's p50 is mostly waiting for a core, while
// the floor's threads run to completion and leave their waiting to the tail,
// so p50 over p50 would grow with C / nproc whatever the driver did
// (docs/performance.md, "Choosing the concurrency").
int DefaultConcurrency() {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, cores - 1);
}

struct Options {
  int volumes = 200;
  int concurrency = DefaultConcurrency();
  int rounds = 3;
  bool inprocess = true;
};

// Failures abort the run by exception so that the daemon and the mounts are
// still cleaned up by their destructors on the way out of main.
[[noreturn]] void Fail(const std::string& what) { throw std::runtime_error(what); }

void Check(const Status& status, const std::string& what) {
  if (!status.ok()) Fail(what + ": " + status.ToString());
}

template <typename T>
T Take(Result<T> result, const std::string& what) {
  if (!result.ok()) Fail(what + ": " + result.status().ToString());
  return std::move(*result);
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Nearest-rank percentile; `q` in [0, 1].
double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t rank = static_cast<size_t>(q * static_cast<double>(values.size()) + 0.999999);
  rank = std::clamp<size_t>(rank, 1, values.size());
  return values[rank - 1];
}

double Median(const std::vector<double>& values) { return Percentile(values, 0.5); }

// What one measured phase reports per round.
struct Summary {
  double p50 = 0;
  double p99 = 0;
  double per_second = 0;
};

// CPU time (user + system) this process has used so far, all threads.
double SelfCpuMs() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto ms = [](const timeval& t) { return t.tv_sec * 1000.0 + t.tv_usec / 1000.0; };
  return ms(usage.ru_utime) + ms(usage.ru_stime);
}

// CPU time (user + system) process `pid` has used so far, from
// /proc/<pid>/stat (fields 14 and 15, in clock ticks).
double ProcessCpuMs(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  // The command name (field 2) may hold spaces; fields after it follow ')'.
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::string skip;
  for (int field = 3; field < 14; ++field) fields >> skip;
  double utime = 0, stime = 0;
  fields >> utime >> stime;
  return (utime + stime) * 1000.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
}

Summary Summarise(const std::vector<double>& latencies_ms, double wall_ms) {
  return {Percentile(latencies_ms, 0.5), Percentile(latencies_ms, 0.99),
          wall_ms > 0 ? 1000.0 * static_cast<double>(latencies_ms.size()) / wall_ms : 0};
}

// The attributes of the benchmark's certificate, as a pod would declare them.
std::map<std::string, std::string> BenchAttributes(const std::string& name) {
  return {
      {"csi.cert-manager.io/issuer-name", "local"},
      {"csi.cert-manager.io/common-name", name + ".bench.svc"},
      {"csi.cert-manager.io/dns-names", name + ".bench.svc," + name + ".bench.svc.cluster.local"},
      {"csi.cert-manager.io/key-algorithm", "ECDSA"},
      {"csi.cert-manager.io/key-size", "256"}};
}

// The full volume context kubelet sends (KubeletPublishRequest's, as a map).
std::map<std::string, std::string> KubeletContext(const std::string& name) {
  csi::v1::NodePublishVolumeRequest request =
      testing::KubeletPublishRequest(name, "/unused", BenchAttributes(name));
  return {request.volume_context().begin(), request.volume_context().end()};
}

std::string VolumeId(const std::string& phase, int round, int index) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "csi-%s-r%d-%05d", phase.c_str(), round, index);
  return buffer;
}

// kubelet's target layout: it creates everything up to the volume's dir and
// leaves `mount` itself to the driver.
std::string TargetFor(const std::string& target_root, const std::string& volume_id) {
  return target_root + "/pod-bench/volumes/kubernetes.io~csi/" + volume_id + "/mount";
}

void CreateParent(const std::string& target) {
  std::filesystem::create_directories(std::filesystem::path(target).parent_path());
}

// Runs `body(i)` for i in [0, count) on `concurrency` threads, each taking the
// next index; returns the wall time of the whole batch.
double RunConcurrently(int count, int concurrency, const std::function<void(int)>& body) {
  std::atomic<int> next{0};
  std::mutex error_mu;
  std::string error;
  auto worker = [&] {
    for (int i = next++; i < count; i = next++) {
      try {
        body(i);
      } catch (const std::exception& e) {
        std::lock_guard lock(error_mu);
        if (error.empty()) error = e.what();
      }
    }
  };
  const auto started = Clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < concurrency; ++t) threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();
  const double wall = Ms(Clock::now() - started);
  if (!error.empty()) Fail(error);
  return wall;
}

// Time the live threads of `pid` have spent runnable but waiting for a core
// (/proc/<pid>/task/*/schedstat, second field, ns).
double RunQueueWaitMs(pid_t pid) {
  double total_ns = 0;
  std::error_code error;
  for (const auto& task :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", error)) {
    std::ifstream in(task.path() / "schedstat");
    double running = 0, waiting = 0;
    if (in >> running >> waiting) total_ns += waiting;
  }
  return total_ns / 1e6;
}

// --- daemon phase ---------------------------------------------------------------

struct DaemonRound {
  Summary publish;
  Summary unpublish;
  double server_p50 = 0;  // the daemon's own duration_ms for NodePublishVolume
  double server_p99 = 0;
  // CPU per publish while publishing: certmountd's, and this process's (the
  // gRPC client; nothing else runs in it during the phase).
  double daemon_cpu_ms = 0;
  double client_cpu_ms = 0;
  // Per publish, how long certmountd's threads were runnable but had no core.
  double daemon_wait_ms = 0;
};

// The daemon's logged duration_ms of each successful NodePublishVolume whose
// volume id starts with `prefix`.
std::vector<double> ServerDurations(const std::string& log, const std::string& prefix) {
  static const std::regex kLine(
      R"(rpc method=NodePublishVolume volume_id=(\S+) code=OK duration_ms=([0-9.]+))");
  std::vector<double> durations;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    std::smatch match;
    if (std::regex_search(line, match, kLine) && match[1].str().rfind(prefix, 0) == 0) {
      durations.push_back(std::stod(match[2].str()));
    }
  }
  return durations;
}

DaemonRound RunDaemonRound(Daemon& daemon, const Options& options, int round) {
  const int n = options.volumes;
  std::vector<std::string> ids(n), targets(n);
  std::vector<csi::v1::NodePublishVolumeRequest> requests(n);
  for (int i = 0; i < n; ++i) {
    ids[i] = VolumeId("daemon", round, i);
    targets[i] = TargetFor(daemon.target_root(), ids[i]);
    CreateParent(targets[i]);
    requests[i] = testing::KubeletPublishRequest(ids[i], targets[i], BenchAttributes(ids[i]));
  }

  std::vector<double> publish_ms(n), unpublish_ms(n);
  const double daemon_cpu_before = ProcessCpuMs(daemon.pid());
  const double client_cpu_before = SelfCpuMs();
  const double daemon_wait_before = RunQueueWaitMs(daemon.pid());

  const double publish_wall = RunConcurrently(n, options.concurrency, [&](int i) {
    csi::v1::NodePublishVolumeResponse response;
    auto context = testing::CallContext();
    const auto started = Clock::now();
    grpc::Status status = daemon.node().NodePublishVolume(context.get(), requests[i], &response);
    publish_ms[i] = Ms(Clock::now() - started);
    if (!status.ok()) Fail("NodePublishVolume " + ids[i] + ": " + status.error_message());
  });
  const double daemon_cpu = ProcessCpuMs(daemon.pid()) - daemon_cpu_before;
  const double client_cpu = SelfCpuMs() - client_cpu_before;
  const double daemon_wait = RunQueueWaitMs(daemon.pid()) - daemon_wait_before;
  const double unpublish_wall = RunConcurrently(n, options.concurrency, [&](int i) {
    csi::v1::NodeUnpublishVolumeRequest request;
    request.set_volume_id(ids[i]);
    request.set_target_path(targets[i]);
    csi::v1::NodeUnpublishVolumeResponse response;
    auto context = testing::CallContext();
    const auto started = Clock::now();
    grpc::Status status = daemon.node().NodeUnpublishVolume(context.get(), request, &response);
    unpublish_ms[i] = Ms(Clock::now() - started);
    if (!status.ok()) Fail("NodeUnpublishVolume " + ids[i] + ": " + status.error_message());
  });

  DaemonRound result;
  result.publish = Summarise(publish_ms, publish_wall);
  result.daemon_cpu_ms = daemon_cpu / n;
  result.client_cpu_ms = client_cpu / n;
  result.daemon_wait_ms = daemon_wait / n;
  result.unpublish = Summarise(unpublish_ms, unpublish_wall);
  std::vector<double> server =
      ServerDurations(daemon.log(), "csi-daemon-r" + std::to_string(round) + "-");
  result.server_p50 = Percentile(server, 0.5);
  result.server_p99 = Percentile(server, 0.99);
  return result;
}

// --- floor phase ----------------------------------------------------------------

// The floor's steps, in the order the publisher does them.
enum FloorStep { kRegister, kKey, kCsr, kSign, kWrite, kBind, kMark, kFloorSteps };
constexpr const char* kFloorStepNames[kFloorSteps] = {
    "RegisterVolume", "Generate+ToPem",    "BuildCsrPem", "LocalCa::Issue",
    "WriteFileSet",   "mkdir+BindMountRO", "MarkMounted"};

struct FloorRound {
  Summary total;
  double step_p50[kFloorSteps] = {};
  double cpu_ms = 0;  // CPU per volume, all of it in this process
};

// What the floor keeps between rounds: a CA, a database and a tmpfs, all in
// their own temp dir next to (on the same filesystem as) the daemon's.
struct FloorWorld {
  TempDir dir;
  std::unique_ptr<LocalCa> ca;
  std::unique_ptr<Store> store;
  std::string volumes_root;
  std::string target_root;
};

void OpenFloorWorld(FloorWorld& world) {
  const certmount::Clock& clock = SystemClock::Instance();
  world.ca = Take(LocalCa::LoadOrCreate(world.dir.Sub("ca"), clock, Env::Default()), "floor CA");
  world.store = Take(Store::Open(world.dir.Sub("state.db"), clock), "floor store");
  world.volumes_root = VolumesRoot(world.dir.path().string());
  Check(MountTmpfsIfNeeded(world.volumes_root, Env::Default()), "floor tmpfs");
  world.target_root = world.dir.Sub("pods");
}

// The floor at `concurrency` volumes in flight, each done start to end on one
// thread: at the daemon's concurrency it sees the same contention for cores,
// the store's lock and the mount table, so the two p50s compare the same load.
FloorRound RunFloorRound(FloorWorld& world, int volumes, int concurrency, int round) {
  Env* env = Env::Default();
  const int n = volumes;
  std::vector<std::string> ids(n), targets(n);
  std::vector<std::map<std::string, std::string>> contexts(n);
  std::vector<CertificateSpec> specs(n);
  for (int i = 0; i < n; ++i) {
    ids[i] = VolumeId("floor" + std::to_string(concurrency), round, i);
    targets[i] = TargetFor(world.target_root, ids[i]);
    // Only the parent exists, as kubelet leaves it: CSI makes creating the
    // target itself the plugin's job, so the floor's mount step includes
    // the mkdir (on ext4 under inode churn it is not free).
    CreateParent(targets[i]);
    contexts[i] = KubeletContext(ids[i]);
    specs[i] = Take(ParseVolumeAttributes(contexts[i], {}), "floor attributes");
  }

  std::vector<double> total(n);
  std::vector<std::vector<double>> steps(kFloorSteps, std::vector<double>(n));
  const auto deadline = Clock::now() + std::chrono::hours(1);
  const double cpu_before = SelfCpuMs();
  const double wall = RunConcurrently(n, concurrency, [&](int i) {
    const PodInfo pod = PodInfoFromContext(contexts[i]);
    VolumeRecord record;
    record.volume_id = ids[i];
    record.target_path = targets[i];
    record.pod_namespace = pod.namespace_;
    record.pod_name = pod.name;
    record.pod_uid = pod.uid;
    record.service_account = pod.service_account;
    record.attributes = contexts[i];
    record.issuer = world.ca->Name();
    const VolumeLayout layout = VolumeLayout::For(world.dir.path().string(), ids[i]);

    Clock::time_point marks[kFloorSteps + 1];
    marks[0] = Clock::now();
    Check(StoreTestAccess(*world.store).RegisterVolume(record), "floor register");
    marks[1] = Clock::now();
    PrivateKey key = Take(PrivateKey::Generate(KeyAlgorithm::kEcdsa, 256), "floor key");
    std::string key_pem = Take(key.ToPem(specs[i].key_encoding), "floor key pem");
    marks[2] = Clock::now();
    IssueInput input;
    input.volume_id = ids[i];
    input.csr_pem = Take(BuildCsrPem(key, specs[i]), "floor csr");
    input.spec = &specs[i];
    input.pod = pod;
    marks[3] = Clock::now();
    IssuedCertificate issued = Take(world.ca->Issue(input, deadline, {}), "floor issue");
    marks[4] = Clock::now();
    const FileOwnership ownership;
    std::vector<FileEntry> files = {
        {"tls.crt", issued.certificate_chain_pem, CertFileMode(ownership)},
        {"tls.key", std::move(key_pem), KeyFileMode(ownership)},
        {"ca.crt", issued.ca_pem, CertFileMode(ownership)},
    };
    Check(WriteFileSet(layout.data, files, ownership, env), "floor files");
    marks[5] = Clock::now();
    Check(env->CreateDir(targets[i], 0750, std::nullopt), "floor mkdir target");
    Check(BindMountReadOnly(layout.data, targets[i], env), "floor bind");
    marks[6] = Clock::now();
    IssuedCertificateFields fields;
    fields.serial = "0" + std::to_string(i + 1);  // parsing the leaf is not essential work
    fields.not_before = 1;
    fields.not_after = 2;
    fields.next_issuance_at = 2;
    Check(StoreTestAccess(*world.store).MarkMounted(ids[i], fields), "floor mark mounted");
    marks[7] = Clock::now();

    total[i] = Ms(marks[kFloorSteps] - marks[0]);
    for (int s = 0; s < kFloorSteps; ++s) steps[s][i] = Ms(marks[s + 1] - marks[s]);
  });
  const double cpu = SelfCpuMs() - cpu_before;
  // Untimed: the floor keeps every volume mounted until the round ends, like
  // the daemon phase, so both see a mount table of the same size.
  for (int i = 0; i < n; ++i) {
    Check(Unmount(targets[i], env), "floor unmount");
    Check(env->RemoveEmptyDirectory(targets[i]), "floor remove target");
    Check(RemoveVolumeDir(VolumeLayout::For(world.dir.path().string(), ids[i]).root, env),
          "floor remove files");
    Take(world.store->DeleteVolume(ids[i]), "floor delete row");
  }

  FloorRound result;
  result.total = Summarise(total, wall);
  result.cpu_ms = cpu / n;
  for (int s = 0; s < kFloorSteps; ++s) result.step_p50[s] = Median(steps[s]);
  return result;
}

// --- in-process publisher phase -------------------------------------------------

constexpr int kPublishSteps = 6;  // PublishStep::kRegistered .. kCommitted
constexpr const char* kPublishSegmentNames[kPublishSteps + 1] = {"validate+parse+TryRegisterVolume",
                                                                 "Generate+ToPem+BuildCsrPem",
                                                                 "Issue",
                                                                 "WriteFileSet",
                                                                 "mkdir target+BindMountRO",
                                                                 "MarkMounted",
                                                                 "log line+return"};

struct InprocRound {
  Summary total;
  double segment_p50[kPublishSteps + 1] = {};
};

struct InprocWorld {
  TempDir dir;
  std::unique_ptr<LocalCa> ca;
  std::unique_ptr<Store> store;
  std::unique_ptr<Publisher> publisher;
  // Per volume: the time each step was reached (index 0 = call start).
  std::mutex mu;
  std::map<std::string, std::vector<Clock::time_point>> marks;
};

void OpenInprocWorld(InprocWorld& world) {
  // The publisher logs a line per publish; send it to a flushed file like the
  // daemon's stderr log rather than onto the report.
  auto logger = spdlog::basic_logger_mt("publish_bench", world.dir.Sub("inproc.log"));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
  const certmount::Clock& clock = SystemClock::Instance();
  world.ca =
      Take(LocalCa::LoadOrCreate(world.dir.Sub("data/ca"), clock, Env::Default()), "inproc CA");
  world.store = Take(Store::Open(world.dir.Sub("data/state.db"), clock), "inproc store");
  std::filesystem::create_directories(world.dir.Sub("pods"));
  PublisherOptions options;
  options.data_root = world.dir.Sub("data");
  options.target_root = world.dir.Sub("pods");
  options.step_hook = [&world](PublishStep, const std::string& volume_id) {
    const auto now = Clock::now();
    std::lock_guard lock(world.mu);
    world.marks[volume_id].push_back(now);
  };
  world.publisher = std::make_unique<Publisher>(options, world.store.get(), world.ca.get(),
                                                Env::Default(), &clock);
  Take(world.publisher->Startup(), "inproc startup");
}

InprocRound RunInprocRound(InprocWorld& world, int volumes, int concurrency, int round) {
  const std::string phase = "inproc" + std::to_string(concurrency);
  std::vector<PublishRequest> requests(volumes);
  for (int i = 0; i < volumes; ++i) {
    requests[i].volume_id = VolumeId(phase, round, i);
    requests[i].target_path = TargetFor(world.dir.Sub("pods"), requests[i].volume_id);
    requests[i].volume_context = KubeletContext(requests[i].volume_id);
    CreateParent(requests[i].target_path);
  }
  std::vector<double> total(volumes);
  const double wall = RunConcurrently(volumes, concurrency, [&](int i) {
    const std::string& id = requests[i].volume_id;
    {
      std::lock_guard lock(world.mu);
      world.marks[id] = {Clock::now()};
    }
    Check(world.publisher->Publish(requests[i]), "inproc publish " + id);
    const auto finished = Clock::now();
    std::lock_guard lock(world.mu);
    world.marks[id].push_back(finished);
    total[i] = Ms(finished - world.marks[id].front());
  });
  InprocRound result;
  result.total = Summarise(total, wall);
  std::vector<std::vector<double>> segments(kPublishSteps + 1);
  {
    std::lock_guard lock(world.mu);
    for (const PublishRequest& request : requests) {
      const std::vector<Clock::time_point>& m = world.marks[request.volume_id];
      if (m.size() != kPublishSteps + 2)
        Fail("inproc: missing step marks for " + request.volume_id);
      for (int s = 0; s <= kPublishSteps; ++s) segments[s].push_back(Ms(m[s + 1] - m[s]));
      world.marks.erase(request.volume_id);
    }
  }
  for (int s = 0; s <= kPublishSteps; ++s) result.segment_p50[s] = Median(segments[s]);
  for (const PublishRequest& request : requests) {
    Check(world.publisher->Unpublish(request.volume_id, request.target_path), "inproc unpublish");
  }
  return result;
}

// --- reporting ------------------------------------------------------------------

double MedianOf(const std::vector<double>& per_round) { return Median(per_round); }

void PrintRound(int round, const DaemonRound& d, const FloorRound& f, const FloorRound* f1) {
  std::printf(
      "round %d: publish p50 %.2f ms p99 %.2f ms %.1f vol/s (daemon-side p50 %.2f p99 %.2f) | "
      "unpublish p50 %.2f p99 %.2f %.1f vol/s | floor p50 %.2f p99 %.2f %.1f vol/s",
      round, d.publish.p50, d.publish.p99, d.publish.per_second, d.server_p50, d.server_p99,
      d.unpublish.p50, d.unpublish.p99, d.unpublish.per_second, f.total.p50, f.total.p99,
      f.total.per_second);
  if (f1 != nullptr) std::printf(" | sequential floor p50 %.2f", f1->total.p50);
  std::printf(
      " | cpu/volume: daemon %.2f + client %.2f ms, floor %.2f ms | daemon runqueue wait %.2f\n",
      d.daemon_cpu_ms, d.client_cpu_ms, f.cpu_ms, d.daemon_wait_ms);
  std::fflush(stdout);
}

int Run(const Options& options, const std::string& command_line) {
  if (geteuid() != 0) {
    std::fprintf(stderr, "publish_bench: must run as root (it mounts)\n");
    return 2;
  }
  std::printf("command: %s\n", command_line.c_str());
  std::printf("nproc: %u\n", std::thread::hardware_concurrency());
  std::printf("volumes %d, concurrency %d, rounds %d, certmountd %s\n", options.volumes,
              options.concurrency, options.rounds, CERTMOUNTD_PATH);
  std::fflush(stdout);

  TempDir daemon_dir;
  Daemon daemon(daemon_dir.path().string());
  if (!daemon.Start()) Fail("certmountd did not start:\n" + daemon.log());
  FloorWorld floor;
  OpenFloorWorld(floor);
  std::unique_ptr<InprocWorld> inproc;
  if (options.inprocess) {
    inproc = std::make_unique<InprocWorld>();
    OpenInprocWorld(*inproc);
  }

  std::vector<double> publish_p50, publish_p99, publish_rate, server_p50, server_p99;
  std::vector<double> unpublish_p50, unpublish_p99, unpublish_rate, floor_p50, floor_p99,
      floor_rate, sequential_floor_p50, daemon_cpu, client_cpu, floor_cpu, daemon_wait;
  std::vector<std::vector<double>> floor_steps(kFloorSteps);
  std::vector<double> inproc1_p50, inprocc_p50, inprocc_rate;
  std::vector<std::vector<double>> inproc1_segments(kPublishSteps + 1),
      inprocc_segments(kPublishSteps + 1);

  for (int round = 1; round <= options.rounds; ++round) {
    DaemonRound d;
    FloorRound f;
    // Alternate which side runs first so slow drift hits both equally.
    if (round % 2 == 1) {
      d = RunDaemonRound(daemon, options, round);
      f = RunFloorRound(floor, options.volumes, options.concurrency, round);
    } else {
      f = RunFloorRound(floor, options.volumes, options.concurrency, round);
      d = RunDaemonRound(daemon, options, round);
    }
    // At c>1 the one-at-a-time floor too, for the cost of the work alone.
    std::optional<FloorRound> f1;
    if (options.concurrency > 1) f1 = RunFloorRound(floor, options.volumes, 1, round);
    PrintRound(round, d, f, f1.has_value() ? &*f1 : nullptr);
    if (f1.has_value()) sequential_floor_p50.push_back(f1->total.p50);
    floor_rate.push_back(f.total.per_second);
    daemon_cpu.push_back(d.daemon_cpu_ms);
    client_cpu.push_back(d.client_cpu_ms);
    floor_cpu.push_back(f.cpu_ms);
    daemon_wait.push_back(d.daemon_wait_ms);
    publish_p50.push_back(d.publish.p50);
    publish_p99.push_back(d.publish.p99);
    publish_rate.push_back(d.publish.per_second);
    server_p50.push_back(d.server_p50);
    server_p99.push_back(d.server_p99);
    unpublish_p50.push_back(d.unpublish.p50);
    unpublish_p99.push_back(d.unpublish.p99);
    unpublish_rate.push_back(d.unpublish.per_second);
    floor_p50.push_back(f.total.p50);
    floor_p99.push_back(f.total.p99);
    for (int s = 0; s < kFloorSteps; ++s) floor_steps[s].push_back(f.step_p50[s]);

    if (inproc != nullptr) {
      InprocRound one = RunInprocRound(*inproc, options.volumes, 1, round);
      InprocRound many = options.concurrency == 1
                             ? one
                             : RunInprocRound(*inproc, options.volumes, options.concurrency, round);
      std::printf(
          "round %d: in-process Publisher::Publish c=1 p50 %.2f ms | c=%d p50 %.2f ms %.1f vol/s\n",
          round, one.total.p50, options.concurrency, many.total.p50, many.total.per_second);
      std::fflush(stdout);
      inproc1_p50.push_back(one.total.p50);
      inprocc_p50.push_back(many.total.p50);
      inprocc_rate.push_back(many.total.per_second);
      for (int s = 0; s <= kPublishSteps; ++s) {
        inproc1_segments[s].push_back(one.segment_p50[s]);
        inprocc_segments[s].push_back(many.segment_p50[s]);
      }
    }
  }

  std::printf("\nmedian of %d rounds:\n", options.rounds);
  std::printf(
      "publish (certmountd over the socket, c=%d): p50 %.2f ms  p99 %.2f ms  %.1f volumes/s\n",
      options.concurrency, MedianOf(publish_p50), MedianOf(publish_p99), MedianOf(publish_rate));
  std::printf("  daemon-side NodePublishVolume duration_ms: p50 %.2f ms  p99 %.2f ms\n",
              MedianOf(server_p50), MedianOf(server_p99));
  std::printf("unpublish (c=%d): p50 %.2f ms  p99 %.2f ms  %.1f volumes/s\n", options.concurrency,
              MedianOf(unpublish_p50), MedianOf(unpublish_p99), MedianOf(unpublish_rate));
  std::printf("floor (in-process, c=%d): p50 %.2f ms  p99 %.2f ms  %.1f volumes/s\n",
              options.concurrency, MedianOf(floor_p50), MedianOf(floor_p99), MedianOf(floor_rate));
  std::printf("  floor step p50s:");
  for (int s = 0; s < kFloorSteps; ++s) {
    std::printf(" %s %.3f;", kFloorStepNames[s], MedianOf(floor_steps[s]));
  }
  std::printf("\n");
  if (inproc != nullptr) {
    std::printf("in-process Publisher::Publish: c=1 p50 %.2f ms | c=%d p50 %.2f ms %.1f vol/s\n",
                MedianOf(inproc1_p50), options.concurrency, MedianOf(inprocc_p50),
                MedianOf(inprocc_rate));
    std::printf("  segment p50s (c=1 / c=%d):\n", options.concurrency);
    for (int s = 0; s <= kPublishSteps; ++s) {
      std::printf("    %-42s %.3f / %.3f ms\n", kPublishSegmentNames[s],
                  MedianOf(inproc1_segments[s]), MedianOf(inprocc_segments[s]));
    }
  }
  // On a machine with fewer cores than volumes in flight, p50 follows the CPU
  // each volume costs, so this says where the gap comes from.
  std::printf("cpu per volume: daemon %.2f ms + benchmark's gRPC client %.2f ms; floor %.2f ms\n",
              MedianOf(daemon_cpu), MedianOf(client_cpu), MedianOf(floor_cpu));
  std::printf("certmountd's threads waiting for a core, per publish: %.2f ms\n",
              MedianOf(daemon_wait));
  // The goal's ratio: publish and floor at the same concurrency.
  std::printf("ratio publish_p50/floor_p50 (both c=%d) = %.2f\n", options.concurrency,
              MedianOf(publish_p50) / MedianOf(floor_p50));
  // With C volumes always in flight, mean latency is C / throughput (Little's
  // law), so this is the ratio of the two means. Unlike the p50s it does not
  // depend on how the kernel shares the cores out when C exceeds them: the
  // floor's threads run to completion and push the waiting into its tail.
  std::printf("ratio floor_vol_per_s/publish_vol_per_s (= mean latency ratio, both c=%d) = %.2f\n",
              options.concurrency, MedianOf(floor_rate) / MedianOf(publish_rate));
  if (!sequential_floor_p50.empty()) {
    std::printf(
        "sequential floor p50 %.2f ms; ratio publish_p50(c=%d)/sequential_floor_p50 = %.2f\n",
        MedianOf(sequential_floor_p50), options.concurrency,
        MedianOf(publish_p50) / MedianOf(sequential_floor_p50));
  }

  const int code = daemon.Terminate();
  if (code != 0) std::fprintf(stderr, "certmountd exited with %d\n", code);
  return 0;
}

}  // namespace
}  // namespace certmount::bench

int main(int argc, char** argv) {
  certmount::bench::Options options;
  CLI::App app{"publish_bench: NodePublishVolume latency through certmountd vs. the floor"};
  app.add_option("--volumes", options.volumes, "volumes published per round")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--concurrency", options.concurrency,
                 "concurrent NodePublishVolume calls (default: nproc - 1, at least 1)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--rounds", options.rounds, "rounds; figures are medians over them")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  bool no_inprocess = false;
  app.add_flag("--no-inprocess", no_inprocess, "skip the in-process Publisher::Publish breakdown");
  CLI11_PARSE(app, argc, argv);
  options.inprocess = !no_inprocess;

  std::string command_line;
  for (int i = 0; i < argc; ++i) command_line += (i == 0 ? "" : " ") + std::string(argv[i]);
  try {
    return certmount::bench::Run(options, command_line);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "publish_bench: %s\n", e.what());
    return 1;
  }
}
