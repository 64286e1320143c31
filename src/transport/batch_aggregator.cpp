// The timer thread: deferred flushes and the inline-execution watch (see
// batch_aggregator.h and docs/threading.md).
#include "transport/batch_aggregator.h"

#include <algorithm>
#include <limits>

#include "runtime/clock.h"
#include "runtime/endpoint_impl.h"
#include "runtime/executor.h"
#include "runtime/thread_name.h"

namespace myelin::detail {

BatchAggregator& BatchAggregator::instance() {
  static BatchAggregator* a = new BatchAggregator();  // lives until exit
  return *a;
}

void BatchAggregator::arm(const std::shared_ptr<EndpointImpl>& ep, std::uint32_t delayUs) {
  push({std::chrono::steady_clock::now() + std::chrono::microseconds(delayUs), ep});
}

void BatchAggregator::armLaneTrim(const std::shared_ptr<EndpointImpl>& ep, std::chrono::nanoseconds delay) {
  push({std::chrono::steady_clock::now() + delay, ep, true});
}

void BatchAggregator::push(Due due) {
  bool earliest;
  {
    std::lock_guard lock(mu_);
    const auto at = due.at;
    queue_.push_back(std::move(due));
    std::push_heap(queue_.begin(), queue_.end());
    earliest = queue_.front().at == at;
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  // The timer thread already sleeps until an earlier time and looks at the
  // queue again then: wake it only when this one is due first.
  if (earliest) cv_.notify_one();
}

void BatchAggregator::watchInline(EndpointImpl& ep) {
  // seq_cst with tick(): either we see ticking_ cleared, or the tick that
  // clears it sees this activity.
  lastInlineNs_.store(steadyNowNs());
  bool first = !ep.inlineWatched_.exchange(true, std::memory_order_acq_rel);
  if (!first && ticking_.load()) return;
  {
    std::lock_guard lock(mu_);
    if (first) {
      std::erase_if(watched_, [](const std::weak_ptr<EndpointImpl>& w) { return w.expired(); });
      try {
        watched_.push_back(ep.weak_from_this());
      } catch (...) {
        ep.inlineWatched_.store(false);  // out of memory: the next watch lists it
        throw;
      }
    }
    if (!ticking_.exchange(true)) {
      watchPeriod_ = kInlineLimit;
      nextTick_ = std::chrono::steady_clock::now() + kInlineLimit;
    }
    if (!thread_.joinable()) {
      try {
        thread_ = std::thread([this] { run(); });
      } catch (...) {
        ticking_.store(false);  // no thread ticks: the next watch starts one
        throw;
      }
    }
  }
  cv_.notify_one();
}

void BatchAggregator::run() {
  using Clock = std::chrono::steady_clock;
  // Like a reader, this thread must never wait for a socket to take a
  // backlog: every deferred flush and watch of the process goes through it.
  nameThisThread("myelin-timer");
  threadState().isReader = true;
  std::unique_lock lock(mu_);
  for (;;) {
    auto next = Clock::time_point::max();
    if (!queue_.empty()) next = queue_.front().at;
    if (ticking_.load() && nextTick_ < next) next = nextTick_;
    if (next == Clock::time_point::max()) {
      cv_.wait(lock);
    } else {
      cv_.wait_until(lock, next);
    }
    auto now = Clock::now();
    while (!queue_.empty() && queue_.front().at <= now) {
      std::pop_heap(queue_.begin(), queue_.end());
      std::weak_ptr<EndpointImpl> weak = std::move(queue_.back().ep);
      const bool trimLanes = queue_.back().trimLanes;
      queue_.pop_back();
      lock.unlock();
      if (auto ep = weak.lock()) {
        if (trimLanes) {
          ep->trimIdleLanes();
        } else {
          ep->flushOnTimer();
        }
      }
      lock.lock();
    }
    if (ticking_.load() && now >= nextTick_) {
      lock.unlock();
      auto next = tick(now);
      lock.lock();
      // A reader that started the watch again meanwhile set an earlier look.
      nextTick_ = nextTick_ > now ? std::min(nextTick_, next) : next;
    }
  }
}

std::chrono::steady_clock::time_point BatchAggregator::tick(std::chrono::steady_clock::time_point now) {
  std::vector<std::shared_ptr<EndpointImpl>>& eps = tickEps_;  // kept: a tick allocates nothing
  {
    std::lock_guard lock(mu_);
    for (auto& w : watched_) {
      if (auto ep = w.lock()) eps.push_back(std::move(ep));
    }
  }
  std::int64_t nowNs = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  std::int64_t limitNs = std::chrono::duration_cast<std::chrono::nanoseconds>(kInlineLimit).count();
  std::int64_t runLimitNs = std::chrono::duration_cast<std::chrono::nanoseconds>(kShortRunLimit).count();
  bool overLimit = false;
  bool running = false;  // an inline run goes on whose claimed lanes may still need releasing
  std::int64_t soonest = std::numeric_limits<std::int64_t>::max();  // a run in progress reaching the limit
  for (auto& ep : eps) {
    std::int64_t since = ep->inlineStartNs_.load(std::memory_order_relaxed);
    if (since && nowNs - since > limitNs) {
      overLimit = true;
      // One lane's turn taking long (a long call) must not hold up the
      // lanes claimed after it, nor what arrives meanwhile: the lanes not
      // yet started go to the executor, and an executor reads until the
      // reader is back. Many short turns may take their time, and nobody
      // else reads meanwhile until the run has gone on for kShortRunLimit:
      // a second thread reading beside them takes a core from them and
      // from the peer. A client's reader running the replies of 12,800
      // calls in flight (RoundTripMediumMsgAsyncCB, 100 x 128), in runs
      // over 1 ms, went from 5.9-6.1 to 6.4-6.6 M calls/s without it, and
      // from 3.2-3.4 to 3.8-4.0 M with TLS (docs/benchmarks.md).
      std::int64_t lane = ep->claimLaneNs_.load(std::memory_order_relaxed);
      const bool longTurn = !lane || nowNs - lane > limitNs;
      if (longTurn) {
        ep->releaseClaims();  // none left in this run: nothing more to watch
      } else {
        running = true;
      }
      if ((longTurn || nowNs - since > runLimitNs) && !ep->followerActive_.exchange(true, std::memory_order_acq_rel)) {
        Executor::instance().post(ep, nullptr);
      }
    } else if (since) {
      running = true;
      soonest = std::min(soonest, since + limitNs);
    }
    // Frames staged while a thread runs this endpoint's frames leave when
    // that thread goes idle; if it has been busy for long, send them now.
    std::int64_t deferred = ep->deferredSinceNs_.load(std::memory_order_relaxed);
    if (deferred && nowNs - deferred > limitNs) {
      overLimit = true;
      ep->flush();
    } else if (deferred) {
      soonest = std::min(soonest, deferred + limitNs);
    }
  }
  eps.clear();
  std::chrono::steady_clock::time_point next;
  {
    std::lock_guard lock(mu_);
    watchPeriod_ = overLimit ? std::chrono::steady_clock::duration(kInlineLimit)
                             : std::min<std::chrono::steady_clock::duration>(watchPeriod_ * 2, kWatchMaxPeriod);
    next = now + watchPeriod_;
  }
  if (soonest != std::numeric_limits<std::int64_t>::max()) {
    next = std::min(next, now + std::chrono::nanoseconds(soonest - nowNs + 1000));
  }
  std::int64_t linger = std::chrono::duration_cast<std::chrono::nanoseconds>(kWatchLinger).count();
  // Never while a run goes on: a long call may yet come in a later claimed
  // lane of it (releaseClaims).
  if (!running && nowNs - lastInlineNs_.load(std::memory_order_relaxed) > linger) {
    std::lock_guard lock(mu_);
    // Clear first, then look again: a reader that started meanwhile either
    // sees the flag cleared (and notifies) or its time is seen here.
    ticking_.store(false);
    if (steadyNowNs() - lastInlineNs_.load() <= linger) ticking_.store(true);
  }
  return next;
}

}  // namespace myelin::detail
