// LatencyHistogram: records durations with bounded relative error and
// answers percentiles, in the manner of HdrHistogram: values fall into
// buckets of powers of two, each split into 64 linear sub-buckets, so any
// reported value is within 1/64 (1.6 %) of the recorded one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace myelin {

/// Histogram of non-negative integer values (nanoseconds, by convention).
///
/// @par Thread Safety
/// Not thread-safe: give each thread its own and merge() them.
class LatencyHistogram {
 public:
  LatencyHistogram();

  /// Records one value. Values above 2^62 are clamped.
  void record(std::uint64_t value);
  /// Records `value` as seen by a sender that should have sent every
  /// `expectedInterval` (coordinated-omission correction): also records the
  /// values the stalled sends would have seen, value - k * interval > 0.
  void recordCorrected(std::uint64_t value, std::uint64_t expectedInterval);
  /// Adds every count of `other`.
  void merge(const LatencyHistogram& other);
  void reset();

  std::uint64_t count() const { return count_; }
  std::uint64_t min() const { return count_ ? min_ : 0; }
  std::uint64_t max() const { return max_; }
  double mean() const { return count_ ? static_cast<double>(sum_) / static_cast<double>(count_) : 0.0; }
  /// The smallest value v such that at least `percent` % of the recorded
  /// values are <= v (as a bucket's upper bound, never above max()).
  /// percent in [0, 100]; 0 for an empty histogram.
  std::uint64_t percentile(double percent) const;

  /// Number of sub-buckets per power of two; relative error is 1/kSubBuckets.
  static constexpr unsigned kSubBucketBits = 6;
  static constexpr unsigned kSubBuckets = 1u << kSubBucketBits;

 private:
  static std::size_t indexOf(std::uint64_t v);
  static std::uint64_t upperBoundOf(std::size_t index);

  std::vector<std::uint64_t> counts_;
  std::uint64_t count_ = 0;
  std::uint64_t min_ = ~std::uint64_t{0};
  std::uint64_t max_ = 0;
  unsigned __int128 sum_ = 0;
};

/// Formats nanoseconds for humans: "850 ns", "12.4 us", "3.10 ms", "1.20 s".
std::string formatNanos(double ns);

}  // namespace myelin
