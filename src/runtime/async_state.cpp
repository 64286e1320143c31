// Completion, callbacks and waiters of Async values (see myelin/async.h),
// and the per-thread free lists their states are allocated from.
#include <algorithm>
#include <cstdint>

#include "myelin/async.h"
#include "runtime/waiter.h"

namespace myelin::detail {

namespace {

// Free lists of Async states by size class, one set per thread. A state is
// usually freed on the thread that ran its callbacks, which is the thread
// that makes the next call there, so the lists stay balanced; a thread
// keeps at most kKeepPerClass states per class and frees the rest.
constexpr std::size_t kClassBytes = 64;
constexpr std::size_t kClasses = 8;  // states up to 512 bytes; larger ones use the heap
constexpr std::uint32_t kKeepPerClass = 256;

struct FreeState {
  FreeState* next;
};

// Trivially destructible, so still usable while the thread's other
// thread-locals are destroyed (which may free states).
struct StatePool {
  FreeState* head[kClasses];
  std::uint32_t count[kClasses];
  bool reaperArmed;
  bool dead;
};
thread_local StatePool tlsPool{};

struct PoolReaper {
  ~PoolReaper() {
    for (std::size_t c = 0; c < kClasses; ++c) {
      while (FreeState* f = tlsPool.head[c]) {
        tlsPool.head[c] = f->next;
        ::operator delete(f);
      }
      tlsPool.count[c] = 0;
    }
    tlsPool.dead = true;
  }
};
thread_local PoolReaper tlsReaper;

std::size_t sizeClass(std::size_t n) { return (n + kClassBytes - 1) / kClassBytes - 1; }

}  // namespace

void* AsyncStateBase::operator new(std::size_t n) {
  std::size_t c = sizeClass(n);
  if (c >= kClasses) return ::operator new(n);
  StatePool& pool = tlsPool;
  if (FreeState* f = pool.head[c]) {
    pool.head[c] = f->next;
    --pool.count[c];
    return f;
  }
  return ::operator new((c + 1) * kClassBytes);
}

void AsyncStateBase::operator delete(void* p, std::size_t n) noexcept {
  std::size_t c = sizeClass(n);
  StatePool& pool = tlsPool;
  if (c >= kClasses || pool.dead || pool.count[c] >= kKeepPerClass) {
    ::operator delete(p);
    return;
  }
  if (!pool.reaperArmed) {
    pool.reaperArmed = true;
    (void)&tlsReaper;  // constructs it: it frees the lists at thread exit
  }
  auto* f = static_cast<FreeState*>(p);
  f->next = pool.head[c];
  pool.head[c] = f;
  ++pool.count[c];
}

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
  if (firstWaiter_) firstWaiter_->notify();
  firstWaiter_ = nullptr;
  for (Waiter* w : moreWaiters_) w->notify();
  moreWaiters_.clear();
  Hook dispatcher = dispatcher_;
  void* arg = dispatcherArg_;
  lock.unlock();
  if (dispatcher) {
    dispatcher(this, arg);
  } else {
    runCallbacks();
  }
}

void AsyncStateBase::addCallback(InlineCallback cb) {
  std::unique_lock lock(mu_);
  if (!callbacksReleased_) {
    if (!firstCallback_ && moreCallbacks_.empty()) {
      firstCallback_ = std::move(cb);
    } else {
      moreCallbacks_.push_back(std::move(cb));
    }
    return;
  }
  lock.unlock();
  cb();
}

void AsyncStateBase::runCallbacks() {
  InlineCallback first;
  std::vector<InlineCallback> more;
  {
    std::lock_guard lock(mu_);
    callbacksReleased_ = true;
    first = std::move(firstCallback_);
    more.swap(moreCallbacks_);
  }
  if (first) first();
  for (auto& cb : more) cb();
}

void AsyncStateBase::setCallbackDispatcher(Hook hook, void* arg) {
  std::lock_guard lock(mu_);
  dispatcher_ = hook;
  dispatcherArg_ = arg;
}

bool AsyncStateBase::addWaiter(Waiter* w) {
  std::lock_guard lock(mu_);
  if (status_.load(std::memory_order_relaxed) != kPending) return false;
  if (!firstWaiter_) {
    firstWaiter_ = w;
  } else {
    moreWaiters_.push_back(w);
  }
  return true;
}

void AsyncStateBase::removeWaiter(Waiter* w) {
  std::lock_guard lock(mu_);
  if (firstWaiter_ == w) {
    firstWaiter_ = nullptr;
  } else {
    moreWaiters_.erase(std::remove(moreWaiters_.begin(), moreWaiters_.end(), w), moreWaiters_.end());
  }
}

}  // namespace myelin::detail
