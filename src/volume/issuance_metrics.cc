#include "volume/issuance_metrics.h"

#include "common/metrics.h"

namespace certmount {
namespace {

struct IssuanceMetrics {
  metrics::CounterFamily& issuances = metrics::DefaultRegistry().AddCounter(
      "certmount_issuances_total",
      "Issuances that ran to an outcome, by issuer, kind (publish or renewal) and result (ok or "
      "error).",
      {"issuer", "kind", "result"});
  metrics::HistogramFamily& issuance_seconds = metrics::DefaultRegistry().AddHistogram(
      "certmount_issuance_duration_seconds",
      "Time one issuance took (key, CSR, issuer, files), by issuer and kind.", {"issuer", "kind"},
      metrics::DurationBuckets());
};

IssuanceMetrics& Metrics() {
  static IssuanceMetrics issuance_metrics;
  return issuance_metrics;
}

[[maybe_unused]] const IssuanceMetrics& registered_at_startup = Metrics();

const char* KindLabel(IssuanceKind kind) {
  return kind == IssuanceKind::kPublish ? "publish" : "renewal";
}

}  // namespace

void RecordIssuanceMetrics(const std::string& issuer, IssuanceKind kind, bool ok, double seconds) {
  IssuanceMetrics& m = Metrics();
  const std::string kind_label = KindLabel(kind);
  m.issuances.WithLabels({issuer, kind_label, ok ? "ok" : "error"}).Increment();
  m.issuance_seconds.WithLabels({issuer, kind_label}).Observe(seconds);
}

}  // namespace certmount
