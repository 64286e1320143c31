// Decoded values kept for the next decode of their type. When a call's
// arguments or an Async's value end, a value that owns heap storage (a vector,
// a long string, a struct holding one) goes to its type's pool instead of
// being freed; the next decode of that type overwrites a kept value in place,
// so its vectors and strings keep their capacity and alike messages decode
// without allocating (docs/benchmarks.md, "Decoding into kept values").
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

/// Bytes held by all pools together (for the bound above, and for tests).
inline std::atomic<std::size_t>& keptBytesTotal() {
  static std::atomic<std::size_t> total{0};
  return total;
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
  bool take(T& into) {
    if (count_.load(std::memory_order_relaxed) == 0) return false;  // no lock when empty  // no lock when empty
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

  /// Keeps `v` (moved from) if it holds heap storage and the bounds allow;
  /// otherwise leaves it to be destroyed by its owner. A value with nothing
  /// on the heap (short strings) is let go before the pool is looked up:
  /// keeping a SmallMessage reply went from 34 instructions to 4 (callgrind).
  static void keep(T& v) noexcept {
    std::size_t bytes = 0;
    if (!addHeapBytes(v, bytes, kKeptValueBytes) || bytes == 0) return;
    instance().give(v, bytes);
  }

  /// keep() with the value's bytes counted.
  void give(T& v, std::size_t bytes) noexcept {
    if (count_.load(std::memory_order_relaxed) >= kKeptPerType) return;
    std::atomic<std::size_t>& total = keptBytesTotal();
    if (total.fetch_add(bytes, std::memory_order_relaxed) + bytes > kKeptBytesTotal) {
      total.fetch_sub(bytes, std::memory_order_relaxed);
      return;
    }
    try {
      std::lock_guard lock(mu_);
      if (kept_.size() < kKeptPerType) {
        kept_.push_back({std::move(v), bytes});
        count_.store(kept_.size(), std::memory_order_relaxed);
        return;
      }
    } catch (...) {  // no memory for the list: the value is simply freed
    }
    total.fetch_sub(bytes, std::memory_order_relaxed);
  }

  std::size_t size() const { return count_.load(std::memory_order_relaxed); }

 private:
  KeptValues() = default;

  struct Kept {
    T value;
    std::size_t bytes;
  };
  std::mutex mu_;
  std::atomic<std::size_t> count_{0};
  std::vector<Kept> kept_;  // mu_
};

/// The arguments of one incoming call: each keepable one that the method
/// takes by reference (`Declared` holds the declared parameter types)
/// starts from a kept value, and goes back when the call is over (also when
/// it threw: any value of such a type is fit to decode into). Only when the
/// parameters travel in declaration order: with another plan a parameter the
/// peer lacks must stay default. A by-value parameter is moved into the
/// method: nothing is left to keep, and looking would cost a streamed
/// SmallMessage 27 instructions (callgrind, StreamSmallMsgFromServer).
template <class Args, class Declared>
class KeptArgs {
 public:
  KeptArgs(Args& args, bool identityPlan) : args_(args), on_(identityPlan) {
    if (on_) forEach([]<class E>(E& a) { KeptValues<E>::instance().take(a); });
  }
  ~KeptArgs() {
    if (on_) forEach([]<class E>(E& a) { KeptValues<E>::keep(a); });
  }
  KeptArgs(const KeptArgs&) = delete;
  KeptArgs& operator=(const KeptArgs&) = delete;

  template <std::size_t I>
  static constexpr bool kKeeps =
      kKeepable<std::tuple_element_t<I, Args>> && std::is_reference_v<std::tuple_element_t<I, Declared>>;
  static constexpr bool kAny = []<std::size_t... I>(std::index_sequence<I...>) {
    return (kKeeps<I> || ...);
  }(std::make_index_sequence<std::tuple_size_v<Args>>{});

 private:
  template <class F>
  void forEach(F&& f) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (each<I>(f), ...);
    }(std::make_index_sequence<std::tuple_size_v<Args>>{});
  }
  template <std::size_t I, class F>
  void each(F& f) {
    if constexpr (kKeeps<I>) f(std::get<I>(args_));
  }

  Args& args_;
  bool on_;
};

/// For AsyncStateBase::setCodec: gives an ending state's value to its pool.
template <class T>
void keepAsyncValue(void* value) noexcept {
  KeptValues<T>::keep(*static_cast<T*>(value));
}

}  // namespace myelin::detail
