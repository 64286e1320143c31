// LightMutex: a mutex for short, rarely contended critical sections (a
// lane's queues and its send buffer, a pool of kept values), taken and given
// back with one atomic instruction each, sleeping in std::atomic::wait (a
// futex on Linux) only under contention.
#pragma once

#include <atomic>
#include <cstdint>

namespace myelin::detail {

/// Meets Lockable (std::lock_guard, std::unique_lock). Not recursive, no
/// owner tracking, no fairness: a thread that gives it back may take it
/// again before a sleeping one wakes. pthread_mutex_lock and unlock cost ~55
/// instructions a pair, and a call takes several (callgrind: 174
/// instructions a call of RoundTripSmallMsgAsyncCB's client in them; a
/// one-way call sent by StreamSmallMsgFromServer's service took 527 -> 469
/// with this one).
class LightMutex {
 public:
  LightMutex() = default;
  LightMutex(const LightMutex&) = delete;
  LightMutex& operator=(const LightMutex&) = delete;

  void lock() noexcept {
    std::uint32_t seen = kFree;
    if (state_.compare_exchange_strong(seen, kHeld, std::memory_order_acquire, std::memory_order_relaxed))
        [[likely]] {
      return;
    }
    lockContended(seen);
  }

  bool try_lock() noexcept {
    std::uint32_t seen = kFree;
    return state_.compare_exchange_strong(seen, kHeld, std::memory_order_acquire, std::memory_order_relaxed);
  }

  void unlock() noexcept {
    if (state_.exchange(kFree, std::memory_order_release) == kHeldWithSleepers) [[unlikely]] {
      state_.notify_one();
    }
  }

 private:
  // The three-state futex mutex ("Futexes Are Tricky", U. Drepper): a
  // thread about to sleep marks the mutex so that its holder wakes one
  // sleeper when it gives it back; a woken thread takes it marked, since
  // others may still sleep.
  static constexpr std::uint32_t kFree = 0, kHeld = 1, kHeldWithSleepers = 2;

  void lockContended(std::uint32_t seen) noexcept {
    if (seen != kHeldWithSleepers) seen = state_.exchange(kHeldWithSleepers, std::memory_order_acquire);
    while (seen != kFree) {
      state_.wait(kHeldWithSleepers, std::memory_order_relaxed);
      seen = state_.exchange(kHeldWithSleepers, std::memory_order_acquire);
    }
  }

  std::atomic<std::uint32_t> state_{kFree};
};

}  // namespace myelin::detail
