// The one header generated code includes: the templates that turn a class's
// traits (ClassTraits/StructTraits/EnumTraits) into schema registrations,
// caller-side stubs and callee-side dispatch thunks.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "myelin/async.h"
#include "myelin/class_ref.h"
#include "myelin/detail/codec.h"
#include "myelin/detail/kept_values.h"
#include "myelin/detail/runtime_api.h"
#include "myelin/endpoint.h"

namespace myelin::detail {

// ---------------------------------------------------------------------------
// Object references (docs/objects.md §5).

/// The schema name of an endpoint class, for the type signature `r:Name` of
/// references to it; specialised by generated code for every class a header
/// defines or refers to.
template <class T>
struct ClassName;

template <class T>
inline constexpr bool kIsEndpointClass = std::is_base_of_v<EndpointClass, T>;

/// A `T&` parameter of endpoint class `T` as the callee holds it while the
/// call is decoded: a reference, handed to the method as `T&` (passArg).
template <class T>
struct RefArg : ClassRef<T> {
  RefArg() = default;
  RefArg(ClassRef<T>&& r) noexcept : ClassRef<T>(std::move(r)) {}  // NOLINT: decoding assigns a ClassRef
};

template <class P>
inline constexpr bool kIsRefArg = false;
template <class T>
inline constexpr bool kIsRefArg<RefArg<T>> = true;

/// How the callee stores a parameter declared as `A`.
template <class A>
using ArgOf = std::conditional_t<kIsEndpointClass<std::remove_cvref_t<A>>, RefArg<std::remove_cvref_t<A>>,
                                 std::remove_cvref_t<A>>;

/// Hands a decoded parameter to the method: moved, or the object a `T&`
/// parameter refers to.
template <class A>
A&& passArg(A& a) {
  return std::move(a);
}
template <class T>
T& passArg(RefArg<T>& a) {
  if (!a) throw std::runtime_error(std::string("a ") + ClassHooks<T>::data.name + "& parameter names no live object");
  return *a;
}

template <class T>
struct TypeSig<ClassRef<T>> {
  static void append(std::string& s) {
    s += "r:";
    s += ClassName<T>::kName;
  }
};
template <class T>
struct TypeSig<RefArg<T>> : TypeSig<ClassRef<T>> {};
template <class T>
struct TypeSig<T, std::enable_if_t<kIsEndpointClass<T>>> : TypeSig<ClassRef<T>> {};

template <class T>
struct Codec<ClassRef<T>> {
  static void encode(WireWriter& w, const ClassRef<T>& v, const CodecCtx& c) {
    w.leafUnsigned(encodeRef(c.ep, ClassRefAccess::core(v), ClassHooks<T>::data));
  }
  static void decode(WireReader& r, ClassRef<T>& v, const CodecCtx& c) {
    DecodedRef d = decodeRef(c.ep, r.leafUnsigned(), ClassHooks<T>::data);
    v = ClassRefAccess::adopt(d.core, static_cast<T*>(d.target));
  }
};
template <class T>
struct Codec<RefArg<T>> : Codec<ClassRef<T>> {};
/// A `T&` argument as the caller passes it: a reference to that object.
template <class T>
struct Codec<T, std::enable_if_t<kIsEndpointClass<T>>> {
  static void encode(WireWriter& w, const T& obj, const CodecCtx& c) {
    struct Hold {
      ObjectCore* core;
      ~Hold() { refRelease(core); }
    } hold{refCoreOf(obj, ClassHooks<T>::data)};
    w.leafUnsigned(encodeRef(c.ep, hold.core, ClassHooks<T>::data));
  }
};

// ---------------------------------------------------------------------------
// Method descriptors.

template <auto Fn, std::size_t N>
struct MethodDesc {
  static constexpr auto kFn = Fn;
  static constexpr std::size_t kParamCount = N;
  std::string_view name;
  std::array<std::string_view, N> params;
};

/// One remote method for ClassTraits::kMethods: its name and its parameter
/// names in declaration order.
template <auto Fn, class... Names>
constexpr MethodDesc<Fn, sizeof...(Names)> method(std::string_view name, Names... params) {
  return {name, {std::string_view(params)...}};
}

template <class F>
struct MemberClass;
template <class F, class C>
struct MemberClass<F C::*> {
  using type = C;
};

template <class F>
struct FnTraits;
template <class R, class... A>
struct FnTraits<R (*)(A...)> {
  using Return = R;
  using Args = std::tuple<ArgOf<A>...>;
  using Declared = std::tuple<A...>;  // the parameters as declared (by value or const&)
  static constexpr bool kInstance = false;
};
template <class R, class... A>
struct FnTraits<R (*)(A...) noexcept> : FnTraits<R (*)(A...)> {};
// Instance methods: the same, called on an object (docs/objects.md).
template <class R, class C, class... A>
struct FnTraits<R (C::*)(A...)> : FnTraits<R (*)(A...)> {
  static constexpr bool kInstance = true;
};
template <class R, class C, class... A>
struct FnTraits<R (C::*)(A...) const> : FnTraits<R (C::*)(A...)> {};
template <class R, class C, class... A>
struct FnTraits<R (C::*)(A...) noexcept> : FnTraits<R (C::*)(A...)> {};
template <class R, class C, class... A>
struct FnTraits<R (C::*)(A...) const noexcept> : FnTraits<R (C::*)(A...)> {};

/// One remote constructor for ClassTraits::kConstructors: the parameter
/// types as declared and the parameter names.
template <class C, class... P>
struct CtorDesc {
  static constexpr std::size_t kParamCount = sizeof...(P);
  using Args = std::tuple<ArgOf<P>...>;
  std::array<std::string_view, sizeof...(P)> params;
};

template <class C, class... P, class... Names>
constexpr CtorDesc<C, P...> constructor(Names... names) {
  static_assert(sizeof...(P) == sizeof...(Names), "one name per constructor parameter");
  return {{std::string_view(names)...}};
}

/// A class's constructors (none for traits written without them).
template <class C>
constexpr auto constructorsOf() {
  if constexpr (requires { ClassTraits<C>::kConstructors; }) {
    return ClassTraits<C>::kConstructors;
  } else {
    return std::tuple<>{};
  }
}

template <class C>
constexpr std::size_t kMethodCount = std::tuple_size_v<std::decay_t<decltype(ClassTraits<C>::kMethods)>>;

// ---------------------------------------------------------------------------
// Remote futures (docs/async-and-errors.md §2): an AsyncRef parameter is the
// leaf 0 and the value inline, or the name of a value the receiver holds.

template <class T>
struct TypeSig<AsyncRef<T>> {
  static void append(std::string& s) {
    s += "ar<";
    TypeSig<T>::append(s);
    s += '>';
  }
};

template <class T>
struct Codec<AsyncRef<T>> {
  static void encode(WireWriter& w, const AsyncRef<T>& v, const CodecCtx& c) {
    if (RemoteValue* rv = AsyncRefAccess::remote(v)) {
      if (std::uint64_t id = mentionRemoteValue(rv, c.ep)) {
        w.leafUnsigned(id);
        return;
      }
      // Fetched before the call's frame opened (prepareValueArg).
      AsyncStateBase* fetched = fetchedRemoteValue(rv);
      if (!fetched || !fetched->hasValue()) throw std::logic_error("an AsyncRef parameter was not fetched");
      w.leafUnsigned(0);
      Codec<T>::encode(w, *static_cast<AsyncState<T>*>(fetched)->value, c);
      return;
    }
    w.leafUnsigned(0);
    const auto& local = AsyncRefAccess::local(v);
    if (!local) {
      Codec<T>::encode(w, T{}, c);
      return;
    }
    if (!local->isSuccess()) throw std::logic_error("an AsyncRef parameter was not ready");
    Codec<T>::encode(w, local->value(), c);
  }
  static void decode(WireReader& r, AsyncRef<T>& v, const CodecCtx& c) {
    std::uint64_t leaf = r.leafUnsigned();
    if (leaf == 0) {
      T value{};
      Codec<T>::decode(r, value, c);
      v = AsyncRef<T>(std::move(value));
      return;
    }
    auto* s = static_cast<AsyncState<T>*>(takeHeldValue(c.ep, leaf, typeid(T)));
    v = AsyncRef<T>(Async<T>(s, AdoptState{}));
  }
};

template <class R>
struct ReturnKind {
  static constexpr CallMode kMode = CallMode::kSync;
  using Value = R;
};
template <>
struct ReturnKind<AsyncVoid> {
  static constexpr CallMode kMode = CallMode::kAsyncVoid;
  using Value = void;
};
template <>
struct ReturnKind<AsyncStatus> {
  static constexpr CallMode kMode = CallMode::kAsyncStatus;
  using Value = void;
};
template <class T>
struct ReturnKind<Async<T>> {
  static constexpr CallMode kMode = CallMode::kAsync;
  using Value = T;
};
template <class T>
struct ReturnKind<AsyncRef<T>> {
  static constexpr CallMode kMode = CallMode::kAsyncRef;
  using Value = T;
};

// ---------------------------------------------------------------------------
// Registration: walks every type reached and records its schema.

template <class T>
struct TypeRegistrar {
  static void reg() {
    if constexpr (IsStruct<T>::value) {
      // Registered (0 and up), or in progress (-2): a type that holds
      // vectors, optionals or pointers of itself reaches itself here.
      if (StructIndex<T>::value != -1) return;
      StructIndex<T>::value = -2;
      std::vector<NamedSig> fields;
      std::apply(
          [&](const auto&... f) {
            (fields.push_back({std::string(f.name), typeSig<typename std::decay_t<decltype(f)>::Member>()}), ...);
            (TypeRegistrar<typename std::decay_t<decltype(f)>::Member>::reg(), ...);
          },
          StructTraits<T>::kFields);
      StructIndex<T>::value = registerStructInfo(std::string(StructTraits<T>::kName), std::move(fields));
    } else if constexpr (IsEnum<T>::value) {
      std::vector<std::pair<std::string, std::int64_t>> values;
      for (const auto& v : EnumTraits<T>::kValues) values.emplace_back(std::string(v.name), v.value);
      registerEnumInfo(std::string(EnumTraits<T>::kName), std::move(values));
    }
  }
};
template <class T, class A>
struct TypeRegistrar<std::vector<T, A>> : TypeRegistrar<T> {};
template <class T, class C, class A>
struct TypeRegistrar<std::set<T, C, A>> : TypeRegistrar<T> {};
template <class K, class V, class C, class A>
struct TypeRegistrar<std::map<K, V, C, A>> {
  static void reg() {
    TypeRegistrar<K>::reg();
    TypeRegistrar<V>::reg();
  }
};
template <class T>
struct TypeRegistrar<const T> : TypeRegistrar<T> {};
template <class T>
struct TypeRegistrar<std::optional<T>> : TypeRegistrar<T> {};
template <class T>
struct TypeRegistrar<std::shared_ptr<T>> : TypeRegistrar<T> {};
template <class T, class E>
struct TypeRegistrar<Result<T, E>> {
  static void reg() {
    TypeRegistrar<T>::reg();
    TypeRegistrar<E>::reg();
  }
};
template <class T, std::size_t N>
struct TypeRegistrar<std::array<T, N>> : TypeRegistrar<T> {};
template <class T>
struct TypeRegistrar<AsyncRef<T>> : TypeRegistrar<T> {};
template <class T, std::size_t N>
struct TypeRegistrar<T[N]> : TypeRegistrar<T> {};

// ---------------------------------------------------------------------------
// Async values: the value's serialiser, installed where the traits are seen.

template <class T>
void encodeAsyncValue(const AsyncStateBase* s, WireWriter& w, const CodecCtx& c) {
  Codec<T>::encode(w, *static_cast<const AsyncState<T>*>(s)->value, c);
}
template <class T>
void decodeAsyncValueIn(AsyncStateBase* s, WireReader& r, const CodecCtx& c) {
  std::optional<T>& value = static_cast<AsyncState<T>*>(s)->value;
  if constexpr (kKeepable<T>) {
    // A recycled reply state still holds its last call's value: decoded
    // over in place, as a kept value is (makeReplyState below).
    if (value) {
      Codec<T>::decode(r, *value, c);
      return;
    }
    T& v = value.emplace();
    KeptValues<T>::instance().take(v);
    Codec<T>::decode(r, v, c);
  } else {
    Codec<T>::decode(r, value.emplace(), c);
  }
}
template <class T>
void decodeAsyncValue(AsyncStateBase* s, WireReader& r, const CodecCtx& c) {
  decodeCounted<T>([&] { decodeAsyncValueIn<T>(s, r, c); });
}
/// Installs the value's serialiser, and for a type whose values are kept
/// (kept_values.h) the hook that keeps the value when the state ends.
template <class T>
void setAsyncCodec(AsyncStateBase* s) {
  if constexpr (kKeepable<T>) {
    s->setCodec(&encodeAsyncValue<T>, &decodeAsyncValue<T>, &keepAsyncValue<T>);
  } else {
    s->setCodec(&encodeAsyncValue<T>, &decodeAsyncValue<T>);
  }
}

// ---------------------------------------------------------------------------
// Async states recycled per thread and type (RecycledStates, async.h).

/// The most heap bytes a recycled state's value holds; a larger value goes
/// to its type's pool as before. A recycled state's value stays counted in
/// kKeptBytesTotal while its call is in flight too: counting it only while
/// it waits costs an atomic add and subtract a call, and
/// RoundTripMediumMsgAsyncCB at 100 threads x 32 ran 5.03 M calls/s that
/// way against 5.95 M. Large values counted in flight fill the total,
/// though: RoundTripLargeMsgListAsyncCB at 100 x 8 (about 70 KB a value)
/// ran 25.6 k calls/s against 40.6 k through the pool, which this bound
/// leaves them to.
inline constexpr std::size_t kRecycledValueBytes = 4096;

/// The recycle hook of a call's reply state or of a service's result
/// (AsyncStateBase::RecycleFn): keeps it in this thread's list when it
/// ended with its value, nothing else holds on to it, and the bounds allow (the list's length; the value's heap
/// bytes, at most kRecycledValueBytes, counted in keptBytesTotal() from
/// now until the state is freed, in use or not).
template <class T>
bool recycleReplyState(AsyncStateBase* base) noexcept {
  auto* s = static_cast<AsyncState<T>*>(base);
  if (!s->value || !s->reusable()) return false;
  RecycledStates<T>* list = RecycledStates<T>::forPush();
  if (!list) return false;
  std::size_t bytes = 0;
  const bool fits = addHeapBytes(*s->value, bytes, kRecycledValueBytes);
  if (!countKept(s->keptBytes, bytes, fits)) return false;  // deleted; its value may go to the pool
  s->resetForReuse();
  list->push(s);
  return true;
}

/// The state of a call returning Async<T>, its codec installed: one this
/// thread recycled when there is one (for types whose values are kept),
/// a new one otherwise.
template <class T>
AsyncState<T>* makeReplyState() {
  if constexpr (kKeepable<T>) {
    if (AsyncState<T>* s = RecycledStates<T>::pop()) return s;
    auto* s = new AsyncState<T>();
    setAsyncCodec<T>(s);
    s->setRecycle(&recycleReplyState<T>);
    return s;
  } else {
    auto* s = new AsyncState<T>();
    setAsyncCodec<T>(s);
    return s;
  }
}

/// After a service method's result was sent at once. Its state is recycled
/// with its value when it ends (RecycledStates, async.h), for the thread's
/// next result of the type to be copied or moved over, when the value holds
/// at most kRecycledValueBytes. A larger value goes to this thread's result
/// slot (result_slot.h) when a result of its type was copied here before,
/// nothing else holds the state, and the bounds allow (kKeptValueBytes for
/// the value, its bytes counted in kKeptBytesTotal, as an argument slot's
/// are). Echoing a 100-item MediumMessage list spent 37 % of the service's
/// time in malloc and free, copying the request into the reply.
template <class T>
void keepResult(AsyncState<T>& s) noexcept {
  if constexpr (kKeepable<T>) {
    // Only while nobody else sees the state: the method may have kept a
    // copy of its Async and passed it to another thread.
    if (!s.hasValue() || !s.soleHolder()) return;
    s.setRecycle(&recycleReplyState<T>);
    if constexpr (kResultSlotFits<T>) {
      ResultSlot<T>::enable();
      typename ResultSlot<T>::Slot* slot = ResultSlot<T>::open();
      if (!slot) return;
      std::size_t bytes = 0;
      const bool fits = addHeapBytes(*s.value, bytes, kKeptValueBytes);
      if (fits && bytes <= kRecycledValueBytes) {
        // Recycled with its state. The slot's value it may have been
        // copied over is no longer the slot's: nothing stays counted there.
        countKept(slot->bytes, 0, true);
        return;
      }
      if (!countKept(slot->bytes, bytes, fits)) return;  // over a bound: freed with its state, as before
      slot->value.emplace(std::move(*s.value));
      s.value.reset();  // nothing left for the state's end to look at
    }
  }
}

/// A state that the fetch of an AsyncRef's value decodes into.
template <class T>
AsyncStateBase* makeFetchState() {
  auto* s = new AsyncState<T>();
  setAsyncCodec<T>(s);
  return s;
}

// ---------------------------------------------------------------------------
// Callee side: decode parameters, call the implementation, encode the result.

/// What a method throws is the method's failure, whatever its type. An
/// InvalidMessageError from a call the method made (a reply it could not
/// take) must not read as this call's own message being invalid, which
/// faults the connection: it fails the call with its text.
[[noreturn, gnu::cold, gnu::noinline]] inline void failHandler(const InvalidMessageError& e) { throw std::runtime_error(e.what()); }

/// Calls the implementation with the decoded arguments: a static method
/// directly, an instance method on the object the call names.
template <auto Fn, class Args>
decltype(auto) invokeImpl(IncomingCall& call, Args&& args) {
  try {
    if constexpr (std::is_member_function_pointer_v<decltype(Fn)>) {
      using C = typename MemberClass<decltype(Fn)>::type;
      C* self = static_cast<C*>(call.object());
      return std::apply([self](auto&&... a) -> decltype(auto) { return (self->*Fn)(passArg(a)...); },
                        std::forward<Args>(args));
    } else {
      return std::apply([](auto&&... a) -> decltype(auto) { return Fn(passArg(a)...); }, std::forward<Args>(args));
    }
  } catch (const InvalidMessageError& e) {
    failHandler(e);
  }
}

/// An AsyncRef call that ends without a value: its caller names the value
/// all the same, so the table holds the error (and the runtime answers it).
template <class T>
void holdFailedResult(IncomingCall& call, const char* why, AsyncError kind = AsyncError::kRemoteError) {
  Async<T> failed;
  failed.state()->completeWithError(kind, why);
  setAsyncCodec<T>(failed.state());
  call.holdResult(failed.state(), typeid(T), false);
}

/// A call's arguments, decoded. A method that takes some argument owning
/// heap storage by const reference decodes into this thread's slot for it,
/// where the last call's arguments were left (ArgSlot, kept_values.h); a
/// by-value parameter is moved into the method and leaves nothing to keep.
template <class Args, class Declared, bool = ArgSlot<Args, Declared>::kUsable>
struct DecodedArgs {
  explicit DecodedArgs(IncomingCall& call) {
    decodeCounted<Args>([&] { decodeWithPlan(call.reader(), args_, call.paramPlan(), call.ctx()); });
    call.reader().finish();
  }
  Args& args() { return args_; }
  Args args_{};
};

template <class Args, class Declared>
struct DecodedArgs<Args, Declared, true> {
  using Slot = ArgSlot<Args, Declared>;
  // The plan is tested once, and the arguments are reached through one
  // pointer set here: testing the plan again in decodeWithPlan() and
  // choosing between the slot and own_ on each access were 7 instructions
  // a streamed call (callgrind).
  explicit DecodedArgs(IncomingCall& call) {
    using Table = TupleFieldTable<Args>;
    const FieldPlan& plan = call.paramPlan();
    if (isIdentityPlan(plan, Table::kCount)) [[likely]] {
      lease_.args = Slot::claim();
      args_ = lease_.args ? lease_.args : &own_.emplace();
      decodeCounted<Args>(
          [&] { Table::decodeAll(call.reader(), *args_, call.ctx(), std::make_index_sequence<Table::kCount>{}); });
    } else {
      args_ = &own_.emplace();
      decodeCounted<Args>([&] { decodeWithPlan(call.reader(), *args_, plan, call.ctx()); });
    }
    call.reader().finish();
  }
  DecodedArgs(const DecodedArgs&) = delete;  // args_ may point into own_
  DecodedArgs& operator=(const DecodedArgs&) = delete;
  Args& args() { return *args_; }

 private:
  struct Lease {  // a member: also given back when decoding throws
    Args* args = nullptr;
    ~Lease() {
      if (args) Slot::release(*args);
    }
  };
  Lease lease_;
  Args* args_;
  std::optional<Args> own_;  // the slot is in use further up this thread
};

/// An AsyncRef method: its caller names the result already, so the table
/// holds one whatever happens — the value, or the failure (parameters that
/// could not be taken, a call skipped, the method threw).
template <auto Fn>
void dispatchAsyncRefThunk(IncomingCall& call) {
  using Traits = FnTraits<std::remove_cv_t<decltype(Fn)>>;
  using T = typename ReturnKind<std::remove_cv_t<typename Traits::Return>>::Value;
  // Not a default Async assigned over: that is a pending state of its own,
  // made and freed per call for nothing.
  std::optional<Async<T>> result;
  try {
    DecodedArgs<typename Traits::Args, typename Traits::Declared> decoded(call);
    auto& args = decoded.args();
    if (call.skipped()) [[unlikely]] {
      holdFailedResult<T>(call, call.skipReasonText(), call.skipError());
      call.throwSkipped();
    }
    // A value another peer holds is fetched from there.
    result.emplace(invokeImpl<Fn>(call, std::move(args)).fetch());
  } catch (const std::exception& e) {
    holdFailedResult<T>(call, e.what());
    throw;
  } catch (const CallSkipped&) {
    throw;  // held above
  } catch (...) {
    holdFailedResult<T>(call, "unknown exception");
    throw;
  }
  setAsyncCodec<T>(result->state());
  call.holdResult(result->state(), typeid(T));
}

template <auto Fn>
void dispatchPlainThunk(IncomingCall& call) {
  using Traits = FnTraits<std::remove_cv_t<decltype(Fn)>>;
  using R = std::remove_cv_t<typename Traits::Return>;
  DecodedArgs<typename Traits::Args, typename Traits::Declared> decoded(call);
  auto& args = decoded.args();
  // Decoded all the same: the references the call carries are counted in
  // and released again (objects.md §4).
  if (call.skipped()) [[unlikely]] {
    call.throwSkipped();
  }
  if constexpr (std::is_void_v<R>) {
    invokeImpl<Fn>(call, std::move(args));
    call.beginReply();
    call.endReply();
  } else if constexpr (std::is_same_v<R, AsyncVoid>) {
    invokeImpl<Fn>(call, std::move(args));
  } else if constexpr (std::is_same_v<R, AsyncStatus>) {
    AsyncStatus result = invokeImpl<Fn>(call, std::move(args));
    if (!result.status().isOk()) call.sendStatusError(result.status());
  } else if constexpr (ReturnKind<R>::kMode == CallMode::kAsync) {
    R result = invokeImpl<Fn>(call, std::move(args));
    using T = typename ReturnKind<R>::Value;
    setAsyncCodec<T>(result.state());
    const bool sentNow = result.state()->isReady();  // then the reply is encoded before replyWhenReady returns
    call.replyWhenReady(result.state());
    if (sentNow) keepResult<T>(*result.state());
  } else {
    R result = invokeImpl<Fn>(call, std::move(args));
    WireWriter& w = call.beginReply();
    try {
      Codec<R>::encode(w, result, call.ctx());
      call.endReply();
    } catch (...) {
      call.abortReply();  // while `result` still holds what its references name
      throw;
    }
  }
}

template <auto Fn>
void dispatchThunk(IncomingCall& call) {
  using R = std::remove_cv_t<typename FnTraits<std::remove_cv_t<decltype(Fn)>>::Return>;
  if constexpr (ReturnKind<R>::kMode == CallMode::kAsyncRef) {
    dispatchAsyncRefThunk<Fn>(call);
  } else {
    dispatchPlainThunk<Fn>(call);
  }
}

template <class C>
void destroyObject(EndpointClass* obj) {
  delete static_cast<C*>(obj);
}

/// Runs a remote constructor: builds the object, hands it to the runtime
/// and answers with a reference to it.
template <class C, std::size_t K>
void constructThunk(IncomingCall& call) {
  using D = std::decay_t<decltype(std::get<K>(constructorsOf<C>()))>;
  typename D::Args args{};
  decodeCounted<typename D::Args>([&] { decodeWithPlan(call.reader(), args, call.paramPlan(), call.ctx()); });
  call.reader().finish();
  if (call.skipped()) [[unlikely]] {
    call.throwSkipped();
  }
  std::unique_ptr<C> obj;
  try {
    obj = std::apply([](auto&&... a) { return std::make_unique<C>(passArg(a)...); }, std::move(args));
  } catch (const InvalidMessageError& e) {
    failHandler(e);
  }
  std::uint64_t ref = call.exportNew(obj.get(), &destroyObject<C>);
  obj.release();  // the runtime owns it now
  WireWriter& w = call.beginReply();
  w.leafUnsigned(ref);
  call.endReply();
}

/// The schema name of a constructor: "#new(p1,p2)" after its parameter names.
template <std::size_t N>
std::string constructorName(const std::array<std::string_view, N>& params) {
  std::string name = "#new(";
  for (std::size_t i = 0; i < N; ++i) {
    if (i) name += ',';
    name += params[i];
  }
  name += ')';
  return name;
}

template <class Tuple, std::size_t... I>
void appendParams(MethodInfo& info, const std::string_view* names, std::index_sequence<I...>) {
  (void)names;
  ((info.params.push_back({std::string(names[I]), typeSig<std::tuple_element_t<I, Tuple>>()}),
    TypeRegistrar<std::tuple_element_t<I, Tuple>>::reg()),
   ...);
}

template <class C, Role kRole>
struct ClassMethodBase {
  static inline int value = -1;
};

template <class C, std::size_t K, class... A>
void constructRemote(C& self, A&&... a);
template <class C>
constexpr std::size_t defaultConstructorIndex();
template <class C>
constexpr std::size_t proxyConstructorIndex();

/// Makes a stand-in for a peer's object (ClassHooksData::makeProxy): any
/// constructor whose parameters can all be default-constructed, whose stub
/// binds the object to the core being imported instead of calling the peer.
template <class C>
EndpointClass* makeProxyOf() {
  using D = std::decay_t<decltype(std::get<proxyConstructorIndex<C>()>(constructorsOf<C>()))>;
  typename D::Args args{};
  return std::apply([](auto&... a) -> EndpointClass* { return new C(passArg(a)...); }, args);
}

/// Constructs a proxy that no constructor bound yet on the thread's current
/// endpoint with the class's parameterless constructor (a class declaring no
/// constructor is constructed by its first call).
template <class C>
void constructDefaultOf(EndpointClass& self) {
  constexpr std::size_t k = defaultConstructorIndex<C>();
  if constexpr (k < std::tuple_size_v<std::decay_t<decltype(constructorsOf<C>())>>) {
    constructRemote<C, k>(static_cast<C&>(self));
  } else {
    throw InvalidConfigurationError(std::string(ClassTraits<C>::kName) +
                                    " has no parameterless constructor to construct it on the peer with");
  }
}

template <class C>
bool registerClass(Role role) {
  std::vector<MethodInfo> infos;
  std::apply(
      [&](const auto&... m) {
        auto one = [&](const auto& md) {
          constexpr auto fn = std::decay_t<decltype(md)>::kFn;
          using Traits = FnTraits<std::remove_cv_t<decltype(fn)>>;
          using R = std::remove_cv_t<typename Traits::Return>;
          using RK = ReturnKind<R>;
          MethodInfo info;
          info.name = std::string(md.name);
          info.mode = RK::kMode;
          if constexpr (!std::is_void_v<typename RK::Value>) {
            info.returnSig = typeSig<typename RK::Value>();
            TypeRegistrar<typename RK::Value>::reg();
          }
          static_assert(std::tuple_size_v<typename Traits::Args> == std::decay_t<decltype(md)>::kParamCount,
                        "parameter names do not match the method's parameters");
          appendParams<typename Traits::Args>(info, md.params.data(),
                                              std::make_index_sequence<std::tuple_size_v<typename Traits::Args>>{});
          if (role == Role::kImplements) info.dispatch = &dispatchThunk<fn>;
          info.instance = Traits::kInstance;
          infos.push_back(std::move(info));
        };
        (void)one;  // unused for a class without methods
        (one(m), ...);
      },
      ClassTraits<C>::kMethods);
  // Constructors follow the methods: sync calls answered with a reference.
  constexpr auto ctors = constructorsOf<C>();
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    auto one = [&]<std::size_t k>(std::integral_constant<std::size_t, k>) {
      constexpr auto cd = std::get<k>(ctors);
      using Args = typename std::decay_t<decltype(cd)>::Args;
      MethodInfo info;
      info.name = constructorName(cd.params);
      info.mode = CallMode::kSync;
      info.returnSig = "r:" + std::string(ClassTraits<C>::kName);
      appendParams<Args>(info, cd.params.data(), std::make_index_sequence<std::tuple_size_v<Args>>{});
      if (role == Role::kImplements) info.dispatch = &constructThunk<C, k>;
      infos.push_back(std::move(info));
    };
    (void)one;  // unused for a class without constructors
    (one(std::integral_constant<std::size_t, K>{}), ...);
  }(std::make_index_sequence<std::tuple_size_v<decltype(ctors)>>{});
  int base = registerClassInfo(std::string(ClassTraits<C>::kName), role, std::move(infos));
  ClassHooksData& hooks = ClassHooks<C>::data;
  hooks.name = ClassTraits<C>::kName.data();  // a literal: terminated
  hooks.destroy = &deleteAs<C>;
  if (role == Role::kCalls) {
    ClassMethodBase<C, Role::kCalls>::value = base;
    constexpr std::size_t n = std::tuple_size_v<std::decay_t<decltype(constructorsOf<C>())>>;
    if constexpr (proxyConstructorIndex<C>() < n) hooks.makeProxy = &makeProxyOf<C>;
    hooks.constructDefault = &constructDefaultOf<C>;
  } else {
    ClassMethodBase<C, Role::kImplements>::value = base;
    hooks.implClass = localClassIndex(std::string(ClassTraits<C>::kName));
  }
  return true;
}

// ---------------------------------------------------------------------------
// Caller side: the body of every generated stub.

template <class T>
void decodeReplyInto(WireReader& r, const CodecCtx& c, void* out) {
  decodeCounted<T>([&] { Codec<T>::decode(r, *static_cast<T*>(out), c); });
}
/// Reads a reply that came after its caller stopped waiting, so that the
/// references it holds are counted; the runtime lets go of the value
/// where a destructor may run. A value with a reference this side could
/// not take (read whole, tlsRefFailure) goes the same way, and so does
/// what was read of an invalid one (`invalid`: the connection faults).
template <class T>
std::shared_ptr<void> readLateReply(WireReader& r, const CodecCtx& c, std::exception_ptr& invalid) {
  auto value = std::make_shared<T>();
  try {
    decodeReplyInto<T>(r, c, value.get());
  } catch (const InvalidMessageError&) {
    invalid = std::current_exception();
  } catch (const std::exception&) {
  }
  return value;
}
template <class T>
constexpr LateReplyFn readLateFor() {
  if constexpr (kMayCarryRefs<T>) {
    return &readLateReply<T>;
  } else {
    return nullptr;  // plain values: a late reply is dropped unread
  }
}

/// Before a call opens its frame: a proxy passed as `T&` that no constructor
/// bound yet is constructed on the peer now (constructing it is a call of
/// its own, which cannot start while this one is open).
template <class A>
void prepareArg(const A& a) {
  if constexpr (kIsEndpointClass<A>) {
    if (!hasObjectCore(a) && ClassHooks<A>::data.constructDefault) {
      ClassHooks<A>::data.constructDefault(const_cast<A&>(a));
    }
  }
}

/// Before a call to `target` opens its frame, an AsyncRef parameter is made
/// ready to encode: a value the target holds is named (waiting for the call
/// that makes it if the order of the lanes does not guarantee it ran
/// first); any other value is waited for, fetched if a peer holds it, and
/// sent inline. A value that failed throws its error here.
template <class A>
void prepareValueArg(const A&, EndpointImpl*) {}
template <class T>
void prepareValueArg(const AsyncRef<T>& a, EndpointImpl* target) {
  if (RemoteValue* v = AsyncRefAccess::remote(a)) {
    if (prepareRemoteValueArg(v, target)) return;
  }
  (void)a.value();
}
template <class... A>
void prepareValueArgs(const EndpointClass* self, const A&... a) {
  if constexpr ((kIsAsyncRef<std::remove_cvref_t<A>> || ...)) {
    EndpointImpl* target = callTarget(self);
    (prepareValueArg(a, target), ...);
  }
}

template <class... A>
void encodeParams(OutgoingCall& call, const A&... a) {
  // Parameters travel by reference: no copy is made to encode them.
  std::tuple<const A&...> refs(a...);
  encodeWithPlan(call.writer(), refs, call.paramPlan(), call.ctx());
}

/// Encodes the parameters of an open call, sends it and returns what the
/// method returns (waiting for the reply of a sync call).
template <class R, class... A>
R sendCall(OutgoingCall& call, const A&... a) {
  using RK = ReturnKind<R>;
  encodeParams(call, a...);
  static_assert(RK::kMode != CallMode::kAsyncVoid, "one-way calls go by sendVoidCall()");
  if constexpr (RK::kMode == CallMode::kAsyncStatus) {
    call.sendAsyncStatus();
    return AsyncStatus{};
  } else if constexpr (RK::kMode == CallMode::kAsync) {
    R result(makeReplyState<typename RK::Value>(), FreshState{});
    call.sendAsync(result.state());
    return result;
  } else if constexpr (RK::kMode == CallMode::kAsyncRef) {
    return AsyncRefAccess::adoptRemote<typename RK::Value>(call.sendAsyncRef(&makeFetchState<typename RK::Value>));
  } else if constexpr (std::is_void_v<R>) {
    call.sendSync(nullptr, nullptr);
  } else {
    R result{};
    call.sendSync(&decodeReplyInto<R>, &result, readLateFor<R>());
    return result;
  }
}

/// Reads a constructor's reply: a reference to a new object of the peer.
inline void decodeNewObject(WireReader& r, const CodecCtx&, void* out) {
  std::uint64_t v = r.leafUnsigned();
  if (v == 0 || (v & 1) != 0) WireReader::fail("a constructor's reply does not name a new object of the peer");
  *static_cast<std::uint64_t*>(out) = v;
}
/// A constructor's reply that came after its caller stopped waiting: the
/// peer's new object is let go (no stand-in was made: nothing to keep).
template <class C>
std::shared_ptr<void> readLateNewObject(WireReader& r, const CodecCtx& c, std::exception_ptr&) {
  std::uint64_t ref = 0;
  decodeNewObject(r, c, &ref);
  dropRemoteObject(c.ep, ref, ClassHooks<C>::data);
  return nullptr;
}

template <class C, std::size_t I>
using MethodReturn = std::remove_cv_t<typename FnTraits<std::remove_cv_t<
    decltype(std::decay_t<decltype(std::get<I>(ClassTraits<C>::kMethods))>::kFn)>>::Return>;

/// Runs a sync call `send` of a method returning `R`. A method returning
/// Status gets the call's framework failures as a Status; a void method
/// whose CallTimeout ran out returns (CallTimeout::isSyncRequestTimedOut()
/// says so); other methods throw (docs/async-and-errors.md §3).
template <class R, class F>
R runSync(F&& send) {
  if constexpr (std::is_same_v<R, Status>) {
    try {
      return send();
    } catch (const ConnectionClosedError& e) {
      return Status::framework(FrameworkError::kConnectionClosed, e.state(), e.what());
    } catch (const RemoteCallError& e) {
      return Status::framework(FrameworkError::kRemoteFailure, EndpointState::kConnected, e.what());
    } catch (const TimeoutError& e) {
      return Status::framework(FrameworkError::kTimedOut, EndpointState::kConnected, e.what());
    } catch (const InvalidMessageError& e) {
      return Status::framework(FrameworkError::kInvalidMessage, EndpointState::kConnected, e.what());
    } catch (const CallCanceledError& e) {
      return Status::framework(FrameworkError::kCanceled, EndpointState::kConnected, e.what());
    }
  } else if constexpr (std::is_void_v<R>) {
    try {
      send();
    } catch (const SyncTimeout&) {
    }
  } else {
    return send();
  }
}

/// encodeParams() for OutgoingCall::sendVoid: the parameters as a tuple of
/// references.
template <class Refs>
void encodeParamRefs(OutgoingCall& call, const void* params) {
  encodeWithPlan(call.writer(), *static_cast<const Refs*>(params), call.paramPlan(), call.ctx());
}
/// The same with every call inside inlined, for parameters that are each a
/// number, an enum, a string or a struct written inline
/// (StructFieldTable::kInlineWriter): with the struct's encode() a call of
/// its own, a streamed SmallMessage cost 16 instructions more (callgrind).
/// Larger parameters keep their writers: flattened, a LargeMessage cost 12
/// more.
template <class Refs>
[[gnu::flatten]] void encodeParamRefsInline(OutgoingCall& call, const void* params) {
  encodeParamRefs<Refs>(call, params);
}
template <class T, class = void>
struct InlineParam : std::bool_constant<kInlineLeaf<T>> {};
template <class T>
struct InlineParam<T, std::enable_if_t<IsStruct<T>::value>> : std::bool_constant<StructFieldTable<T>::kInlineWriter> {
};

/// A one-way call: its parameters go by reference to the runtime, which
/// opens, encodes and sends it in one call (`self`: an instance method's
/// proxy, else null).
template <class... A>
void sendVoidCall(int method, const EndpointClass* self, const A&... a) {
  using Refs = std::tuple<const A&...>;
  constexpr EncodeParamsFn encode =
      (InlineParam<A>::value && ...) ? &encodeParamRefsInline<Refs> : &encodeParamRefs<Refs>;
  const Refs refs(a...);
  if (self) {
    OutgoingCall::sendVoidOn(method, *self, encode, &refs);
  } else {
    OutgoingCall::sendVoid(method, encode, &refs);
  }
}

template <class C, std::size_t I, class... A>
auto callRemote(A&&... a) {
  using R = MethodReturn<C, I>;
  const int method = ClassMethodBase<C, Role::kCalls>::value + static_cast<int>(I);
  if constexpr (ReturnKind<R>::kMode == CallMode::kAsyncVoid) {
    (prepareArg(a), ...);
    prepareValueArgs(nullptr, a...);
    sendVoidCall(method, nullptr, a...);
    return AsyncVoid{};
  } else {
    auto send = [&]() -> R {
      (prepareArg(a), ...);
      prepareValueArgs(nullptr, a...);
      OutgoingCall call(method, ReturnKind<R>::kMode);
      return sendCall<R>(call, a...);
    };
    if constexpr (ReturnKind<R>::kMode == CallMode::kSync) {
      return runSync<R>(send);
    } else {
      return send();
    }
  }
}

/// The index in kConstructors of the class's parameterless constructor,
/// or the tuple's size if it has none.
template <class C>
constexpr std::size_t defaultConstructorIndex() {
  constexpr auto ctors = constructorsOf<C>();
  return []<std::size_t... K>(std::index_sequence<K...>) {
    std::size_t found = sizeof...(K);
    ((std::tuple_element_t<K, std::decay_t<decltype(ctors)>>::kParamCount == 0 && found == sizeof...(K)
          ? (found = K)
          : 0),
     ...);
    return found;
  }(std::make_index_sequence<std::tuple_size_v<std::decay_t<decltype(ctors)>>>{});
}

/// The index in kConstructors of the first constructor whose parameters
/// can all be default-constructed (none is an object reference), or the
/// tuple's size: the one that makes stand-ins (makeProxyOf).
template <class C>
constexpr std::size_t proxyConstructorIndex() {
  constexpr auto ctors = constructorsOf<C>();
  using Ctors = std::decay_t<decltype(ctors)>;
  return []<std::size_t... K>(std::index_sequence<K...>) {
    std::size_t found = sizeof...(K);
    auto usable = []<class Args>(std::type_identity<Args>) {
      return []<class... P>(std::type_identity<std::tuple<P...>>) {
        return ((std::is_default_constructible_v<P> && !kIsRefArg<P>) && ...);
      }(std::type_identity<Args>{});
    };
    (void)usable;  // unused for a class without constructors
    ((usable(std::type_identity<typename std::tuple_element_t<K, Ctors>::Args>{}) && found == sizeof...(K)
          ? (found = K)
          : 0),
     ...);
    return found;
  }(std::make_index_sequence<std::tuple_size_v<Ctors>>{});
}

/// The body of a generated constructor stub: constructs the object on the
/// thread's current endpoint and binds `self` to it (or, while the runtime
/// makes a stand-in for a peer's object, binds it to that object).
template <class C, std::size_t K, class... A>
void constructRemote(C& self, A&&... a) {
  if (bindPendingProxy(self, ClassHooks<C>::data) || hasObjectCore(self)) return;
  (prepareArg(a), ...);
  prepareValueArgs(nullptr, a...);
  OutgoingCall call(ClassMethodBase<C, Role::kCalls>::value + static_cast<int>(kMethodCount<C> + K),
                    CallMode::kSync);
  encodeParams(call, a...);
  std::uint64_t ref = 0;
  call.sendSync(&decodeNewObject, &ref, &readLateNewObject<C>);
  bindRemoteObject(self, call.endpoint(), ref, ClassHooks<C>::data);
}

/// A proxy of a class that declares no constructor is constructed on the
/// peer by its first call: here, before that call opens.
template <class C, class Self>
void constructIfUnbound(Self& self) {
  if (!hasObjectCore(self)) {
    constexpr std::size_t k = defaultConstructorIndex<C>();
    if constexpr (k < std::tuple_size_v<std::decay_t<decltype(constructorsOf<C>())>>) {
      constructRemote<C, k>(const_cast<C&>(static_cast<const C&>(self)));
    }
  }
}

/// The body of a generated instance-method stub.
template <class C, std::size_t I, class Self, class... A>
auto callRemoteOn(Self& self, A&&... a) {
  using R = MethodReturn<C, I>;
  const int method = ClassMethodBase<C, Role::kCalls>::value + static_cast<int>(I);
  if constexpr (ReturnKind<R>::kMode == CallMode::kAsyncVoid) {
    constructIfUnbound<C>(self);
    (prepareArg(a), ...);
    prepareValueArgs(&self, a...);
    sendVoidCall(method, &self, a...);
    return AsyncVoid{};
  } else {
    auto send = [&]() -> R {
      constructIfUnbound<C>(self);
      (prepareArg(a), ...);
      prepareValueArgs(&self, a...);
      OutgoingCall call(method, ReturnKind<R>::kMode, self);
      return sendCall<R>(call, a...);
    };
    if constexpr (ReturnKind<R>::kMode == CallMode::kSync) {
      return runSync<R>(send);
    } else {
      return send();
    }
  }
}

}  // namespace myelin::detail
