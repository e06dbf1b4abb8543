// A small Prometheus metrics registry (Debian 12 ships no client library):
// counters, gauges and fixed-bucket histograms with label sets, rendered in
// the text exposition format 0.0.4, plus collectors that fill gauges at
// scrape time.
//
// Hot paths stay cheap: a metric handle (Counter&, Gauge&, Histogram&) is
// resolved once by label values and then updated with atomic operations
// only; the family's lock is taken only to resolve a handle and to render.
//
// Misuse that is a programming error (an invalid or non-certmount_ name, a
// wrong number of label values, unsorted buckets, one name registered twice
// with a different shape) aborts the process with a message: such a bug
// shows up the first time the code runs, in any test.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace certmount::metrics {

// Label values, in the order of the family's label names.
using LabelValues = std::vector<std::string>;

// A monotonically increasing value.
class Counter {
 public:
  // Adds `amount`; negative or NaN amounts are ignored (a counter never goes down).
  void Increment(double amount = 1.0);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// A value that goes up and down, or is set outright.
class Gauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Add(double delta) { value_.fetch_add(delta, std::memory_order_relaxed); }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// Counts observations into fixed buckets (upper bounds inclusive, as
// Prometheus' `le` says) and keeps their sum.
class Histogram {
 public:
  // `bounds` (strictly increasing, finite) must outlive the histogram; its
  // family owns them.
  explicit Histogram(const std::vector<double>* bounds);

  void Observe(double value);

  struct Snapshot {
    std::vector<uint64_t> cumulative;  // one per bound, then the +Inf bucket
    uint64_t count = 0;                // equals cumulative.back()
    double sum = 0;
  };
  // A consistent-enough copy: count always equals the +Inf bucket.
  Snapshot Read() const;

 private:
  const std::vector<double>& bounds_;
  std::vector<std::atomic<uint64_t>> buckets_;  // not cumulative; last is +Inf
  std::atomic<double> sum_{0.0};
};

// Buckets for durations in seconds, from 5 ms to a minute.
std::vector<double> DurationBuckets();

enum class Type { kCounter, kGauge, kHistogram };

// What every family has: a name, help text, label names, and its children.
class FamilyBase {
 public:
  FamilyBase(Type type, std::string name, std::string help, std::vector<std::string> label_names);
  virtual ~FamilyBase() = default;
  FamilyBase(const FamilyBase&) = delete;
  FamilyBase& operator=(const FamilyBase&) = delete;

  Type type() const { return type_; }
  const std::string& name() const { return name_; }
  const std::vector<std::string>& label_names() const { return label_names_; }

  // Appends the family's HELP and TYPE lines and one line per sample
  // (children ordered by label values) to `out`.
  void Render(std::string& out) const;

 protected:
  // Appends the samples only; called by Render.
  virtual void RenderSamples(std::string& out) const = 0;
  // Aborts unless `values` has one value per label name.
  void CheckArity(const LabelValues& values) const;

 private:
  const Type type_;
  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;
};

// Children of one metric type keyed by label values. A child, once made,
// lives as long as the family (except through GaugeFamily::ReplaceAll), so
// callers may keep the reference WithLabels returns.
template <typename Metric>
class Family : public FamilyBase {
 public:
  using FamilyBase::FamilyBase;

  // The child with these label values, made (at zero) on first use. Aborts
  // when the number of values differs from the number of label names.
  Metric& WithLabels(const LabelValues& values) {
    CheckArity(values);
    std::lock_guard lock(mu_);
    std::unique_ptr<Metric>& child = children_[values];
    if (child == nullptr) child = MakeChild();
    return *child;
  }

 protected:
  virtual std::unique_ptr<Metric> MakeChild() const = 0;

  mutable std::mutex mu_;
  std::map<LabelValues, std::unique_ptr<Metric>> children_;
};

class CounterFamily final : public Family<Counter> {
 public:
  using Family::Family;

 private:
  std::unique_ptr<Counter> MakeChild() const override { return std::make_unique<Counter>(); }
  void RenderSamples(std::string& out) const override;
};

class GaugeFamily final : public Family<Gauge> {
 public:
  using Family::Family;

  // Replaces every child with `values` in one step, so a scrape never sees
  // half of an update and rows that are gone (e.g. unpublished volumes)
  // disappear. Invalidates references from WithLabels: use it only on
  // families that a collector fills and no one holds handles into.
  void ReplaceAll(const std::vector<std::pair<LabelValues, double>>& values);

 private:
  std::unique_ptr<Gauge> MakeChild() const override { return std::make_unique<Gauge>(); }
  void RenderSamples(std::string& out) const override;
};

class HistogramFamily final : public Family<Histogram> {
 public:
  HistogramFamily(std::string name, std::string help, std::vector<std::string> label_names,
                  std::vector<double> bounds);
  const std::vector<double>& bounds() const { return bounds_; }

 private:
  std::unique_ptr<Histogram> MakeChild() const override {
    return std::make_unique<Histogram>(&bounds_);
  }
  void RenderSamples(std::string& out) const override;

  const std::vector<double> bounds_;
};

class Registry;

// Keeps a collector registered; unregisters it on destruction, waiting for
// a scrape that is running it to finish, so the collector may capture
// objects that die right after this handle.
class CollectorRegistration {
 public:
  CollectorRegistration() = default;
  CollectorRegistration(Registry* registry, uint64_t id) : registry_(registry), id_(id) {}
  ~CollectorRegistration();
  CollectorRegistration(CollectorRegistration&& other) noexcept;
  CollectorRegistration& operator=(CollectorRegistration&& other) noexcept;
  CollectorRegistration(const CollectorRegistration&) = delete;
  CollectorRegistration& operator=(const CollectorRegistration&) = delete;

 private:
  void Reset();
  Registry* registry_ = nullptr;
  uint64_t id_ = 0;
};

// Owns metric families and collectors; renders them all. Thread-safe.
class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Registers a family, or returns the one already registered under `name`
  // when its type, label names (and buckets) are the same; aborts when they
  // differ. Names start with "certmount_"; counter names end in "_total".
  // A family without labels gets its single child at once, so it renders
  // (at zero) before its first update. The family lives as long as the
  // registry.
  CounterFamily& AddCounter(const std::string& name, const std::string& help,
                            const std::vector<std::string>& label_names = {});
  GaugeFamily& AddGauge(const std::string& name, const std::string& help,
                        const std::vector<std::string>& label_names = {});
  HistogramFamily& AddHistogram(const std::string& name, const std::string& help,
                                const std::vector<std::string>& label_names,
                                const std::vector<double>& bounds);

  // Registers `collect`, run at the start of every Render (one scrape at a
  // time) to fill gauges from state that is cheaper to read on demand than
  // to track. It must not call back into this registry's Render or
  // AddCollector.
  [[nodiscard]] CollectorRegistration AddCollector(std::function<void()> collect);

  // Runs the collectors, then renders every family ordered by name in the
  // text exposition format 0.0.4.
  std::string Render();

 private:
  friend class CollectorRegistration;
  void RemoveCollector(uint64_t id);
  FamilyBase* Find(const std::string& name);

  std::mutex families_mu_;
  std::map<std::string, std::unique_ptr<FamilyBase>> families_;
  // Held while collectors run, so removing one waits for its run to end.
  std::mutex collectors_mu_;
  std::map<uint64_t, std::function<void()>> collectors_;
  uint64_t next_collector_id_ = 1;
};

// The process-wide registry certmountd serves. It lives until exit; stop
// every thread that updates metrics before returning from main.
Registry& DefaultRegistry();

// The exposition format's spelling of a sample value: integers without a
// fraction, "+Inf", "-Inf", "NaN", otherwise the shortest round-trip form.
std::string FormatValue(double value);

// Label value escaping: backslash, double quote and newline.
std::string EscapeLabelValue(const std::string& value);

}  // namespace certmount::metrics
