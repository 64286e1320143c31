// Hands an exception that left user code the runtime ran (a `then`
// callback, a connection notice, an AsyncFrame's onError) to the process's
// UncaughtHandler (myelin/errors.h), so the thread that ran it goes on.
#pragma once

#include <exception>
#include <utility>

namespace myelin::detail {

/// Passes `error` to the handler; never throws.
void reportUncaught(const char* where, std::exception_ptr error) noexcept;

/// Runs `fn()`; an exception that leaves it is reported as from `where`.
template <class F>
void runReporting(const char* where, F&& fn) noexcept {
  try {
    std::forward<F>(fn)();
  } catch (...) {
    reportUncaught(where, std::current_exception());
  }
}

}  // namespace myelin::detail
