// CallTimeout's scopes and the text of Status and FrameworkError: the parts
// of the error and control model that are not templates.
#include <algorithm>
#include <chrono>
#include <string>

#include "myelin/control.h"
#include "myelin/result.h"
#include "runtime/clock.h"
#include "runtime/endpoint_impl.h"

namespace myelin {

// The innermost scope and its deadline live in the thread's ThreadState,
// where every call reads the deadline with one load.
CallTimeout::CallTimeout(std::uint32_t ms)
    : deadlineNs_(detail::steadyNowNs() + static_cast<std::int64_t>(ms) * 1'000'000),
      outer_(static_cast<CallTimeout*>(detail::threadState().timeout)) {
  if (outer_) deadlineNs_ = std::min(deadlineNs_, outer_->deadlineNs_);
  detail::ThreadState& ts = detail::threadState();
  ts.timeout = this;
  ts.deadlineNs = deadlineNs_;
}

CallTimeout::~CallTimeout() {
  detail::ThreadState& ts = detail::threadState();
  auto* top = static_cast<CallTimeout*>(ts.timeout);
  if (top == this) {
    ts.timeout = outer_;
    ts.deadlineNs = outer_ ? outer_->deadlineNs_ : 0;
    return;
  }
  // Not the innermost: a scope held across a co_await ends after scopes
  // made meanwhile (or on another thread). Unlink it where it is on this
  // thread's chain, so no scope is left pointing at it.
  for (CallTimeout* t = top; t; t = t->outer_) {
    if (t->outer_ == this) {
      t->outer_ = outer_;
      return;
    }
  }
}

std::uint32_t CallTimeout::remainingMs() const {
  std::int64_t left = deadlineNs_ - detail::steadyNowNs();
  return left <= 0 ? 0 : static_cast<std::uint32_t>((left + 999'999) / 1'000'000);
}

std::int64_t CallTimeout::currentDeadlineNs() { return detail::threadState().deadlineNs; }

void CallTimeout::noteSyncTimeout() {
  for (auto* t = static_cast<CallTimeout*>(detail::threadState().timeout); t; t = t->outer_) t->timedOut_ = true;
}

const char* toString(FrameworkError e) {
  switch (e) {
    case FrameworkError::kNone:
      return "no error";
    case FrameworkError::kConnectionClosed:
      return "connection closed";
    case FrameworkError::kTimedOut:
      return "timed out";
    case FrameworkError::kCanceled:
      return "canceled";
    case FrameworkError::kRemoteFailure:
      return "remote handler failed";
    case FrameworkError::kInvalidMessage:
      return "invalid message";
  }
  return "unknown framework error";
}

std::string Status::getFormattedMessage() const {
  std::string s;
  switch (kind_) {
    case Kind::kOk:
      return "ok";
    case Kind::kFramework:
      s = toString(framework_);
      s += " (endpoint ";
      s += toString(state_);
      s += ")";
      break;
    case Kind::kApplication:
      s = codeType_ + " " + std::to_string(code_);
      break;
  }
  if (!message_.empty()) s += ": " + message_;
  return s;
}

}  // namespace myelin
