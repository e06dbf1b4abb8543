#include "common/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string_view>

namespace certmount::metrics {

namespace {

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "certmount metrics: %s\n", message.c_str());
  std::abort();
}

bool IsMetricName(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    const bool digit = c >= '0' && c <= '9';
    if (!letter && !(digit && i > 0)) return false;
  }
  return true;
}

bool IsLabelName(std::string_view name) {
  if (name.empty() || name.starts_with("__")) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    const bool digit = c >= '0' && c <= '9';
    if (!letter && !(digit && i > 0)) return false;
  }
  return true;
}

void CheckNames(const std::string& name, const std::vector<std::string>& label_names) {
  if (!IsMetricName(name) || !name.starts_with("certmount_")) {
    Die("\"" + name + "\" is not a metric name starting with certmount_");
  }
  for (const std::string& label : label_names) {
    if (!IsLabelName(label)) Die(name + ": \"" + label + "\" is not a label name");
    if (std::count(label_names.begin(), label_names.end(), label) != 1) {
      Die(name + ": label \"" + label + "\" appears twice");
    }
  }
}

std::string EscapeHelp(const std::string& help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

const char* TypeName(Type type) {
  switch (type) {
    case Type::kCounter:
      return "counter";
    case Type::kGauge:
      return "gauge";
    case Type::kHistogram:
      return "histogram";
  }
  return "untyped";
}

// Appends `{a="x",b="y"}` (nothing without labels); `extra`, when given, is
// one more label appended last (histograms' le).
void AppendLabels(std::string& out, const std::vector<std::string>& names,
                  const LabelValues& values, const char* extra_name = nullptr,
                  const std::string& extra_value = "") {
  if (names.empty() && extra_name == nullptr) return;
  out += '{';
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ',';
    out += names[i];
    out += "=\"";
    out += EscapeLabelValue(values[i]);
    out += '"';
  }
  if (extra_name != nullptr) {
    if (!names.empty()) out += ',';
    out += extra_name;
    out += "=\"";
    out += EscapeLabelValue(extra_value);
    out += '"';
  }
  out += '}';
}

void AppendSample(std::string& out, const std::string& name, const std::vector<std::string>& names,
                  const LabelValues& values, double value) {
  out += name;
  AppendLabels(out, names, values);
  out += ' ';
  out += FormatValue(value);
  out += '\n';
}

}  // namespace

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Below 2^53 every integer is exact; printing it whole keeps timestamps
  // and counts readable (1700000000, not 1.7e+09).
  if (value == std::trunc(value) && std::fabs(value) < 9007199254740992.0) {
    return std::to_string(static_cast<int64_t>(value));
  }
  char buffer[64];
  auto [end, error] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  if (error != std::errc()) return "NaN";
  return std::string(buffer, end);
}

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
  return out;
}

void Counter::Increment(double amount) {
  if (!(amount > 0)) return;
  value_.fetch_add(amount, std::memory_order_relaxed);
}

Histogram::Histogram(const std::vector<double>* bounds)
    : bounds_(*bounds), buckets_(bounds->size() + 1) {}

void Histogram::Observe(double value) {
  // The first bound not below the value: `le` is inclusive.
  const size_t index = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  buckets_[index].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot snapshot;
  snapshot.cumulative.reserve(buckets_.size());
  uint64_t running = 0;
  for (const std::atomic<uint64_t>& bucket : buckets_) {
    running += bucket.load(std::memory_order_relaxed);
    snapshot.cumulative.push_back(running);
  }
  snapshot.count = running;
  snapshot.sum = sum_.load(std::memory_order_relaxed);
  return snapshot;
}

std::vector<double> DurationBuckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

FamilyBase::FamilyBase(Type type, std::string name, std::string help,
                       std::vector<std::string> label_names)
    : type_(type),
      name_(std::move(name)),
      help_(std::move(help)),
      label_names_(std::move(label_names)) {}

void FamilyBase::Render(std::string& out) const {
  out += "# HELP " + name_ + " " + EscapeHelp(help_) + "\n";
  out += "# TYPE " + name_ + " " + TypeName(type_) + "\n";
  RenderSamples(out);
}

void FamilyBase::CheckArity(const LabelValues& values) const {
  if (values.size() != label_names_.size()) {
    Die(name_ + ": " + std::to_string(values.size()) + " label values for " +
        std::to_string(label_names_.size()) + " labels");
  }
}

void CounterFamily::RenderSamples(std::string& out) const {
  std::lock_guard lock(mu_);
  for (const auto& [values, counter] : children_) {
    AppendSample(out, name(), label_names(), values, counter->Value());
  }
}

void GaugeFamily::ReplaceAll(const std::vector<std::pair<LabelValues, double>>& values) {
  std::map<LabelValues, std::unique_ptr<Gauge>> fresh;
  for (const auto& [labels, value] : values) {
    CheckArity(labels);
    std::unique_ptr<Gauge>& gauge = fresh[labels];
    if (gauge == nullptr) gauge = std::make_unique<Gauge>();
    gauge->Set(value);
  }
  std::lock_guard lock(mu_);
  children_.swap(fresh);
}

void GaugeFamily::RenderSamples(std::string& out) const {
  std::lock_guard lock(mu_);
  for (const auto& [values, gauge] : children_) {
    AppendSample(out, name(), label_names(), values, gauge->Value());
  }
}

HistogramFamily::HistogramFamily(std::string name, std::string help,
                                 std::vector<std::string> label_names, std::vector<double> bounds)
    : Family(Type::kHistogram, std::move(name), std::move(help), std::move(label_names)),
      bounds_(std::move(bounds)) {}

void HistogramFamily::RenderSamples(std::string& out) const {
  std::lock_guard lock(mu_);
  for (const auto& [values, histogram] : children_) {
    const Histogram::Snapshot snapshot = histogram->Read();
    for (size_t i = 0; i <= bounds_.size(); ++i) {
      out += name() + "_bucket";
      AppendLabels(out, label_names(), values, "le",
                   i < bounds_.size() ? FormatValue(bounds_[i]) : "+Inf");
      out += ' ' + std::to_string(snapshot.cumulative[i]) + '\n';
    }
    AppendSample(out, name() + "_sum", label_names(), values, snapshot.sum);
    out += name() + "_count";
    AppendLabels(out, label_names(), values);
    out += ' ' + std::to_string(snapshot.count) + '\n';
  }
}

CollectorRegistration::~CollectorRegistration() { Reset(); }

CollectorRegistration::CollectorRegistration(CollectorRegistration&& other) noexcept
    : registry_(other.registry_), id_(other.id_) {
  other.registry_ = nullptr;
}

CollectorRegistration& CollectorRegistration::operator=(CollectorRegistration&& other) noexcept {
  if (this != &other) {
    Reset();
    registry_ = other.registry_;
    id_ = other.id_;
    other.registry_ = nullptr;
  }
  return *this;
}

void CollectorRegistration::Reset() {
  if (registry_ != nullptr) registry_->RemoveCollector(id_);
  registry_ = nullptr;
}

FamilyBase* Registry::Find(const std::string& name) {
  auto it = families_.find(name);
  return it == families_.end() ? nullptr : it->second.get();
}

CounterFamily& Registry::AddCounter(const std::string& name, const std::string& help,
                                    const std::vector<std::string>& label_names) {
  CheckNames(name, label_names);
  if (!name.ends_with("_total")) Die("counter " + name + " must end in _total");
  std::lock_guard lock(families_mu_);
  if (FamilyBase* existing = Find(name)) {
    auto* counter = dynamic_cast<CounterFamily*>(existing);
    if (counter == nullptr || counter->label_names() != label_names) {
      Die(name + " is already registered with another type or labels");
    }
    return *counter;
  }
  auto family = std::make_unique<CounterFamily>(Type::kCounter, name, help, label_names);
  if (label_names.empty()) family->WithLabels({});
  CounterFamily& result = *family;
  families_[name] = std::move(family);
  return result;
}

GaugeFamily& Registry::AddGauge(const std::string& name, const std::string& help,
                                const std::vector<std::string>& label_names) {
  CheckNames(name, label_names);
  std::lock_guard lock(families_mu_);
  if (FamilyBase* existing = Find(name)) {
    auto* gauge = dynamic_cast<GaugeFamily*>(existing);
    if (gauge == nullptr || gauge->label_names() != label_names) {
      Die(name + " is already registered with another type or labels");
    }
    return *gauge;
  }
  auto family = std::make_unique<GaugeFamily>(Type::kGauge, name, help, label_names);
  if (label_names.empty()) family->WithLabels({});
  GaugeFamily& result = *family;
  families_[name] = std::move(family);
  return result;
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
  if (FamilyBase* existing = Find(name)) {
    auto* histogram = dynamic_cast<HistogramFamily*>(existing);
    if (histogram == nullptr || histogram->label_names() != label_names ||
        histogram->bounds() != bounds) {
      Die(name + " is already registered with another type, labels or buckets");
    }
    return *histogram;
  }
  auto family = std::make_unique<HistogramFamily>(name, help, label_names, bounds);
  if (label_names.empty()) family->WithLabels({});
  HistogramFamily& result = *family;
  families_[name] = std::move(family);
  return result;
}

CollectorRegistration Registry::AddCollector(std::function<void()> collect) {
  std::lock_guard lock(collectors_mu_);
  const uint64_t id = next_collector_id_++;
  collectors_[id] = std::move(collect);
  return CollectorRegistration(this, id);
}

void Registry::RemoveCollector(uint64_t id) {
  std::lock_guard lock(collectors_mu_);
  collectors_.erase(id);
}

std::string Registry::Render() {
  {
    std::lock_guard lock(collectors_mu_);
    for (auto& [id, collect] : collectors_) {
      // A failing collector leaves its gauges as they were; the scrape goes on.
      try {
        collect();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "certmount metrics: collector failed: %s\n", e.what());
      } catch (...) {
        std::fprintf(stderr, "certmount metrics: collector failed\n");
      }
    }
  }
  std::string out;
  std::lock_guard lock(families_mu_);
  // families_ is a map by name: the output order is stable across scrapes.
  for (const auto& [name, family] : families_) family->Render(out);
  return out;
}

Registry& DefaultRegistry() {
  static Registry registry;
  return registry;
}

}  // namespace certmount::metrics
