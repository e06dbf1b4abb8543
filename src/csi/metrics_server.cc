#include "csi/metrics_server.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <exception>

namespace certmount {

namespace {

constexpr char kContentType[] = "text/plain; version=0.0.4; charset=utf-8";

Status BadAddress(const std::string& text) {
  return Status::InvalidArgument("--metrics-address: \"" + text +
                                 "\" is not host:port, :port or [ipv6]:port with a port "
                                 "from 1 to 65535");
}

// 500 with the exception's text, for a handler that threw.
void AnswerInternalError(const httplib::Request&, httplib::Response& response,
                         std::exception_ptr error) {
  std::string what = "unknown error";
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  response.status = 500;
  response.set_content("internal error: " + what + "\n", "text/plain");
}

}  // namespace

Result<MetricsAddress> ParseMetricsAddress(const std::string& text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) return BadAddress(text);
  std::string host = text.substr(0, colon);
  const std::string port_text = text.substr(colon + 1);
  if (host.empty()) {
    host = "0.0.0.0";
  } else if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return BadAddress(text);
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string::npos) {
    return BadAddress(text);  // a bare IPv6 address needs brackets
  }
  int port = 0;
  auto [end, error] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || error != std::errc() || end != port_text.data() + port_text.size() ||
      port < 1 || port > 65535) {
    return BadAddress(text);
  }
  return MetricsAddress{host, port};
}

StateCollector::StateCollector(metrics::Registry* registry, Store* store,
                               const RenewalScheduler* scheduler)
    : store_(store),
      scheduler_(scheduler),
      collect_errors_(registry
                          ->AddCounter("certmount_metrics_collect_errors_total",
                                       "Scrapes whose read of the node state failed; the "
                                       "state gauges then keep their previous values.")
                          .WithLabels({})),
      registration_(registry->AddCollectable(this)) {}

std::vector<prometheus::MetricFamily> StateCollector::Collect() const {
  using metrics::GaugeSnapshot;
  const SchedulerStats stats = scheduler_->Stats();
  std::vector<prometheus::MetricFamily> out = {
      GaugeSnapshot("certmount_renewal_scheduled_volumes", "Volumes the renewal scheduler tracks.",
                    {}, {{{}, static_cast<double>(stats.scheduled)}}),
      GaugeSnapshot("certmount_renewal_queue_depth",
                    "Volumes due for renewal that have not started: waiting for an issuer token "
                    "or a free worker.",
                    {}, {{{}, static_cast<double>(stats.due)}}),
      GaugeSnapshot("certmount_renewals_running", "Renewals running now.", {},
                    {{{}, static_cast<double>(stats.running)}}),
      GaugeSnapshot("certmount_issuer_rate_limit_waits",
                    "Times renewals found the issuer token bucket (--issuer-qps, "
                    "--issuer-burst) empty and had to wait, since start.",
                    {}, {{{}, static_cast<double>(stats.rate_limit_waits)}}),
      GaugeSnapshot("certmount_issuer_rate_limit_wait_seconds",
                    "Total time renewals waited for the issuer token bucket, since start.", {},
                    {{{}, stats.rate_limit_wait_seconds}}),
      GaugeSnapshot("certmount_ca_refresh_pending_volumes",
                    "Volumes still owed the work of a local CA change: a re-issue from the new "
                    "signing CA (reissue) or a rewritten ca.crt (trust_bundle).",
                    {"work"},
                    {{{"reissue"}, static_cast<double>(stats.reissue_pending)},
                     {{"trust_bundle"}, static_cast<double>(stats.trust_bundle_pending)}}),
  };
  std::optional<std::vector<prometheus::MetricFamily>> read = StoreFamilies();
  std::lock_guard lock(last_mu_);
  if (read.has_value()) {
    last_store_families_ = std::move(*read);
  } else {
    collect_errors_.Increment();
  }
  out.insert(out.end(), last_store_families_.begin(), last_store_families_.end());
  return out;
}

std::optional<std::vector<prometheus::MetricFamily>> StateCollector::StoreFamilies() const {
  Result<std::vector<VolumeSummary>> rows = store_->ListVolumeSummaries();
  if (!rows.ok()) {
    spdlog::warn("metrics: cannot read the node state: {}", rows.status().ToString());
    return std::nullopt;
  }
  int64_t mounted = 0;
  int64_t publishing = 0;
  std::vector<std::pair<metrics::LabelValues, double>> expiration;
  std::vector<std::pair<metrics::LabelValues, double>> renewal;
  for (const VolumeSummary& row : *rows) {
    if (!row.mounted) {
      ++publishing;
      continue;
    }
    ++mounted;
    metrics::LabelValues labels = {row.volume_id, row.pod_namespace, row.pod_name};
    if (row.not_after.has_value()) {
      expiration.emplace_back(labels, static_cast<double>(*row.not_after));
    }
    if (row.next_issuance_at.has_value()) {
      renewal.emplace_back(std::move(labels), static_cast<double>(*row.next_issuance_at));
    }
  }
  const std::vector<std::string> volume_labels = {"volume_id", "pod_namespace", "pod_name"};
  return std::vector<prometheus::MetricFamily>{
      metrics::GaugeSnapshot("certmount_volumes",
                             "Volumes in the node state, by state: mounted (published) or "
                             "publishing (registered, publish still running).",
                             {"state"},
                             {{{"mounted"}, static_cast<double>(mounted)},
                              {{"publishing"}, static_cast<double>(publishing)}}),
      metrics::GaugeSnapshot("certmount_certificate_expiration_timestamp_seconds",
                             "The not_after of each mounted volume's certificate, in unix seconds.",
                             volume_labels, expiration),
      metrics::GaugeSnapshot("certmount_certificate_renewal_timestamp_seconds",
                             "When each mounted volume's certificate is next issued (renewal, or "
                             "retry after a failure), in unix seconds.",
                             volume_labels, renewal),
  };
}

MetricsServer::MetricsServer(metrics::Registry* registry, Store* store)
    : registry_(registry), store_(store) {}

MetricsServer::~MetricsServer() { Stop(); }

void MetricsServer::AddRoutes() {
  server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& response) {
    response.set_content(registry_->Render(), kContentType);
  });
  server_->Get("/healthz", [](const httplib::Request&, httplib::Response& response) {
    response.set_content("ok\n", "text/plain");
  });
  server_->Get("/readyz", [this](const httplib::Request&, httplib::Response& response) {
    AnswerReadiness(response);
  });
  // A handler that throws answers 500 instead of ending the thread.
  server_->set_exception_handler(AnswerInternalError);
}

void MetricsServer::AnswerReadiness(httplib::Response& response) const {
  if (!startup_complete_) {
    response.status = 503;
    response.set_content("not ready: startup (cleanup, schedule, CSI socket) is not complete\n",
                         "text/plain");
    return;
  }
  Status writable = store_->CheckWritable();
  if (!writable.ok()) {
    response.status = 503;
    response.set_content("not ready: the database is not writable: " + writable.ToString() + "\n",
                         "text/plain");
    return;
  }
  response.set_content("ok\n", "text/plain");
}

Status MetricsServer::Start(const MetricsAddress& address) {
  server_ = std::make_unique<httplib::Server>();
  AddRoutes();

  const std::string shown = address.host.find(':') != std::string::npos
                                ? "[" + address.host + "]:" + std::to_string(address.port)
                                : address.host + ":" + std::to_string(address.port);
  errno = 0;
  bool bound = false;
  try {
    bound = server_->bind_to_port(address.host, address.port);
  } catch (const std::exception& e) {
    return Status::Unavailable("cannot listen on " + shown + ": " + e.what());
  }
  if (!bound) {
    const int error = errno;
    return Status::Unavailable("cannot listen on " + shown + ": " +
                               (error != 0 ? std::strerror(error) : "bind failed"));
  }
  thread_ = std::thread([this] {
    try {
      server_->listen_after_bind();
    } catch (const std::exception& e) {
      spdlog::error("metrics server stopped: {}", e.what());
    }
    listen_returned_ = true;
  });
  spdlog::info("serving metrics and probes on http://{}/metrics", shown);
  return Status::Ok();
}

void MetricsServer::Stop() {
  if (server_ == nullptr) return;
  if (thread_.joinable()) {
    // stop() only takes effect once the listen loop runs; the thread may
    // not have reached it yet.
    while (!server_->is_running() && !listen_returned_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    server_->stop();
    thread_.join();
  }
  server_.reset();
}

}  // namespace certmount
