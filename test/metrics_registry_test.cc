// The metrics registry's exposition output, byte for byte: what a
// Prometheus server parses must be exactly the text format 0.0.4.
#include "common/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <thread>
#include <vector>

namespace certmount::metrics {
namespace {

TEST(MetricsRegistryTest, CountersByLabelWithHelpAndType) {
  Registry registry;
  CounterFamily& requests =
      registry.AddCounter("certmount_test_requests_total", "Requests handled.", {"method", "code"});
  requests.WithLabels({"Publish", "OK"}).Increment();
  requests.WithLabels({"Publish", "OK"}).Increment(2);
  requests.WithLabels({"Probe", "OK"}).Increment();
  requests.WithLabels({"Publish", "INTERNAL"}).Increment(-5);  // ignored: counters only rise
  EXPECT_EQ(registry.Render(),
            "# HELP certmount_test_requests_total Requests handled.\n"
            "# TYPE certmount_test_requests_total counter\n"
            "certmount_test_requests_total{method=\"Probe\",code=\"OK\"} 1\n"
            "certmount_test_requests_total{method=\"Publish\",code=\"INTERNAL\"} 0\n"
            "certmount_test_requests_total{method=\"Publish\",code=\"OK\"} 3\n");
}

TEST(MetricsRegistryTest, EscapesLabelValuesAndHelp) {
  Registry registry;
  GaugeFamily& gauge =
      registry.AddGauge("certmount_test_gauge", "A \\ backslash\nand a newline.", {"path"});
  gauge.WithLabels({"a\\b \"quoted\"\nnext"}).Set(-2.5);
  EXPECT_EQ(registry.Render(),
            "# HELP certmount_test_gauge A \\\\ backslash\\nand a newline.\n"
            "# TYPE certmount_test_gauge gauge\n"
            "certmount_test_gauge{path=\"a\\\\b \\\"quoted\\\"\\nnext\"} -2.5\n");
}

TEST(MetricsRegistryTest, HistogramBucketsAreCumulativeWithInfSumAndCount) {
  Registry registry;
  HistogramFamily& family = registry.AddHistogram("certmount_test_duration_seconds", "Durations.",
                                                  {"kind"}, {0.25, 1, 2.5});
  Histogram& publish = family.WithLabels({"publish"});
  publish.Observe(0.125);
  publish.Observe(0.25);  // le is inclusive: counts in 0.25
  publish.Observe(0.5);
  publish.Observe(7);  // only +Inf
  EXPECT_EQ(registry.Render(),
            "# HELP certmount_test_duration_seconds Durations.\n"
            "# TYPE certmount_test_duration_seconds histogram\n"
            "certmount_test_duration_seconds_bucket{kind=\"publish\",le=\"0.25\"} 2\n"
            "certmount_test_duration_seconds_bucket{kind=\"publish\",le=\"1\"} 3\n"
            "certmount_test_duration_seconds_bucket{kind=\"publish\",le=\"2.5\"} 3\n"
            "certmount_test_duration_seconds_bucket{kind=\"publish\",le=\"+Inf\"} 4\n"
            "certmount_test_duration_seconds_sum{kind=\"publish\"} 7.875\n"
            "certmount_test_duration_seconds_count{kind=\"publish\"} 4\n");
}

TEST(MetricsRegistryTest, UnlabelledFamiliesRenderAtZeroBeforeFirstUseAndSortByName) {
  Registry registry;
  registry.AddHistogram("certmount_test_b_seconds", "B.", {}, {1});
  registry.AddCounter("certmount_test_a_total", "A.");
  registry.AddGauge("certmount_test_c", "C.", {"x"});  // labelled: no sample yet
  EXPECT_EQ(registry.Render(),
            "# HELP certmount_test_a_total A.\n"
            "# TYPE certmount_test_a_total counter\n"
            "certmount_test_a_total 0\n"
            "# HELP certmount_test_b_seconds B.\n"
            "# TYPE certmount_test_b_seconds histogram\n"
            "certmount_test_b_seconds_bucket{le=\"1\"} 0\n"
            "certmount_test_b_seconds_bucket{le=\"+Inf\"} 0\n"
            "certmount_test_b_seconds_sum 0\n"
            "certmount_test_b_seconds_count 0\n"
            "# HELP certmount_test_c C.\n"
            "# TYPE certmount_test_c gauge\n");
}

TEST(MetricsRegistryTest, ValueFormatting) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(1700000000), "1700000000");
  EXPECT_EQ(FormatValue(-3), "-3");
  EXPECT_EQ(FormatValue(0.005), "0.005");
  EXPECT_EQ(FormatValue(1e300), "1e+300");
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatValue(std::nan("")), "NaN");
}

TEST(MetricsRegistryTest, CollectorsFillGaugesAtScrapeTimeUntilUnregistered) {
  Registry registry;
  GaugeFamily& volumes = registry.AddGauge("certmount_test_volumes", "Volumes.", {"id"});
  std::vector<std::string> ids = {"a", "b"};
  {
    CollectorRegistration collector = registry.AddCollector([&] {
      std::vector<std::pair<LabelValues, double>> values;
      for (const std::string& id : ids) values.push_back({{id}, 1});
      volumes.ReplaceAll(values);
    });
    EXPECT_NE(registry.Render().find("certmount_test_volumes{id=\"b\"} 1\n"), std::string::npos);
    ids = {"a"};  // b is gone: its sample goes too
    const std::string text = registry.Render();
    EXPECT_NE(text.find("certmount_test_volumes{id=\"a\"} 1\n"), std::string::npos);
    EXPECT_EQ(text.find("id=\"b\""), std::string::npos);
  }
  ids = {"c"};  // unregistered: no longer runs, the last values stay
  const std::string text = registry.Render();
  EXPECT_EQ(text.find("id=\"c\""), std::string::npos);
  EXPECT_NE(text.find("id=\"a\""), std::string::npos);
}

TEST(MetricsRegistryTest, SameShapeReturnsTheSameFamily) {
  Registry registry;
  CounterFamily& first = registry.AddCounter("certmount_test_x_total", "X.", {"a"});
  CounterFamily& second = registry.AddCounter("certmount_test_x_total", "X.", {"a"});
  EXPECT_EQ(&first, &second);
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
  EXPECT_EQ(histogram.Read().count, 40000u);
  EXPECT_EQ(histogram.Read().cumulative[0], 40000u);
  EXPECT_EQ(histogram.Read().sum, 20000);
}

}  // namespace
}  // namespace certmount::metrics
