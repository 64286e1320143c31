// BatchAggregator: the process's one timer thread. It flushes staging
// buffers that calls left behind during a burst (at most maxBatchYieldUs
// after they were armed), and watches reader threads that run calls inline,
// sending an executor to read a socket whose reader has been busy for long.
// It sleeps while there is nothing to do.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace myelin::detail {

class EndpointImpl;

class BatchAggregator {
 public:
  static BatchAggregator& instance();
  /// Flushes `ep` once `delayUs` has passed.
  void arm(const std::shared_ptr<EndpointImpl>& ep, std::uint32_t delayUs);
  /// Called by a reader thread each time it starts running calls inline.
  /// Cheap: a store, plus a notification only when the watch was idle.
  void watchInline(EndpointImpl& ep);

  /// A reader busy this long gets an executor to read for it.
  static constexpr std::chrono::milliseconds kInlineLimit{1};
  /// The watch ticks every kInlineLimit while readers ran inline during the
  /// last kWatchLinger, then sleeps.
  static constexpr std::chrono::milliseconds kWatchLinger{100};

 private:
  BatchAggregator() = default;
  void run();
  void tick(std::chrono::steady_clock::time_point now);

  std::mutex mu_;
  std::condition_variable cv_;
  /// Deferred flushes, a min-heap by due time (endpoints may have different
  /// delays). A vector heap keeps its storage: arming allocates nothing.
  struct Due {
    std::chrono::steady_clock::time_point at;
    std::weak_ptr<EndpointImpl> ep;
    bool operator<(const Due& o) const { return at > o.at; }  // earliest on top
  };
  std::vector<Due> queue_;
  std::vector<std::weak_ptr<EndpointImpl>> watched_;
  std::vector<std::shared_ptr<EndpointImpl>> tickEps_;  // timer thread only
  std::atomic<bool> ticking_{false};
  std::atomic<std::int64_t> lastInlineNs_{0};
  std::chrono::steady_clock::time_point nextTick_{};
  std::thread thread_;
};

}  // namespace myelin::detail
