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
    if (c->ep) {
      std::uint64_t received = c->ep->forgetImport(c);
      c->ep->sendRelease(c->id, received, c->mentions.load(std::memory_order_relaxed));
    }
    if (c->proxy) {
      ObjectAccess::take(*c->proxy);  // its base destructor has nothing left to do
      c->destroyProxy(c->proxy);
    }
  } else if (c->destroy && c->obj) {
    EndpointClass* obj = c->obj;
    ObjectAccess::take(*obj);  // its base destructor has nothing left to do
    c->destroy(obj);
  }
  delete c;
}

ExportTable::~ExportTable() {
  clear();  // the entries are released as the Taken ends
}

std::uint64_t ExportTable::addRef(ObjectCore* core, std::size_t max, std::uint64_t* gen) {
  std::lock_guard lock(mu_);
  if (closed_) return 0;
  if (auto it = ids_.find(core); it != ids_.end()) {
    Entry& e = entries_[it->second - 1];
    ++e.sent;
    if (gen) *gen = e.gen;
    return it->second;
  }
  if (live_ >= max) return kFull;
  // What may run out of memory comes first, and is undone if it does: a
  // failed addRef leaves the table as it was. free_ has room for every
  // entry, so removeIfDone() never allocates.
  auto id = ids_.try_emplace(core, 0).first;
  std::uint32_t index;
  if (!free_.empty()) {
    index = free_.back();
    free_.pop_back();
  } else {
    try {
      free_.reserve(entries_.size() + 1);
      entries_.emplace_back();
    } catch (...) {
      ids_.erase(id);
      throw;
    }
    index = static_cast<std::uint32_t>(entries_.size() - 1);
  }
  retainCore(core);  // the new entry's
  entries_[index] = Entry{core, 1, 0, 0, 0, ++entriesMade_};
  if (gen) *gen = entriesMade_;
  ++live_;
  id->second = std::uint64_t{index} + 1;
  return id->second;
}

ObjectCore* ExportTable::removeIfDone(std::uint64_t id) {
  Entry& e = entries_[id - 1];
  if (e.sent != e.released || e.seen != e.expected) return nullptr;
  ObjectCore* c = e.core;
  e = Entry{};
  ids_.erase(c);
  free_.push_back(static_cast<std::uint32_t>(id - 1));
  --live_;
  return c;
}

ObjectCore* ExportTable::unsend(std::uint64_t id, std::uint64_t gen, bool& overReleased) {
  std::lock_guard lock(mu_);
  // release() accepts up to `sent - released`, which counts references
  // still being encoded. An entry gone (not cleared: the connection is
  // open), or made again since, went because the peer released this
  // reference before it was sent; so does one whose every reference counted
  // is released. Taking the reference back from it would leave fewer sent
  // than released (the next release's bound would wrap around), or take it
  // from the new entry, whose object the peer may hold.
  Entry* e = id != 0 && id <= entries_.size() ? &entries_[id - 1] : nullptr;
  if (e && (!e->core || e->gen != gen)) e = nullptr;  // gone, or made again
  overReleased = !closed_ && (!e || e->sent == e->released);
  if (!e || overReleased) return nullptr;
  --e->sent;
  return removeIfDone(id);
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

ExportTable::Taken ExportTable::clear() noexcept {
  std::lock_guard lock(mu_);
  closed_ = true;
  Taken out(std::move(entries_));
  entries_.clear();  // a moved-from vector is valid but unspecified
  ids_.clear();
  free_.clear();
  live_ = 0;
  return out;
}

std::size_t ExportTable::Taken::size() const noexcept {
  std::size_t n = 0;
  for (const Entry& e : entries_) n += e.core != nullptr;
  return n;
}

std::size_t ExportTable::size() const {
  std::lock_guard lock(mu_);
  return live_;
}

void bindRemoteObject(EndpointClass& self, EndpointImpl* ep, std::uint64_t ref, const ClassHooksData& cls) {
  ObjectCore* core = ep->importRef(ref >> 1, cls);
  // Two threads racing into the first call of a lazily constructed proxy:
  // the loser's object is released again.
  if (!ObjectAccess::bind(self, core)) releaseCore(core);
}

void dropRemoteObject(EndpointImpl* ep, std::uint64_t ref, const ClassHooksData& cls) {
  releaseCore(ep->importRef(ref >> 1, cls));
}

bool hasObjectCore(const EndpointClass& obj) { return ObjectAccess::core(obj) != nullptr; }

// ---------------------------------------------------------------------------
// References as values (docs/objects.md §5)

namespace {

/// The core a stand-in under construction binds to (refTarget), and its
/// class: an endpoint-class member the stand-in constructs must not take it.
struct PendingProxy {
  ObjectCore* core = nullptr;
  const ClassHooksData* cls = nullptr;
};
thread_local PendingProxy tlsPending;

}  // namespace

bool bindPendingProxy(EndpointClass& self, const ClassHooksData& h) {
  if (!tlsPending.core || tlsPending.cls != &h) return false;
  ObjectAccess::bind(self, std::exchange(tlsPending.core, nullptr));
  return true;
}

void refRetain(ObjectCore* core) noexcept { retainCore(core); }

void refRelease(ObjectCore* core) noexcept {
  try {
    releaseCore(core);
  } catch (...) {
    // As in ~EndpointClass: a failed RELEASE is reported by the
    // connection's fault handling; a throwing destructor is the object's.
  }
}

bool refIsRemote(const ObjectCore* core) noexcept { return core->remote; }

ObjectCore* refCoreOf(const EndpointClass& obj, const ClassHooksData& h) {
  ObjectCore* c = ObjectAccess::core(obj);
  if (!c && h.constructDefault) {
    // A proxy of a class that declares no constructor, not called yet: it
    // is constructed on the peer now, so that it names an object there.
    h.constructDefault(const_cast<EndpointClass&>(obj));
    c = ObjectAccess::core(obj);
  }
  if (!c) {
    // A local object referred to for the first time. Its base pointer holds
    // the core's first reference, so the core outlives it (~EndpointClass).
    auto* n = new ObjectCore(false);
    n->obj = const_cast<EndpointClass*>(&obj);
    n->cls = static_cast<std::uint32_t>(h.implClass);
    n->baseHolds = true;
    if (!ObjectAccess::bind(obj, n)) delete n;  // another thread bound one first
    c = ObjectAccess::core(obj);
  }
  retainCore(c);
  return c;
}

ObjectCore* adoptNew(EndpointClass* obj, void (*destroy)(EndpointClass*), const ClassHooksData& h) {
  ObjectCore* c = ObjectAccess::core(*obj);
  if (!c && h.constructDefault) {
    h.constructDefault(*obj);
    c = ObjectAccess::core(*obj);
  }
  if (c) {
    // A new proxy, or a local object whose constructor already referred to
    // itself: the reference its base pointer holds becomes the new
    // ClassRef's, and the runtime owns the object from here on.
    std::unique_lock lock(c->mu);
    if (!c->remote) {
      c->destroy = destroy;
      c->baseHolds = false;
    } else if (!c->proxy) {
      c->proxy = obj;
      c->destroyProxy = destroy;
    } else {
      // The peer's constructor handed the new object to us already (it
      // passed itself on), so it has a stand-in: that one serves.
      lock.unlock();
      ObjectAccess::take(*obj);
      destroy(obj);
    }
    return c;
  }
  auto* n = new ObjectCore(false);
  n->obj = obj;
  n->destroy = destroy;
  n->cls = static_cast<std::uint32_t>(h.implClass);
  ObjectAccess::bind(*obj, n);
  return n;
}

EndpointClass* refTarget(ObjectCore* core, const ClassHooksData& h) {
  std::lock_guard lock(core->mu);
  if (!core->remote) return core->obj;
  if (!core->proxy) {
    if (!h.makeProxy) {
      throw InvalidConfigurationError(std::string(h.name) +
                                      " cannot stand in for a peer's object: it needs a constructor whose "
                                      "parameters can all be default-constructed");
    }
    tlsPending = {core, &h};
    EndpointClass* p;
    try {
      p = h.makeProxy();
    } catch (...) {
      tlsPending = {};
      throw;
    }
    // A class without a constructor stub (an implicit or defaulted one) is
    // bound here instead.
    if (std::exchange(tlsPending, {}).core) ObjectAccess::bind(*p, core);
    core->proxy = p;
    core->destroyProxy = h.destroy;
  }
  return core->proxy;
}

std::uint64_t encodeRef(EndpointImpl* ep, ObjectCore* core, const ClassHooksData& h) {
  if (!core) return 0;
  if (core->remote) {
    if (core->ep.get() != ep) {
      throw WrongEndpointOnStackError(std::string("a reference to a ") + h.name + " of " +
                                      core->ep->remoteAddress() + " cannot be sent over another connection");
    }
    threadState().noteRefSent(nullptr, core);
    core->mentions.fetch_add(1, std::memory_order_relaxed);
    return core->id << 1 | 1;
  }
  if (h.implClass < 0) {
    throw InvalidConfigurationError(std::string(h.name) +
                                    " is not implemented by this program (myelin-gen --implements): its objects "
                                    "cannot be passed to a peer");
  }
  ThreadState& ts = threadState();
  ts.noteRefSent(ep, core);
  // Nothing counted (out of memory: addRef left the table as it was; the
  // connection closed; the table full): the note goes, since taking it back
  // would release a reference the table never counted and fault the
  // connection.
  auto unnote = [&ts] {
    ts.refsSent.pop_back();
    ts.noteCountsSettled();
  };
  std::uint64_t gen = 0;
  std::uint64_t id;
  try {
    id = ep->exports().addRef(core, ep->config().maxAllocObjects, &gen);
  } catch (...) {
    unnote();
    throw;
  }
  if (id == 0 || id == ExportTable::kFull) {
    unnote();
    if (id == 0) throw ConnectionClosedError("the connection to " + ep->remoteAddress() + " is closed");
    throw InvalidConfigurationError("more than maxAllocObjects (" + std::to_string(ep->config().maxAllocObjects) +
                                    ") objects would be exported to " + ep->remoteAddress());
  }
  ts.refsSent.back().id = id;
  ts.refsSent.back().gen = gen;
  return id << 1;
}

void takeBackRefs(std::size_t from) noexcept {
  ThreadState& ts = threadState();
  auto& sent = ts.refsSent;
  EndpointImpl* faulted = nullptr;  // a dropped message's references name one endpoint: one fault
  while (sent.size() > from) {
    ThreadState::SentRef r = sent.back();
    sent.pop_back();
    if (!r.ep) {
      r.core->mentions.fetch_sub(1, std::memory_order_relaxed);
    } else {
      bool overReleased = false;
      if (ObjectCore* drop = r.ep->exports().unsend(r.id, r.gen, overReleased)) {
        releaseCoresAs(r.ep, {drop});  // the entry's reference; a destructor calls that connection
      }
      if (overReleased && r.ep != faulted) {
        faulted = r.ep;
        try {
          r.ep->faultLater("release of a reference to one of this side's objects that never reached it");
        } catch (...) {
          // Out of memory: the counts stay sound without the fault.
        }
      }
    }
  }
  ts.noteCountsSettled();
}

DecodedRef decodeRef(EndpointImpl* ep, std::uint64_t leaf, const ClassHooksData& h) {
  if (leaf == 0) return {};
  std::uint64_t id = leaf >> 1;
  if (leaf & 1) {
    // One of our objects, named by the id we gave it.
    ObjectCore* drop = nullptr;
    ObjectCore* c = ep->exports().takeForCall(id, drop);
    if (drop) releaseCore(drop);  // the entry's reference; ours keeps the core
    if (!c) {
      WireReader::fail("a reference to object " + std::to_string(id) +
                       ", which this side never exported or already released");
    }
    if (h.implClass < 0 || c->cls != static_cast<std::uint32_t>(h.implClass)) {
      releaseCore(c);
      WireReader::fail("a reference to object " + std::to_string(id) + ", which is not a " + h.name);
    }
    std::lock_guard lock(c->mu);
    return {c, c->obj};
  }
  if (!h.constructDefault) {
    WireReader::fail(std::string("a reference to a peer's ") + h.name + ", which this program does not call");
  }
  ObjectCore* c = ep->importRef(id, h);
  try {
    return {c, refTarget(c, h)};
  } catch (const std::exception&) {
    releaseCore(c);
    // Read as null: the value fails once read whole, and the references
    // after this one are counted and let go with it (decodeCounted).
    if (deferRefFailure()) return {};
    throw;
  } catch (...) {  // not std::exception (a thread's cancellation among them): on its way
    releaseCore(c);
    throw;
  }
}

}  // namespace myelin::detail

namespace myelin {

EndpointClass::~EndpointClass() {
  detail::ObjectCore* c = detail::ObjectAccess::take(*this);
  if (!c) return;
  try {
    if (!c->remote) {
      // A local object destroyed while referred to: calls that name it from
      // now on fail instead of touching freed memory.
      {
        std::lock_guard lock(c->mu);
        c->obj = nullptr;
      }
      if (c->baseHolds) detail::releaseCore(c);
      return;
    }
    detail::releaseCore(c);
  } catch (...) {
    // A destructor must not throw; the connection's own fault handling
    // reports a failed RELEASE.
  }
}

}  // namespace myelin
