// renewal_bench: what a node with many mounted volumes costs certmountd.
//
// For each row count it makes a fresh data root on a tmpfs, writes that many
// mounted rows through the Store, runs the real certmountd (CERTMOUNTD_PATH)
// and reports the time from exec to the socket accepting connections and
// the resident memory (VmRSS) once serving. For --idle-volumes rows it then
// measures, over --idle-seconds of no traffic, the CPU used (utime + stime)
// and the voluntary context switches summed over all threads (wake-ups):
// the renewal scheduler must sleep until the earliest due renewal, not poll.
//
// Every row's target path is one shared mount point: the startup cleanup
// keeps a row only when its target is mounted, and 100,000 real mounts would
// exceed the kernel's default mount limit. Needs root (tmpfs, mounts).
//
//   sudo build/renewal_bench --volumes 10000,100000 --idle-seconds 60
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "state/store.h"
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

bool SocketAccepts(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

bool Seed(const std::string& db_path, const std::string& target, int volumes) {
  auto store = certmount::Store::Open(db_path, certmount::SystemClock::Instance());
  certmount::Status seeded = store.ok()
                                 ? certmount::testing::SeedMountedVolumes(**store, target, volumes)
                                 : store.status();
  if (!seeded.ok()) std::cerr << seeded.ToString() << "\n";
  return seeded.ok();
}

struct RunFigures {
  double startup_ms = 0;
  ProcessCounters serving;
  bool idle_measured = false;
  double idle_cpu_ms = 0;
  long long idle_wakeups = 0;
  long long idle_scheduler_wakeups = 0;
  int idle_seconds = 0;
};

bool RunOnce(const std::string& base, int volumes, int idle_seconds, RunFigures* figures) {
  const std::string root = base + "/n" + std::to_string(volumes);
  fs::create_directories(root);
  if (mount("tmpfs", root.c_str(), "tmpfs", 0, "size=4g") != 0) {
    std::cerr << "mount tmpfs on " << root << ": " << strerror(errno) << "\n";
    return false;
  }
  const std::string data_root = root + "/data";
  const std::string target_root = root + "/pods";
  const std::string target = target_root + "/shared/volumes/kubernetes.io~csi/tls/mount";
  fs::create_directories(data_root);
  fs::create_directories(target);
  bool ok = mount("tmpfs", target.c_str(), "tmpfs", 0, "size=1m") == 0 &&
            Seed(data_root + "/state.db", target, volumes);
  const std::string socket_path = root + "/csi.sock";
  pid_t pid = -1;
  if (ok) {
    const auto started = Clock::now();
    pid = fork();
    if (pid == 0) {
      int log = open((root + "/certmountd.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(log, 1);
      dup2(log, 2);
      execl(CERTMOUNTD_PATH, CERTMOUNTD_PATH, ("--endpoint=unix://" + socket_path).c_str(),
            "--node-id=bench", ("--data-root=" + data_root).c_str(),
            ("--target-root=" + target_root).c_str(), "--log-level=info", nullptr);
      _exit(127);
    }
    ok = false;
    while (Clock::now() - started < std::chrono::minutes(5)) {
      if (waitpid(pid, nullptr, WNOHANG) == pid) {
        pid = -1;
        break;
      }
      if (SocketAccepts(socket_path)) {
        ok = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    figures->startup_ms = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
    if (!ok) std::cerr << "certmountd did not serve; see " << root << "/certmountd.log\n";
  }
  if (ok) {
    // Let startup's last allocations and threads settle before measuring.
    std::this_thread::sleep_for(std::chrono::seconds(1));
    figures->serving = ReadCounters(pid);
    if (idle_seconds > 0) {
      std::this_thread::sleep_for(std::chrono::seconds(idle_seconds));
      const ProcessCounters after = ReadCounters(pid);
      figures->idle_measured = true;
      figures->idle_seconds = idle_seconds;
      figures->idle_cpu_ms = static_cast<double>(after.cpu_ticks - figures->serving.cpu_ticks) *
                             1000.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
      figures->idle_wakeups = after.voluntary_switches - figures->serving.voluntary_switches;
      figures->idle_scheduler_wakeups =
          after.scheduler_switches - figures->serving.scheduler_switches;
    }
  }
  if (pid > 0) {
    kill(pid, SIGTERM);
    waitpid(pid, nullptr, 0);
  }
  std::error_code copy_error;
  fs::copy_file(root + "/certmountd.log", base + "/certmountd-" + std::to_string(volumes) + ".log",
                fs::copy_options::overwrite_existing, copy_error);
  umount2((data_root + "/volumes").c_str(), MNT_DETACH);
  umount2(target.c_str(), MNT_DETACH);
  umount2(root.c_str(), MNT_DETACH);
  std::error_code ignored;
  fs::remove_all(root, ignored);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> volume_counts = {10'000, 100'000};
  int idle_seconds = 60;
  int idle_volumes = 10'000;
  std::string base = "/tmp/certmount-renewal-bench";
  CLI::App app{"renewal_bench: certmountd startup, memory and idle cost with many volumes"};
  app.add_option("--volumes", volume_counts, "mounted row counts to run with")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--idle-seconds", idle_seconds, "how long to measure idle CPU and wake-ups")
      ->capture_default_str();
  app.add_option("--idle-volumes", idle_volumes, "the row count whose run measures idle cost")
      ->capture_default_str();
  app.add_option("--dir", base, "scratch directory (a tmpfs is mounted below it)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (geteuid() != 0) {
    std::cerr << "renewal_bench needs root (tmpfs and bind mounts)\n";
    return 2;
  }

  std::cout << "certmountd: " << CERTMOUNTD_PATH << "\n";
  std::cout << "volumes  startup_ms  rss_mib  idle_s  idle_cpu_ms  idle_wakeups  wakeups_per_s"
               "  scheduler_wakeups\n";
  for (int volumes : volume_counts) {
    RunFigures figures;
    if (!RunOnce(base, volumes, volumes == idle_volumes ? idle_seconds : 0, &figures)) return 1;
    std::printf("%7d  %10.1f  %7.1f", volumes, figures.startup_ms,
                static_cast<double>(figures.serving.rss_kib) / 1024.0);
    if (figures.idle_measured) {
      std::printf("  %6d  %11.1f  %12lld  %13.2f  %17lld\n", figures.idle_seconds,
                  figures.idle_cpu_ms, figures.idle_wakeups,
                  static_cast<double>(figures.idle_wakeups) / figures.idle_seconds,
                  figures.idle_scheduler_wakeups);
    } else {
      std::printf("  %6s  %11s  %12s  %13s  %17s\n", "-", "-", "-", "-", "-");
    }
    std::fflush(stdout);
  }
  return 0;
}
