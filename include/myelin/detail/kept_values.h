// Decoded values kept for the next decode of their type. A value that owns
// heap storage (a vector, a long string, a struct holding one) is not freed
// when it ends: a method's arguments stay in a slot of the thread that ran it
// (ArgSlot), an Async's value goes to its type's pool (KeptValues). The next
// decode overwrites the kept value in place, so its vectors and strings keep
// their capacity (docs/architecture.md, "Decoding into kept values").
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "myelin/detail/codec.h"
#include "myelin/detail/light_mutex.h"
#include "myelin/detail/result_slot.h"

namespace myelin::detail {

// ---------------------------------------------------------------------------
// Which types may be kept.
//
// kOverwrites: Codec<T>::decode into any T leaves exactly what decoding into
// T{} leaves (every codec below resets what the message does not set).
// kOwnsHeap: a value may own heap storage, which is what keeping it saves.
// Anything else (object references, shared pointers, user codecs) is never
// kept. Depth bounds the look into nested types, so a recursive struct is
// simply not kept.

template <class T, int Depth = 8, class = void>
struct KeepOf {
  static constexpr bool kOverwrites = false;
  static constexpr bool kOwnsHeap = false;
};

template <class T, int D>
  requires(D > 0 && (std::is_arithmetic_v<T> || IsEnum<T>::value))
struct KeepOf<T, D> {
  static constexpr bool kOverwrites = true;
  static constexpr bool kOwnsHeap = false;
};

template <int D>
  requires(D > 0)
struct KeepOf<std::string, D> {
  static constexpr bool kOverwrites = true;
  static constexpr bool kOwnsHeap = true;
};

template <class T, int D>
  requires(D > 0)
struct KeepOf<std::vector<T>, D> {
  static constexpr bool kOverwrites = KeepOf<T, D - 1>::kOverwrites;
  static constexpr bool kOwnsHeap = true;
};

template <class T, std::size_t N, int D>
  requires(D > 0)
struct KeepOf<std::array<T, N>, D> {
  static constexpr bool kOverwrites = KeepOf<T, D - 1>::kOverwrites;
  static constexpr bool kOwnsHeap = KeepOf<T, D - 1>::kOwnsHeap;
};

template <class T, int D>
  requires(D > 0)
struct KeepOf<std::optional<T>, D> {
  static constexpr bool kOverwrites = KeepOf<T, D - 1>::kOverwrites;
  static constexpr bool kOwnsHeap = KeepOf<T, D - 1>::kOwnsHeap;
};

template <class K, class V, int D>
  requires(D > 0)
struct KeepOf<std::map<K, V>, D> {
  static constexpr bool kOverwrites = KeepOf<K, D - 1>::kOverwrites && KeepOf<V, D - 1>::kOverwrites;
  static constexpr bool kOwnsHeap = true;
};

template <class T, int D>
  requires(D > 0)
struct KeepOf<std::set<T>, D> {
  static constexpr bool kOverwrites = KeepOf<T, D - 1>::kOverwrites;
  static constexpr bool kOwnsHeap = true;
};

template <class S, int D, class Fields>
struct StructKeep;
template <class S, int D, class... B, class... M>
struct StructKeep<S, D, std::tuple<FieldDesc<B, M>...>> {
  static constexpr bool kOverwrites = (KeepOf<M, D - 1>::kOverwrites && ...);
  static constexpr bool kOwnsHeap = (KeepOf<M, D - 1>::kOwnsHeap || ...);
};

template <class S, int D>
  requires(D > 0 && IsStruct<S>::value)
struct KeepOf<S, D> : StructKeep<S, D, std::remove_cvref_t<decltype(StructTraits<S>::kFields)>> {};

/// True when values of T are kept for reuse.
template <class T>
inline constexpr bool kKeepable = KeepOf<T>::kOverwrites && KeepOf<T>::kOwnsHeap;

// ---------------------------------------------------------------------------
// How much a value holds: its heap blocks, each counted with 16 bytes of
// allocator overhead. Counting stops once `sum` passes `limit` (false).

inline constexpr std::size_t kBlockOverhead = 16;

template <class T>
bool addHeapBytes(const T& v, std::size_t& sum, std::size_t limit) {
  if constexpr (!KeepOf<T>::kOwnsHeap) {
    return true;
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (v.capacity() > std::string().capacity()) sum += v.capacity() + 1 + kBlockOverhead;
    return sum <= limit;
  } else if constexpr (IsStruct<T>::value) {
    return std::apply([&](const auto&... f) { return (addHeapBytes(v.*(f.ptr), sum, limit) && ...); },
                      StructTraits<T>::kFields);
  } else if constexpr (requires { typename T::allocator_type; } && requires { v.capacity(); }) {  // vector
    using E = typename T::value_type;
    if (v.capacity()) sum += v.capacity() * sizeof(E) + kBlockOverhead;
    if (sum > limit) return false;
    if constexpr (KeepOf<E>::kOwnsHeap) {
      for (const E& e : v) {
        if (!addHeapBytes(e, sum, limit)) return false;
      }
    }
    return true;
  } else if constexpr (requires { typename T::key_type; }) {  // map, set
    sum += v.size() * (sizeof(typename T::value_type) + 32 + kBlockOverhead);
    if (sum > limit) return false;
    for (const auto& e : v) {
      if constexpr (requires { e.first; }) {
        if (!addHeapBytes(e.first, sum, limit) || !addHeapBytes(e.second, sum, limit)) return false;
      } else {
        if (!addHeapBytes(e, sum, limit)) return false;
      }
    }
    return true;
  } else if constexpr (requires { v.has_value(); }) {  // optional
    return !v || addHeapBytes(*v, sum, limit);
  } else {  // array
    for (const auto& e : v) {
      if (!addHeapBytes(e, sum, limit)) return false;
    }
    return true;
  }
}

// ---------------------------------------------------------------------------
// The pools.

/// What is kept, process-wide: a value holding more than kKeptValueBytes is
/// freed as before; all pools together hold at most kKeptBytesTotal, each at
/// most kKeptPerType values. Callers with many replies in flight decode
/// ahead of the callbacks that end them, so a pool must hold a burst: a
/// client with 128 MediumList100 calls in flight still made 155 of its 201
/// allocations a reply with 16 values a type (callgrind), and 20 threads
/// with 512 UserProfile calls in flight each found the pool empty for 40 %
/// of their replies with 256, 1.5 % with 4096 (2.3 MB kept).
inline constexpr std::size_t kKeptValueBytes = 256 * 1024;
inline constexpr std::size_t kKeptBytesTotal = 8 * 1024 * 1024;
inline constexpr std::size_t kKeptPerType = 4096;

/// Counts `more` bytes in keptBytesTotal(); false (and nothing counted) when
/// that would pass kKeptBytesTotal.
inline bool reserveKept(std::size_t more) noexcept {
  std::atomic<std::size_t>& total = keptBytesTotal();
  if (total.fetch_add(more, std::memory_order_relaxed) + more <= kKeptBytesTotal) return true;
  total.fetch_sub(more, std::memory_order_relaxed);
  return false;
}

/// Moves a slot's count in keptBytesTotal() from `counted` to `bytes`, the
/// heap bytes of the value it keeps now (`fits`: within kKeptValueBytes).
/// False when the value is over a bound: then the slot counts nothing, and
/// its value is to be freed.
inline bool countKept(std::size_t& counted, std::size_t bytes, bool fits) noexcept {
  if (fits && bytes == counted) [[likely]] return true;
  std::atomic<std::size_t>& total = keptBytesTotal();
  if (fits && bytes > counted) {
    fits = reserveKept(bytes - counted);
  } else if (fits) {
    total.fetch_sub(counted - bytes, std::memory_order_relaxed);
  }
  if (fits) {
    counted = bytes;
    return true;
  }
  total.fetch_sub(counted, std::memory_order_relaxed);
  counted = 0;
  return false;
}

/// One type's kept values. Never destroyed: a runtime thread may still
/// decode while the process exits.
template <class T>
class KeptValues {
  static_assert(kKeepable<T>);

 public:
  static KeptValues& instance() {
    static KeptValues* pool = new KeptValues;
    return *pool;
  }

  /// Moves a kept value into `into`; false (and `into` untouched) when none.
  /// `into` is made by the caller, before the lock. Constructing an Async's
  /// value from the kept one under the lock instead (one move less) took
  /// UserProfileServiceCB at 20 threads from 3.69 to 3.34 M calls/s, likely
  /// because the state's storage, first written under the lock, held it
  /// longer while other threads waited.
  bool take(T& into) {
    if (!wanted_.load(std::memory_order_relaxed)) wanted_.store(true, std::memory_order_relaxed);
    if (count_.load(std::memory_order_relaxed) == 0) return false;  // no lock when empty
    std::size_t bytes = 0;
    {
      std::lock_guard lock(mu_);
      if (kept_.empty()) return false;
      into = std::move(kept_.back().value);
      bytes = kept_.back().bytes;
      kept_.pop_back();
      count_.store(kept_.size(), std::memory_order_relaxed);
    }
    keptBytesTotal().fetch_sub(bytes, std::memory_order_relaxed);
    return true;
  }

  /// Keeps `v` (moved from) if something of this process takes values of
  /// its type (a decode into an Async looked here before), it holds heap
  /// storage and the bounds allow; otherwise leaves it to be destroyed by its
  /// owner. A service's results are not kept unless it also decodes that
  /// type: its arguments decode into their per-thread slot (ArgSlot), and
  /// the pool filled with results nobody took, 8 MiB held for nothing,
  /// left no room for the slots.
  static void keep(T& v) noexcept {
    KeptValues& pool = instance();
    if (!pool.wanted_.load(std::memory_order_relaxed)) return;
    std::size_t bytes = 0;
    if (!addHeapBytes(v, bytes, kKeptValueBytes) || bytes == 0) return;
    pool.give(v, bytes);
  }

  std::size_t size() const { return count_.load(std::memory_order_relaxed); }

 private:
  KeptValues() = default;

  /// keep() with the value's bytes counted.
  void give(T& v, std::size_t bytes) noexcept {
    if (count_.load(std::memory_order_relaxed) >= kKeptPerType || !reserveKept(bytes)) return;
    try {
      std::lock_guard lock(mu_);
      if (kept_.size() < kKeptPerType) {
        // Made in place: one move of the value, not two (a temporary Kept,
        // then the vector's). A move copies each short string's bytes;
        // RoundTripMediumMsgAsyncCB at 1 thread x 512 ran 4.54 -> 4.88 M
        // calls/s, at 100 x 32 4.46 -> 4.81 (docs/benchmarks.md).
        kept_.emplace_back(std::move(v), bytes);
        count_.store(kept_.size(), std::memory_order_relaxed);
        return;
      }
    } catch (...) {  // no memory for the list: the value is simply freed
    }
    keptBytesTotal().fetch_sub(bytes, std::memory_order_relaxed);
  }

  struct Kept {
    Kept(T&& v, std::size_t b) : value(std::move(v)), bytes(b) {}
    T value;
    std::size_t bytes;
  };
  // Taken twice a call whose Async value is kept (pthread's lock and unlock
  // were 126 instructions a call of RoundTripMediumMsgAsyncCB's client); a
  // SpinMutex, given back with a plain store: that client at 1 thread and
  // 512 calls in flight ran 3.49-3.55 M/s with a LightMutex here, 3.72-3.75
  // M/s with this one, side by side (at 100 threads x 8, the same within
  // the runs' spread).
  SpinMutex mu_;
  std::atomic<bool> wanted_{false};  // take() was called: someone decodes this type from here
  std::atomic<std::size_t> count_{0};
  std::vector<Kept> kept_;  // mu_
};

/// The last arguments of one method on one thread, left where they are for
/// the next call of that method on that thread to decode into: a call's
/// arguments are decoded and end on the thread that runs it, so they need
/// no pool and no lock. A keepable argument the method takes by reference
/// stays (its vectors and strings keep their capacity); every other
/// argument is reset to its default when the call is over (a by-value one
/// was moved into the method; an object reference or shared pointer must
/// not outlive the call). Only when the parameters travel in declaration
/// order: with another plan a parameter the peer lacks must stay default.
/// The bounds are the pools': kKeptValueBytes for a call's kept arguments
/// together, and the slot's bytes count in kKeptBytesTotal.
///
/// Taking a const-reference argument from its type's pool and giving it
/// back (two mutexes and two moves a call) made a streamed MediumMessage
/// cost the receiving client 349-379 ns of CPU against 296-314 ns for fresh
/// arguments; the slot, 224-235 ns against 291-300 (docs/benchmarks.md,
/// "Arguments kept per thread").
template <class Args, class Declared>
class ArgSlot {
  template <std::size_t I>
  using E = std::tuple_element_t<I, Args>;

 public:
  /// Whether argument I stays in the slot between calls.
  template <std::size_t I>
  static constexpr bool kKeeps = kKeepable<E<I>> && std::is_reference_v<std::tuple_element_t<I, Declared>>;
  /// Whether argument I is reset to E{} when the call is over (everything
  /// that does not stay, but plain numbers, which any decode overwrites).
  template <std::size_t I>
  static constexpr bool kResets = !kKeeps<I> && !(KeepOf<E<I>>::kOverwrites && !KeepOf<E<I>>::kOwnsHeap);

  /// A method with a slot: some argument stays, and the others can be reset.
  static constexpr bool kUsable = []<std::size_t... I>(std::index_sequence<I...>) {
    return (kKeeps<I> || ...) && ((!kResets<I> || (std::is_default_constructible_v<E<I>> &&
                                                    std::is_nothrow_move_assignable_v<E<I>>)) &&
                                  ...);
  }(std::make_index_sequence<std::tuple_size_v<Args>>{});

  /// This thread's arguments of the method, now in use; nullptr while a
  /// call of the same method runs further up this thread's stack (a nested
  /// wait ran it), or when the thread is exiting.
  static Args* claim() noexcept {
    Slot* s = PerThread<Slot>::get();  // the first call on this thread makes the slot
    if (!s || s->busy) return nullptr;
    s->busy = true;
    return &s->args;
  }

  /// The call is over (returned, threw, or its arguments did not decode:
  /// any value of a kept type is fit to decode into again).
  static void release(Args& args) noexcept {
    Slot& s = *PerThread<Slot>::ifMade();  // claim() made it
    forEach<false>(args, []<class T>(T& a) noexcept { a = T{}; });
    std::size_t bytes = 0;
    bool fits = true;
    forEach<true>(args, [&]<class T>(T& a) noexcept { fits = fits && addHeapBytes(a, bytes, kKeptValueBytes); });
    if (!countKept(s.bytes, bytes, fits)) [[unlikely]] {
      // Over a bound: freed, as a fresh decode's arguments would be.
      forEach<true>(args, []<class T>(T& a) noexcept { a = T{}; });
    }
    s.busy = false;
  }

  /// Bytes this thread's slot holds (tests).
  static std::size_t heldBytes() noexcept {
    const Slot* s = PerThread<Slot>::ifMade();
    return s ? s->bytes : 0;
  }

 private:
  struct Slot {
    Args args{};
    std::size_t bytes = 0;  // counted in keptBytesTotal()
    bool busy = false;
    ~Slot() { keptBytesTotal().fetch_sub(bytes, std::memory_order_relaxed); }
  };

  // Applies f to the arguments that stay (Kept) or to those reset (!Kept).
  template <bool Kept, class F>
  static void forEach(Args& args, F&& f) noexcept {
    auto one = [&]<std::size_t I>() {
      if constexpr (Kept ? kKeeps<I> : kResets<I>) f(std::get<I>(args));
    };
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (one.template operator()<I>(), ...);
    }(std::make_index_sequence<std::tuple_size_v<Args>>{});
  }
};

/// For AsyncStateBase::setCodec: gives an ending state's value to its pool.
template <class T>
void keepAsyncValue(void* value) noexcept {
  KeptValues<T>::keep(*static_cast<T*>(value));
}

}  // namespace myelin::detail
