// The result a service method last returned by copy (`return member_;`,
// an echo) on this thread, kept once its reply is encoded so that the next
// copy of its type reuses its heap storage: copy-assigning into a value of
// the same shape allocates nothing. async.h takes it, the dispatch thunk
// fills it (generated_support.h); its bytes count with the other kept values.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>

namespace myelin::detail {

/// Bytes held by all kept values together: the pools, the argument slots
/// and the result slots (kept_values.h bounds it).
inline std::atomic<std::size_t>& keptBytesTotal() {
  static std::atomic<std::size_t> total{0};
  return total;
}

/// One object of type S per thread, made on the thread's first get() and
/// destroyed when the thread ends. After that, get() answers nullptr: a
/// thread-local destructor that runs later (and may still run calls) must
/// not touch it.
template <class S>
class PerThread {
 public:
  static S* get() noexcept {
    if (S* s = live()) [[likely]] return s;
    return make();
  }
  /// The object, if get() made it and it still lives; nullptr otherwise.
  static S* ifMade() noexcept { return live(); }

 private:
  // The object's address while it lives: a plain pointer, trivially
  // destroyed, so one thread-local load answers (the holder's own
  // thread_local needs its guard tested on each access; the state byte,
  // that test and the pointer were 12 instructions per get() and ifMade()
  // pair, callgrind on a streamed call's client) and it can still be read
  // once the object is gone.
  static S*& live() noexcept {
    static thread_local S* p = nullptr;
    return p;
  }
  static bool& gone() noexcept {
    static thread_local bool g = false;
    return g;
  }
  struct Holder {
    S s;
    ~Holder() {
      live() = nullptr;
      gone() = true;
    }
  };
  __attribute__((noinline)) static S* make() noexcept {
    if (gone()) return nullptr;
    static thread_local Holder h;
    live() = &h.s;
    return &h.s;
  }
};

/// Types whose results a slot can hold: copying over a kept value is what
/// saves (not a trivially copyable one), and moving it in and out cannot
/// throw. Whether a value of T owns heap storage at all is known only where
/// its codec is (kept_values.h): the thunk enables the slot for such types.
template <class T>
inline constexpr bool kResultSlotFits = !std::is_trivially_copyable_v<T> && std::is_copy_assignable_v<T> &&
                                        std::is_nothrow_move_constructible_v<T>;

/// This thread's kept result of type T. `Async(const T&)` takes the value
/// and copies over it; the thunk gives the value back after the reply is
/// encoded, only when a result of T was copied on this thread before
/// (`wanted`): a thread that only builds fresh results of T keeps none.
/// A value taken stays counted until it comes back or another takes its
/// place, so a slot counts at most one value of at most kKeptValueBytes.
template <class T>
class ResultSlot {
  static_assert(kResultSlotFits<T>);

 public:
  struct Slot {
    std::optional<T> value;
    std::size_t bytes = 0;  // counted in keptBytesTotal(), while the value is here or out on loan
    bool wanted = false;    // a copy looked here
    ~Slot() { keptBytesTotal().fetch_sub(bytes, std::memory_order_relaxed); }
  };

  /// Moves this thread's kept value into `into` (empty) and notes that
  /// results of T are copied here; false when none is kept.
  static bool take(std::optional<T>& into) noexcept {
    // No thread-local lookup for a type no thunk of this process keeps (a
    // shared pointer, a type with a user codec, or none dispatched yet).
    if (!enabled_.load(std::memory_order_relaxed)) return false;
    Slot* s = PerThread<Slot>::get();  // the first look on this thread makes the slot
    if (!s) [[unlikely]] return false;
    s->wanted = true;
    if (!s->value) return false;
    into.emplace(std::move(*s->value));
    s->value.reset();
    return true;
  }

  /// This thread's slot when a copy looked here before and nothing is kept
  /// now; nullptr otherwise.
  static Slot* open() noexcept {
    Slot* s = PerThread<Slot>::ifMade();
    return s && s->wanted && !s->value ? s : nullptr;
  }

  /// Called by the thunk (keepResult) for types whose values may own heap
  /// storage, once it has sent such a result.
  static void enable() noexcept {
    if (!enabled_.load(std::memory_order_relaxed)) enabled_.store(true, std::memory_order_relaxed);
  }

  /// Bytes this thread's slot counts (tests).
  static std::size_t heldBytes() noexcept {
    const Slot* s = PerThread<Slot>::ifMade();
    return s ? s->bytes : 0;
  }

 private:
  static inline std::atomic<bool> enabled_{false};
};

}  // namespace myelin::detail
