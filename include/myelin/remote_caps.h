// remoteCaps: what the peer of the current endpoint understands, answered in
// O(1) from the tables negotiated at the handshake.
#pragma once

#include <cstddef>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "myelin/detail/codec.h"
#include "myelin/endpoint.h"

namespace myelin::remoteCaps {

// Each query uses the current endpoint of this thread (see EndpointCtx) and
// throws NoEndpointOnStackError without one. Names are fully qualified
// without a leading "::", e.g. "shop::Cart".

/// The peer serves (or calls) the class.
bool hasClass(std::string_view cls);
/// The peer serves this method with a compatible return type and mode, so
/// calling it will not throw UndefinedRemoteMethodError.
bool hasMethod(std::string_view cls, std::string_view method);
/// The peer's version of the method has this parameter (same name and type).
bool hasMethodParam(std::string_view cls, std::string_view method, std::string_view param);
/// The peer's version of the method returns the same type as ours.
bool hasMethodReturn(std::string_view cls, std::string_view method);
bool hasStruct(std::string_view st);
/// The peer's struct has this field with the same type as ours.
bool hasStructField(std::string_view st, std::string_view field);
bool hasEnum(std::string_view en);

/// The same queries on an explicit endpoint.
bool hasClass(const Endpoint& ep, std::string_view cls);
bool hasMethod(const Endpoint& ep, std::string_view cls, std::string_view method);
bool hasMethodParam(const Endpoint& ep, std::string_view cls, std::string_view method, std::string_view param);
bool hasMethodReturn(const Endpoint& ep, std::string_view cls, std::string_view method);
bool hasStruct(const Endpoint& ep, std::string_view st);
bool hasStructField(const Endpoint& ep, std::string_view st, std::string_view field);
bool hasEnum(const Endpoint& ep, std::string_view en);

namespace typed_detail {

template <auto V>
struct ValueTag {};

/// True if A and B are the very same function or member pointer. Compared as
/// template arguments, so no pointer comparison has to be a constant
/// expression (which some instrumented builds do not allow).
template <auto A, auto B>
inline constexpr bool kSame = std::is_same_v<ValueTag<A>, ValueTag<B>>;

template <class C, auto Fn, std::size_t I = 0>
constexpr std::string_view methodNameOf() {
  using Methods = std::decay_t<decltype(myelin::detail::ClassTraits<C>::kMethods)>;
  if constexpr (I == std::tuple_size_v<Methods>) {
    static_assert(I == ~std::size_t{0}, "the function is not a remote method of this class");
    return {};
  } else {
    constexpr auto md = std::get<I>(myelin::detail::ClassTraits<C>::kMethods);
    using D = std::decay_t<decltype(md)>;
    if constexpr (kSame<D::kFn, Fn>) {
      return md.name;
    } else {
      return methodNameOf<C, Fn, I + 1>();
    }
  }
}

template <class S, class M>
S structOf(M S::*);


template <auto Field, std::size_t I = 0>
constexpr std::string_view fieldNameOf() {
  using S = decltype(structOf(Field));
  using Fields = std::decay_t<decltype(myelin::detail::StructTraits<S>::kFields)>;
  if constexpr (I == std::tuple_size_v<Fields>) {
    static_assert(I == ~std::size_t{0}, "the member is not a field of a generated struct");
    return {};
  } else {
    constexpr auto f = std::get<I>(myelin::detail::StructTraits<S>::kFields);
    if constexpr (kSame<f.ptr, Field>) {
      return f.name;
    } else {
      return fieldNameOf<Field, I + 1>();
    }
  }
}

}  // namespace typed_detail

// Typed forms, checked at compile time. They need the traits the generator
// writes, so include the generated header (`<stem>_gen.h`, on the include
// path of every target passed to myelin_generate).
//
//   if (myelin::remoteCaps::hasMethod<shop::Cart, &shop::Cart::checkout>()) ...
//   if (myelin::remoteCaps::hasStructField<&shop::Item::color>()) ...

template <class C>
bool hasClass() {
  return hasClass(myelin::detail::ClassTraits<C>::kName);
}
template <class C, auto Fn>
bool hasMethod() {
  return hasMethod(myelin::detail::ClassTraits<C>::kName, typed_detail::methodNameOf<C, Fn>());
}
template <class C, auto Fn>
bool hasMethodParam(std::string_view param) {
  return hasMethodParam(myelin::detail::ClassTraits<C>::kName, typed_detail::methodNameOf<C, Fn>(), param);
}
template <class C, auto Fn>
bool hasMethodReturn() {
  return hasMethodReturn(myelin::detail::ClassTraits<C>::kName, typed_detail::methodNameOf<C, Fn>());
}
template <class S>
bool hasStruct() {
  return hasStruct(myelin::detail::StructTraits<S>::kName);
}
template <auto Field>
bool hasStructField() {
  using S = decltype(typed_detail::structOf(Field));
  return hasStructField(myelin::detail::StructTraits<S>::kName, typed_detail::fieldNameOf<Field>());
}
template <class E>
bool hasEnum() {
  return hasEnum(myelin::detail::EnumTraits<E>::kName);
}

}  // namespace myelin::remoteCaps
