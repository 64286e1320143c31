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
  /// Has `ep` look at its lanes that ran dry holding a burst's storage
  /// (EndpointImpl::trimIdleLanes) once `delay` has passed.
  void armLaneTrim(const std::shared_ptr<EndpointImpl>& ep, std::chrono::nanoseconds delay);
  /// Called by a reader thread each time it starts running calls inline.
  /// Cheap: a store, plus a notification only when the watch was idle.
  void watchInline(EndpointImpl& ep);

  /// A reader whose lane's turn (a call) runs this long gets an executor to
  /// read for it, and hands on the lanes it claimed and has not started.
  static constexpr std::chrono::milliseconds kInlineLimit{1};
  /// A reader whose run of short turns goes on this long gets an executor
  /// to read for it too: frames for other lanes, replies and credit wait
  /// for a run at most about this long (as long as a long call holds them).
  static constexpr std::chrono::milliseconds kShortRunLimit{16};
  /// While readers run calls inline the watch looks at them every
  /// kInlineLimit at first; each look that finds none over the limit doubles
  /// the period up to kWatchMaxPeriod, and one that finds a reader over it
  /// resets it. A look also comes exactly when a run it saw in progress
  /// would pass the limit. Ticking every 1 ms regardless woke this thread
  /// 1,000 times a second under any steady load, competing for the CPU with
  /// the threads doing the work on a 2-core machine.
  static constexpr std::chrono::milliseconds kWatchMaxPeriod{16};
  /// The watch sleeps after kWatchLinger without inline runs.
  static constexpr std::chrono::milliseconds kWatchLinger{100};

 private:
  BatchAggregator() = default;
  void run();
  /// Looks at the watched readers; returns when to look next.
  std::chrono::steady_clock::time_point tick(std::chrono::steady_clock::time_point now);

  std::mutex mu_;
  std::condition_variable cv_;
  /// Deferred flushes, a min-heap by due time (endpoints may have different
  /// delays). A vector heap keeps its storage: arming allocates nothing.
  struct Due {
    std::chrono::steady_clock::time_point at;
    std::weak_ptr<EndpointImpl> ep;
    bool trimLanes = false;  // trimIdleLanes, not a flush
    bool operator<(const Due& o) const { return at > o.at; }  // earliest on top
  };
  void push(Due due);
  std::vector<Due> queue_;
  std::vector<std::weak_ptr<EndpointImpl>> watched_;
  std::vector<std::shared_ptr<EndpointImpl>> tickEps_;  // timer thread only
  std::atomic<bool> ticking_{false};
  std::atomic<std::int64_t> lastInlineNs_{0};
  std::chrono::steady_clock::time_point nextTick_{};
  std::chrono::steady_clock::duration watchPeriod_{kInlineLimit};  // (mu_)
  std::thread thread_;
};

}  // namespace myelin::detail
