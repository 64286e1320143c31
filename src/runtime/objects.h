// Remote objects (docs/objects.md): the core behind every EndpointClass
// object that is exported to a peer or stands in for a peer's object, and
// the per-connection export table with its release accounting (§4).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "myelin/class_ref.h"
#include "myelin/endpoint.h"

namespace myelin::detail {

class EndpointImpl;

/// Shared by everything that refers to one object: its base pointer, the
/// export entries naming it, calls running on it. Intrusively counted.
struct ObjectCore {
  explicit ObjectCore(bool isRemote) : remote(isRemote) {}

  std::atomic<std::int64_t> refs{1};
  const bool remote;  // a proxy of a peer's object (else a local object)

  // A local object: what calls run on, and how the runtime deletes it when
  // it owns it (objects made by a remote constructor or makeRef). `obj` is
  // cleared under `mu` when an object the runtime does not own is
  // destroyed; such an object's base pointer holds a reference to the core
  // (`baseHolds`), so the core outlives it. An owned object's does not:
  // the last reference deletes the object.
  std::mutex mu;
  EndpointClass* obj = nullptr;
  void (*destroy)(EndpointClass*) = nullptr;
  std::uint32_t cls = 0;  // its class: a call must name a method of it
  bool baseHolds = false;

  // A proxy: the connection (kept open while the proxy lives), the
  // object's id in the peer's namespace and the counts of §4.
  std::shared_ptr<EndpointImpl> ep;
  std::uint64_t id = 0;
  const ClassHooksData* cls_hooks = nullptr;  // its class: every reference naming it must agree
  std::uint64_t received = 0;  // guarded by the endpoint's import map lock
  std::atomic<std::uint64_t> mentions{0};
  // The stand-in ClassRefs hand out (made under `mu` on first need, deleted
  // with the core; its base pointer holds no reference).
  EndpointClass* proxy = nullptr;
  void (*destroyProxy)(EndpointClass*) = nullptr;
};

void retainCore(ObjectCore* c);
/// Drops one reference. The last one deletes a runtime-owned object (its
/// destructor runs on this thread) or, for a proxy, sends RELEASE.
void releaseCore(ObjectCore* c);

/// The one door to EndpointClass's private pointer.
struct ObjectAccess {
  static ObjectCore* core(const EndpointClass& o) { return std::atomic_ref(o.myelinCore_).load(); }
  /// Sets the pointer if it is still null; false if another thread won.
  static bool bind(const EndpointClass& o, ObjectCore* c) {
    ObjectCore* expected = nullptr;
    return std::atomic_ref(o.myelinCore_).compare_exchange_strong(expected, c);
  }
  static ObjectCore* take(const EndpointClass& o) { return std::atomic_ref(o.myelinCore_).exchange(nullptr); }
};

/// The objects of ours a peer may name, by id (docs/objects.md §3, §4).
///
/// @par Thread Safety
/// Every member may be called from any thread. Cores handed back through a
/// `drop` argument or a returned list must be released (releaseCore) after
/// the call, outside any lock: that may run a destructor.
class ExportTable {
 public:
  ExportTable() = default;
  ExportTable(const ExportTable&) = delete;
  ExportTable& operator=(const ExportTable&) = delete;
  ~ExportTable();

  /// One more reference to `core` sent to the peer: counted on its entry,
  /// or a new entry (holding a reference of its own) if fewer than `max`
  /// objects are exported. Returns the id, 0 after clear(), kFull if a new
  /// entry would pass `max`.
  /// `gen`, if given, receives the entry's generation: ids are reused, and
  /// unsend() must not touch an entry made for the same object after this
  /// one went.
  static constexpr std::uint64_t kFull = ~std::uint64_t{0};
  std::uint64_t addRef(ObjectCore* core, std::size_t max = ~std::size_t{0}, std::uint64_t* gen = nullptr);
  /// A call naming `id` is about to run, or a reference naming it was
  /// decoded: counts it as seen and returns the core with one reference
  /// for the caller, or null if the id is unknown.
  ObjectCore* takeForCall(std::uint64_t id, ObjectCore*& drop);
  /// The reference addRef() counted on entry `id` of generation `gen`
  /// taken back: the message that carried it was dropped before it left.
  /// Returns the entry's core if the entry went with it (the caller
  /// releases it), else null. `overReleased` is set when the peer has
  /// already released every reference counted, this one included, which
  /// never reached it — the entry may be gone for that, or made again for
  /// a later reference: the peer is wrong (fault it), and the counts stay
  /// as they are (never fewer sent than released, no other entry touched).
  ObjectCore* unsend(std::uint64_t id, std::uint64_t gen, bool& overReleased);

  enum class ReleaseResult : std::uint8_t { kOk, kUnknown, kTooMany };
  /// The peer released `refs` references and had sent `mentions` messages
  /// naming `id`. kUnknown / kTooMany: the peer is wrong (fault it).
  ReleaseResult release(std::uint64_t id, std::uint64_t refs, std::uint64_t mentions, ObjectCore*& drop);


 private:
  struct Entry {
    ObjectCore* core = nullptr;  // null: free
    std::uint64_t sent = 0, released = 0, expected = 0, seen = 0;
    std::uint64_t gen = 0;  // which of the entries this id has named
  };

 public:
  /// The entries a closed table gave up, each holding a reference to its
  /// object: forEachCore() hands them over one by one; those still here
  /// when the Taken ends are released then. Taking them out moves the
  /// table's entries: it allocates nothing, so a connection that closes
  /// out of memory still lets its objects go.
  class Taken {
   public:
    Taken() = default;
    Taken(Taken&& o) noexcept : entries_(std::move(o.entries_)) { o.entries_.clear(); }
    Taken& operator=(Taken&& o) noexcept {
      if (this != &o) {
        forEachCore([](ObjectCore* c) { releaseCore(c); });
        entries_ = std::move(o.entries_);
        o.entries_.clear();
      }
      return *this;
    }
    ~Taken() {
      forEachCore([](ObjectCore* c) { releaseCore(c); });
    }
    /// Objects held.
    std::size_t size() const noexcept;
    bool empty() const noexcept { return size() == 0; }
    /// Calls f(core) for each object held, whose reference f takes over.
    template <class F>
    void forEachCore(F&& f) {
      for (Entry& e : entries_) {
        if (ObjectCore* c = std::exchange(e.core, nullptr)) f(c);
      }
      entries_.clear();
    }

   private:
    friend class ExportTable;
    explicit Taken(std::vector<Entry>&& e) noexcept : entries_(std::move(e)) {}
    std::vector<Entry> entries_;
  };

  /// Drops every entry (the connection closed) and returns them; later
  /// add() returns 0.
  Taken clear() noexcept;
  /// Objects currently exported.
  std::size_t size() const;

 private:
  /// Frees the entry if nothing refers to it any more; returns its core.
  ObjectCore* removeIfDone(std::uint64_t id);

  mutable std::mutex mu_;
  std::vector<Entry> entries_;  // id = index + 1
  std::unordered_map<ObjectCore*, std::uint64_t> ids_;  // core -> id of its entry
  std::vector<std::uint32_t> free_;
  std::size_t live_ = 0;
  std::uint64_t entriesMade_ = 0;  // the last entry's generation
  bool closed_ = false;
};

/// Takes back what encodeRef counted for this thread's references from
/// entry `from` of ThreadState::refsSent on: their frame was dropped.
void takeBackRefs(std::size_t from) noexcept;

}  // namespace myelin::detail
