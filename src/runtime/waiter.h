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

  /// Wakes the owner. The notification happens under the mutex, so once
  /// the owner has passed `barrier()` no notifier can still be touching this
  /// object (it lives in a thread-local that dies with its thread).
  void notify() {
    std::lock_guard lock(mu);
    signaled = true;
    cv.notify_one();
  }
  /// Runs `publish` (which makes the owner's wait condition true) and wakes
  /// the owner, atomically with respect to barrier().
  template <class F>
  void notifyWith(F&& publish) {
    std::lock_guard lock(mu);
    publish();
    signaled = true;
    cv.notify_one();
  }
  /// Returns once no notifyWith() that published a condition the owner has
  /// seen is still running.
  void barrier() { std::lock_guard lock(mu); }
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
