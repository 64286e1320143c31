// DeadlineTimer: one thread per process that ends async calls whose
// CallTimeout ran out before their reply came (docs/async-and-errors.md §3).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace myelin::detail {

class AsyncStateBase;

class DeadlineTimer {
 public:
  /// The process's timer (started on first use, never stopped).
  static DeadlineTimer& instance();

  /// Completes `state`, a pending remote call, with AsyncError::kTimedOut at
  /// `deadlineNs` (steady clock) unless it completed first. Holds a
  /// reference to it meanwhile.
  void add(AsyncStateBase* state, std::int64_t deadlineNs);

  /// Entries held now (completed ones included until they are swept).
  std::size_t size();

 private:
  DeadlineTimer();
  void run();
  /// Drops entries whose state completed already (mu_ held); returns their
  /// references to release once mu_ is released.
  std::vector<AsyncStateBase*> sweepLocked();

  struct Entry {
    std::int64_t at;
    AsyncStateBase* state;
    bool operator>(const Entry& o) const { return at > o.at; }
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Entry> heap_;  // a min-heap on `at`
  // Sweep when the heap reaches this size: states that complete before
  // their deadline stay in the heap until then, so it holds at most about
  // twice the calls that are really pending (and at least this floor).
  static constexpr std::size_t kMinSweep = 1024;
  // ... and every 100 ms, so that completed calls do not keep their values
  // alive until their deadline.
  static constexpr std::int64_t kSweepEveryNs = 100'000'000;
  std::size_t sweepAt_ = kMinSweep;
  std::thread thread_;
};

}  // namespace myelin::detail
