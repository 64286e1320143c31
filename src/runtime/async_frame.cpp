// AsyncFrame and its FrameState: grouping the asynchronous calls of a scope,
// waiting for them (Async values and barriers on the lanes of fire-and-forget
// calls), cancelling them, and routing their failures to onError.
#include "runtime/async_frame.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "myelin/async.h"
#include "myelin/control.h"
#include "runtime/endpoint_impl.h"
#include "runtime/uncaught.h"

namespace myelin::detail {

namespace {

Status statusOf(const AsyncStateBase& s) {
  FrameworkError e = FrameworkError::kRemoteFailure;
  EndpointState st = EndpointState::kConnected;
  switch (s.error()) {
    case AsyncError::kConnectionClosed:
      e = FrameworkError::kConnectionClosed;
      st = EndpointState::kClosed;
      break;
    case AsyncError::kInvalidMessage:
      e = FrameworkError::kInvalidMessage;
      break;
    case AsyncError::kCanceled:
      e = FrameworkError::kCanceled;
      break;
    case AsyncError::kTimedOut:
      e = FrameworkError::kTimedOut;
      break;
    default:
      break;
  }
  if (EndpointImpl* raw = s.endpoint(); raw && e == FrameworkError::kConnectionClosed) {
    if (auto ep = EndpointImpl::pin(raw)) st = ep->state();
  }
  return Status::framework(e, st, s.errorMessage());
}

/// Milliseconds left until `deadline` (-1: none), at least 0.
std::int64_t leftMs(std::chrono::steady_clock::time_point deadline, bool unlimited) {
  if (unlimited) return -1;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return std::max<std::int64_t>(0, left.count());
}

}  // namespace

void FrameState::addAsync(AsyncStateBase* state) {
  {
    std::lock_guard lock(mu);
    pending.push_back(state);  // first: out of memory here leaves no reference behind
  }
  state->addRef();
  state->addCallback(InlineCallback([self = shared_from_this(), state] { self->settled(state); }));
}

bool FrameState::takePending(AsyncStateBase* state) noexcept {
  std::lock_guard lock(mu);
  auto it = std::find(pending.begin(), pending.end(), state);
  if (it == pending.end()) return false;
  *it = pending.back();
  pending.pop_back();
  return true;
}

void FrameState::forgetAsync(AsyncStateBase* state) noexcept {
  // addAsync takes its reference after it noted the state (a push that
  // threw left neither). Its callback, if the state completes after all
  // (a close), finds the state gone and leaves the reference alone.
  if (takePending(state)) state->release();
}

void FrameState::settled(AsyncStateBase* state) {
  {
    std::lock_guard lock(mu);
    // Forgotten (forgetAsync): its call never left, its caller was told,
    // and the frame's reference went with it.
    if (std::find(pending.begin(), pending.end(), state) == pending.end()) return;
  }
  // Reported before it leaves `pending`: a wait that sees it gone has seen
  // its failure reach onError too (when this runs on another thread).
  if (!state->hasValue()) report(statusOf(*state));
  if (takePending(state)) state->release();
}

void FrameState::noteLane(EndpointImpl* ep, Lane* lane) {
  std::lock_guard lock(mu);
  for (const LaneUse& u : lanes) {
    if (u.raw == ep && u.lane == lane) return;
  }
  lanes.push_back({ep->weak_from_this(), ep, lane});
}

void FrameState::report(const Status& status) {
  std::function<void(const Status&)> handler;
  {
    std::lock_guard lock(mu);
    if (errors++ == 0) first = status;
    handler = onError;
  }
  if (handler) {
    runReporting("AsyncFrame onError", [&] { handler(status); });
  } else if (outer) {
    outer->report(status);
  }
}

void FrameState::errorPosted() {
  std::lock_guard lock(mu);
  ++errorsInFlight;
}

void FrameState::errorDelivered(const Status& status) {
  report(status);
  std::lock_guard lock(mu);
  --errorsInFlight;
}

bool FrameState::wait(std::int64_t timeoutMs) {
  const bool unlimited = timeoutMs < 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(unlimited ? 0 : timeoutMs);
  // Async values: wait for each until none is left (a callback may start
  // more calls in this frame meanwhile).
  for (;;) {
    AsyncStateBase* next = nullptr;
    {
      std::lock_guard lock(mu);
      if (!pending.empty()) {
        next = pending.back();
        next->addRef();
      }
    }
    if (!next) break;
    bool done = waitForState(*next, leftMs(deadline, unlimited));
    if (done) {
      // Its settling callback runs in the lane's turn, which the wait on an
      // own call's value reached; one made on another lane may still be
      // queued: wait for it to leave `pending`.
      std::lock_guard lock(mu);
      done = std::find(pending.begin(), pending.end(), next) == pending.end();
    }
    next->release();
    if (!done) {
      if (!unlimited && std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::yield();
    }
  }
  // Fire-and-forget calls: a barrier on each lane they used; the errors
  // they caused arrive before its ack and run in the lane's turn.
  std::vector<LaneUse> used;
  {
    std::lock_guard lock(mu);
    used = lanes;
  }
  for (const LaneUse& u : used) {
    std::shared_ptr<EndpointImpl> ep = u.ep.lock();
    if (!ep) continue;  // closed: its calls failed with it
    if (!ep->waitLaneIdle(u.lane, leftMs(deadline, unlimited))) return false;
    bool delivered = ep->waitWhileRunning(
        u.lane,
        [&] {
          std::lock_guard lock(mu);
          return errorsInFlight == 0;
        },
        leftMs(deadline, unlimited));
    if (!delivered) return false;
  }
  return true;
}

void FrameState::cancel() {
  canceled.store(true, std::memory_order_relaxed);
  std::vector<AsyncStateBase*> calls;
  std::vector<LaneUse> used;
  {
    std::lock_guard lock(mu);
    calls = pending;
    for (AsyncStateBase* s : calls) s->addRef();
    used = lanes;
  }
  for (AsyncStateBase* s : calls) {
    cancelState(*s);
    s->release();
  }
  // The AsyncStatus calls that may not have run yet: the peer skips them,
  // and methods running them see CallCtx::isAsyncFrameCanceled().
  for (const LaneUse& u : used) {
    if (auto ep = u.ep.lock()) ep->sendFrameCancel(u.lane, this);
  }
}

}  // namespace myelin::detail

namespace myelin {

AsyncFrame::AsyncFrame() : AsyncFrame(-1) {}

AsyncFrame::AsyncFrame(std::int64_t exitTimeoutMs)
    : state_(std::make_shared<detail::FrameState>()), exitTimeoutMs_(exitTimeoutMs) {
  detail::ThreadState& ts = detail::threadState();
  if (ts.frame) state_->outer = ts.frame->shared_from_this();
  ts.frame = state_.get();
}

AsyncFrame::~AsyncFrame() {
  if (!detached_) {
    try {
      state_->wait(exitTimeoutMs_);
    } catch (...) {
      // A wait that cannot go on (the endpoint failed) ends the scope.
    }
  }
  detail::threadState().frame = state_->outer.get();
}

bool AsyncFrame::wait(std::int64_t timeoutMs) { return state_->wait(timeoutMs); }

void AsyncFrame::onError(std::function<void(const Status&)> cb) {
  std::lock_guard lock(state_->mu);
  state_->onError = std::move(cb);
}

void AsyncFrame::cancel() { state_->cancel(); }

bool AsyncFrame::isCanceled() const { return state_->canceled.load(std::memory_order_relaxed); }

void AsyncFrame::detach() { detached_ = true; }

std::size_t AsyncFrame::errorCount() const {
  std::lock_guard lock(state_->mu);
  return state_->errors;
}

Status AsyncFrame::firstError() const {
  std::lock_guard lock(state_->mu);
  return state_->first;
}

}  // namespace myelin
