// scrape_bench: how long a /metrics scrape holds the store's lock, reading
// every row, with the full rows (ListVolumes, which parses each row's
// attribute JSON) against the summaries /metrics reads
// (ListVolumeSummaries). A publish waits for that lock, so at 100,000 rows
// this is how long a scrape can stall one. Same database, same run; figures
// are medians of --repeats reads. Needs no root.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "state/store.h"
#include "support/seed_volumes.h"
#include "support/store_test_access.h"
#include "support/temp_dir.h"

namespace {

using Clock = std::chrono::steady_clock;

// Median wall time of `repeats` calls of `read`, in ms; false from `read`
// aborts.
double MedianMs(int repeats, const std::function<bool()>& read, bool* ok) {
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    const auto started = Clock::now();
    if (!read()) {
      *ok = false;
      return 0;
    }
    times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - started).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> volume_counts = {10'000, 100'000};
  int repeats = 5;
  CLI::App app{"scrape_bench: the store lock a /metrics scrape holds, full rows vs summaries"};
  app.add_option("--volumes", volume_counts, "row counts to run with")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--repeats", repeats, "reads of each kind; the median is reported")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  std::printf("volumes  list_volumes_ms  summaries_ms  ratio\n");
  for (int volumes : volume_counts) {
    certmount::testing::TempDir dir;
    auto store = certmount::Store::Open(dir.Sub("state.db"), certmount::SystemClock::Instance());
    certmount::Status seeded = store.ok() ? certmount::testing::SeedMountedVolumes(
                                                **store, "/var/lib/kubelet/pods/x", volumes)
                                          : store.status();
    if (!seeded.ok()) {
      std::fprintf(stderr, "scrape_bench: %s\n", seeded.ToString().c_str());
      return 1;
    }
    bool ok = true;
    // A read that returns every row, by `list`, under the store's lock.
    auto reads_every_row = [&](auto list) {
      return [&, list] {
        auto rows = list();
        return rows.ok() && static_cast<int>(rows->size()) == volumes;
      };
    };
    const double full = MedianMs(
        repeats, reads_every_row([&] { return certmount::StoreTestAccess(**store).ListVolumes(); }),
        &ok);
    const double lean =
        MedianMs(repeats, reads_every_row([&] { return (**store).ListVolumeSummaries(); }), &ok);
    if (!ok) {
      std::fprintf(stderr, "scrape_bench: a read failed or missed rows\n");
      return 1;
    }
    std::printf("%7d  %15.2f  %12.2f  %5.2f\n", volumes, full, lean, full / lean);
    std::fflush(stdout);
  }
  return 0;
}
