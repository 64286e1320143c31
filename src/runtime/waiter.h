// Waiter: how a blocked thread is woken. Each thread has one; a thread that
// waits for a reply registers it with its lanes so that both the reply and
// calls addressed to it (continuations) wake it. It is an eventfd, so the
// same wait can also watch a socket (a caller reading its own reply).
#pragma once

#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>

namespace myelin::detail {

/// How long a thread that waits for its socket again and again (an
/// endpoint's reader) polls before it sleeps. It keeps two averages: how
/// long its waits last (a wait that slept counted with its wake-up, which is
/// what polling saves) and how long it works between them (reading, running
/// the calls it read, writing their replies). While its waits last less
/// than `max` (pollSpinMaxUs) on average, it polls for twice the shorter of
/// the two averages, between `base` (pollSpinUs) and `max`; otherwise
/// `base`. Bounding the window by the work keeps polling in proportion to
/// what it speeds up: batches that take 100-250 us to answer earn a long
/// window, while single calls a few hundred us apart, each a few us of
/// work, keep the base (a long window there kept a CPU polling for 5,000
/// calls/s, and on 2 busy CPUs raised their p99 from ~100 us to 1.5 ms).
/// Each sample counts as at most 2 * max, so a few short waits bring the
/// window back after an idle spell.
class AdaptiveSpin {
 public:
  AdaptiveSpin(std::uint32_t baseUs, std::uint32_t maxUs) : baseUs_(baseUs), maxUs_(maxUs) {}

  std::uint32_t spinUs() const {
    if (baseUs_ == 0 || maxUs_ <= baseUs_) return baseUs_;
    if (waitAvgNs_ / 1000 >= maxUs_) return baseUs_;
    const std::int64_t windowUs = 2 * std::min(waitAvgNs_, workAvgNs_) / 1000;
    return static_cast<std::uint32_t>(std::clamp<std::int64_t>(windowUs, baseUs_, maxUs_));
  }
  /// The thread starts a wait at `nowNs`: the time since the last one ended
  /// was work.
  void waitStarts(std::int64_t nowNs) {
    if (waitEndNs_ != kNone) noteWork(nowNs - waitEndNs_);
    waitStartNs_ = nowNs;
  }
  /// The wait begun by waitStarts() ends at `nowNs`.
  void waitEnds(std::int64_t nowNs) {
    noteWait(nowNs - waitStartNs_);
    waitEndNs_ = nowNs;
  }
  /// Something other than work came between two waits (the thread left the
  /// socket to a caller that watched it): the span is not counted.
  void interrupt() { waitEndNs_ = kNone; }

  void noteWait(std::int64_t ns) { follow(waitAvgNs_, ns); }
  void noteWork(std::int64_t ns) { follow(workAvgNs_, ns); }
  std::int64_t averageWaitNs() const { return waitAvgNs_; }
  std::int64_t averageWorkNs() const { return workAvgNs_; }

 private:
  static constexpr std::int64_t kNone = -1;
  void follow(std::int64_t& avg, std::int64_t ns) {
    const std::int64_t cap = 2 * static_cast<std::int64_t>(maxUs_) * 1000;
    avg += (std::clamp<std::int64_t>(ns, 0, cap) - avg) / 8;
  }

  std::uint32_t baseUs_;
  std::uint32_t maxUs_;
  std::int64_t waitAvgNs_ = 0;
  std::int64_t workAvgNs_ = 0;
  std::int64_t waitStartNs_ = 0;
  std::int64_t waitEndNs_ = kNone;
};

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
  /// that occurred (0 when woken by a notification or the timeout). With
  /// `spinUs` > 0 and a socket to watch, it polls without sleeping for up
  /// to that long before it sleeps, yielding the CPU between polls, unless
  /// another thread of the process is polling so: what arrives meanwhile
  /// costs no wake-up of this thread (EndpointConfig::pollSpinUs).
  short waitOrReady(int fd, short events, int timeoutMs, std::uint32_t spinUs = 0) {
    {
      std::lock_guard lock(mu);
      if (signaled) {
        consumeLocked();
        return 0;
      }
    }
    pollfd p[2] = {{efd, POLLIN, 0}, {fd, events, 0}};
    const nfds_t count = fd >= 0 ? 2 : 1;
    int n = 0;
    // One thread of the process polls at a time, and it yields between
    // polls: without both, 4 sync callers on 4 connections fell from 120 k
    // to 16 k calls/s on 2 cores (the woken callers waited for the pollers'
    // windows to end); with one poller but no yield, to 36 k.
    int idle = 0;
    if (spinUs > 0 && fd >= 0 && timeoutMs != 0 && spinning().load(std::memory_order_relaxed) == 0 &&
        spinning().compare_exchange_strong(idle, 1, std::memory_order_acquire)) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(spinUs);
      do {
        n = ::poll(p, count, 0);
        if (n == 0) sched_yield();
      } while (n == 0 && std::chrono::steady_clock::now() < until);
      spinning().store(0, std::memory_order_release);
    }
    while (n <= 0) {  // nothing yet (or EINTR): sleep
      n = ::poll(p, count, timeoutMs);
      if (n == 0 || (n < 0 && errno != EINTR)) break;
    }
    {
      std::lock_guard lock(mu);
      if (signaled) consumeLocked();
    }
    return fd >= 0 && n > 0 ? p[1].revents : 0;
  }

 private:
  /// 1 while a thread of the process polls before sleeping.
  static std::atomic<int>& spinning() {
    static std::atomic<int> s{0};
    return s;
  }
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
