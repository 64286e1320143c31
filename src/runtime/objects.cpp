// Remote objects: object cores, the export table's accounting and the
// EndpointClass base (docs/objects.md). The frames that carry objects are
// handled in endpoint_impl.cpp.
#include "runtime/objects.h"

#include "myelin/detail/runtime_api.h"
#include "myelin/errors.h"
#include "runtime/endpoint_impl.h"

namespace myelin::detail {

void retainCore(ObjectCore* c) { c->refs.fetch_add(1, std::memory_order_relaxed); }

void releaseCore(ObjectCore* c) {
  if (c->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  if (c->remote) {
    // The last local reference to a peer's object: tell the owner how many
    // references we got and how many messages named it (§4).
    if (c->ep) c->ep->sendRelease(c->id, c->received, c->mentions.load(std::memory_order_relaxed));
  } else if (c->destroy && c->obj) {
    EndpointClass* obj = c->obj;
    ObjectAccess::take(*obj);  // its base destructor has nothing left to do
    c->destroy(obj);
  }
  delete c;
}

ExportTable::~ExportTable() {
  for (ObjectCore* c : clear()) releaseCore(c);
}

std::uint64_t ExportTable::add(ObjectCore* core) {
  std::lock_guard lock(mu_);
  if (closed_) return 0;
  std::uint32_t index;
  if (!free_.empty()) {
    index = free_.back();
    free_.pop_back();
  } else {
    index = static_cast<std::uint32_t>(entries_.size());
    entries_.emplace_back();
  }
  entries_[index] = Entry{core, 1, 0, 0, 0};
  ++live_;
  return std::uint64_t{index} + 1;
}

ObjectCore* ExportTable::removeIfDone(std::uint64_t id) {
  Entry& e = entries_[id - 1];
  if (e.sent != e.released || e.seen != e.expected) return nullptr;
  ObjectCore* c = e.core;
  e = Entry{};
  free_.push_back(static_cast<std::uint32_t>(id - 1));
  --live_;
  return c;
}

ObjectCore* ExportTable::takeForCall(std::uint64_t id, ObjectCore*& drop) {
  std::lock_guard lock(mu_);
  if (id == 0 || id > entries_.size() || !entries_[id - 1].core) return nullptr;
  Entry& e = entries_[id - 1];
  ++e.seen;
  ObjectCore* c = e.core;
  retainCore(c);
  drop = removeIfDone(id);
  return c;
}

ExportTable::ReleaseResult ExportTable::release(std::uint64_t id, std::uint64_t refs, std::uint64_t mentions,
                                                ObjectCore*& drop) {
  std::lock_guard lock(mu_);
  if (id == 0 || id > entries_.size() || !entries_[id - 1].core) return ReleaseResult::kUnknown;
  Entry& e = entries_[id - 1];
  if (refs == 0 || refs > e.sent - e.released) return ReleaseResult::kTooMany;
  e.released += refs;
  e.expected += mentions;
  drop = removeIfDone(id);
  return ReleaseResult::kOk;
}

std::vector<ObjectCore*> ExportTable::clear() {
  std::lock_guard lock(mu_);
  closed_ = true;
  std::vector<ObjectCore*> out;
  for (Entry& e : entries_) {
    if (e.core) out.push_back(e.core);
  }
  entries_.clear();
  free_.clear();
  live_ = 0;
  return out;
}

std::size_t ExportTable::size() const {
  std::lock_guard lock(mu_);
  return live_;
}

void bindRemoteObject(EndpointClass& self, EndpointImpl* ep, std::uint64_t ref) {
  auto* core = new ObjectCore(true);
  core->ep = ep->shared_from_this();
  core->id = ref >> 1;
  core->received = 1;
  // Two threads racing into the first call of a lazily constructed proxy:
  // the loser's object is released again.
  if (!ObjectAccess::bind(self, core)) releaseCore(core);
}

bool hasObjectCore(const EndpointClass& obj) { return ObjectAccess::core(obj) != nullptr; }

}  // namespace myelin::detail

namespace myelin {

EndpointClass::~EndpointClass() {
  detail::ObjectCore* c = detail::ObjectAccess::take(*this);
  if (!c) return;
  try {
    if (!c->remote) {
      // A local object destroyed while exported (the base pointer holds no
      // reference to its core): calls that name it from now on fail
      // instead of touching freed memory.
      std::lock_guard lock(c->mu);
      c->obj = nullptr;
      return;
    }
    detail::releaseCore(c);
  } catch (...) {
    // A destructor must not throw; the connection's own fault handling
    // reports a failed RELEASE.
  }
}

}  // namespace myelin
