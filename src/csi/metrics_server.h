// The HTTP endpoint for Prometheus and probes (--metrics-address):
//   /metrics  the registry in the text exposition format 0.0.4
//   /healthz  200 "ok" while the process serves HTTP at all
//   /readyz   200 once startup is complete and the database takes writes
//             right now; 503 with the reason otherwise
// It starts before the startup cleanup, so a long cleanup (100k volumes)
// is visible as live-but-not-ready rather than as a dead endpoint.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "common/metrics.h"
#include "common/status.h"
#include "renew/scheduler.h"
#include "state/store.h"

namespace httplib {
class Server;
}

namespace certmount {

struct MetricsAddress {
  std::string host;  // "0.0.0.0" for ":port"; an IPv6 host without brackets
  int port = 0;      // 1..65535
};

// Parses "host:port", ":port" (every IPv4 interface) or "[ipv6]:port".
// INVALID_ARGUMENT, naming the flag, for anything else.
Result<MetricsAddress> ParseMetricsAddress(const std::string& text);

// Fills the state gauges at scrape time: volumes by state and each volume's
// certificate expiration and next renewal (from the Store), and the renewal
// queue and issuer rate-limit waits (from the scheduler). Unregisters on
// destruction; `store` and `scheduler` must outlive it.
class StateCollector {
 public:
  StateCollector(metrics::Registry* registry, Store* store, const RenewalScheduler* scheduler);

 private:
  void Collect();

  Store* store_;
  const RenewalScheduler* scheduler_;
  metrics::GaugeFamily& volumes_;
  metrics::GaugeFamily& expiration_;
  metrics::GaugeFamily& renewal_;
  metrics::Gauge& scheduled_;
  metrics::Gauge& queue_depth_;
  metrics::Gauge& running_;
  metrics::Gauge& rate_limit_waits_;
  metrics::Gauge& rate_limit_wait_seconds_;
  metrics::Counter& collect_errors_;
  // Last: unregistered first, before the references above go.
  metrics::CollectorRegistration registration_;
};

class MetricsServer {
 public:
  // `registry` and `store` must outlive the server; `store` answers the
  // readiness write probe.
  MetricsServer(metrics::Registry* registry, Store* store);
  // Stops (see Stop).
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Binds `address` and serves on a thread of its own. UNAVAILABLE, naming
  // the address and the reason, when it cannot bind. Call once.
  Status Start(const MetricsAddress& address);

  // From now on /readyz answers 200 whenever the database is writable;
  // false turns it back to 503 (shutdown).
  void SetStartupComplete(bool complete) { startup_complete_ = complete; }

  // Stops serving and joins the thread. Idempotent.
  void Stop();

 private:
  metrics::Registry* registry_;
  Store* store_;
  std::atomic<bool> startup_complete_{false};
  std::unique_ptr<httplib::Server> server_;
  std::atomic<bool> listen_returned_{false};
  std::thread thread_;
};

}  // namespace certmount
