// Control of calls in flight: CallTimeout, a deadline for the calls a thread
// makes in a scope, and CallCtx, what a service method can learn about the
// call it runs (docs/async-and-errors.md §3).
#pragma once

#include <cstdint>
#include <memory>

namespace myelin {

namespace detail {
class EndpointImpl;
struct Lane;
}  // namespace detail

/// Gives the calls this thread makes in the scope a deadline, `ms` from
/// construction. Scopes stack: the earliest deadline of the enclosing ones
/// applies.
///
/// A sync call that runs out of time stops waiting (its reply, if one comes
/// later, is dropped) and the scope's isSyncRequestTimedOut() turns true.
/// What the call then returns depends on its method: a `void` method
/// returns, a `Status` method returns a framework error
/// `FrameworkError::kTimedOut`, any other throws TimeoutError.
///
/// @par Thread Safety
/// A CallTimeout belongs to the thread that made it; destroy it on that
/// thread, innermost first (as RAII does).
class CallTimeout {
 public:
  explicit CallTimeout(std::uint32_t ms);
  ~CallTimeout();
  CallTimeout(const CallTimeout&) = delete;
  CallTimeout& operator=(const CallTimeout&) = delete;

  /// True once a sync call made in this scope (or in one inside it) ran out
  /// of time.
  bool isSyncRequestTimedOut() const { return timedOut_; }
  /// Milliseconds left before the deadline that applies in this scope
  /// (0 once it passed).
  std::uint32_t remainingMs() const;

  /// The deadline that applies to this thread's calls now, in
  /// steady_clock nanoseconds since its epoch; 0 for none (used by the
  /// runtime).
  static std::int64_t currentDeadlineNs();
  /// Marks every scope of this thread as having had a sync call time out
  /// (used by the runtime).
  static void noteSyncTimeout();

 private:
  std::int64_t deadlineNs_;  // the earliest of this and the enclosing scopes
  CallTimeout* outer_;
  bool timedOut_ = false;
};

/// What a service method can learn about the call it is running: whether
/// the caller canceled it (Async::cancel, or its sync call timed out and
/// gave up), or its deadline (the caller's CallTimeout) passed. A method
/// that works long may check and stop early; it still returns normally (its
/// reply is dropped by the caller).
///
/// The static members answer for the call the calling thread runs; outside
/// a service method nothing is canceled and there is no deadline. `ref()`
/// captures the call for a method that completes its Async later on another
/// thread.
class CallCtx {
 public:
  /// A captured call (or none, default-constructed). Copyable; any thread.
  class Ref {
   public:
    Ref() = default;
    /// The caller canceled the call, or the connection is gone.
    bool isCanceled() const;
    /// The call's deadline passed.
    bool isTimedOut() const;
    bool isOk() const { return !isCanceled() && !isTimedOut(); }
    /// Milliseconds left before the deadline; -1 for a call without one.
    std::int64_t remainingMs() const;

   private:
    friend class CallCtx;
    std::weak_ptr<detail::EndpointImpl> ep_;
    detail::Lane* lane_ = nullptr;
    std::uint32_t seq_ = 0;
    bool replies_ = false;        // a call that expects a reply: it can be canceled
    std::int64_t deadlineNs_ = 0;  // steady clock; 0: none
  };

  static Ref ref();
  static bool isCanceled() { return ref().isCanceled(); }
  static bool isTimedOut() { return ref().isTimedOut(); }
  static bool isOk() { return ref().isOk(); }
  static std::int64_t remainingMs() { return ref().remainingMs(); }
};

}  // namespace myelin
