#include "common/process_metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <sstream>
#include <string>

#include "common/metrics.h"

namespace certmount::metrics {

namespace {

// The fields of /proc/self/stat after the command name, which may contain
// spaces and parentheses, hence the split at the last ')'. fields[0] is
// field 3 (state) of proc(5).
std::vector<std::string> SelfStatFields() {
  std::ifstream in("/proc/self/stat");
  std::string line;
  std::getline(in, line);
  const size_t end_of_name = line.rfind(')');
  if (end_of_name == std::string::npos) return {};
  std::istringstream rest(line.substr(end_of_name + 1));
  return {std::istream_iterator<std::string>(rest), std::istream_iterator<std::string>()};
}

// A whole field as a number; nullopt for anything else, so that an odd
// /proc (a newer kernel's format, a sandbox's emulation) drops a metric
// instead of throwing in the scrape.
std::optional<double> Number(const std::string& field) {
  double value = 0;
  const char* end = field.data() + field.size();
  auto [parsed_end, error] = std::from_chars(field.data(), end, value);
  if (error != std::errc() || parsed_end != end) return std::nullopt;
  return value;
}

std::optional<double> BootTimeSeconds() {
  std::ifstream in("/proc/stat");
  for (std::string key; in >> key;) {
    if (key == "btime") {
      double seconds = 0;
      if (in >> seconds) return seconds;
      return std::nullopt;
    }
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return std::nullopt;
}

void Add(std::vector<prometheus::MetricFamily>& out, const char* name, const char* help,
         double value, prometheus::MetricType type = prometheus::MetricType::Gauge) {
  prometheus::MetricFamily family = GaugeSnapshot(name, help, {}, {{{}, value}});
  if (type == prometheus::MetricType::Counter) {
    family.type = type;
    family.metric[0].counter.value = value;
  }
  out.push_back(std::move(family));
}

}  // namespace

std::vector<prometheus::MetricFamily> ProcessCollectable::Collect() const {
  std::vector<prometheus::MetricFamily> out;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  const std::vector<std::string> stat = SelfStatFields();
  // proc(5): utime 14, stime 15, starttime 22, vsize 23, rss 24.
  if (stat.size() > 21 && ticks > 0) {
    const std::optional<double> utime = Number(stat[11]), stime = Number(stat[12]),
                                start = Number(stat[19]), vsize = Number(stat[20]),
                                rss = Number(stat[21]);
    if (utime && stime) {
      Add(out, "process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
          (*utime + *stime) / ticks, prometheus::MetricType::Counter);
    }
    if (vsize) Add(out, "process_virtual_memory_bytes", "Virtual memory size in bytes.", *vsize);
    if (rss) {
      Add(out, "process_resident_memory_bytes", "Resident memory size in bytes.", *rss * page);
    }
    std::optional<double> boot = BootTimeSeconds();
    if (boot && start) {
      Add(out, "process_start_time_seconds",
          "Start time of the process since unix epoch in seconds.", *boot + *start / ticks);
    }
  }
  std::error_code error;
  double open_fds = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", error), end; !error && it != end;
       it.increment(error)) {
    ++open_fds;
  }
  if (!error) Add(out, "process_open_fds", "Number of open file descriptors.", open_fds);
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    Add(out, "process_max_fds", "Maximum number of open file descriptors.",
        static_cast<double>(limit.rlim_cur));
  }
  return out;
}

}  // namespace certmount::metrics
