// CallTimeout's scopes and the text of Status and FrameworkError: the parts
// of the error and control model that are not templates.
#include <algorithm>
#include <chrono>
#include <string>

#include "myelin/control.h"
#include "myelin/result.h"

namespace myelin {

namespace {

thread_local CallTimeout* tlsInnermostTimeout = nullptr;

std::int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

CallTimeout::CallTimeout(std::uint32_t ms)
    : deadlineNs_(nowNs() + static_cast<std::int64_t>(ms) * 1'000'000), outer_(tlsInnermostTimeout) {
  if (outer_) deadlineNs_ = std::min(deadlineNs_, outer_->deadlineNs_);
  tlsInnermostTimeout = this;
}

CallTimeout::~CallTimeout() { tlsInnermostTimeout = outer_; }

std::uint32_t CallTimeout::remainingMs() const {
  std::int64_t left = deadlineNs_ - nowNs();
  return left <= 0 ? 0 : static_cast<std::uint32_t>((left + 999'999) / 1'000'000);
}

std::int64_t CallTimeout::currentDeadlineNs() {
  return tlsInnermostTimeout ? tlsInnermostTimeout->deadlineNs_ : 0;
}

void CallTimeout::noteSyncTimeout() {
  for (CallTimeout* t = tlsInnermostTimeout; t; t = t->outer_) t->timedOut_ = true;
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
