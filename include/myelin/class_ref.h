// ClassRef<T>: a copyable, counted reference to an endpoint-class object,
// here or on a peer, that travels as a parameter, a result or a struct field
// (docs/objects.md §5). makeRef<T>() makes an object that lives as long as
// any reference to it, local or remote.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "myelin/endpoint.h"

namespace myelin {

namespace detail {

struct ObjectCore;

/// What the runtime knows of one endpoint class in this program, filled in
/// by the class's generated registration (generated_support.h).
struct ClassHooksData {
  /// Set where the class is called: makes a stand-in for a peer's object
  /// (bound to the core the runtime is importing), and constructs a proxy
  /// that no constructor bound yet on its endpoint.
  EndpointClass* (*makeProxy)() = nullptr;
  void (*constructDefault)(EndpointClass& self) = nullptr;
  /// Deletes an object of the class (a stand-in, where it is called).
  void (*destroy)(EndpointClass*) = nullptr;
  /// Set where the class is implemented: its local class index.
  std::int32_t implClass = -1;
  const char* name = "";
};
template <class T>
struct ClassHooks {
  static inline ClassHooksData data{};
};

template <class T>
void deleteAs(EndpointClass* p) {
  delete static_cast<T*>(p);
}

/// The runtime side of ClassRef (src/runtime/objects.cpp). Cores come back
/// with one reference for the caller.
ObjectCore* refCoreOf(const EndpointClass& obj, const ClassHooksData& h);
ObjectCore* adoptNew(EndpointClass* obj, void (*destroy)(EndpointClass*), const ClassHooksData& h);
/// The object a core stands for here: the local object (null once it was
/// destroyed) or the stand-in for the peer's object, made on first need.
EndpointClass* refTarget(ObjectCore* core, const ClassHooksData& h);
void refRetain(ObjectCore* core) noexcept;
void refRelease(ObjectCore* core) noexcept;
bool refIsRemote(const ObjectCore* core) noexcept;

struct ClassRefAccess;

}  // namespace detail

/// A reference to an object of endpoint class `T`: a local object, or one
/// on a peer (calls through it are remote calls). Copies refer to the same
/// object. An object made by makeRef<T>() or by a peer's constructor call
/// lives until every reference to it is gone: local ClassRefs, references
/// held by peers, and references still travelling in messages. A local
/// object the application owns (on the stack, a member) is referred to as
/// long as it lives; calls that reach it after its destruction fail on the
/// caller's side with RemoteCallError.
///
/// @par Thread Safety
/// Distinct ClassRefs may be used from any threads, also when they refer to
/// one object; one ClassRef is as safe as a shared_ptr.
template <class T>
class ClassRef {
  static_assert(std::is_base_of_v<EndpointClass, T>, "ClassRef<T>: T must derive from myelin::EndpointClass");

 public:
  ClassRef() noexcept = default;
  ClassRef(std::nullptr_t) noexcept {}  // NOLINT: null converts implicitly, as for pointers
  /// Refers to `obj`, a local object or a proxy. A proxy's ClassRef keeps
  /// the peer's object alive after the proxy itself is gone.
  ClassRef(T& obj) : core_(detail::refCoreOf(obj, detail::ClassHooks<T>::data)) {  // NOLINT: T& converts like a T*
    try {
      ptr_ = static_cast<T*>(detail::refTarget(core_, detail::ClassHooks<T>::data));
    } catch (...) {
      detail::refRelease(core_);
      throw;
    }
  }
  ClassRef(const ClassRef& o) noexcept : core_(o.core_), ptr_(o.ptr_) {
    if (core_) detail::refRetain(core_);
  }
  ClassRef(ClassRef&& o) noexcept : core_(std::exchange(o.core_, nullptr)), ptr_(std::exchange(o.ptr_, nullptr)) {}
  ClassRef& operator=(ClassRef o) noexcept {
    std::swap(core_, o.core_);
    std::swap(ptr_, o.ptr_);
    return *this;
  }
  ~ClassRef() {
    if (core_) detail::refRelease(core_);
  }

  /// The object (null for the null reference). A reference to a local
  /// object the application owns does not keep it alive: after its
  /// destruction this pointer dangles like any other (peers calling it get
  /// an error instead).
  T* get() const noexcept { return ptr_; }
  T& operator*() const noexcept { return *ptr_; }
  T* operator->() const noexcept { return ptr_; }
  explicit operator bool() const noexcept { return ptr_ != nullptr; }
  /// True if the object lives on a peer.
  bool isRemote() const noexcept { return core_ && detail::refIsRemote(core_); }
  void reset() noexcept { *this = ClassRef(); }

  /// Two references are equal if they name the same object.
  friend bool operator==(const ClassRef& a, const ClassRef& b) noexcept { return a.core_ == b.core_; }

 private:
  ClassRef(detail::ObjectCore* core, T* ptr) noexcept : core_(core), ptr_(ptr) {}
  friend struct detail::ClassRefAccess;
  template <class U, class... A>
  friend ClassRef<U> makeRef(A&&... args);

  detail::ObjectCore* core_ = nullptr;
  T* ptr_ = nullptr;
};

/// Makes a `T` whose lifetime the references to it decide. Where `T` is
/// implemented, the object is local; where it is called, it is constructed
/// on the thread's current endpoint, like `T(args...)`, and this reference
/// keeps it alive there.
template <class T, class... A>
ClassRef<T> makeRef(A&&... args) {
  T* obj = new T(std::forward<A>(args)...);
  detail::ObjectCore* core;
  try {
    core = detail::adoptNew(obj, &detail::deleteAs<T>, detail::ClassHooks<T>::data);
  } catch (...) {
    delete obj;
    throw;
  }
  // The local object, or the stand-in for the peer's (which may be another
  // one if the peer's constructor handed its object to us first).
  return ClassRef<T>(core, static_cast<T*>(detail::refTarget(core, detail::ClassHooks<T>::data)));
}

namespace detail {
struct ClassRefAccess {
  template <class T>
  static ObjectCore* core(const ClassRef<T>& r) noexcept {
    return r.core_;
  }
  /// Wraps a core that carries one reference for the new ClassRef.
  template <class T>
  static ClassRef<T> adopt(ObjectCore* core, T* ptr) noexcept {
    return ClassRef<T>(core, ptr);
  }
};
}  // namespace detail

}  // namespace myelin
