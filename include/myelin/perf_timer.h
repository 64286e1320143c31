// PerfTimer: measures one benchmark region (RPCs, latency, and the endpoint
// statistics of both sides) and PerfReport, its result, which prints the
// per-test details block of the raw benchmark table (Table B).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "myelin/endpoint.h"
#include "myelin/latency_histogram.h"
#include "myelin/stats.h"

namespace myelin {

/// Adds the counters of `from` to `into`: messages, bytes, writes, reads,
/// batch histogram and calls are summed; the high-water marks and the
/// largest batch take the maximum; seconds take the longer interval.
void mergeStats(EndpointStats& into, const EndpointStats& from);

/// What a PerfTimer measured.
struct PerfReport {
  std::string name;
  std::string description;
  /// Wall time from the timer's construction to stop().
  double seconds = 0;
  std::uint64_t rpcs = 0;
  /// rpcs / seconds (0 if no time passed).
  double rps = 0;
  /// Latencies recorded during the region, in nanoseconds (may be empty).
  LatencyHistogram latency;
  /// This side's statistics, summed over the timer's endpoints.
  EndpointStats local;
  /// The peer's statistics, if setRemoteStats() was called.
  EndpointStats remote;
  bool hasRemote = false;

  /// Bytes per second this side sent / received during the region.
  double sendBytesPerSecond() const;
  double recvBytesPerSecond() const;
  /// Average messages per socket write in the busy direction: the remote
  /// one if the peer sent more than twice as many messages, else the local.
  double busiestAverageBatch() const;

  /// Prints the details block: duration, RPC rate, messages and average
  /// framed size each way, latency (if any was recorded), bytes, buffer
  /// high-water marks, batching each way and the batch histograms.
  void printDetails(std::FILE* out) const;
};

/// Measures a region of a benchmark. Construction resets the statistics of
/// the given endpoints (getLocalStats(true)) and starts the clock; stop()
/// reads them again and returns the report.
///
/// @par Thread Safety
/// addRpcs(), recordLatency() and mergeLatency() may be called from any
/// thread at once; construction, setRemoteStats() and stop() from one thread.
class PerfTimer {
 public:
  PerfTimer(std::string name, std::string description, std::vector<Endpoint> endpoints);
  PerfTimer(std::string name, std::string description, const Endpoint& endpoint)
      : PerfTimer(std::move(name), std::move(description), std::vector<Endpoint>{endpoint}) {}
  PerfTimer(const PerfTimer&) = delete;
  PerfTimer& operator=(const PerfTimer&) = delete;

  /// Counts `n` completed RPCs.
  void addRpcs(std::uint64_t n) { rpcs_.fetch_add(n, std::memory_order_relaxed); }
  std::uint64_t rpcs() const { return rpcs_.load(std::memory_order_relaxed); }
  /// Records one latency in nanoseconds (into one of a few histograms
  /// chosen by the calling thread, so that threads rarely contend).
  void recordLatency(std::uint64_t ns);
  /// Adds a histogram a thread filled on its own.
  void mergeLatency(const LatencyHistogram& h);
  /// The peer's statistics for the region (e.g. fetched from the service).
  void setRemoteStats(const EndpointStats& remote);
  /// Stops the clock, reads the endpoints' statistics and returns the
  /// report. Call once.
  PerfReport stop();

 private:
  static constexpr std::size_t kShards = 16;
  struct alignas(64) Shard {
    std::mutex mu;
    LatencyHistogram histogram;
  };

  std::string name_;
  std::string description_;
  std::vector<Endpoint> endpoints_;
  std::chrono::steady_clock::time_point start_;
  std::atomic<std::uint64_t> rpcs_{0};
  std::array<Shard, kShards> shards_;
  EndpointStats remote_;
  bool hasRemote_ = false;
};

}  // namespace myelin
