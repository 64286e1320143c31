// Control of calls in flight: CallTimeout, a deadline for the calls a thread
// makes in a scope (docs/async-and-errors.md §3).
#pragma once

#include <cstdint>

namespace myelin {

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

}  // namespace myelin
