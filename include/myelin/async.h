// Asynchronous return modes: AsyncVoid (tracked fire-and-forget) and
// Async<T> (a value that arrives later). On the calling side Async<T> is the
// handle to the pending reply; in a service it is what a method returns,
// either ready (`return value;`) or completed later from any thread.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <mutex>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "myelin/detail/asan.h"
#include "myelin/detail/inline_callback.h"
#include "myelin/detail/result_slot.h"
#include "myelin/detail/wire_codec.h"
#include "myelin/errors.h"
#include "myelin/result.h"

namespace myelin {

/// Return type of a fire-and-forget method that reports failure: success
/// costs what an AsyncVoid call costs (no reply), and a failure (the
/// service returned an error Status, or threw) is delivered to the
/// AsyncFrame the call was made in, through its onError (an error with no
/// frame to take it faults the endpoint, as AsyncVoid failures do). A
/// service returns `{}`, a Status, or an application enum code. On the
/// calling side the returned value means only "sent".
class AsyncStatus {
 public:
  AsyncStatus() = default;
  AsyncStatus(Status s) : status_(std::move(s)) {}  // NOLINT(google-explicit-constructor)
  template <class E>
    requires std::is_enum_v<E>
  AsyncStatus(E code, std::string message = {})  // NOLINT(google-explicit-constructor)
      : status_(code, std::move(message)) {}
  const Status& status() const { return status_; }

 private:
  Status status_;
};

/// Return type of a fire-and-forget method. The call returns as soon as it
/// is queued; a failure on the service (the handler threw, the method is
/// gone) faults the endpoint, so errors are never silent. A service
/// implementation returns `{}`.
class AsyncVoid {};

/// Why an asynchronous value ended without a value.
enum class AsyncError : std::uint8_t {
  kNone = 0,
  kConnectionClosed,  ///< the endpoint closed or faulted first
  kRemoteError,       ///< the remote handler threw
  kInvalidMessage,    ///< the reply could not be decoded
  kCanceled,          ///< canceled by the caller (Async::cancel)
  kTimedOut,          ///< the call's CallTimeout ran out first
};

namespace detail {

class EndpointImpl;
struct Waiter;
struct CodecCtx;

/// Type-erased shared state of an Async<T>. Reference-counted; completed
/// exactly once, by a value or an error. Thread-safe.
class AsyncStateBase {
 public:
  AsyncStateBase() = default;
  AsyncStateBase(const AsyncStateBase&) = delete;
  AsyncStateBase& operator=(const AsyncStateBase&) = delete;
  virtual ~AsyncStateBase() = default;

  /// States come from per-thread free lists (async_state.cpp): an Async
  /// call costs no heap allocation in steady state.
  static void* operator new(std::size_t n);
  static void operator delete(void* p, std::size_t n) noexcept;
  static void* operator new(std::size_t n, std::align_val_t a) { return ::operator new(n, a); }
  static void operator delete(void* p, std::align_val_t a) noexcept { ::operator delete(p, a); }

  void addRef() { refs_.fetch_add(1, std::memory_order_relaxed); }
  /// addRef() for a state no other thread can reach yet (a call's, before
  /// it is entered as pending): a plain store, no atomic add.
  void addRefUnshared() { refs_.store(refs_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }
  /// User handles (Async<T> copies), counted apart from the runtime's
  /// references: a service result whose last handle goes while it is still
  /// pending can never be completed, so it fails (see watchAbandon). A
  /// call's reply state (bound to an endpoint before anyone else sees it)
  /// is always completed by the runtime, by its reply or by the
  /// connection's end: its handles are not counted. An atomic add and
  /// subtract less per copy of a call's Async.
  void addHandle() {
    if (!endpoint_) handles_.fetch_add(1, std::memory_order_relaxed);
  }
  /// The first handle of a state nobody else sees yet: no atomic add.
  void initHandle() { handles_.store(1, std::memory_order_relaxed); }
  void dropHandle() {
    if (endpoint_) return;
    if (handles_.fetch_sub(1, std::memory_order_acq_rel) == 1 && abandonWatch_.load(std::memory_order_acquire)) {
      completeWithError(AsyncError::kRemoteError, "the service dropped its Async result without completing it");
    }
  }
  /// Arms the check above (the runtime does, for a service method's result
  /// that is sent when it completes).
  void watchAbandon() {
    if (endpoint_) return;  // a call's reply: the runtime completes it
    abandonWatch_.store(true, std::memory_order_release);
    if (handles_.load(std::memory_order_acquire) == 0) {
      completeWithError(AsyncError::kRemoteError, "the service dropped its Async result without completing it");
    }
  }
  /// What a handle's end does: dropHandle() then release(). The sole
  /// holder of a state nobody watches for abandonment (a value made and
  /// sent on one thread, a default Async that is assigned over) deletes it
  /// at once: nobody else can reach it.
  void dropHandleAndRelease() {
    if (refs_.load(std::memory_order_acquire) == 1 && !abandonWatch_.load(std::memory_order_acquire)) {
      destroy();
      return;
    }
    dropHandle();
    release();
  }
  /// Drops a reference. The last one needs no atomic subtract: nobody else
  /// holds one, so nobody can take one (references are only copied by their
  /// holders); the acquire load orders the other holders' last uses before
  /// the delete.
  void release() {
    if (refs_.load(std::memory_order_acquire) == 1 || refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      destroy();
    }
  }

  /// What a call's reply state does when its last reference goes: true
  /// when it took the state back for a later call (generated_support.h,
  /// makeReplyState); false to have it deleted.
  using RecycleFn = bool (*)(AsyncStateBase* self) noexcept;
  void setRecycle(RecycleFn r) { recycle_ = r; }
  /// True when the state ended with its value and holds nothing else a
  /// later call could see: no error, callbacks or waiters beyond the first,
  /// none of them left (recycling needs no more than resetForReuse()).
  bool reusable() const noexcept {
    return status_.load(std::memory_order_relaxed) == kValue && !hasMore_.load(std::memory_order_relaxed) &&
           moreCallbacks_.empty() && !firstCallback_ && firstWaiter_ == nullptr && moreWaiters_.empty() &&
           !abandonWatch_.load(std::memory_order_relaxed);
  }
  /// Makes a reusable() state what a new one is, keeping its codec and
  /// recycle hooks (the derived state keeps its value).
  void resetForReuse() noexcept {
    refs_.store(1, std::memory_order_relaxed);
    handles_.store(0, std::memory_order_relaxed);
    status_.store(kPending, std::memory_order_relaxed);
    cbSlot_.store(kSlotEmpty, std::memory_order_relaxed);
    hasWaiters_.store(false, std::memory_order_relaxed);
    dispatcher_ = nullptr;
    dispatcherArg_ = nullptr;
    endpoint_ = nullptr;
    callSeq_ = 0;
    isCall_ = false;
    endsOnlyByAnswer_ = false;
  }

  bool isReady() const {
    std::uint8_t st = status_.load(std::memory_order_acquire);
    return st == kValue || st == kError;
  }
  bool hasValue() const { return status_.load(std::memory_order_acquire) == kValue; }
  /// True while one handle is all that holds the state and nobody watches
  /// it for abandonment: no other thread can reach it.
  bool soleHolder() const {
    return refs_.load(std::memory_order_acquire) == 1 && !abandonWatch_.load(std::memory_order_acquire);
  }
  AsyncError error() const { return errorKind_; }
  const std::string& errorMessage() const { return errorMessage_; }

  /// Marks the stored value as complete. Returns false if already complete.
  bool completeWithValue();
  /// Stores the value with `fill()` and completes, atomically: of several
  /// racing completions exactly one stores its value. False if already
  /// complete (then `fill` is not called).
  template <class F>
  bool completeWithValueFrom(F&& fill) {
    std::uint8_t expected = kPending;
    if (!status_.compare_exchange_strong(expected, kFilling, std::memory_order_acquire)) return false;
    fill();
    status_.store(kValue, std::memory_order_seq_cst);
    finishCompletion();
    return true;
  }
  /// Completes with an error. Returns false if already complete.
  bool completeWithError(AsyncError kind, std::string message);
  /// Marks a state that no other thread can see yet as holding its value
  /// (an Async made from a value): no lock, nobody to notify or call back.
  void initReady() {
    cbSlot_.store(kSlotReleased, std::memory_order_relaxed);
    status_.store(kValue, std::memory_order_release);
  }

  /// Runs `cb` once the value or error is there (and, for a call's reply,
  /// in order with the calling thread's other callbacks).
  void addCallback(InlineCallback cb);
  /// Runs the queued callbacks now (called by the runtime when it is this
  /// state's turn on its lane). The caller must hold a reference for the
  /// whole call: the first callback runs where it is stored, in this state,
  /// and may drop the last handle.
  void runCallbacks();
  /// runCallbacks() holding a reference meanwhile, for a caller whose only
  /// reference may be a handle that a callback drops (the thread that
  /// completes a value with setValue or cancel).
  void runCallbacksHeld();
  /// True once runCallbacks() ran: for a call's reply, its lane reached it.
  bool callbacksDispatched() const { return cbSlot_.load(std::memory_order_acquire) == kSlotReleased; }
  /// Complete for every thread: ready and, for a call's reply, its lane
  /// reached it. A wait needs no more (waitForState's first test, inline:
  /// value() in a then-callback, once per call of an async client).
  bool settled() const { return isReady() && (!endpoint_ || callbacksDispatched()); }

  /// Serialises / deserialises the value (used by the runtime). The
  /// functions are installed by generated code, which sees the value type's
  /// serialiser; a program that only includes the interface header can still
  /// create and return Async values.
  using EncodeFn = void (*)(const AsyncStateBase* self, WireWriter& w, const CodecCtx& c);
  using DecodeFn = void (*)(AsyncStateBase* self, WireReader& r, const CodecCtx& c);
  /// Takes the value of a state that ends (moved from) for the next decode
  /// of its type (kept_values.h); null for types that are not kept.
  using KeepFn = void (*)(void* value) noexcept;
  void setCodec(EncodeFn e, DecodeFn d, KeepFn k = nullptr) {
    encode_ = e;
    decode_ = d;
    keep_ = k;
  }
  void encodeValue(WireWriter& w, const CodecCtx& c) const { encode_(this, w, c); }
  void decodeValue(WireReader& r, const CodecCtx& c) { decode_(this, r, c); }

  // Hooks set by the runtime.
  using Hook = void (*)(AsyncStateBase* self, void* arg);
  /// Called once on completion, instead of running callbacks inline.
  void setCallbackDispatcher(Hook hook, void* arg);
  void* dispatcherArg() const { return dispatcherArg_; }
  void setEndpoint(EndpointImpl* ep) { endpoint_ = ep; }
  EndpointImpl* endpoint() const { return endpoint_; }
  /// The reply-expecting call this state waits for: its number on the lane
  /// that dispatcherArg() names (caller side only; for cancel()).
  void setCall(std::uint32_t seq) {
    callSeq_ = seq;
    isCall_ = true;
  }
  bool isCall() const { return isCall_; }
  std::uint32_t callSeq() const { return callSeq_; }
  /// Only the peer's answer (or the connection's end) completes this state:
  /// cancel() leaves it alone (an AsyncRef call, docs/async-and-errors.md §2).
  void setEndsOnlyByAnswer() { endsOnlyByAnswer_ = true; }
  bool endsOnlyByAnswer() const { return endsOnlyByAnswer_; }
  /// Registers a thread waiting for completion; false if already complete.
  bool addWaiter(Waiter* w);
  void removeWaiter(Waiter* w);

 private:
  void destroy() noexcept {
    if (recycle_ && recycle_(this)) return;
    delete this;
  }
  void finishCompletion();
  /// Runs a callback on the thread that adds it (the value was complete),
  /// holding a reference meanwhile.
  void runHeld(InlineCallback& cb);

  // Completion, callbacks and waiters take no lock in the common case (one
  // callback, no thread blocked in wait()): three lock round trips per call
  // were a fifth of a small round trip's client time. mu_ guards only the
  // waiter list and the callbacks after the first; the seq_cst pairs
  // status_/hasWaiters_ and cbSlot_/hasMore_ make sure that a completion and
  // a registration racing each other always meet (async_state.cpp).
  static constexpr std::uint8_t kPending = 0, kValue = 1, kError = 2, kFilling = 3;
  static constexpr std::uint8_t kSlotEmpty = 0, kSlotWriting = 1, kSlotFilled = 2, kSlotReleased = 3;
  std::atomic<int> refs_{1};
  std::atomic<int> handles_{0};
  std::atomic<bool> abandonWatch_{false};
  std::atomic<std::uint8_t> status_{kPending};
  AsyncError errorKind_ = AsyncError::kNone;
  std::string errorMessage_;
  std::mutex mu_;
  // The first callback and the first waiter are kept in place (no
  // allocation); further ones go to the vectors.
  std::atomic<std::uint8_t> cbSlot_{kSlotEmpty};  // state of firstCallback_
  InlineCallback firstCallback_;
  std::atomic<bool> hasMore_{false};
  std::vector<InlineCallback> moreCallbacks_;  // mu_
  std::atomic<bool> hasWaiters_{false};
  Waiter* firstWaiter_ = nullptr;  // mu_
  std::vector<Waiter*> moreWaiters_;  // mu_
  Hook dispatcher_ = nullptr;
  void* dispatcherArg_ = nullptr;
  EndpointImpl* endpoint_ = nullptr;
  EncodeFn encode_ = nullptr;
  DecodeFn decode_ = nullptr;
  RecycleFn recycle_ = nullptr;

 protected:
  KeepFn keep_ = nullptr;

 private:
  std::uint32_t callSeq_ = 0;
  bool isCall_ = false;
  bool endsOnlyByAnswer_ = false;
};

/// Completes `state` with "canceled" if it is still pending, and for a
/// remote call tells the callee (a CANCEL frame). False if it had completed.
bool cancelState(AsyncStateBase& state);

/// Waits for `state`, running calls addressed to this thread meanwhile.
/// timeoutMs < 0 waits forever. Returns true when complete.
bool waitForState(AsyncStateBase& state, std::int64_t timeoutMs);

template <class T>
class AsyncState final : public AsyncStateBase {
 public:
  // Defaulted, so `new AsyncState<T>()` zeroes the object before the
  // members' initializers run. A provided constructor skipping that (a
  // `rep stos` of 496 bytes for a MediumMessage's state) made
  // RoundTripMediumMsgAsyncCB 1-4 % faster but UserProfileServiceCB 4-5 %
  // slower (docs/benchmarks.md, "A call's state zeroed first").
  AsyncState() = default;
  ~AsyncState() override {
    if (keep_ && value) keep_(&*value);
    if (keptBytes) keptBytesTotal().fetch_sub(keptBytes, std::memory_order_relaxed);
  }
  std::optional<T> value;
  /// A recycled reply state (generated_support.h): the next in its
  /// thread's list, and the heap bytes of its value counted in
  /// keptBytesTotal() (kept_values.h) until the state is freed.
  AsyncState* nextFree = nullptr;
  std::size_t keptBytes = 0;
};

/// Async states kept per thread and type, value and all, for the next
/// Async of their type on the thread that released them. The recycle hook
/// (generated_support.h, recycleReplyState) fills the list: a call's reply
/// state, and a service's result once sent. A call's next reply decodes
/// over the value in place, a service's next copied result is assigned
/// over it, so vectors and strings keep their capacity, and the state is
/// neither allocated and zeroed nor freed, its value never moved in and
/// out of a pool.
template <class T>
class RecycledStates {
 public:
  /// States one thread keeps per type (as the state free lists do per size).
  static constexpr std::uint32_t kPerThread = 256;

  /// A state reset to new but for its value (engaged) and its hooks;
  /// nullptr when this thread keeps none.
  static AsyncState<T>* pop() noexcept {
    if constexpr (std::is_trivially_copyable_v<T>) return nullptr;  // owns no heap storage: never kept
    RecycledStates* list = PerThread<RecycledStates>::get();  // the first look makes the list
    if (!list) return nullptr;
    list->wanted_ = true;
    if (!list->head_) return nullptr;
    AsyncState<T>* s = list->head_;
    unpoison(s);
    list->head_ = s->nextFree;
    --list->count_;
    return s;
  }
  /// This thread's list when the thread makes Async values of T (it looked
  /// here before) and the list has room; nullptr otherwise (also once the
  /// thread is exiting). A thread that only releases states, such as the
  /// timer thread dropping its references to calls with a CallTimeout,
  /// keeps none: they would wait there for nothing, their values counted.
  static RecycledStates* forPush() noexcept {
    RecycledStates* list = PerThread<RecycledStates>::ifMade();
    return list && list->wanted_ && list->count_ < kPerThread ? list : nullptr;
  }
  void push(AsyncState<T>* s) noexcept {
    s->nextFree = head_;
    head_ = s;
    ++count_;
    poison(s);
  }

  ~RecycledStates() {
    while (AsyncState<T>* s = head_) {
      unpoison(s);  // first: UBSan's check of a member access reads the vptr
      head_ = s->nextFree;
      delete s;
    }
  }

 private:
  // A kept state is not freed, so ASan would not see a use after its
  // release: its base part is poisoned while it waits here, up to the value
  // (which may sit in the base's tail padding) and the link.
  static std::size_t basePart(AsyncState<T>* s) {
    return static_cast<std::size_t>(reinterpret_cast<char*>(&s->value) - reinterpret_cast<char*>(s));
  }
  static void poison([[maybe_unused]] AsyncState<T>* s) { ASAN_POISON_MEMORY_REGION(s, basePart(s)); }
  static void unpoison([[maybe_unused]] AsyncState<T>* s) { ASAN_UNPOISON_MEMORY_REGION(s, basePart(s)); }

  AsyncState<T>* head_ = nullptr;
  std::uint32_t count_ = 0;
  bool wanted_ = false;  // pop() was called on this thread
};

/// Tag of the constructors that take over a reference to an existing state.
struct AdoptState {};
/// Tag of the constructor that takes a state nobody else sees yet.
struct FreshState {};

}  // namespace detail

/// A value that arrives later.
///
/// Caller side: returned by a remote method declared `Async<T>`; `then`
/// registers a callback (run in reply order on the calling thread's queue),
/// `wait`/`value` block, running incoming calls for this thread meanwhile.
/// Service side: construct from a value (`return value;`), or default
/// construct, return it, and complete it later with `setValue`/`setError`
/// from any thread.
///
/// @par Thread Safety
/// Copies share one state; every member may be called from any thread.
template <class T>
class Async {
  static_assert(!std::is_void_v<T>, "use AsyncVoid for methods with no result");

 public:
  using ValueType = T;

  /// A pending value, to be completed with setValue/setError.
  Async() : state_(new detail::AsyncState<T>()) { state_->initHandle(); }
  /// A value that is already there. The state is new and unshared: no
  /// locking needed (a service returning a value spent two lock round trips
  /// here per call).
  Async(T&& v) : state_(detail::RecycledStates<T>::pop()) {  // NOLINT(google-explicit-constructor)
    if constexpr (std::is_move_assignable_v<T>) {
      if (state_) {
        *state_->value = std::move(v);  // a recycled state: no allocation, no zeroing
        ready();
        return;
      }
    }
    state_ = new detail::AsyncState<T>();
    try {
      state_->value.emplace(std::move(v));
    } catch (...) {  // a move that copies, and ran out of memory
      delete state_;
      throw;
    }
    ready();
  }
  /// A copy of a value that is already there (`return member_;`, an echo).
  /// In a service method, the copy goes over the result this thread's last
  /// such call returned, kept once its reply was encoded, so that its
  /// strings and vectors are reused instead of allocated
  /// (detail/result_slot.h).
  /// A recycled state's value (detail::RecycledStates) is copied over the
  /// same way.
  Async(const T& v)  // NOLINT(google-explicit-constructor): `return value;`
    requires std::is_copy_constructible_v<T>
      : state_(detail::RecycledStates<T>::pop()) {
    if constexpr (std::is_copy_assignable_v<T>) {
      if (state_) {
        try {
          *state_->value = v;
        } catch (...) {
          delete state_;
          throw;
        }
        ready();
        return;
      }
    }
    state_ = new detail::AsyncState<T>();
    bool kept = false;
    if constexpr (detail::kResultSlotFits<T>) kept = detail::ResultSlot<T>::take(state_->value);
    try {
      if (kept) {
        *state_->value = v;
      } else {
        state_->value.emplace(v);
      }
    } catch (...) {
      delete state_;
      throw;
    }
    ready();
  }
  /// Takes over one reference to `s` (used by the runtime).
  Async(detail::AsyncState<T>* s, detail::AdoptState) : state_(s) { state_->addHandle(); }
  /// The first handle of a new or recycled state `s` (used by the runtime).
  Async(detail::AsyncState<T>* s, detail::FreshState) : state_(s) { state_->initHandle(); }
  Async(const Async& o) : state_(o.state_) {
    state_->addRef();
    state_->addHandle();
  }
  Async(Async&& o) noexcept : state_(std::exchange(o.state_, nullptr)) {}
  Async& operator=(Async o) noexcept {
    std::swap(state_, o.state_);
    return *this;
  }
  ~Async() {
    if (state_) state_->dropHandleAndRelease();
  }

  /// Completes with a value; false if it was already complete.
  bool setValue(T v) {
    return state_->completeWithValueFrom([&] { state_->value.emplace(std::move(v)); });
  }
  /// Completes with an error; false if it was already complete.
  bool setError(std::string message) { return state_->completeWithError(AsyncError::kRemoteError, std::move(message)); }

  /// True once a value or an error is there.
  bool isReady() const { return state_->isReady(); }
  /// True once a value is there.
  bool isSuccess() const { return state_->hasValue(); }
  /// True once it ended with an error.
  bool isError() const { return state_->isReady() && !state_->hasValue(); }
  AsyncError error() const { return state_->error(); }
  const std::string& errorMessage() const { return state_->errorMessage(); }

  /// True once it ended because cancel() was called.
  bool isCanceled() const { return isError() && state_->error() == AsyncError::kCanceled; }
  /// True once it ended because the call's CallTimeout ran out.
  bool isTimedOut() const { return isError() && state_->error() == AsyncError::kTimedOut; }

  /// Gives up on the value: completes it at once with AsyncError::kCanceled
  /// (then callbacks run and waits return) unless it is already complete,
  /// and tells the service, whose method sees CallCtx::isCanceled() and,
  /// if it has not started yet, is not run. A reply that still comes is
  /// dropped. Returns false if the value was already complete; of a cancel
  /// and a reply racing each other exactly one wins.
  bool cancel() { return detail::cancelState(*state_); }

  /// Blocks until complete or `timeoutMs` passed (< 0: no limit); returns
  /// isReady().
  bool wait(std::int64_t timeoutMs = -1) const {
    return state_->settled() || detail::waitForState(*state_, timeoutMs);
  }

  /// Waits, then returns the value. Throws TimeoutError if the timeout
  /// passed or the call's CallTimeout ran out, CallCanceledError if it was
  /// canceled, ConnectionClosedError or RemoteCallError if it ended in
  /// another error.
  const T& value(std::int64_t timeoutMs = -1) const {
    if (!wait(timeoutMs)) throw TimeoutError("Async value not ready after " + std::to_string(timeoutMs) + " ms");
    if (!state_->hasValue()) throwError();
    return *state_->value;
  }

  /// Runs `cb()` once complete (value or error). On the calling side of a
  /// remote call, callbacks run in the order the replies arrived, one at a
  /// time per calling thread. A callback's captures may be destroyed as
  /// soon as it has run, before the callbacks registered after it run:
  /// keep what a later callback needs in its own captures.
  template <class F>
    requires std::is_invocable_v<std::decay_t<F>&>
  const Async& then(F&& cb) const {
    state_->addCallback(detail::InlineCallback(std::forward<F>(cb)));
    return *this;
  }
  /// Runs `cb(a)` once complete, as then(cb) does, where `a` is this Async:
  /// `then([](const Async<T>& a) { use(a.value()); })`. The callback gets
  /// the value without keeping a copy of the handle in its captures, which
  /// costs two atomic instructions per call (RoundTripStringAsyncCB's
  /// client: docs/benchmarks.md). `a` is valid during the call, also when
  /// the callback drops the handle it was registered on; copy it to keep
  /// it.
  template <class F>
    requires(!std::is_invocable_v<std::decay_t<F>&> && std::is_invocable_v<std::decay_t<F>&, const Async&>)
  const Async& then(F&& cb) const {
    state_->addCallback(detail::InlineCallback(
        [s = state_, f = std::decay_t<F>(std::forward<F>(cb))]() mutable {
          // Whoever runs the callbacks holds a reference meanwhile (the
          // runtime's queued entry, runHeld or runCallbacksHeld).
          LentHandle lent{Async(s, Lent{})};
          f(std::as_const(lent.handle));
        }));
    return *this;
  }

  /// `co_await` in a coroutine: suspends until complete (resuming where
  /// `then` callbacks run), then yields the value or throws as value() does.
  auto operator co_await() const {
    struct Awaiter {
      Async a;
      bool await_ready() const noexcept { return a.isReady(); }
      void await_suspend(std::coroutine_handle<> h) const { a.then([h] { h.resume(); }); }
      T await_resume() const { return a.value(); }
    };
    return Awaiter{*this};
  }

  /// A coroutine declared to return Async<T> runs at once, up to its first
  /// suspension; `co_return v;` completes the Async, an exception that
  /// leaves it completes it with an error. A service method may be such a
  /// coroutine: its reply leaves when it finishes.
  struct promise_type {
    // Declared, so that the promise is not an aggregate: the compiler would
    // otherwise build it from the coroutine's arguments (an Async argument
    // would become the result).
    promise_type() {}  // NOLINT(modernize-use-equals-default)
    Async result;
    Async get_return_object() { return result; }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_value(T v) { result.setValue(std::move(v)); }
    void unhandled_exception() {
      try {
        throw;
      } catch (const std::exception& e) {
        result.setError(e.what());
      } catch (...) {
        result.setError("the coroutine threw an exception that is not a std::exception");
      }
    }
  };

  /// The shared state (used by the runtime).
  detail::AsyncState<T>* state() const { return state_; }

 private:
  [[noreturn]] void throwError() const {
    switch (state_->error()) {
      case AsyncError::kRemoteError:
        throw RemoteCallError(state_->errorMessage());
      case AsyncError::kTimedOut:
        throw TimeoutError(state_->errorMessage());
      case AsyncError::kCanceled:
        throw CallCanceledError(state_->errorMessage());
      case AsyncError::kInvalidMessage:
        throw InvalidMessageError(state_->errorMessage());
      default:
        throw ConnectionClosedError(state_->errorMessage());
    }
  }

  /// Completes a state nobody else sees yet with the value it holds, as
  /// the handle's first.
  void ready() {
    state_->initHandle();
    state_->initReady();
  }

  /// A handle to a state that someone else holds a reference to, for the
  /// length of a callback: no reference is taken or given back.
  struct Lent {};
  struct LentHandle {
    Async handle;
    ~LentHandle() { handle.state_ = nullptr; }
  };
  Async(detail::AsyncState<T>* s, Lent) : state_(s) {}

  detail::AsyncState<T>* state_;
};

/// The calling side's name for the handle of a pending remote value.
template <class T>
using AsyncVal = Async<T>;

namespace detail {

/// The calling side's record of a value a peer holds for it (an AsyncRef
/// call's result): reference-counted; defined by the runtime
/// (runtime/values.h). The last release tells the peer to forget the value.
struct RemoteValue;
void retainRemoteValue(RemoteValue* v) noexcept;
void releaseRemoteValue(RemoteValue* v) noexcept;
/// The producing call's answer: complete once the peer holds the value (or
/// the call failed, or the connection ended). Lives as long as `v`.
AsyncStateBase& remoteValueAnswer(RemoteValue* v);
/// The value itself, fetched from the peer the first time it is asked for
/// (a FETCH). Returns one reference.
AsyncStateBase* fetchRemoteValue(RemoteValue* v);
/// The fetched state if a fetch was made (no reference added), else null.
AsyncStateBase* fetchedRemoteValue(RemoteValue* v) noexcept;

struct AsyncRefAccess;

}  // namespace detail

/// A remote future: the result of a method declared `AsyncRef<T> f(...)`.
/// The callee keeps the value; the caller holds a handle to it. Passing the
/// handle into another call to the same peer sends only its name, and the
/// callee reads the value where it is; the value travels to the caller only
/// if value() (or fetch()) is called there, and then once
/// (docs/async-and-errors.md §2).
///
/// Service side: a method returns a value (`return image;`) or an Async<T>
/// it completes later; a parameter of type AsyncRef<T> holds the value
/// locally, and value() waits for it if the call that makes it has not
/// finished. A default AsyncRef (and a moved-from one) is empty: it holds
/// a default T, ready; to complete one later, make it from an Async<T>.
///
/// @par Thread Safety
/// Copies share one value; every member may be called from any thread.
template <class T>
class AsyncRef {
  static_assert(!std::is_void_v<T>, "AsyncRef needs a value type");

 public:
  using ValueType = T;

  /// Holds a default T.
  AsyncRef() = default;
  /// Holds `v`.
  AsyncRef(T v) : local_(Async<T>(std::move(v))) {}  // NOLINT(google-explicit-constructor): `return value;`
  /// Holds what `a` completes with (a service completes it later).
  AsyncRef(Async<T> a) : local_(std::move(a)) {}  // NOLINT(google-explicit-constructor)
  AsyncRef(const AsyncRef& o) : local_(o.local_), remote_(o.remote_) {
    if (remote_) detail::retainRemoteValue(remote_);
  }
  AsyncRef(AsyncRef&& o) noexcept : local_(std::move(o.local_)), remote_(std::exchange(o.remote_, nullptr)) {
    o.local_.reset();
  }
  AsyncRef& operator=(AsyncRef o) noexcept {
    std::swap(local_, o.local_);
    std::swap(remote_, o.remote_);
    return *this;
  }
  ~AsyncRef() {
    if (remote_) detail::releaseRemoteValue(remote_);
  }

  /// True if a peer holds the value (this side holds a name for it).
  bool isRemote() const { return remote_ != nullptr; }
  /// True once the value (or an error) is there: for a remote value, once
  /// the peer answered the call that makes it.
  bool isReady() const { return empty() || state().isReady(); }
  bool isSuccess() const { return empty() || state().hasValue(); }
  bool isError() const { return !empty() && state().isReady() && !state().hasValue(); }
  AsyncError error() const { return empty() ? AsyncError::kNone : state().error(); }
  const std::string& errorMessage() const {
    static const std::string kNone;
    return empty() ? kNone : state().errorMessage();
  }
  /// Waits until isReady() or `timeoutMs` passed (< 0: no limit), running
  /// calls addressed to this thread meanwhile; the value does not travel.
  bool wait(std::int64_t timeoutMs = -1) const { return empty() || detail::waitForState(state(), timeoutMs); }
  /// Runs `cb()` once isReady() (for a remote value: in reply order on the
  /// calling thread's queue, like Async::then).
  template <class F>
  const AsyncRef& then(F&& cb) const {
    if (empty()) {
      cb();
    } else {
      state().addCallback(detail::InlineCallback(std::forward<F>(cb)));
    }
    return *this;
  }

  /// The value as an Async: a remote value is fetched from the peer the
  /// first time (later calls share that fetch).
  Async<T> fetch() const {
    if (remote_) {
      auto* s = static_cast<detail::AsyncState<T>*>(detail::fetchRemoteValue(remote_));
      return Async<T>(s, detail::AdoptState{});
    }
    if (local_) return *local_;
    return Async<T>(T{});
  }
  /// Waits for the value (fetching it once if the peer holds it) and
  /// returns it; throws as Async::value() does.
  const T& value(std::int64_t timeoutMs = -1) const {
    if (remote_) return fetch().value(timeoutMs);  // the fetched state lives as long as the handle
    if (local_) return local_->value(timeoutMs);
    static const T kDefault{};
    return kDefault;
  }
  /// `co_await` yields the value (fetched) or throws as value() does.
  auto operator co_await() const { return fetch().operator co_await(); }

  /// Completes a value this side holds; false if it was already complete.
  /// Throws std::logic_error for a value the peer holds, or an empty one.
  bool setValue(T v) { return local().setValue(std::move(v)); }
  bool setError(std::string message) { return local().setError(std::move(message)); }

 private:
  friend struct detail::AsyncRefAccess;
  bool empty() const { return !remote_ && !local_; }
  detail::AsyncStateBase& state() const {
    return remote_ ? detail::remoteValueAnswer(remote_) : *local_->state();
  }
  Async<T>& local() {
    if (remote_) throw std::logic_error("AsyncRef::setValue/setError on a value the peer holds");
    if (!local_) {
      throw std::logic_error(
          "AsyncRef::setValue/setError on an empty AsyncRef (it holds T{}); make one from an Async<T> to complete "
          "it later");
    }
    return *local_;
  }

  std::optional<Async<T>> local_;     // this side holds the value
  detail::RemoteValue* remote_ = nullptr;  // the peer holds it (one reference)
};

namespace detail {
/// What the codec and the stubs need of an AsyncRef.
struct AsyncRefAccess {
  template <class T>
  static RemoteValue* remote(const AsyncRef<T>& r) {
    return r.remote_;
  }
  template <class T>
  static const std::optional<Async<T>>& local(const AsyncRef<T>& r) {
    return r.local_;
  }
  /// Takes over one reference to `v`.
  template <class T>
  static AsyncRef<T> adoptRemote(RemoteValue* v) {
    AsyncRef<T> r;
    r.remote_ = v;
    return r;
  }
};
template <class T>
inline constexpr bool kIsAsyncRef = false;
template <class T>
inline constexpr bool kIsAsyncRef<AsyncRef<T>> = true;
}  // namespace detail

}  // namespace myelin
