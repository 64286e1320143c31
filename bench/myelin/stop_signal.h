// The end of a benchmark run, as one flag: callbacks check it without a lock
// before issuing the next call, and threads that only keep calls in flight
// block on it instead of polling with short sleeps (a hundred threads waking
// every few milliseconds cost the client tens of thousands of context
// switches a second).
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>

namespace bench {

class StopSignal {
 public:
  /// Whether the run has ended (no lock: cheap enough for every call).
  bool raised() const { return raised_.load(std::memory_order_relaxed); }

  void raise() {
    {
      std::lock_guard lock(mu_);
      raised_.store(true, std::memory_order_relaxed);
    }
    cv_.notify_all();
  }

  /// Blocks until raise().
  void wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return raised(); });
  }

 private:
  std::atomic<bool> raised_{false};
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace bench
