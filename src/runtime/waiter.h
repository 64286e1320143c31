// Waiter: how a blocked thread is woken. Each thread has one; a thread that
// waits for a reply registers it with its lanes so that both the reply and
// calls addressed to it (continuations) wake it. It is an eventfd, so the
// same wait can also watch a socket (a caller reading its own reply).
#pragma once

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>

namespace myelin::detail {

struct Waiter {
  std::mutex mu;
  bool signaled = false;  // guarded by mu; while true the eventfd holds 1, unless the owner signaled itself
  int efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  const std::thread::id owner = std::this_thread::get_id();

  Waiter() = default;
  Waiter(const Waiter&) = delete;
  Waiter& operator=(const Waiter&) = delete;
  ~Waiter() {
    if (efd >= 0) ::close(efd);
  }

  /// Wakes the owner. Done under the mutex, so once the owner has passed
  /// `barrier()` no notifier can still be touching this object (it lives in a
  /// thread-local that dies with its thread).
  void notify() {
    std::lock_guard lock(mu);
    signalLocked();
  }
  /// Runs `publish` (which makes the owner's wait condition true) and wakes
  /// the owner, atomically with respect to barrier().
  template <class F>
  void notifyWith(F&& publish) {
    std::lock_guard lock(mu);
    publish();
    signalLocked();
  }
  /// Returns once no notify() that the owner may have seen is still running.
  void barrier() { std::lock_guard lock(mu); }

  /// Blocks until notified (consuming the notification) or `deadline`.
  template <class Clock, class Dur>
  void waitUntil(std::chrono::time_point<Clock, Dur> deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    waitOrReadable(-1, left < 0 ? 0 : static_cast<int>(left) + 1);
  }
  void wait() { waitOrReadable(-1, -1); }

  /// Blocks until notified, until `fd` (if >= 0) is readable, or for
  /// `timeoutMs` (< 0: no limit). Consumes a notification; returns true if
  /// `fd` is readable (or hung up).
  bool waitOrReadable(int fd, int timeoutMs) { return waitOrReady(fd, POLLIN, timeoutMs) != 0; }

  /// Like waitOrReadable for any poll `events` of `fd`; returns the events
  /// that occurred (0 when woken by a notification or the timeout).
  short waitOrReady(int fd, short events, int timeoutMs) {
    {
      std::lock_guard lock(mu);
      if (signaled) {
        consumeLocked();
        return 0;
      }
    }
    pollfd p[2] = {{efd, POLLIN, 0}, {fd, events, 0}};
    int n;
    do {
      n = ::poll(p, fd >= 0 ? 2 : 1, timeoutMs);
    } while (n < 0 && errno == EINTR);
    {
      std::lock_guard lock(mu);
      if (signaled) consumeLocked();
    }
    return fd >= 0 && n > 0 ? p[1].revents : 0;
  }

 private:
  void signalLocked() {
    if (signaled) return;
    signaled = true;
    // The owner is awake when it notifies itself (it read its own reply):
    // the flag is enough, and the syscall is saved.
    if (std::this_thread::get_id() == owner) return;
    std::uint64_t one = 1;
    [[maybe_unused]] auto r = ::write(efd, &one, sizeof one);
  }
  void consumeLocked() {
    signaled = false;
    std::uint64_t v;
    [[maybe_unused]] auto r = ::read(efd, &v, sizeof v);
  }
};

}  // namespace myelin::detail
