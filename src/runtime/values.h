// Remote futures (docs/async-and-errors.md §2): the caller's record of a
// value its peer holds for it (RemoteValue, behind an AsyncRef handle) and
// the holder's table of the values it keeps for its peer (HeldValues).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <typeinfo>
#include <unordered_map>
#include <vector>

#include "myelin/async.h"

namespace myelin::detail {

class EndpointImpl;
struct Lane;

/// The wire name of the value made by call `seq` of lane `slot`; `holderLane`:
/// the lane is the holder's own (a call made back on its lane).
inline std::uint64_t heldValueId(std::uint32_t slot, std::uint32_t seq, bool holderLane) {
  return (std::uint64_t{seq} << 18) | (std::uint64_t{slot} << 2) | (holderLane ? 2u : 0u) | 1u;
}

struct RemoteValue {
  std::atomic<int> refs{1};  // AsyncRef handles (and a pending DROP)
  std::weak_ptr<EndpointImpl> ep;
  EndpointImpl* raw = nullptr;
  Lane* lane = nullptr;   // the producing call's lane
  bool parallel = false;  // ... sent on a RemoteThreadPool lane
  bool nested = false;    // ... sent as a continuation (N bit)
  std::uint64_t id = 0;
  AsyncStateBase* answer = nullptr;  // the producing call's answer (one reference)
  std::atomic<std::uint64_t> mentions{0};  // messages sent naming the value
  std::mutex mu;
  AsyncStateBase* fetched = nullptr;  // the value, once asked for (one reference; mu)
  AsyncStateBase* (*makeFetch)() = nullptr;  // makes the typed state of a fetch
};

/// The call this thread encoded was sent (`sent`) or dropped: the AsyncRef
/// values it named from entry `from` of the thread's pending mentions on
/// are counted as mentioned, or not.
void settleMentions(std::size_t from, bool sent) noexcept;

/// The values a connection keeps for its peer, by name. Counted like
/// exported objects (objects.md §4): an entry goes once its DROP came and
/// every message naming it that the DROP announced was taken in.
/// Thread-safe.
class HeldValues {
 public:
  enum class Result : std::uint8_t { kOk, kUnknown, kWrongType, kDuplicate, kFull, kDroppedTwice, kTooFew, kClosed };

  HeldValues() = default;
  HeldValues(const HeldValues&) = delete;
  HeldValues& operator=(const HeldValues&) = delete;
  ~HeldValues() { clear(); }

  /// Keeps `state` (adds a reference) under `id`; at most `max` entries;
  /// kClosed (nothing kept) after close().
  Result hold(std::uint64_t id, AsyncStateBase* state, const std::type_info& type, std::size_t max);
  /// The value `id` for a message naming it (counted), with one reference
  /// for the caller; `type` null accepts any type (a FETCH). Null on error.
  AsyncStateBase* take(std::uint64_t id, const std::type_info* type, Result& why);
  /// The peer dropped its handles to `id` after naming it in `mentions`
  /// messages (kTooFew: fewer than it was seen named).
  Result drop(std::uint64_t id, std::uint64_t mentions);

 private:
  struct Entry {
    AsyncStateBase* state;
    const std::type_info* type;
    std::uint64_t seen = 0;
    std::uint64_t expected = 0;
    bool dropped = false;
  };
  using Map = std::unordered_map<std::uint64_t, Entry>;

 public:
  /// The entries a closed table gave up, with the reference each holds:
  /// release() lets go of them, as does the end of a Taken that still has
  /// them. Taking them out moves the table's map: it allocates nothing, so
  /// a connection that closes out of memory still lets its values go.
  class Taken {
   public:
    Taken() = default;
    Taken(Taken&& o) noexcept : map_(std::move(o.map_)) { o.map_.clear(); }
    Taken& operator=(Taken&& o) noexcept {
      if (this != &o) {
        release();
        map_ = std::move(o.map_);
        o.map_.clear();
      }
      return *this;
    }
    ~Taken() { release(); }
    bool empty() const noexcept { return map_.empty(); }
    std::size_t size() const noexcept { return map_.size(); }
    void release() noexcept {
      for (auto& [id, e] : map_) e.state->release();
      map_.clear();
    }

   private:
    friend class HeldValues;
    explicit Taken(Map&& m) noexcept : map_(std::move(m)) {}
    Map map_;
  };

  /// Forgets every entry and keeps no more (the connection ended); returns
  /// them with their references, for the caller to let go of.
  Taken close() noexcept;
  /// Forgets every entry, releasing them here.
  void clear() noexcept;
  std::size_t size();

 private:
  std::mutex mu_;
  Map map_;
  bool closed_ = false;
};

}  // namespace myelin::detail
