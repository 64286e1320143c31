// Remote futures (docs/async-and-errors.md §2): the value table a holder
// keeps for its peer, and the caller's side of an AsyncRef: naming a value
// in a call, fetching it, and dropping it when the last handle goes.
#include "runtime/values.h"

#include <algorithm>
#include <string>

#include "myelin/control.h"
#include "runtime/clock.h"
#include "runtime/endpoint_impl.h"
#include "runtime/objects.h"

namespace myelin::detail {

// ---------------------------------------------------------------------------
// The holder's table

HeldValues::Result HeldValues::hold(std::uint64_t id, AsyncStateBase* state, const std::type_info& type,
                                    std::size_t max) {
  std::lock_guard lock(mu_);
  if (closed_) return Result::kClosed;
  if (map_.size() >= max) return Result::kFull;
  auto [it, fresh] = map_.try_emplace(id, Entry{state, &type});
  if (!fresh) return Result::kDuplicate;
  state->addRef();
  return Result::kOk;
}

AsyncStateBase* HeldValues::take(std::uint64_t id, const std::type_info* type, Result& why) {
  AsyncStateBase* gone = nullptr;
  AsyncStateBase* s = nullptr;
  {
    std::lock_guard lock(mu_);
    auto it = map_.find(id);
    if (it == map_.end()) {
      why = Result::kUnknown;
      return nullptr;
    }
    Entry& e = it->second;
    if (type && *type != *e.type) {
      why = Result::kWrongType;
      return nullptr;
    }
    s = e.state;
    s->addRef();
    if (++e.seen == e.expected && e.dropped) {
      gone = e.state;
      map_.erase(it);
    }
  }
  if (gone) gone->release();
  why = Result::kOk;
  return s;
}

HeldValues::Result HeldValues::drop(std::uint64_t id, std::uint64_t mentions) {
  AsyncStateBase* gone = nullptr;
  {
    std::lock_guard lock(mu_);
    auto it = map_.find(id);
    if (it == map_.end()) return Result::kUnknown;
    Entry& e = it->second;
    if (e.dropped) return Result::kDroppedTwice;
    if (mentions < e.seen) return Result::kTooFew;
    e.dropped = true;
    e.expected = mentions;
    if (e.seen == e.expected) {
      gone = e.state;
      map_.erase(it);
    }
  }
  if (gone) gone->release();
  return Result::kOk;
}

HeldValues::Taken HeldValues::close() noexcept {
  std::lock_guard lock(mu_);
  closed_ = true;
  Taken gone(std::move(map_));
  map_.clear();  // a moved-from map is valid but unspecified
  return gone;
}

void HeldValues::clear() noexcept {
  Taken gone;
  {
    std::lock_guard lock(mu_);
    gone = Taken(std::move(map_));
    map_.clear();
  }
  // Released here, outside the lock (gone's end).
}

std::size_t HeldValues::size() {
  std::lock_guard lock(mu_);
  return map_.size();
}

// ---------------------------------------------------------------------------
// The caller's handle

namespace {

/// The last handle went and the answer came: the holder may forget the
/// value (a DROP with the mentions sent), and the record goes.
void finishRemoteValue(RemoteValue* v) noexcept {
  if (auto ep = v->ep.lock()) ep->sendValueDrop(v->id, v->mentions.load(std::memory_order_acquire));
  v->answer->release();
  if (v->fetched) v->fetched->release();
  delete v;
}

/// True if `lane` is the sequential lane the call that makes `v` went on:
/// a message on it reaches the holder after that call ran, as long as it
/// does not overtake the call as a continuation (a waiting receiver runs N
/// frames ahead of plain ones).
bool onProducersLane(const RemoteValue* v, const Lane* lane) {
  return lane == v->lane && !v->parallel && lane->sendMode.load(std::memory_order_relaxed) != kLaneParallel;
}
bool orderedAfterProducer(const RemoteValue* v, const Lane* lane, bool nested) {
  return onProducersLane(v, lane) && (!nested || v->nested);
}

/// Sends the FETCH of `v` that `s` waits for (with the N bit if `nested`),
/// or fails `s`.
void sendFetchOrFail(EndpointImpl& ep, RemoteValue* v, Lane* lane, AsyncStateBase* s, bool nested) noexcept {
  if (v->answer->isReady() && !v->answer->hasValue()) {  // the call failed: so does its value
    ep.failLocally(s, v->answer->error(), v->answer->errorMessage());
    return;
  }
  try {
    ep.sendFetch(lane, v->id, s, nested);
    v->mentions.fetch_add(1, std::memory_order_relaxed);
  } catch (const std::exception& e) {
    ep.failLocally(s, AsyncError::kConnectionClosed, e.what());
  }
}

}  // namespace

void retainRemoteValue(RemoteValue* v) noexcept { v->refs.fetch_add(1, std::memory_order_relaxed); }

void releaseRemoteValue(RemoteValue* v) noexcept {
  if (v->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  if (v->answer->isReady()) {
    finishRemoteValue(v);
    return;
  }
  // The producing call may not have run yet, and a DROP on another lane
  // could overtake it: it leaves once the answer is in.
  try {
    v->answer->addCallback(InlineCallback([v] { finishRemoteValue(v); }));
  } catch (...) {
    // Out of memory: the holder keeps the value until the connection ends.
  }
}

AsyncStateBase& remoteValueAnswer(RemoteValue* v) { return *v->answer; }

AsyncStateBase* fetchedRemoteValue(RemoteValue* v) noexcept {
  std::lock_guard lock(v->mu);
  return v->fetched;
}

AsyncStateBase* fetchRemoteValue(RemoteValue* v) {
  std::shared_ptr<EndpointImpl> ep = v->ep.lock();
  Lane* lane = ep && ep->connected() ? ep->laneForCall() : nullptr;
  AsyncStateBase* s;
  {
    std::lock_guard lock(v->mu);
    if (v->fetched) {
      v->fetched->addRef();
      return v->fetched;
    }
    s = v->makeFetch();
    // Shared by every handle: one cancel() must not spoil it for the others.
    s->setEndsOnlyByAnswer();
    // Bound to its reply's lane before other threads can wait on it.
    if (lane) ep->bindReplyState(lane, s);
    v->fetched = s;  // the record's reference
  }
  s->addRef();  // the caller's
  if (!lane) {
    s->completeWithError(AsyncError::kConnectionClosed, "the connection that holds the value closed");
    return s;
  }
  const bool nested = sendsNested(lane);
  if (onProducersLane(v, lane)) {
    // A FETCH need not be a continuation: sent as a plain frame when the
    // producing call was one, it runs after that call.
    sendFetchOrFail(*ep, v, lane, s, nested && v->nested);
    return s;
  }
  // The FETCH could overtake the call that makes the value: it leaves once
  // that call was answered (without blocking this thread).
  retainRemoteValue(v);
  s->addRef();
  std::weak_ptr<EndpointImpl> weak = ep;
  v->answer->addCallback(InlineCallback([weak, v, lane, s, nested] {
    if (auto e = weak.lock()) {
      sendFetchOrFail(*e, v, lane, s, nested);
    } else {
      // Only while the endpoint is being destroyed (its pending calls fail
      // inline): its memory is still there for the completion.
      s->completeWithError(AsyncError::kConnectionClosed, "the connection that holds the value closed");
    }
    s->release();
    releaseRemoteValue(v);
  }));
  return s;
}

EndpointImpl* callTarget(const EndpointClass* self) {
  if (self) {
    ObjectCore* core = ObjectAccess::core(*self);
    if (core && core->remote) return core->ep.get();
  }
  ThreadState& ts = threadState();
  if (ts.current) return ts.current;
  return ts.connected.get();
}

bool prepareRemoteValueArg(RemoteValue* v, EndpointImpl* target) {
  if (!target || target != v->raw) return false;
  std::shared_ptr<EndpointImpl> ep = v->ep.lock();
  if (ep.get() != target) return false;  // another endpoint at the same address
  Lane* lane = target->laneForCall();
  if (orderedAfterProducer(v, lane, sendsNested(lane))) return true;
  // The call could reach the holder first: it waits for the answer, within
  // the thread's CallTimeout.
  std::int64_t timeoutMs = -1;
  if (std::int64_t deadline = threadState().deadlineNs) {
    timeoutMs = std::max<std::int64_t>(0, (deadline - steadyNowNs() + 999'999) / 1'000'000);
  }
  if (!waitForState(*v->answer, timeoutMs)) {
    CallTimeout::noteSyncTimeout();
    throw SyncTimeout("the call that makes an AsyncRef passed on was not answered within the CallTimeout");
  }
  return true;
}

std::uint64_t mentionRemoteValue(RemoteValue* v, EndpointImpl* ep) {
  if (ep != v->raw || v->ep.expired()) return 0;
  // Counted when the call is sent (settleMentions): a call dropped before
  // that must not announce a mention the holder never sees.
  threadState().noteMention(v);
  retainRemoteValue(v);
  return v->id;
}

void settleMentions(std::size_t from, bool sent) noexcept {
  ThreadState& ts = threadState();
  auto& pending = ts.mentionsPending;
  for (std::size_t i = from; i < pending.size(); ++i) {
    if (sent) pending[i]->mentions.fetch_add(1, std::memory_order_relaxed);
    releaseRemoteValue(pending[i]);
  }
  pending.resize(from);
  ts.noteCountsSettled();
}

AsyncStateBase* takeHeldValue(EndpointImpl* ep, std::uint64_t id, const std::type_info& type) {
  HeldValues::Result why;
  AsyncStateBase* s = ep->held().take(id, &type, why);
  if (!s) {
    WireReader::fail(why == HeldValues::Result::kWrongType
                         ? "value " + std::to_string(id) + " is named as another type than it holds"
                         : "value " + std::to_string(id) + ", which this side does not hold");
  }
  return s;
}

}  // namespace myelin::detail
