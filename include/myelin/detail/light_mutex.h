// LightMutex: a mutex for short, rarely contended critical sections (a TLS
// session, the reader's claim), taken and given back with one atomic
// instruction each, sleeping in std::atomic::wait (a futex on Linux) only
// under contention. SpinMutex: the locks every call takes (a lane's two, a
// pool of kept values), given back with a plain store.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

namespace myelin::detail {

/// Tells the CPU that this thread spins on a value another thread will
/// change: x86's `pause` and Arm's `yield` give the core's resources to its
/// sibling hyperthread and keep the loop from flooding memory with loads.
inline void cpuRelax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  asm volatile("yield" ::: "memory");
#endif
}

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

/// SpinMutex: a lane's two locks, over its send buffer and over its receive
/// queues and pending replies, and a kept-value pool's (kept_values.h). Each
/// is taken for every call by the thread that makes or runs it, and by
/// others now and then for a few instructions (a flush swapping the buffer
/// out, the reader routing a frame or a reply, a thread giving a value
/// back). It is given back with a plain release store, no atomic
/// read-modify-write: no one sleeps on it, so there is no one to wake. A
/// thread that finds it held spins, then yields, then naps for 50 us at a
/// time: a holder copying a large frame or encoding a large argument may
/// keep it for milliseconds, and a nap costs about what a wake-up did. Side
/// by side with LightMutex: StreamSmallMsgFromServer's service, sending
/// one-way calls back to back, 26.7-27.2 -> 28.6-29.9 M calls/s (the send
/// buffer's); RoundTripSmallMsgAsyncCB, 3.37-3.43 -> 3.51-3.52 M/s at 1
/// thread and 5.23-5.27 -> 5.55-5.58 M/s at 100 (the receive side's too).
class SpinMutex {
 public:
  SpinMutex() = default;
  SpinMutex(const SpinMutex&) = delete;
  SpinMutex& operator=(const SpinMutex&) = delete;

  void lock() noexcept {
    if (!held_.exchange(true, std::memory_order_acquire)) [[likely]] return;
    lockContended();
  }

  bool try_lock() noexcept {
    return !held_.load(std::memory_order_relaxed) && !held_.exchange(true, std::memory_order_acquire);
  }

  void unlock() noexcept { held_.store(false, std::memory_order_release); }

 private:
  static constexpr unsigned kSpins = 64, kYields = 64;

  __attribute__((noinline)) void lockContended() noexcept {
    for (unsigned i = 0;; ++i) {
      if (try_lock()) return;
      if (i < kSpins) {
        cpuRelax();
      } else if (i < kSpins + kYields) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  }

  std::atomic<bool> held_{false};
};

}  // namespace myelin::detail
