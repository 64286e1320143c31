// InlineCallback: a move-only `void()` callable that keeps small captures in
// place. Async callbacks are stored in it, so registering one costs no heap
// allocation when its captures fit in kInlineBytes (the common case: a
// pointer or two and an Async handle); larger ones go to the heap.
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace myelin::detail {

class InlineCallback {
 public:
  static constexpr std::size_t kInlineBytes = 48;

  InlineCallback() noexcept = default;

  template <class F, class D = std::decay_t<F>,
            class = std::enable_if_t<!std::is_same_v<D, InlineCallback> && std::is_invocable_v<D&>>>
  InlineCallback(F&& f) {  // NOLINT(google-explicit-constructor): any callable converts
    if constexpr (fitsInline<D>()) {
      ::new (static_cast<void*>(buf_)) D(std::forward<F>(f));
      ops_ = &kInlineOps<D>;
    } else {
      D* p = new D(std::forward<F>(f));
      ::new (static_cast<void*>(buf_)) D*(p);
      ops_ = &kHeapOps<D>;
    }
  }

  InlineCallback(InlineCallback&& o) noexcept : ops_(o.ops_) {
    if (ops_) {
      ops_->move(buf_, o.buf_);
      o.ops_ = nullptr;
    }
  }
  InlineCallback& operator=(InlineCallback&& o) noexcept {
    if (this != &o) {
      reset();
      ops_ = o.ops_;
      if (ops_) {
        ops_->move(buf_, o.buf_);
        o.ops_ = nullptr;
      }
    }
    return *this;
  }
  InlineCallback(const InlineCallback&) = delete;
  InlineCallback& operator=(const InlineCallback&) = delete;
  ~InlineCallback() { reset(); }

  explicit operator bool() const noexcept { return ops_ != nullptr; }
  void operator()() { ops_->call(buf_); }

  /// Destroys the stored callable (the object becomes empty).
  void reset() noexcept {
    if (ops_) {
      ops_->destroy(buf_);
      ops_ = nullptr;
    }
  }

 private:
  struct Ops {
    void (*call)(void* self);
    void (*move)(void* dst, void* src) noexcept;  // move-constructs dst from src, destroys src
    void (*destroy)(void* self) noexcept;
  };

  template <class D>
  static constexpr bool fitsInline() {
    return sizeof(D) <= kInlineBytes && alignof(D) <= alignof(std::max_align_t) &&
           std::is_nothrow_move_constructible_v<D>;
  }

  template <class D>
  static constexpr Ops kInlineOps{
      [](void* self) { (*static_cast<D*>(self))(); },
      [](void* dst, void* src) noexcept {
        ::new (dst) D(std::move(*static_cast<D*>(src)));
        static_cast<D*>(src)->~D();
      },
      [](void* self) noexcept { static_cast<D*>(self)->~D(); },
  };
  template <class D>
  static constexpr Ops kHeapOps{
      [](void* self) { (**static_cast<D**>(self))(); },
      [](void* dst, void* src) noexcept { ::new (dst) D*(*static_cast<D**>(src)); },
      [](void* self) noexcept { delete *static_cast<D**>(self); },
  };

  alignas(std::max_align_t) unsigned char buf_[kInlineBytes];
  const Ops* ops_ = nullptr;
};

}  // namespace myelin::detail
