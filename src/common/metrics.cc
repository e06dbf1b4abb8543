#include "common/metrics.h"

#include <prometheus/check_names.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "common/process_metrics.h"

namespace certmount::metrics {

namespace {

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "certmount metrics: %s\n", message.c_str());
  std::abort();
}

void CheckNames(const std::string& name, const std::vector<std::string>& label_names) {
  if (!prometheus::CheckMetricName(name) || !name.starts_with("certmount_")) {
    Die("\"" + name + "\" is not a metric name starting with certmount_");
  }
  for (const std::string& label : label_names) {
    if (!prometheus::CheckLabelName(label)) Die(name + ": \"" + label + "\" is not a label name");
    if (std::count(label_names.begin(), label_names.end(), label) != 1) {
      Die(name + ": label \"" + label + "\" appears twice");
    }
  }
}

// The family registered as `name` in `families`, when its shape matches;
// aborts when `name` is taken by a family of another shape or type.
template <typename Metric>
Family<Metric>* Existing(const std::map<std::string, std::unique_ptr<Family<Metric>>>& families,
                         bool taken, const std::string& name,
                         const std::vector<std::string>& label_names,
                         const std::vector<double>& bounds = {}) {
  auto it = families.find(name);
  if (it == families.end()) {
    if (taken) Die(name + " is already registered with another type");
    return nullptr;
  }
  if (it->second->label_names() != label_names || it->second->bounds() != bounds) {
    Die(name + " is already registered with other labels or buckets");
  }
  return it->second.get();
}

template <typename Metric, typename Builder, typename... ChildArgs>
Family<Metric>& Register(std::map<std::string, std::unique_ptr<Family<Metric>>>& families,
                         Builder builder, prometheus::Registry& registry, const std::string& name,
                         const std::string& help, const std::vector<std::string>& label_names,
                         const std::vector<double>& bounds = {}) {
  prometheus::Family<Metric>& family = builder.Name(name).Help(help).Register(registry);
  auto wrapped = std::make_unique<Family<Metric>>(&family, label_names, bounds);
  Family<Metric>& result = *wrapped;
  families[name] = std::move(wrapped);
  if (label_names.empty()) result.WithLabels({});
  return result;
}

}  // namespace

template <typename Metric>
Metric& Family<Metric>::WithLabels(const LabelValues& values) {
  if (values.size() != label_names_.size()) {
    Die(std::to_string(values.size()) + " label values for " + std::to_string(label_names_.size()) +
        " labels");
  }
  prometheus::Labels labels;
  for (size_t i = 0; i < values.size(); ++i) labels[label_names_[i]] = values[i];
  // prometheus-cpp returns the existing child for labels it already has.
  if constexpr (std::is_same_v<Metric, Histogram>) {
    return family_->Add(labels, bounds_);
  } else {
    return family_->Add(labels);
  }
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

std::vector<double> DurationBuckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

CounterFamily& Registry::AddCounter(const std::string& name, const std::string& help,
                                    const std::vector<std::string>& label_names) {
  CheckNames(name, label_names);
  if (!name.ends_with("_total")) Die(name + ": a counter's name ends in _total");
  std::lock_guard lock(families_mu_);
  bool taken = gauges_.contains(name) || histograms_.contains(name);
  if (CounterFamily* existing = Existing(counters_, taken, name, label_names)) return *existing;
  return Register(counters_, prometheus::BuildCounter(), registry_, name, help, label_names);
}

GaugeFamily& Registry::AddGauge(const std::string& name, const std::string& help,
                                const std::vector<std::string>& label_names) {
  CheckNames(name, label_names);
  std::lock_guard lock(families_mu_);
  bool taken = counters_.contains(name) || histograms_.contains(name);
  if (GaugeFamily* existing = Existing(gauges_, taken, name, label_names)) return *existing;
  return Register(gauges_, prometheus::BuildGauge(), registry_, name, help, label_names);
}

HistogramFamily& Registry::AddHistogram(const std::string& name, const std::string& help,
                                        const std::vector<std::string>& label_names,
                                        const std::vector<double>& bounds) {
  CheckNames(name, label_names);
  if (std::find(label_names.begin(), label_names.end(), "le") != label_names.end()) {
    Die(name + ": a histogram cannot have a label named le");
  }
  if (bounds.empty()) Die(name + ": a histogram needs at least one bucket");
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i]) || (i > 0 && bounds[i] <= bounds[i - 1])) {
      Die(name + ": bucket bounds must be finite and strictly increasing");
    }
  }
  std::lock_guard lock(families_mu_);
  bool taken = counters_.contains(name) || gauges_.contains(name);
  if (HistogramFamily* existing = Existing(histograms_, taken, name, label_names, bounds)) {
    return *existing;
  }
  return Register(histograms_, prometheus::BuildHistogram(), registry_, name, help, label_names,
                  bounds);
}

CollectableRegistration Registry::AddCollectable(const prometheus::Collectable* collectable) {
  std::lock_guard lock(collectables_mu_);
  const uint64_t id = next_collectable_id_++;
  collectables_[id] = collectable;
  return CollectableRegistration(this, id);
}

void Registry::RemoveCollectable(uint64_t id) {
  std::lock_guard lock(collectables_mu_);
  collectables_.erase(id);
}

std::vector<prometheus::MetricFamily> Registry::Collect() {
  std::vector<prometheus::MetricFamily> families = registry_.Collect();
  {
    std::lock_guard lock(collectables_mu_);
    for (const auto& [id, collectable] : collectables_) {
      try {
        std::vector<prometheus::MetricFamily> more = collectable->Collect();
        std::move(more.begin(), more.end(), std::back_inserter(families));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "certmount metrics: collectable failed: %s\n", e.what());
      }
    }
  }
  // By name: the output order is stable across scrapes and registrations.
  std::stable_sort(families.begin(), families.end(),
                   [](const auto& a, const auto& b) { return a.name < b.name; });
  return families;
}

std::string Registry::Render() { return prometheus::TextSerializer().Serialize(Collect()); }

CollectableRegistration::~CollectableRegistration() { Reset(); }

CollectableRegistration::CollectableRegistration(CollectableRegistration&& other) noexcept
    : registry_(other.registry_), id_(other.id_) {
  other.registry_ = nullptr;
}

CollectableRegistration& CollectableRegistration::operator=(
    CollectableRegistration&& other) noexcept {
  if (this != &other) {
    Reset();
    registry_ = other.registry_;
    id_ = other.id_;
    other.registry_ = nullptr;
  }
  return *this;
}

void CollectableRegistration::Reset() {
  if (registry_ != nullptr) registry_->RemoveCollectable(id_);
  registry_ = nullptr;
}

prometheus::MetricFamily GaugeSnapshot(const std::string& name, const std::string& help,
                                       const std::vector<std::string>& label_names,
                                       const std::vector<std::pair<LabelValues, double>>& values) {
  prometheus::MetricFamily family{name, help, prometheus::MetricType::Gauge, {}};
  family.metric.reserve(values.size());
  for (const auto& [label_values, value] : values) {
    prometheus::ClientMetric& metric = family.metric.emplace_back();
    for (size_t i = 0; i < label_names.size() && i < label_values.size(); ++i) {
      metric.label.push_back({label_names[i], label_values[i]});
    }
    // As prometheus-cpp orders the labels of its own families: by name.
    std::sort(metric.label.begin(), metric.label.end());
    metric.gauge.value = value;
  }
  return family;
}

Registry& DefaultRegistry() {
  // Constructed in this order, destroyed in the reverse: the registration
  // goes before the collectable, the registry last.
  static Registry registry;
  static const ProcessCollectable process;
  static const CollectableRegistration registration = [] {
    registry.AddGauge("certmount_build_info", "certmountd's version; always 1.", {"version"})
        .WithLabels({CERTMOUNT_VERSION})
        .Set(1);
    return registry.AddCollectable(&process);
  }();
  return registry;
}

}  // namespace certmount::metrics
