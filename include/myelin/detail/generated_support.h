// The one header generated code includes: the templates that turn a class's
// traits (ClassTraits/StructTraits/EnumTraits) into schema registrations,
// caller-side stubs and callee-side dispatch thunks.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "myelin/async.h"
#include "myelin/detail/codec.h"
#include "myelin/detail/runtime_api.h"

namespace myelin::detail {

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
struct FnTraits;
template <class R, class... A>
struct FnTraits<R (*)(A...)> {
  using Return = R;
  using Args = std::tuple<std::remove_cv_t<std::remove_reference_t<A>>...>;
};
template <class R, class... A>
struct FnTraits<R (*)(A...) noexcept> : FnTraits<R (*)(A...)> {};

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
template <class T>
struct ReturnKind<Async<T>> {
  static constexpr CallMode kMode = CallMode::kAsync;
  using Value = T;
};

// ---------------------------------------------------------------------------
// Registration: walks every type reached and records its schema.

template <class T>
struct TypeRegistrar {
  static void reg() {
    if constexpr (IsStruct<T>::value) {
      if (StructIndex<T>::value >= 0) return;
      StructIndex<T>::value = -2;  // in progress: cuts recursion
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
template <class T, std::size_t N>
struct TypeRegistrar<std::array<T, N>> : TypeRegistrar<T> {};
template <class T, std::size_t N>
struct TypeRegistrar<T[N]> : TypeRegistrar<T> {};

// ---------------------------------------------------------------------------
// Async values: the value's serialiser, installed where the traits are seen.

template <class T>
void encodeAsyncValue(const AsyncStateBase* s, WireWriter& w, const CodecCtx& c) {
  Codec<T>::encode(w, *static_cast<const AsyncState<T>*>(s)->value, c);
}
template <class T>
void decodeAsyncValue(AsyncStateBase* s, WireReader& r, const CodecCtx& c) {
  Codec<T>::decode(r, static_cast<AsyncState<T>*>(s)->value.emplace(), c);
}

// ---------------------------------------------------------------------------
// Callee side: decode parameters, call the implementation, encode the result.

template <auto Fn>
void dispatchThunk(IncomingCall& call) {
  using Traits = FnTraits<std::remove_cv_t<decltype(Fn)>>;
  using R = std::remove_cv_t<typename Traits::Return>;
  typename Traits::Args args{};
  decodeWithPlan(call.reader(), args, call.paramPlan(), call.ctx());
  call.reader().finish();
  if constexpr (std::is_void_v<R>) {
    std::apply(Fn, std::move(args));
    call.beginReply();
    call.endReply();
  } else if constexpr (std::is_same_v<R, AsyncVoid>) {
    std::apply(Fn, std::move(args));
  } else if constexpr (ReturnKind<R>::kMode == CallMode::kAsync) {
    R result = std::apply(Fn, std::move(args));
    using T = typename ReturnKind<R>::Value;
    result.state()->setCodec(&encodeAsyncValue<T>, &decodeAsyncValue<T>);
    call.replyWhenReady(result.state());
  } else {
    R result = std::apply(Fn, std::move(args));
    WireWriter& w = call.beginReply();
    Codec<R>::encode(w, result, call.ctx());
    call.endReply();
  }
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
          infos.push_back(std::move(info));
        };
        (one(m), ...);
      },
      ClassTraits<C>::kMethods);
  int base = registerClassInfo(std::string(ClassTraits<C>::kName), role, std::move(infos));
  if (role == Role::kCalls) {
    ClassMethodBase<C, Role::kCalls>::value = base;
  } else {
    ClassMethodBase<C, Role::kImplements>::value = base;
  }
  return true;
}

// ---------------------------------------------------------------------------
// Caller side: the body of every generated stub.

template <class T>
void decodeReplyInto(WireReader& r, const CodecCtx& c, void* out) {
  Codec<T>::decode(r, *static_cast<T*>(out), c);
}

template <class C, std::size_t I, class... A>
auto callRemote(A&&... a) {
  constexpr auto md = std::get<I>(ClassTraits<C>::kMethods);
  constexpr auto fn = std::decay_t<decltype(md)>::kFn;
  using Traits = FnTraits<std::remove_cv_t<decltype(fn)>>;
  using R = std::remove_cv_t<typename Traits::Return>;
  using RK = ReturnKind<R>;
  OutgoingCall call(ClassMethodBase<C, Role::kCalls>::value + static_cast<int>(I), RK::kMode);
  {
    // Parameters travel by reference: no copy is made to encode them.
    std::tuple<const std::remove_cv_t<std::remove_reference_t<A>>&...> refs(a...);
    encodeWithPlan(call.writer(), refs, call.paramPlan(), call.ctx());
  }
  if constexpr (RK::kMode == CallMode::kAsyncVoid) {
    call.sendAsyncVoid();
    return AsyncVoid{};
  } else if constexpr (RK::kMode == CallMode::kAsync) {
    R result;
    using T = typename RK::Value;
    result.state()->setCodec(&encodeAsyncValue<T>, &decodeAsyncValue<T>);
    call.sendAsync(result.state());
    return result;
  } else if constexpr (std::is_void_v<R>) {
    call.sendSync(nullptr, nullptr);
  } else {
    R result{};
    call.sendSync(&decodeReplyInto<R>, &result);
    return result;
  }
}

}  // namespace myelin::detail
