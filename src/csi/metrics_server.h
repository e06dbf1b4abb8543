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
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/metrics.h"
#include "common/status.h"
#include "renew/scheduler.h"
#include "state/store.h"

namespace httplib {
class Server;
struct Response;
}  // namespace httplib

namespace certmount {

struct MetricsAddress {
  std::string host;  // "0.0.0.0" for ":port"; an IPv6 host without brackets
  int port = 0;      // 1..65535
};

// Parses "host:port", ":port" (every IPv4 interface) or "[ipv6]:port".
// INVALID_ARGUMENT, naming the flag, for anything else.
Result<MetricsAddress> ParseMetricsAddress(const std::string& text);

// The state gauges, computed at scrape time (a prometheus-cpp Collectable):
// volumes by state and each volume's certificate expiration and next
// renewal (from the Store), and the renewal queue and issuer rate-limit
// waits (from the scheduler). When the Store cannot be read, the scrape
// shows the store's families as last read and counts the failure.
// Registers itself with `registry` and unregisters on destruction; `store`
// and `scheduler` must outlive it.
class StateCollector : public prometheus::Collectable {
 public:
  StateCollector(metrics::Registry* registry, Store* store, const RenewalScheduler* scheduler);

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  // The three families read from the store; nullopt when the read failed.
  std::optional<std::vector<prometheus::MetricFamily>> StoreFamilies() const;

  Store* store_;
  const RenewalScheduler* scheduler_;
  metrics::Counter& collect_errors_;
  mutable std::mutex last_mu_;
  mutable std::vector<prometheus::MetricFamily> last_store_families_;
  // Last: unregistered first, before the members above go.
  metrics::CollectableRegistration registration_;
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
  // /metrics, /healthz and /readyz on server_.
  void AddRoutes();
  // 200 once startup is complete and the database takes writes, else 503
  // saying which is missing.
  void AnswerReadiness(httplib::Response& response) const;

  metrics::Registry* registry_;
  Store* store_;
  std::atomic<bool> startup_complete_{false};
  std::unique_ptr<httplib::Server> server_;
  std::atomic<bool> listen_returned_{false};
  std::thread thread_;
};

}  // namespace certmount
