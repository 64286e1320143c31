// The deadline timer's thread: sleeps until the earliest deadline, ends the
// calls that are still pending then, and sweeps out calls that completed.
#include "runtime/deadline_timer.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>

#include "myelin/async.h"
#include "runtime/clock.h"
#include "runtime/endpoint_impl.h"
#include "runtime/thread_name.h"

namespace myelin::detail {

DeadlineTimer& DeadlineTimer::instance() {
  // Never destroyed: its thread may be asleep in a wait when the process
  // exits, and states it holds are reachable from it.
  static DeadlineTimer* timer = new DeadlineTimer();
  return *timer;
}

DeadlineTimer::DeadlineTimer()
    : thread_([this] {
        nameThisThread("myelin-deadline");
        run();
      }) {
  thread_.detach();
}

std::size_t DeadlineTimer::size() {
  std::lock_guard lock(mu_);
  return heap_.size();
}

void DeadlineTimer::add(AsyncStateBase* state, std::int64_t deadlineNs) {
  state->addRef();
  std::vector<AsyncStateBase*> done;
  {
    std::lock_guard lock(mu_);
    if (heap_.size() >= sweepAt_) done = sweepLocked();
    heap_.push_back({deadlineNs, state});
    std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
    if (heap_.front().state == state) cv_.notify_one();  // a new earliest deadline
  }
  for (AsyncStateBase* s : done) s->release();
}

std::vector<AsyncStateBase*> DeadlineTimer::sweepLocked() {
  std::vector<AsyncStateBase*> done;
  auto firstDone = std::partition(heap_.begin(), heap_.end(), [](const Entry& e) { return !e.state->isReady(); });
  for (auto it = firstDone; it != heap_.end(); ++it) done.push_back(it->state);
  heap_.erase(firstDone, heap_.end());
  std::make_heap(heap_.begin(), heap_.end(), std::greater<>());
  sweepAt_ = std::max(kMinSweep, heap_.size() * 2);
  return done;
}

void DeadlineTimer::run() {
  std::unique_lock lock(mu_);
  std::int64_t lastSweep = steadyNowNs();
  for (;;) {
    if (heap_.empty()) {
      cv_.wait(lock);
      continue;
    }
    std::int64_t now = steadyNowNs();
    if (now - lastSweep >= kSweepEveryNs) {
      // Completed calls hold their values until swept: at most this long.
      lastSweep = now;
      std::vector<AsyncStateBase*> done = sweepLocked();
      lock.unlock();
      for (AsyncStateBase* s : done) s->release();
      lock.lock();
      continue;
    }
    if (heap_.front().at > now) {
      cv_.wait_for(lock, std::chrono::nanoseconds(std::min(heap_.front().at - now, kSweepEveryNs)));
      continue;
    }
    std::vector<AsyncStateBase*> due;
    while (!heap_.empty() && heap_.front().at <= now) {
      std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
      due.push_back(heap_.back().state);
      heap_.pop_back();
    }
    lock.unlock();
    for (AsyncStateBase* s : due) {
      try {
        if (!s->isReady()) {
          // Completing posts the callbacks to the call's endpoint: keep it
          // alive meanwhile. One that is gone failed its calls already.
          // (Should the application drop the endpoint's last handle
          // meanwhile, the endpoint is destroyed on this thread.)
          if (std::shared_ptr<EndpointImpl> ep = EndpointImpl::pin(s->endpoint())) {
            s->completeWithError(AsyncError::kTimedOut, "no reply within the call's CallTimeout");
          }
        }
      } catch (...) {
        // Out of memory while posting: the call ends when its connection does.
      }
      s->release();
    }
    lock.lock();
  }
}

}  // namespace myelin::detail
