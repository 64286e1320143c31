// PendingTable: the calls of one lane that wait for their reply, by sequence
// number. Sequence numbers are given out in order, so the table is a ring
// indexed by the low bits (no allocation per call); a call that stays pending
// while the ring has moved a whole capacity past it moves to a hash map.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

namespace myelin::detail {

template <class V>
class PendingTable {
 public:
  /// Ring entries the table starts with and grows to at most; beyond that a
  /// long-pending call moves aside instead of growing the ring further.
  static constexpr std::size_t kInitialSlots = 64;
  static constexpr std::size_t kMaxSlots = 16 * 1024;

  /// Adds the call `seq` (which must not be pending already).
  void insert(std::uint32_t seq, V v) {
    if (ring_.empty()) ring_.resize(kInitialSlots);
    for (;;) {
      Slot& s = ring_[seq & (ring_.size() - 1)];
      if (!s.used) {
        s = Slot{seq, true, std::move(v)};
        ++size_;
        return;
      }
      if (ring_.size() < kMaxSlots) {
        grow();
        continue;
      }
      // The ring is as large as it gets: the older call waits aside.
      overflow_.emplace(s.seq, std::move(s.value));
      s = Slot{seq, true, std::move(v)};
      ++size_;
      return;
    }
  }

  /// The entry of call `seq`, or null if it is not pending. Allocates
  /// nothing (callers that must not throw look and replace in place).
  V* find(std::uint32_t seq) {
    if (!ring_.empty()) {
      Slot& s = ring_[seq & (ring_.size() - 1)];
      if (s.used && s.seq == seq) return &s.value;
    }
    if (overflow_.empty()) return nullptr;
    auto it = overflow_.find(seq);
    return it == overflow_.end() ? nullptr : &it->second;
  }

  /// Removes the call `seq` into `out`; false if it is not pending.
  bool take(std::uint32_t seq, V& out) {
    if (!ring_.empty()) {
      Slot& s = ring_[seq & (ring_.size() - 1)];
      if (s.used && s.seq == seq) {
        out = std::move(s.value);
        s.used = false;
        --size_;
        return true;
      }
    }
    if (overflow_.empty()) return false;
    auto it = overflow_.find(seq);
    if (it == overflow_.end()) return false;
    out = std::move(it->second);
    overflow_.erase(it);
    --size_;
    return true;
  }

  /// Removes up to `max` entries (in no particular order) and hands each to
  /// `f`; returns how many. Allocates nothing: a caller that must end every
  /// entry even out of memory takes them in runs of a fixed size. `from` is
  /// the caller's place in the ring between runs (start it at 0).
  template <class F>
  std::size_t drainSome(std::size_t max, std::size_t& from, F&& f) {
    std::size_t n = 0;
    bool wrapped = false;
    while (n < max && size_ > overflow_.size()) {  // entries left in the ring
      if (from >= ring_.size()) {
        if (wrapped) break;
        from = 0;  // entries added behind the place since the last run
        wrapped = true;
      }
      Slot& s = ring_[from++];
      if (s.used) {
        s.used = false;
        --size_;
        ++n;
        f(std::move(s.value));
      }
    }
    while (n < max && !overflow_.empty()) {
      auto it = overflow_.begin();
      f(std::move(it->second));
      overflow_.erase(it);
      --size_;
      ++n;
    }
    return n;
  }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::size_t ringSlots() const { return ring_.size(); }
  std::size_t asideCount() const { return overflow_.size(); }

 private:
  struct Slot {
    std::uint32_t seq = 0;
    bool used = false;
    V value{};
  };

  void grow() {
    std::vector<Slot> old(ring_.size() * 2);
    old.swap(ring_);
    const std::size_t mask = ring_.size() - 1;
    for (Slot& s : old) {
      if (!s.used) continue;
      Slot& d = ring_[s.seq & mask];
      if (d.used) {
        // Two calls a multiple of the new size apart: the older one waits
        // aside (sequence numbers wrap, so compare by distance).
        bool dIsOlder = static_cast<std::int32_t>(d.seq - s.seq) < 0;
        Slot& older = dIsOlder ? d : s;
        overflow_.emplace(older.seq, std::move(older.value));
        if (dIsOlder) d = std::move(s);
      } else {
        d = std::move(s);
      }
    }
  }

  std::vector<Slot> ring_;
  std::unordered_map<std::uint32_t, V> overflow_;
  std::size_t size_ = 0;
};

}  // namespace myelin::detail
