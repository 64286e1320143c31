// LatencyHistogram (see myelin/latency_histogram.h): log-linear buckets.
#include "myelin/latency_histogram.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace myelin {

namespace {
// Values below kSubBuckets get exact buckets; above, each power of two
// [2^k, 2^(k+1)) gets kSubBuckets buckets of width 2^(k - kSubBucketBits).
constexpr unsigned kMaxBits = 62;
constexpr std::size_t kBucketCount =
    LatencyHistogram::kSubBuckets + (kMaxBits - LatencyHistogram::kSubBucketBits + 1) * LatencyHistogram::kSubBuckets;
}  // namespace

LatencyHistogram::LatencyHistogram() : counts_(kBucketCount, 0) {}

std::size_t LatencyHistogram::indexOf(std::uint64_t v) {
  if (v < kSubBuckets) return static_cast<std::size_t>(v);
  unsigned top = 63u - static_cast<unsigned>(__builtin_clzll(v));  // v in [2^top, 2^(top+1))
  unsigned shift = top - kSubBucketBits;
  std::size_t sub = static_cast<std::size_t>((v >> shift) - kSubBuckets);  // 0 .. kSubBuckets-1
  return kSubBuckets + static_cast<std::size_t>(top - kSubBucketBits) * kSubBuckets + sub;
}

std::uint64_t LatencyHistogram::upperBoundOf(std::size_t index) {
  if (index < kSubBuckets) return index;
  std::size_t rel = index - kSubBuckets;
  unsigned shift = static_cast<unsigned>(rel / kSubBuckets);
  std::uint64_t sub = rel % kSubBuckets;
  return ((kSubBuckets + sub + 1) << shift) - 1;
}

void LatencyHistogram::record(std::uint64_t value) {
  value = std::min<std::uint64_t>(value, (std::uint64_t{1} << kMaxBits) - 1);
  ++counts_[indexOf(value)];
  ++count_;
  sum_ += value;
  min_ = std::min(min_, value);
  max_ = std::max(max_, value);
}

void LatencyHistogram::recordCorrected(std::uint64_t value, std::uint64_t expectedInterval) {
  record(value);
  if (expectedInterval == 0) return;
  for (std::uint64_t missing = value; missing > expectedInterval;) {
    missing -= expectedInterval;
    record(missing);
  }
}

void LatencyHistogram::merge(const LatencyHistogram& other) {
  for (std::size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
  count_ += other.count_;
  sum_ += other.sum_;
  if (other.count_) {
    min_ = std::min(min_, other.min_);
    max_ = std::max(max_, other.max_);
  }
}

void LatencyHistogram::reset() {
  std::fill(counts_.begin(), counts_.end(), 0);
  count_ = 0;
  sum_ = 0;
  min_ = ~std::uint64_t{0};
  max_ = 0;
}

std::uint64_t LatencyHistogram::percentile(double percent) const {
  if (count_ == 0) return 0;
  percent = std::clamp(percent, 0.0, 100.0);
  auto rank = static_cast<std::uint64_t>(std::ceil(percent / 100.0 * static_cast<double>(count_)));
  if (rank == 0) rank = 1;
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < counts_.size(); ++i) {
    seen += counts_[i];
    if (seen >= rank) return std::min(upperBoundOf(i), max_);
  }
  return max_;
}

std::string formatNanos(double ns) {
  char buf[32];
  if (ns < 1000) {
    std::snprintf(buf, sizeof buf, "%.0f ns", ns);
  } else if (ns < 1e6) {
    std::snprintf(buf, sizeof buf, ns < 1e5 ? "%.1f us" : "%.0f us", ns / 1e3);
  } else if (ns < 1e9) {
    std::snprintf(buf, sizeof buf, ns < 1e8 ? "%.2f ms" : "%.0f ms", ns / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f s", ns / 1e9);
  }
  return buf;
}

}  // namespace myelin
