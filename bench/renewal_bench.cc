// renewal_bench: what a node with many mounted volumes costs certmountd.
//
// For each volume count N it builds the node a running certmountd leaves
// behind: a scratch tmpfs, the volumes tmpfs under the data root, N mounted
// rows written through the Store (renewals spread over the next 60 days, so
// none falls due), and for every row a read-only bind of that row's own data
// directory at that row's own kubelet-style target, made with mount(2)
// directly. Then it runs the real certmountd (CERTMOUNTD_PATH) and reports:
//
//   startup_ms    exec to the socket accepting connections; the startup
//                 cleanup proves each row's mount before the socket is served
//   kept/deleted  the cleanup's counts and the scheduler's volume count, from
//                 the daemon's log. Unless every row was kept and scheduled
//                 the bench fails: its figures would measure nothing
//   rss_mib       VmRSS once serving
//   idle_*        for --idle-volumes only: CPU (utime + stime) and voluntary
//                 context switches of all threads (wake-ups) over
//                 --idle-seconds without traffic; the scheduler must sleep
//                 until the earliest renewal, not poll
//   unpub_p50/90  --unpublishes NodeUnpublishVolume calls over the socket,
//                 each of a volume the daemon published just before
//                 (untimed), so every timed call removes a real volume with
//                 its files while the N seeded ones stay mounted
//   mounts        lines of the daemon's /proc/<pid>/mountinfo while it
//                 unpublishes: the table an O(mounts) check would read
//
// Everything happens in a private mount namespace: no mount reaches the
// host, and all of them go with the namespace even if the bench is killed.
// Each run still unmounts its scratch tree itself (a lazy unmount of its root
// takes every mount below it) and checks that nothing is left. Needs root.
//
//   sudo build/renewal_bench --volumes 100,1000,10000 --idle-volumes 10000 --idle-seconds 60
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "csi.grpc.pb.h"
#include "state/store.h"
#include "support/daemon.h"
#include "support/seed_volumes.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct ProcessCounters {
  long long cpu_ticks = 0;           // utime + stime, all threads
  long long voluntary_switches = 0;  // summed over /proc/<pid>/task/*
  long long scheduler_switches = 0;  // of those, the renew-* threads'
  long long rss_kib = 0;
};

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

long long StatusField(const std::string& status, const std::string& name) {
  const size_t at = status.find(name + ":");
  if (at == std::string::npos) return 0;
  return std::atoll(status.c_str() + at + name.size() + 1);
}

ProcessCounters ReadCounters(pid_t pid) {
  ProcessCounters counters;
  const std::string proc = "/proc/" + std::to_string(pid);
  counters.rss_kib = StatusField(ReadAll(proc + "/status"), "VmRSS");
  // Fields after the parenthesised command name; utime and stime are the
  // 14th and 15th fields of the line.
  const std::string stat = ReadAll(proc + "/stat");
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::string field;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14 || i == 15) counters.cpu_ticks += std::atoll(field.c_str());
  }
  std::error_code error;
  for (const auto& task : fs::directory_iterator(proc + "/task", error)) {
    const long long switches =
        StatusField(ReadAll(task.path().string() + "/status"), "voluntary_ctxt_switches");
    counters.voluntary_switches += switches;
    if (ReadAll(task.path().string() + "/comm").rfind("renew-", 0) == 0) {
      counters.scheduler_switches += switches;
    }
  }
  return counters;
}

size_t CountLines(const std::string& text) {
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

bool SocketAccepts(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

// Nearest rank; `q` in (0, 1].
double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size())));
  return values[std::clamp<size_t>(rank, 1, values.size()) - 1];
}

// Where one run's node lives: everything below `root`, a tmpfs.
struct NodeLayout {
  explicit NodeLayout(const std::string& base_root)
      : root(base_root),
        data_root(root + "/data"),
        volumes_root(data_root + "/volumes"),
        target_root(root + "/pods"),
        socket_path(root + "/csi.sock"),
        log_path(root + "/certmountd.log") {}

  // kubelet's layout for an inline volume named "tls" of pod `pod`.
  std::string Target(const std::string& pod) const {
    return target_root + "/" + pod + "/volumes/kubernetes.io~csi/tls/mount";
  }

  std::string root;
  std::string data_root;
  std::string volumes_root;
  std::string target_root;
  std::string socket_path;
  std::string log_path;
};

// The scratch tmpfs at a run's root. Its destructor lazily unmounts it,
// which takes every mount below it too (the volumes tmpfs and all binds),
// so a run that fails half-way leaves no mount behind either.
class ScratchMount {
 public:
  explicit ScratchMount(std::string root) : root_(std::move(root)) {
    fs::create_directories(root_);
    mounted_ = mount("tmpfs", root_.c_str(), "tmpfs", 0, "size=4g") == 0;
    if (!mounted_) std::cerr << "mount tmpfs on " << root_ << ": " << strerror(errno) << "\n";
  }
  ~ScratchMount() {
    if (mounted_ && umount2(root_.c_str(), MNT_DETACH) != 0) {
      std::cerr << "umount " << root_ << ": " << strerror(errno) << "\n";
    }
    std::error_code ignored;
    fs::remove_all(root_, ignored);
  }
  ScratchMount(const ScratchMount&) = delete;
  ScratchMount& operator=(const ScratchMount&) = delete;

  bool mounted() const { return mounted_; }

 private:
  std::string root_;
  bool mounted_ = false;
};

bool MakeDirectory(const std::string& path) {
  if (mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) return true;
  std::cerr << "mkdir " << path << ": " << strerror(errno) << "\n";
  return false;
}

// mkdir -p for a path whose first `existing` bytes name a directory that
// exists: one mkdir per missing component, no stat.
bool MakeDirectoriesBelow(const std::string& path, size_t existing) {
  for (size_t slash = path.find('/', existing + 1); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    if (!MakeDirectory(path.substr(0, slash))) return false;
  }
  return MakeDirectory(path);
}

// The volumes tmpfs, as certmountd mounts it, and for each of `count` rows
// its data directory bind-mounted read-only at its own target: what a node
// where certmountd published `count` volumes shows. Returns the seconds it
// took, or nullopt.
std::optional<double> MountVolumes(const NodeLayout& node, int count) {
  const auto started = Clock::now();
  if (!MakeDirectoriesBelow(node.volumes_root, node.root.size()) ||
      !MakeDirectory(node.target_root)) {
    return std::nullopt;
  }
  constexpr unsigned long kLockedDown = MS_NOSUID | MS_NODEV | MS_NOEXEC;
  if (mount("tmpfs", node.volumes_root.c_str(), "tmpfs", kLockedDown, "mode=0700") != 0) {
    std::cerr << "mount the volumes tmpfs: " << strerror(errno) << "\n";
    return std::nullopt;
  }
  for (int i = 0; i < count; ++i) {
    const std::string volume = node.volumes_root + "/" + certmount::testing::SeededVolumeId(i);
    const std::string data = volume + "/data";
    const std::string target = node.Target("pod-" + std::to_string(i));
    if (!MakeDirectory(volume) || !MakeDirectory(data) ||
        !MakeDirectoriesBelow(target, node.target_root.size())) {
      return std::nullopt;
    }
    // A bind ignores MS_RDONLY on creation; the remount applies it.
    if (mount(data.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0 ||
        mount(nullptr, target.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | kLockedDown,
              nullptr) != 0) {
      std::cerr << "bind " << data << " at " << target << ": " << strerror(errno) << "\n";
      return std::nullopt;
    }
  }
  return std::chrono::duration<double>(Clock::now() - started).count();
}

bool Seed(const NodeLayout& node, int volumes) {
  auto store =
      certmount::Store::Open(node.data_root + "/state.db", certmount::SystemClock::Instance());
  certmount::Status seeded =
      store.ok() ? certmount::testing::SeedMountedVolumes(
                       **store, volumes,
                       [&node](int i) { return node.Target("pod-" + std::to_string(i)); })
                 : store.status();
  if (!seeded.ok()) std::cerr << seeded.ToString() << "\n";
  return seeded.ok();
}

// What certmountd's log says its startup did.
struct StartupCounts {
  long long kept = -1;
  long long deleted = -1;
  long long scheduled = -1;
};

StartupCounts ReadStartupCounts(const std::string& log) {
  StartupCounts counts;
  std::smatch match;
  if (std::regex_search(log, match,
                        std::regex("startup cleanup: kept ([0-9]+) rows, deleted ([0-9]+)"))) {
    counts.kept = std::stoll(match[1]);
    counts.deleted = std::stoll(match[2]);
  }
  if (std::regex_search(log, match, std::regex("renewal scheduler: ([0-9]+) volumes"))) {
    counts.scheduled = std::stoll(match[1]);
  }
  return counts;
}

// certmountd as a child: started with Start, SIGTERMed by the destructor.
class DaemonProcess {
 public:
  explicit DaemonProcess(const NodeLayout& node) : node_(node) {}
  ~DaemonProcess() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
  }
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  // Execs certmountd and waits (polling every millisecond) until its socket
  // accepts. Returns the milliseconds from fork to then, or nullopt if it
  // exited or did not serve within five minutes.
  std::optional<double> Start() {
    // Everything the child needs is built before fork: the bench has gRPC
    // threads from an earlier run, and the child may only exec.
    const std::vector<std::string> args = {CERTMOUNTD_PATH,
                                           "--endpoint=unix://" + node_.socket_path,
                                           "--node-id=bench",
                                           "--data-root=" + node_.data_root,
                                           "--target-root=" + node_.target_root,
                                           "--log-level=info"};
    std::vector<char*> argv;
    for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    const int log = open(node_.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const auto started = Clock::now();
    pid_ = fork();
    if (pid_ == 0) {
      dup2(log, 1);
      dup2(log, 2);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(log);
    while (Clock::now() - started < std::chrono::minutes(5)) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return std::nullopt;
      }
      if (SocketAccepts(node_.socket_path)) {
        return std::chrono::duration<double, std::milli>(Clock::now() - started).count();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return std::nullopt;
  }

  pid_t pid() const { return pid_; }

 private:
  const NodeLayout& node_;
  pid_t pid_ = -1;
};

struct UnpublishFigures {
  double p50_ms = 0;
  double p90_ms = 0;
  size_t mounts = 0;
};

// `count` rounds of: publish a new volume (untimed), unpublish it (timed),
// both over the CSI socket as kubelet calls them.
std::optional<UnpublishFigures> MeasureUnpublish(const NodeLayout& node, pid_t daemon, int count) {
  namespace csi = ::csi::v1;
  auto channel =
      grpc::CreateChannel("unix://" + node.socket_path, grpc::InsecureChannelCredentials());
  std::unique_ptr<csi::Node::Stub> stub = csi::Node::NewStub(channel);
  UnpublishFigures figures;
  std::vector<double> latencies;
  for (int i = 0; i < count; ++i) {
    const std::string id = "csi-unpublish-" + std::to_string(i);
    const std::string target = node.Target("pod-unpublish-" + std::to_string(i));
    if (!MakeDirectoriesBelow(fs::path(target).parent_path().string(), node.target_root.size())) {
      return std::nullopt;
    }
    csi::NodePublishVolumeRequest publish = certmount::testing::KubeletPublishRequest(
        id, target,
        // ECDSA: an RSA key would make each untimed publish ~300 ms.
        {{"csi.cert-manager.io/issuer-name", "local"},
         {"csi.cert-manager.io/common-name", id + ".bench.svc"},
         {"csi.cert-manager.io/key-algorithm", "ECDSA"}});
    csi::NodePublishVolumeResponse published;
    grpc::Status status =
        stub->NodePublishVolume(certmount::testing::CallContext().get(), publish, &published);
    if (!status.ok()) {
      std::cerr << "NodePublishVolume " << id << ": " << status.error_message() << "\n";
      return std::nullopt;
    }
    if (i == 0)
      figures.mounts = CountLines(ReadAll("/proc/" + std::to_string(daemon) + "/mountinfo"));
    csi::NodeUnpublishVolumeRequest unpublish;
    unpublish.set_volume_id(id);
    unpublish.set_target_path(target);
    csi::NodeUnpublishVolumeResponse unpublished;
    const auto started = Clock::now();
    status =
        stub->NodeUnpublishVolume(certmount::testing::CallContext().get(), unpublish, &unpublished);
    latencies.push_back(std::chrono::duration<double, std::milli>(Clock::now() - started).count());
    if (!status.ok() || fs::exists(target)) {
      std::cerr << "NodeUnpublishVolume " << id << ": " << status.error_message()
                << (fs::exists(target) ? " (the target is still there)" : "") << "\n";
      return std::nullopt;
    }
  }
  figures.p50_ms = Percentile(latencies, 0.5);
  figures.p90_ms = Percentile(latencies, 0.9);
  return figures;
}

struct RunFigures {
  double mount_s = 0;
  double startup_ms = 0;
  StartupCounts counts;
  ProcessCounters serving;
  bool idle_measured = false;
  double idle_cpu_ms = 0;
  long long idle_wakeups = 0;
  long long idle_scheduler_wakeups = 0;
  int idle_seconds = 0;
  std::optional<UnpublishFigures> unpublish;
};

struct RunOptions {
  int volumes = 0;
  int idle_seconds = 0;  // 0: no idle measurement
  int unpublishes = 0;
};

// Mounts left at or below `dir` in this namespace.
int MountsBelow(const std::string& dir) {
  std::istringstream table(ReadAll("/proc/self/mountinfo"));
  int count = 0;
  for (std::string line; std::getline(table, line);) {
    std::istringstream fields(line);
    std::string id, parent, device, root, point;
    fields >> id >> parent >> device >> root >> point;
    if (point == dir || point.rfind(dir + "/", 0) == 0) ++count;
  }
  return count;
}

bool Run(const std::string& base, const RunOptions& options, RunFigures* figures) {
  const NodeLayout node(base + "/n" + std::to_string(options.volumes));
  {
    ScratchMount scratch(node.root);
    if (!scratch.mounted()) return false;
    std::optional<double> mounted = MountVolumes(node, options.volumes);
    if (!mounted.has_value() || !Seed(node, options.volumes)) return false;
    figures->mount_s = *mounted;

    DaemonProcess daemon(node);
    std::optional<double> startup = daemon.Start();
    const std::string log_copy = base + "/certmountd-" + std::to_string(options.volumes) + ".log";
    if (!startup.has_value()) {
      fs::copy_file(node.log_path, log_copy, fs::copy_options::overwrite_existing);
      std::cerr << "certmountd did not serve; see " << log_copy << "\n";
      return false;
    }
    figures->startup_ms = *startup;
    figures->counts = ReadStartupCounts(ReadAll(node.log_path));
    // Let startup's last allocations and threads settle before measuring.
    std::this_thread::sleep_for(std::chrono::seconds(1));
    figures->serving = ReadCounters(daemon.pid());
    if (options.idle_seconds > 0) {
      std::this_thread::sleep_for(std::chrono::seconds(options.idle_seconds));
      const ProcessCounters after = ReadCounters(daemon.pid());
      figures->idle_measured = true;
      figures->idle_seconds = options.idle_seconds;
      figures->idle_cpu_ms = static_cast<double>(after.cpu_ticks - figures->serving.cpu_ticks) *
                             1000.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
      figures->idle_wakeups = after.voluntary_switches - figures->serving.voluntary_switches;
      figures->idle_scheduler_wakeups =
          after.scheduler_switches - figures->serving.scheduler_switches;
    }
    if (options.unpublishes > 0) {
      figures->unpublish = MeasureUnpublish(node, daemon.pid(), options.unpublishes);
      if (!figures->unpublish.has_value()) return false;
    }
    std::error_code ignored;
    fs::copy_file(node.log_path, log_copy, fs::copy_options::overwrite_existing, ignored);
  }
  if (int left = MountsBelow(node.root); left != 0) {
    std::cerr << left << " mounts are left below " << node.root << "\n";
    return false;
  }
  return true;
}

// A namespace of the bench's own, whose mounts propagate nowhere: the host
// never sees them, and the kernel removes them all when the bench and its
// daemon are gone, however they end.
bool EnterPrivateMountNamespace() {
  if (unshare(CLONE_NEWNS) != 0) {
    std::cerr << "unshare(CLONE_NEWNS): " << strerror(errno) << "\n";
    return false;
  }
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    std::cerr << "making / private: " << strerror(errno) << "\n";
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> volume_counts = {100, 1'000, 10'000};
  int idle_seconds = 60;
  int idle_volumes = 10'000;
  int unpublishes = 200;
  std::string base = "/tmp/certmount-renewal-bench";
  CLI::App app{
      "renewal_bench: certmountd startup, memory, idle cost and unpublish latency "
      "with many mounted volumes"};
  app.add_option("--volumes", volume_counts, "mounted volume counts to run with")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--idle-seconds", idle_seconds, "how long to measure idle CPU and wake-ups")
      ->capture_default_str();
  app.add_option("--idle-volumes", idle_volumes, "the volume count whose run measures idle cost")
      ->capture_default_str();
  app.add_option("--unpublishes", unpublishes, "timed unpublishes per run (0: none)")
      ->capture_default_str();
  app.add_option("--dir", base, "scratch directory (a tmpfs is mounted below it)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (geteuid() != 0) {
    std::cerr << "renewal_bench needs root (tmpfs and bind mounts)\n";
    return 2;
  }
  // Before any thread exists: unshare(CLONE_NEWNS) refuses a threaded caller.
  if (!EnterPrivateMountNamespace()) return 1;
  fs::create_directories(base);

  std::cout << "certmountd: " << CERTMOUNTD_PATH << "\n";
  std::cout << "volumes  mount_s  startup_ms   kept  deleted  scheduled  rss_mib  idle_s  "
               "idle_cpu_ms  idle_wakeups  scheduler_wakeups  unpublishes  mounts  unpub_p50_ms  "
               "unpub_p90_ms\n";
  for (int volumes : volume_counts) {
    RunOptions options;
    options.volumes = volumes;
    options.idle_seconds = volumes == idle_volumes ? idle_seconds : 0;
    options.unpublishes = unpublishes;
    RunFigures f;
    const bool ok = Run(base, options, &f);
    if (f.startup_ms > 0) {
      std::printf("%7d  %7.2f  %10.1f  %5lld  %7lld  %9lld  %7.1f", volumes, f.mount_s,
                  f.startup_ms, f.counts.kept, f.counts.deleted, f.counts.scheduled,
                  static_cast<double>(f.serving.rss_kib) / 1024.0);
      if (f.idle_measured) {
        std::printf("  %6d  %11.1f  %12lld  %17lld", f.idle_seconds, f.idle_cpu_ms, f.idle_wakeups,
                    f.idle_scheduler_wakeups);
      } else {
        std::printf("  %6s  %11s  %12s  %17s", "-", "-", "-", "-");
      }
      if (f.unpublish.has_value()) {
        std::printf("  %11d  %6zu  %12.2f  %12.2f\n", options.unpublishes, f.unpublish->mounts,
                    f.unpublish->p50_ms, f.unpublish->p90_ms);
      } else {
        std::printf("  %11s  %6s  %12s  %12s\n", "-", "-", "-", "-");
      }
      std::fflush(stdout);
    }
    if (!ok) return 1;
    // A run whose daemon did not keep and schedule every volume measured an
    // empty node, whatever its figures say.
    if (f.counts.kept != volumes || f.counts.deleted != 0 || f.counts.scheduled != volumes) {
      std::cerr << "certmountd kept " << f.counts.kept << " and deleted " << f.counts.deleted
                << " of " << volumes << " mounted volumes and scheduled " << f.counts.scheduled
                << "; see " << base << "/certmountd-" << volumes << ".log\n";
      return 1;
    }
  }
  return 0;
}
