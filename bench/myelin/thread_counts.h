// Per-thread call counters for the raw benchmark's service and client:
// each thread writes only its own counters (no shared cache line at tens of
// millions of calls per second); sum() reads them all from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "raw_api.h"

namespace bench {

struct ThreadCounts {
  std::atomic<std::uint64_t> received{0};
  std::atomic<std::uint64_t> mismatched{0};
  std::atomic<std::uint64_t> valueSum{0};
};

class CountRegistry {
 public:
  ThreadCounts& mine() {
    thread_local std::shared_ptr<ThreadCounts> counts = add();
    return *counts;
  }
  RawCounts sum() {
    std::lock_guard lock(mu_);
    RawCounts c;
    for (auto& t : all_) {
      c.received += t->received.load(std::memory_order_relaxed);
      c.mismatched += t->mismatched.load(std::memory_order_relaxed);
      c.valueSum += t->valueSum.load(std::memory_order_relaxed);
    }
    return c;
  }

 private:
  std::shared_ptr<ThreadCounts> add() {
    auto t = std::make_shared<ThreadCounts>();
    std::lock_guard lock(mu_);
    all_.push_back(t);  // kept after the thread exits: its counts still count
    return t;
  }
  std::mutex mu_;
  std::vector<std::shared_ptr<ThreadCounts>> all_;
};

/// Adds to a counter only its own thread writes (no atomic read-modify-write).
inline void bump(std::atomic<std::uint64_t>& a, std::uint64_t by = 1) {
  a.store(a.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

}  // namespace bench
