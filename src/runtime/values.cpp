// Remote futures (docs/async-and-errors.md §2): the value table a holder
// keeps for its peer, and the caller's side of an AsyncRef: naming a value
// in a call, fetching it, and dropping it when the last handle goes.
#include "runtime/values.h"

#include <string>

#include "runtime/endpoint_impl.h"
#include "runtime/objects.h"

namespace myelin::detail {

// ---------------------------------------------------------------------------
// The holder's table

HeldValues::Result HeldValues::hold(std::uint64_t id, AsyncStateBase* state, const std::type_info& type,
                                    std::size_t max) {
  std::lock_guard lock(mu_);
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

void HeldValues::clear() {
  std::vector<AsyncStateBase*> gone;
  {
    std::lock_guard lock(mu_);
    gone.reserve(map_.size());
    for (auto& [id, e] : map_) gone.push_back(e.state);
    map_.clear();
  }
  for (AsyncStateBase* s : gone) s->release();
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

/// True if a message naming `v` sent on `lane` now reaches the holder after
/// the call that makes the value ran: both go on the same lane, which runs
/// one frame at a time.
bool orderedAfterProducer(const RemoteValue* v, const Lane* lane) {
  return lane == v->lane && !v->parallel && lane->sendMode.load(std::memory_order_relaxed) != kLaneParallel;
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
    // Bound to its reply's lane before other threads can wait on it.
    if (lane) ep->bindReplyState(lane, s);
    v->fetched = s;  // the record's reference
  }
  s->addRef();  // the caller's
  if (!lane) {
    s->completeWithError(AsyncError::kConnectionClosed, "the connection that holds the value closed");
    return s;
  }
  if (!orderedAfterProducer(v, lane)) waitForState(*v->answer, -1);
  if (v->answer->isReady() && !v->answer->hasValue()) {  // the call failed: so does its value
    s->completeWithError(v->answer->error(), v->answer->errorMessage());
    return s;
  }
  try {
    v->mentions.fetch_add(1, std::memory_order_relaxed);
    ep->sendFetch(lane, v->id, s);
  } catch (const std::exception& e) {
    s->completeWithError(AsyncError::kConnectionClosed, e.what());
  }
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
  if (!orderedAfterProducer(v, target->laneForCall())) waitForState(*v->answer, -1);
  return true;
}

std::uint64_t mentionRemoteValue(RemoteValue* v, EndpointImpl* ep) {
  if (ep != v->raw || v->ep.expired()) return 0;
  v->mentions.fetch_add(1, std::memory_order_relaxed);
  return v->id;
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
