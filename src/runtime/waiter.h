// Waiter: how a blocked thread is woken. Each thread has one; a thread that
// waits for a reply registers it with its lanes so that both the reply and
// calls addressed to it (continuations) wake it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace myelin::detail {

struct Waiter {
  std::mutex mu;
  std::condition_variable cv;
  bool signaled = false;

  void notify() {
    {
      std::lock_guard lock(mu);
      signaled = true;
    }
    cv.notify_one();
  }
  /// Blocks until notified or `deadline`; consumes the notification.
  template <class Clock, class Dur>
  void waitUntil(std::chrono::time_point<Clock, Dur> deadline) {
    std::unique_lock lock(mu);
    cv.wait_until(lock, deadline, [&] { return signaled; });
    signaled = false;
  }
  void wait() {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return signaled; });
    signaled = false;
  }
};

}  // namespace myelin::detail
