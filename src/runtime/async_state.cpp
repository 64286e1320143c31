// Completion, callbacks and waiters of Async values (see myelin/async.h).
#include <algorithm>

#include "myelin/async.h"
#include "runtime/waiter.h"

namespace myelin::detail {

bool AsyncStateBase::completeWithValue() {
  std::unique_lock lock(mu_);
  if (status_.load(std::memory_order_relaxed) != kPending) return false;
  status_.store(kValue, std::memory_order_release);
  finishCompletion(lock);
  return true;
}

bool AsyncStateBase::completeWithError(AsyncError kind, std::string message) {
  std::unique_lock lock(mu_);
  if (status_.load(std::memory_order_relaxed) != kPending) return false;
  errorKind_ = kind;
  errorMessage_ = std::move(message);
  status_.store(kError, std::memory_order_release);
  finishCompletion(lock);
  return true;
}

void AsyncStateBase::finishCompletion(std::unique_lock<std::mutex>& lock) {
  // Waiters are woken under mu_: a waiter leaves through removeWaiter(),
  // which takes mu_, so none can be destroyed while we notify it.
  for (Waiter* w : waiters_) w->notify();
  waiters_.clear();
  Hook dispatcher = dispatcher_;
  void* arg = dispatcherArg_;
  lock.unlock();
  if (dispatcher) {
    dispatcher(this, arg);
  } else {
    runCallbacks();
  }
}

void AsyncStateBase::addCallback(std::function<void()> cb) {
  std::unique_lock lock(mu_);
  if (!callbacksReleased_) {
    callbacks_.push_back(std::move(cb));
    return;
  }
  lock.unlock();
  cb();
}

void AsyncStateBase::runCallbacks() {
  std::vector<std::function<void()>> cbs;
  {
    std::lock_guard lock(mu_);
    callbacksReleased_ = true;
    cbs.swap(callbacks_);
  }
  for (auto& cb : cbs) cb();
}

void AsyncStateBase::setCallbackDispatcher(Hook hook, void* arg) {
  std::lock_guard lock(mu_);
  dispatcher_ = hook;
  dispatcherArg_ = arg;
}

bool AsyncStateBase::addWaiter(Waiter* w) {
  std::lock_guard lock(mu_);
  if (status_.load(std::memory_order_relaxed) != kPending) return false;
  waiters_.push_back(w);
  return true;
}

void AsyncStateBase::removeWaiter(Waiter* w) {
  std::lock_guard lock(mu_);
  waiters_.erase(std::remove(waiters_.begin(), waiters_.end(), w), waiters_.end());
}

}  // namespace myelin::detail
