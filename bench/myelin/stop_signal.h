// A flag the benchmark clients' worker threads block on until the run ends.
// Workers that only keep calls in flight wait here instead of polling with
// short sleeps: a hundred threads waking every few milliseconds cost the
// client tens of thousands of context switches a second.
#pragma once

#include <condition_variable>
#include <mutex>

namespace bench {

class StopSignal {
 public:
  void raise() {
    {
      std::lock_guard lock(mu_);
      raised_ = true;
    }
    cv_.notify_all();
  }

  void wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return raised_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool raised_ = false;
};

}  // namespace bench
