// Control of calls in flight: CallTimeout, a deadline for the calls a thread
// makes in a scope, and CallCtx, what a service method can learn about the
// call it runs (docs/async-and-errors.md §3).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "myelin/result.h"

namespace myelin {

namespace detail {
class EndpointImpl;
struct Lane;
struct FrameState;
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
/// thread, innermost first (as RAII does). In a coroutine, keep it between
/// two co_awaits: a scope held across one would also apply to what the
/// thread does while the coroutine is suspended.
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
    /// The caller canceled the AsyncFrame this call was made in
    /// (AsyncFrame::cancel). For an AsyncStatus call; an Async call the
    /// frame canceled sees isCanceled(), which this then returns too.
    bool isAsyncFrameCanceled() const;

   private:
    friend class CallCtx;
    std::weak_ptr<detail::EndpointImpl> ep_;
    detail::Lane* lane_ = nullptr;
    std::uint32_t seq_ = 0;
    bool replies_ = false;        // a call that expects a reply: it can be canceled
    bool status_ = false;         // an AsyncStatus call (seq_ is its vseq)
    std::int64_t deadlineNs_ = 0;  // steady clock; 0: none
  };

  static Ref ref();
  static bool isCanceled() { return ref().isCanceled(); }
  static bool isTimedOut() { return ref().isTimedOut(); }
  static bool isOk() { return ref().isOk(); }
  static std::int64_t remainingMs() { return ref().remainingMs(); }
  static bool isAsyncFrameCanceled() { return ref().isAsyncFrameCanceled(); }
  /// Reports `status` (an error) to the caller's AsyncFrame now, while the
  /// method goes on: its onError runs with it, as for the failure the
  /// method may still return. Only for the AsyncStatus call the thread is
  /// running; false (nothing sent) for any other call, or outside one.
  static bool sendAsyncFrameError(const Status& status);
};

/// Groups the asynchronous calls this thread makes in its scope (Async,
/// AsyncVoid and AsyncStatus calls) and, when the scope ends, waits until
/// all of them finished: Async values completed (and their callbacks ran),
/// fire-and-forget calls ran on the peer.
///
/// Failures of the frame's calls — an Async that ended in error, an
/// AsyncStatus call whose method failed — go to the function given to
/// onError, on the thread that runs the calling thread's callbacks; a frame
/// without one passes them to the next enclosing frame that has one, and
/// keeps a count (errorCount, firstError) either way. Frames nest: a call
/// belongs to the innermost frame.
///
/// @par Thread Safety
/// A frame belongs to the thread that made it, which must destroy it
/// (innermost first, as RAII does). wait() and the destructor are for that
/// thread; cancel(), errorCount() and firstError() may be called from any
/// thread.
class AsyncFrame {
 public:
  /// Waits without limit at scope exit.
  AsyncFrame();
  /// Waits at most `exitTimeoutMs` at scope exit (then stops waiting; the
  /// calls go on).
  explicit AsyncFrame(std::int64_t exitTimeoutMs);
  ~AsyncFrame();
  AsyncFrame(const AsyncFrame&) = delete;
  AsyncFrame& operator=(const AsyncFrame&) = delete;

  /// Waits until every call made in the frame so far has finished; false
  /// if `timeoutMs` (< 0: no limit) passed first or a connection closed.
  bool wait(std::int64_t timeoutMs = -1);
  /// Runs `cb(status)` for each failure of a call of this frame (and of
  /// inner frames without a handler of their own), including failures
  /// that arrive after the scope ended if it was detached.
  void onError(std::function<void(const Status&)> cb);
  /// Cancels the frame's Async calls that are still pending
  /// (Async::cancel) and marks the frame canceled.
  void cancel();
  bool isCanceled() const;
  /// Scope exit stops waiting: the calls go on, and their failures still
  /// reach onError.
  void detach();
  /// Failures seen so far, and the first of them (success if none).
  std::size_t errorCount() const;
  Status firstError() const;

 private:
  std::shared_ptr<detail::FrameState> state_;
  std::int64_t exitTimeoutMs_;
  bool detached_ = false;
};

}  // namespace myelin
