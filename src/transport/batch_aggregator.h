// BatchAggregator: flushes staging buffers that calls left behind during a
// burst, at most maxBatchYieldUs after they were armed. One thread per
// process; it sleeps while no endpoint has deferred data.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

namespace myelin::detail {

class EndpointImpl;

class BatchAggregator {
 public:
  static BatchAggregator& instance();
  /// Flushes `ep` once `delayUs` has passed.
  void arm(const std::shared_ptr<EndpointImpl>& ep, std::uint32_t delayUs);

 private:
  BatchAggregator() = default;
  void run();

  struct Entry {
    std::weak_ptr<EndpointImpl> ep;
    std::chrono::steady_clock::time_point due;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Entry> queue_;
  std::thread thread_;
};

}  // namespace myelin::detail
