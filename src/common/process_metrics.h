// The standard process_* metrics of a Prometheus client (prometheus-cpp
// 1.0 has none), read from /proc at scrape time: CPU time, resident and
// virtual memory, open and maximum file descriptors, start time.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <vector>

namespace certmount::metrics {

class ProcessCollectable : public prometheus::Collectable {
 public:
  // process_cpu_seconds_total, process_resident_memory_bytes,
  // process_virtual_memory_bytes, process_open_fds, process_max_fds,
  // process_start_time_seconds. A value that cannot be read is left out of
  // that scrape.
  std::vector<prometheus::MetricFamily> Collect() const override;
};

}  // namespace certmount::metrics
