// certmount's metrics, on prometheus-cpp (Debian 12's prometheus-cpp-dev):
// the library owns the registry, the families, the counters, gauges and
// histograms, and the text exposition. This header adds what certmount's
// code relies on: families registered by name with label *names* fixed up
// front and children picked by label *values* in that order, the certmount_
// naming rules checked at registration, collectables that compute families
// at scrape time, and one process-wide registry that also carries process_*
// and certmount_build_info.
//
// Hot paths stay cheap: a child (Counter&, Gauge&, Histogram&) is resolved
// once by label values and then updated with atomic operations only.
//
// Misuse that is a programming error (an invalid or non-certmount_ name, a
// wrong number of label values, unsorted buckets, one name registered twice
// with a different shape) aborts the process with a message: such a bug
// shows up the first time the code runs, in any test.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace certmount::metrics {

// Label values, in the order of the family's label names.
using LabelValues = std::vector<std::string>;

// prometheus-cpp's metrics: Counter::Increment (negative amounts ignored),
// Gauge::Set/Increment/Decrement, Histogram::Observe; all atomic.
using Counter = prometheus::Counter;
using Gauge = prometheus::Gauge;
using Histogram = prometheus::Histogram;

// Buckets for durations in seconds, from 5 ms to a minute.
std::vector<double> DurationBuckets();

// One prometheus-cpp family and its label names. Children, once made, live
// as long as the registry, so callers may keep the reference WithLabels
// returns.
template <typename Metric>
class Family {
 public:
  Family(prometheus::Family<Metric>* family, std::vector<std::string> label_names,
         std::vector<double> bounds = {})
      : family_(family), label_names_(std::move(label_names)), bounds_(std::move(bounds)) {}
  Family(const Family&) = delete;
  Family& operator=(const Family&) = delete;

  // The child with these label values, made (at zero) on first use. Aborts
  // when the number of values differs from the number of label names.
  Metric& WithLabels(const LabelValues& values);

  const std::vector<std::string>& label_names() const { return label_names_; }
  const std::vector<double>& bounds() const { return bounds_; }

 private:
  prometheus::Family<Metric>* family_;
  const std::vector<std::string> label_names_;
  const std::vector<double> bounds_;  // histograms only
};

using CounterFamily = Family<Counter>;
using GaugeFamily = Family<Gauge>;
using HistogramFamily = Family<Histogram>;

class Registry;

// Keeps a collectable registered; unregisters it on destruction, waiting
// for a scrape that is running it to finish, so the collectable may refer
// to objects that die right after this handle.
class CollectableRegistration {
 public:
  CollectableRegistration() = default;
  CollectableRegistration(Registry* registry, uint64_t id) : registry_(registry), id_(id) {}
  ~CollectableRegistration();
  CollectableRegistration(CollectableRegistration&& other) noexcept;
  CollectableRegistration& operator=(CollectableRegistration&& other) noexcept;
  CollectableRegistration(const CollectableRegistration&) = delete;
  CollectableRegistration& operator=(const CollectableRegistration&) = delete;

 private:
  void Reset();
  Registry* registry_ = nullptr;
  uint64_t id_ = 0;
};

// Owns metric families and collectables; renders them all. Thread-safe.
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

  // Registers `collectable` (which must outlive the returned handle): its
  // Collect() runs at every Render, one scrape at a time, for values that
  // are cheaper to read on demand than to track. It must not call back into
  // this registry's Render or AddCollectable. An exception from it drops
  // its families from that scrape only.
  [[nodiscard]] CollectableRegistration AddCollectable(const prometheus::Collectable* collectable);

  // Every family (registered ones and collectables'), ordered by name.
  std::vector<prometheus::MetricFamily> Collect();
  // Collect() in the text exposition format 0.0.4, by prometheus-cpp.
  std::string Render();

 private:
  friend class CollectableRegistration;
  void RemoveCollectable(uint64_t id);

  prometheus::Registry registry_{prometheus::Registry::InsertBehavior::Throw};
  std::mutex families_mu_;
  std::map<std::string, std::unique_ptr<CounterFamily>> counters_;
  std::map<std::string, std::unique_ptr<GaugeFamily>> gauges_;
  std::map<std::string, std::unique_ptr<HistogramFamily>> histograms_;
  // Held while collectables run, so removing one waits for its run to end.
  std::mutex collectables_mu_;
  std::map<uint64_t, const prometheus::Collectable*> collectables_;
  uint64_t next_collectable_id_ = 1;
};

// The process-wide registry certmountd serves, with the process_* metrics
// (ProcessCollectable) and certmount_build_info{version} = 1 registered. It
// lives until exit; stop every thread that updates metrics before returning
// from main.
Registry& DefaultRegistry();

// A gauge family for a collectable to return: one sample per entry, label
// names and values as given (values in the order of the names).
prometheus::MetricFamily GaugeSnapshot(const std::string& name, const std::string& help,
                                       const std::vector<std::string>& label_names,
                                       const std::vector<std::pair<LabelValues, double>>& values);

}  // namespace certmount::metrics
