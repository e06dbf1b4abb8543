// certmount's layer over prometheus-cpp: families registered by name with
// label names up front, children by label values in that order, the naming
// rules, scrape-time collectables, and the process-wide registry's own
// metrics. The exposition itself is prometheus-cpp's; these tests read it
// the way a Prometheus server would, one sample line at a time.
#include "common/metrics.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace certmount::metrics {
namespace {

bool HasLine(const std::string& text, const std::string& line) {
  return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

TEST(MetricsRegistryTest, CountersByLabelWithHelpAndType) {
  Registry registry;
  CounterFamily& requests =
      registry.AddCounter("certmount_test_requests_total", "Requests handled.", {"method", "code"});
  requests.WithLabels({"Publish", "OK"}).Increment();
  requests.WithLabels({"Publish", "OK"}).Increment(2);
  requests.WithLabels({"Probe", "OK"}).Increment();
  requests.WithLabels({"Publish", "INTERNAL"}).Increment(-5);  // ignored: counters only rise
  const std::string text = registry.Render();
  EXPECT_TRUE(HasLine(text, "# HELP certmount_test_requests_total Requests handled.")) << text;
  EXPECT_TRUE(HasLine(text, "# TYPE certmount_test_requests_total counter")) << text;
  // prometheus-cpp writes labels ordered by name.
  EXPECT_TRUE(HasLine(text, "certmount_test_requests_total{code=\"OK\",method=\"Publish\"} 3"))
      << text;
  EXPECT_TRUE(HasLine(text, "certmount_test_requests_total{code=\"OK\",method=\"Probe\"} 1"));
  EXPECT_TRUE(
      HasLine(text, "certmount_test_requests_total{code=\"INTERNAL\",method=\"Publish\"} 0"));
}

TEST(MetricsRegistryTest, EscapesLabelValues) {
  Registry registry;
  registry.AddGauge("certmount_test_gauge", "G.", {"path"})
      .WithLabels({"a\\b \"quoted\"\nnext"})
      .Set(-2.5);
  const std::string text = registry.Render();
  EXPECT_TRUE(HasLine(text, "certmount_test_gauge{path=\"a\\\\b \\\"quoted\\\"\\nnext\"} -2.5"))
      << text;
}

TEST(MetricsRegistryTest, HistogramBucketsAreCumulativeWithInfSumAndCount) {
  Registry registry;
  Histogram& publish =
      registry
          .AddHistogram("certmount_test_duration_seconds", "Durations.", {"kind"}, {0.25, 1, 2.5})
          .WithLabels({"publish"});
  publish.Observe(0.125);
  publish.Observe(0.25);  // le is inclusive: counts in 0.25
  publish.Observe(0.5);
  publish.Observe(7);  // only +Inf
  const std::string text = registry.Render();
  const std::string name = "certmount_test_duration_seconds";
  EXPECT_TRUE(HasLine(text, "# TYPE " + name + " histogram")) << text;
  EXPECT_TRUE(HasLine(text, name + "_bucket{kind=\"publish\",le=\"0.25\"} 2")) << text;
  EXPECT_TRUE(HasLine(text, name + "_bucket{kind=\"publish\",le=\"1\"} 3")) << text;
  EXPECT_TRUE(HasLine(text, name + "_bucket{kind=\"publish\",le=\"2.5\"} 3")) << text;
  EXPECT_TRUE(HasLine(text, name + "_bucket{kind=\"publish\",le=\"+Inf\"} 4")) << text;
  EXPECT_TRUE(HasLine(text, name + "_sum{kind=\"publish\"} 7.875")) << text;
  EXPECT_TRUE(HasLine(text, name + "_count{kind=\"publish\"} 4")) << text;
}

TEST(MetricsRegistryTest, UnlabelledFamiliesRenderAtZeroBeforeFirstUseSortedByName) {
  Registry registry;
  registry.AddHistogram("certmount_test_b_seconds", "B.", {}, {1});
  registry.AddCounter("certmount_test_a_total", "A.");
  const std::string text = registry.Render();
  EXPECT_TRUE(HasLine(text, "certmount_test_a_total 0")) << text;
  EXPECT_TRUE(HasLine(text, "certmount_test_b_seconds_count 0")) << text;
  EXPECT_LT(text.find("certmount_test_a_total"), text.find("certmount_test_b_seconds")) << text;
}

// Computes its family at scrape time from `ids`.
class IdsCollectable : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override {
    std::vector<std::pair<LabelValues, double>> values;
    for (const std::string& id : ids) values.push_back({{id}, 1});
    return {GaugeSnapshot("certmount_test_volumes", "Volumes.", {"id"}, values)};
  }
  std::vector<std::string> ids = {"a", "b"};
};

TEST(MetricsRegistryTest, CollectablesRunAtScrapeTimeUntilUnregistered) {
  Registry registry;
  registry.AddCounter("certmount_test_z_total", "Z.");
  IdsCollectable volumes;
  {
    CollectableRegistration registration = registry.AddCollectable(&volumes);
    std::string text = registry.Render();
    EXPECT_TRUE(HasLine(text, "certmount_test_volumes{id=\"b\"} 1")) << text;
    // Sorted by name among the registry's own families.
    EXPECT_LT(text.find("certmount_test_volumes"), text.find("certmount_test_z_total")) << text;
    volumes.ids = {"a"};  // b is gone: its sample goes too
    text = registry.Render();
    EXPECT_TRUE(HasLine(text, "certmount_test_volumes{id=\"a\"} 1")) << text;
    EXPECT_EQ(text.find("id=\"b\""), std::string::npos) << text;
  }
  EXPECT_EQ(registry.Render().find("certmount_test_volumes"), std::string::npos);
}

TEST(MetricsRegistryTest, SameShapeReturnsTheSameFamilyAndChild) {
  Registry registry;
  CounterFamily& first = registry.AddCounter("certmount_test_x_total", "X.", {"a"});
  CounterFamily& second = registry.AddCounter("certmount_test_x_total", "X.", {"a"});
  EXPECT_EQ(&first, &second);
  EXPECT_EQ(&first.WithLabels({"1"}), &second.WithLabels({"1"}));
}

TEST(MetricsRegistryDeathTest, MisuseAborts) {
  Registry registry;
  EXPECT_DEATH(registry.AddCounter("other_total", "No prefix."), "certmount_");
  EXPECT_DEATH(registry.AddCounter("certmount_count", "No _total."), "_total");
  EXPECT_DEATH(registry.AddGauge("certmount_g", "Bad label.", {"bad-label"}), "label name");
  EXPECT_DEATH(registry.AddHistogram("certmount_h", "le.", {"le"}, {1}), "le");
  EXPECT_DEATH(registry.AddHistogram("certmount_h", "Unsorted.", {}, {2, 1}), "increasing");
  CounterFamily& family = registry.AddCounter("certmount_y_total", "Y.", {"a"});
  EXPECT_DEATH(family.WithLabels({"1", "2"}), "label values");
  EXPECT_DEATH(registry.AddGauge("certmount_y_total", "Y.", {"a"}), "already registered");
  EXPECT_DEATH(registry.AddCounter("certmount_y_total", "Y.", {"b"}), "already registered");
}

TEST(MetricsRegistryTest, TheDefaultRegistryHasBuildInfoAndProcessMetrics) {
  const std::string text = DefaultRegistry().Render();
  EXPECT_TRUE(HasLine(text, "certmount_build_info{version=\"" CERTMOUNT_VERSION "\"} 1")) << text;
  for (const char* name : {"process_cpu_seconds_total", "process_resident_memory_bytes",
                           "process_virtual_memory_bytes", "process_open_fds", "process_max_fds",
                           "process_start_time_seconds"}) {
    EXPECT_NE(text.find(std::string("\n") + name + " "), std::string::npos) << name << "\n" << text;
  }
  EXPECT_TRUE(HasLine(text, "# TYPE process_cpu_seconds_total counter")) << text;
}

TEST(MetricsRegistryTest, ConcurrentIncrementsAllCount) {
  Registry registry;
  Counter& counter = registry.AddCounter("certmount_test_c_total", "C.").WithLabels({});
  Histogram& histogram =
      registry.AddHistogram("certmount_test_h_seconds", "H.", {}, {1}).WithLabels({});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        counter.Increment();
        histogram.Observe(0.5);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(counter.Value(), 40000);
  const std::string text = registry.Render();
  EXPECT_TRUE(HasLine(text, "certmount_test_h_seconds_bucket{le=\"1\"} 40000")) << text;
  EXPECT_TRUE(HasLine(text, "certmount_test_h_seconds_sum 20000")) << text;
}

}  // namespace
}  // namespace certmount::metrics
