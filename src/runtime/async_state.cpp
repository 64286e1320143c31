// Completion, callbacks and waiters of Async values (see myelin/async.h),
// and the per-thread free lists their states are allocated from.
#include <algorithm>
#include <cstdint>

#include "myelin/async.h"
#include "myelin/detail/asan.h"
#include "runtime/uncaught.h"
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

// A pooled state is not freed, so ASan would not see a use after its release:
// its bytes past the list link are poisoned while it waits in the pool.
void poisonPooled(FreeState* f, std::size_t c) {
  ASAN_POISON_MEMORY_REGION(reinterpret_cast<char*>(f) + sizeof(FreeState), (c + 1) * kClassBytes - sizeof(FreeState));
}
void unpoisonPooled(FreeState* f, std::size_t c) { ASAN_UNPOISON_MEMORY_REGION(f, (c + 1) * kClassBytes); }

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
        unpoisonPooled(f, c);
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
    unpoisonPooled(f, c);
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
  poisonPooled(f, c);
}

bool AsyncStateBase::completeWithValue() {
  // The runtime decoded the value into place before (nobody else completes
  // a call's state while its reply is being read).
  std::uint8_t expected = kPending;
  if (!status_.compare_exchange_strong(expected, kValue, std::memory_order_seq_cst)) return false;
  finishCompletion();
  return true;
}

bool AsyncStateBase::completeWithError(AsyncError kind, std::string message) {
  std::uint8_t expected = kPending;
  if (!status_.compare_exchange_strong(expected, kFilling, std::memory_order_acquire)) return false;
  errorKind_ = kind;
  errorMessage_ = std::move(message);
  status_.store(kError, std::memory_order_seq_cst);
  finishCompletion();
  return true;
}

void AsyncStateBase::finishCompletion() {
  // Pairs with addWaiter(): it publishes hasWaiters_ and then reads status_;
  // we published status_ and now read hasWaiters_ (both seq_cst), so at
  // least one of us sees the other. Waiters are woken under mu_: a waiter
  // leaves through removeWaiter(), which takes mu_, so none can be
  // destroyed while we notify it.
  if (hasWaiters_.load(std::memory_order_seq_cst)) {
    std::lock_guard lock(mu_);
    if (firstWaiter_) firstWaiter_->notify();
    firstWaiter_ = nullptr;
    for (Waiter* w : moreWaiters_) w->notify();
    moreWaiters_.clear();
  }
  // The dispatcher is set before the state is published to the thread that
  // completes it (setCallbackDispatcher).
  if (dispatcher_) {
    dispatcher_(this, dispatcherArg_);
  } else {
    runCallbacksHeld();  // the completing handle may be the last reference
  }
}

void AsyncStateBase::addCallback(InlineCallback cb) {
  std::uint8_t slot = kSlotEmpty;
  if (cbSlot_.compare_exchange_strong(slot, kSlotWriting, std::memory_order_acquire)) {
    firstCallback_ = std::move(cb);
    std::uint8_t writing = kSlotWriting;
    if (cbSlot_.compare_exchange_strong(writing, kSlotFilled, std::memory_order_seq_cst)) return;
    // Released while we stored it: runCallbacks() has gone by; run it here.
    InlineCallback mine = std::move(firstCallback_);
    runHeld(mine);
    return;
  }
  // Run here, on the thread adding it: its exception still goes to the
  // UncaughtHandler, as from the runtime's threads (whether the value was
  // complete when then() was called is a race the caller cannot see).
  if (slot == kSlotReleased) {
    runHeld(cb);
    return;
  }
  // The slot holds an earlier callback: this one queues behind it. Publish
  // hasMore_ before looking at the slot again; runCallbacks() releases the
  // slot before it reads hasMore_ (both seq_cst), so it takes this callback
  // or we see the slot released and run it ourselves.
  std::unique_lock lock(mu_);
  hasMore_.store(true, std::memory_order_seq_cst);
  if (cbSlot_.load(std::memory_order_seq_cst) == kSlotReleased) {
    lock.unlock();
    runHeld(cb);
    return;
  }
  moreCallbacks_.push_back(std::move(cb));
}

void AsyncStateBase::runHeld(InlineCallback& cb) {
  // The caller's handle may be the last reference, and the callback may
  // drop it (a callback that replaces the handle it was registered on): a
  // callback that takes the Async as its argument holds none of its own.
  addRef();
  runReporting("Async callback", cb);
  release();  // may delete this
}

void AsyncStateBase::runCallbacksHeld() {
  addRef();
  runCallbacks();
  release();  // may delete this
}

void AsyncStateBase::runCallbacks() {
  std::uint8_t prev = cbSlot_.exchange(kSlotReleased, std::memory_order_seq_cst);
  std::vector<InlineCallback> more;
  if (hasMore_.load(std::memory_order_seq_cst)) {
    std::lock_guard lock(mu_);
    more.swap(moreCallbacks_);
  }
  // A callback that throws does not keep the others from running, and its
  // exception never reaches whoever completed the value. The first runs
  // where it was stored: once the slot is released nothing else touches it,
  // and every caller holds a reference, so the state outlives the run.
  if (prev == kSlotFilled) {
    runReporting("Async callback", firstCallback_);
    firstCallback_.reset();
  }
  for (auto& cb : more) runReporting("Async callback", cb);
}

void AsyncStateBase::setCallbackDispatcher(Hook hook, void* arg) {
  dispatcher_ = hook;
  dispatcherArg_ = arg;
}

bool AsyncStateBase::addWaiter(Waiter* w) {
  std::lock_guard lock(mu_);
  if (!firstWaiter_) {
    firstWaiter_ = w;
  } else {
    moreWaiters_.push_back(w);
  }
  hasWaiters_.store(true, std::memory_order_seq_cst);
  std::uint8_t st = status_.load(std::memory_order_seq_cst);
  if (st == kValue || st == kError) {  // completed meanwhile, and perhaps without seeing us
    if (firstWaiter_ == w) {
      firstWaiter_ = nullptr;
    } else {
      moreWaiters_.erase(std::remove(moreWaiters_.begin(), moreWaiters_.end(), w), moreWaiters_.end());
    }
    return false;
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
