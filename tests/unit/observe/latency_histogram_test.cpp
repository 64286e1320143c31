// LatencyHistogram: percentiles against an exact sort, the relative error
// bound, merging, and coordinated-omission correction.
#include "myelin/latency_histogram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace myelin {
namespace {

TEST(LatencyHistogram, EmptyReportsZeros) {
  LatencyHistogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.percentile(50), 0u);
  EXPECT_EQ(h.min(), 0u);
  EXPECT_EQ(h.max(), 0u);
  EXPECT_EQ(h.mean(), 0.0);
}

TEST(LatencyHistogram, SmallValuesAreExact) {
  LatencyHistogram h;
  for (std::uint64_t v = 0; v < 64; ++v) h.record(v);
  EXPECT_EQ(h.percentile(50), 31u);
  EXPECT_EQ(h.percentile(100), 63u);
  EXPECT_EQ(h.min(), 0u);
  EXPECT_EQ(h.max(), 63u);
}

TEST(LatencyHistogram, PercentilesWithinTheRelativeErrorOfAnExactSort) {
  std::mt19937_64 rng(42);
  std::lognormal_distribution<double> dist(10.0, 1.5);  // ~ microseconds to tens of ms
  std::vector<std::uint64_t> values;
  LatencyHistogram h;
  for (int i = 0; i < 200000; ++i) {
    auto v = static_cast<std::uint64_t>(dist(rng));
    values.push_back(v);
    h.record(v);
  }
  std::sort(values.begin(), values.end());
  for (double p : {1.0, 10.0, 50.0, 90.0, 99.0, 99.9, 99.99, 100.0}) {
    auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(values.size())));
    std::uint64_t exact = values[std::max<std::size_t>(rank, 1) - 1];
    std::uint64_t got = h.percentile(p);
    EXPECT_GE(got, exact) << "p" << p;
    EXPECT_LE(static_cast<double>(got), static_cast<double>(exact) * (1.0 + 1.0 / 64) + 1) << "p" << p;
  }
  EXPECT_EQ(h.max(), values.back());
  EXPECT_EQ(h.min(), values.front());
  double sum = 0;
  for (auto v : values) sum += static_cast<double>(v);
  EXPECT_NEAR(h.mean(), sum / static_cast<double>(values.size()), 1e-6 * sum / static_cast<double>(values.size()));
}

TEST(LatencyHistogram, HugeValuesAreClampedNotLost) {
  LatencyHistogram h;
  h.record(~std::uint64_t{0});
  EXPECT_EQ(h.count(), 1u);
  EXPECT_GT(h.percentile(100), std::uint64_t{1} << 61);
}

TEST(LatencyHistogram, MergeAddsCounts) {
  LatencyHistogram a, b;
  for (int i = 0; i < 100; ++i) a.record(1000);
  for (int i = 0; i < 100; ++i) b.record(5000);
  a.merge(b);
  EXPECT_EQ(a.count(), 200u);
  EXPECT_LE(a.percentile(50), 1015u);
  EXPECT_GE(a.percentile(51), 4900u);
  EXPECT_EQ(a.max(), 5000u);
  EXPECT_EQ(a.min(), 1000u);
}

TEST(LatencyHistogram, CorrectionFillsInTheSendsAStallDelayed) {
  // One send every 100 us; one reply took 1 ms: the nine sends that should
  // have gone out meanwhile would have waited 900, 800, ... 100 us.
  LatencyHistogram h;
  h.recordCorrected(1'000'000, 100'000);
  EXPECT_EQ(h.count(), 10u);
  EXPECT_EQ(h.max(), 1'000'000u);
  EXPECT_EQ(h.min(), 100'000u);
  LatencyHistogram plain;
  plain.recordCorrected(50'000, 100'000);
  EXPECT_EQ(plain.count(), 1u) << "a reply faster than the interval adds nothing";
}

TEST(LatencyHistogram, ResetEmpties) {
  LatencyHistogram h;
  h.record(7);
  h.reset();
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.percentile(99), 0u);
}

TEST(LatencyHistogram, FormatsNanosForHumans) {
  EXPECT_EQ(formatNanos(850), "850 ns");
  EXPECT_EQ(formatNanos(12400), "12.4 us");
  EXPECT_EQ(formatNanos(3.1e6), "3.10 ms");
  EXPECT_EQ(formatNanos(1.2e9), "1.20 s");
}

}  // namespace
}  // namespace myelin
