// Typed serialisation on top of WireWriter/WireReader: type signatures for
// schema negotiation and Codec<T> for every supported C++ type. Structs are
// flattened into their fields in the order the negotiated FieldPlan gives,
// inline when that order is the declaration order (the common case).
#pragma once

#include <array>
#include <limits>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "myelin/detail/wire_codec.h"
#include "myelin/result.h"

namespace myelin::detail {

// ---------------------------------------------------------------------------
// Traits the generator specialises (docs/generated-code.md).

template <class T>
struct StructTraits;  // kName, kFields
template <class T>
struct EnumTraits;  // kName, kValues
template <class C>
struct ClassTraits;  // kName, kMethods

struct EnumValue {
  std::string_view name;
  std::int64_t value;
};

template <class S, class M>
struct FieldDesc {
  using Struct = S;
  using Member = M;
  std::string_view name;
  M S::*ptr;
};

/// One struct field for StructTraits::kFields.
template <class S, class M>
constexpr FieldDesc<S, M> field(std::string_view name, M S::*ptr) {
  return {name, ptr};
}

template <class T, class = void>
struct IsStruct : std::false_type {};
template <class T>
struct IsStruct<T, std::void_t<decltype(StructTraits<T>::kFields)>> : std::true_type {};
template <class T, class = void>
struct IsEnum : std::false_type {};
template <class T>
struct IsEnum<T, std::void_t<decltype(EnumTraits<T>::kValues)>> : std::true_type {};

// ---------------------------------------------------------------------------
// Negotiated plans, filled by the runtime after the handshake.

/// For one struct (or one method's parameter list) and one direction: the
/// local field indices in the order they travel. Fields the peer lacks are
/// absent (skipped when writing, left default when reading). Made once per
/// connection; `order` must not change after construction.
struct FieldPlan {
  const std::uint16_t* order = nullptr;
  std::uint32_t count = 0;
  /// `count` when `order` is 0, 1, ..., count - 1 (the fields travel in
  /// local declaration order, as when both sides declare the type alike),
  /// else kNotInOrder. Computed here, once per plan, so that a codec picks
  /// its fast path with one compare per value (isIdentityPlan): testing a
  /// flag and the count apart took a streamed call 4 instructions more on
  /// each side (callgrind).
  std::uint32_t inOrderCount = 0;
  static constexpr std::uint32_t kNotInOrder = ~std::uint32_t{0};

  constexpr FieldPlan() = default;
  constexpr FieldPlan(const std::uint16_t* o, std::uint32_t n)
      : order(o), count(n), inOrderCount(isDeclarationOrder(o, n) ? n : kNotInOrder) {}

  bool inDeclarationOrder() const { return inOrderCount != kNotInOrder; }
  /// Makes the plan take the per-field table even in declaration order (tests).
  void forgetOrder() { inOrderCount = kNotInOrder; }

 private:
  static constexpr bool isDeclarationOrder(const std::uint16_t* o, std::uint32_t n) {
    for (std::uint32_t k = 0; k < n; ++k) {
      if (o[k] != k) return false;
    }
    return true;
  }
};

class EndpointImpl;

/// What a serialiser needs from the connection: the plans by local struct
/// index for sending and for receiving, and the connection itself (object
/// references are named in its namespaces).
struct CodecCtx {
  const FieldPlan* sendStructs = nullptr;
  const FieldPlan* recvStructs = nullptr;
  EndpointImpl* ep = nullptr;
};

/// Local index of a registered struct type (assigned by registerStruct).
template <class S>
struct StructIndex {
  static inline int value = -1;
};

// ---------------------------------------------------------------------------
// Type signatures: "u32", "s", "v<S:ns::Point>", ... (docs/wire-format.md).

template <class T, class = void>
struct TypeSig;

template <class T>
std::string typeSig() {
  std::string s;
  TypeSig<T>::append(s);
  return s;
}

template <class T>
struct TypeSig<T, std::enable_if_t<std::is_integral_v<T>>> {
  static void append(std::string& s) {
    if constexpr (std::is_same_v<T, bool>) {
      s += "b";
    } else if constexpr (std::is_same_v<T, char>) {
      s += "c";
    } else {
      s += std::is_signed_v<T> ? "i" : "u";
      s += std::to_string(sizeof(T) * 8);
    }
  }
};
template <>
struct TypeSig<float> {
  static void append(std::string& s) { s += "f32"; }
};
template <>
struct TypeSig<double> {
  static void append(std::string& s) { s += "f64"; }
};
template <>
struct TypeSig<std::string> {
  static void append(std::string& s) { s += "s"; }
};
template <class T>
struct TypeSig<T, std::enable_if_t<IsEnum<T>::value>> {
  static void append(std::string& s) {
    s += "E:";
    s += EnumTraits<T>::kName;
  }
};
template <class T>
struct TypeSig<T, std::enable_if_t<IsStruct<T>::value>> {
  static void append(std::string& s) {
    s += "S:";
    s += StructTraits<T>::kName;
  }
};
template <class T, class A>
struct TypeSig<std::vector<T, A>> {
  static void append(std::string& s) {
    s += "v<";
    TypeSig<T>::append(s);
    s += ">";
  }
};
template <class T, class C, class A>
struct TypeSig<std::set<T, C, A>> {
  static void append(std::string& s) {
    s += "set<";
    TypeSig<T>::append(s);
    s += ">";
  }
};
template <class K, class V, class C, class A>
struct TypeSig<std::map<K, V, C, A>> {
  static void append(std::string& s) {
    s += "m<";
    TypeSig<K>::append(s);
    s += ",";
    TypeSig<V>::append(s);
    s += ">";
  }
};
template <class T>
struct TypeSig<std::optional<T>> {
  static void append(std::string& s) {
    s += "o<";
    TypeSig<T>::append(s);
    s += ">";
  }
};
template <class T>
struct TypeSig<std::shared_ptr<T>> {
  static void append(std::string& s) {
    s += "p<";
    TypeSig<T>::append(s);
    s += ">";
  }
};
template <class T, std::size_t N>
struct TypeSig<std::array<T, N>> {
  static void append(std::string& s) {
    s += "a<" + std::to_string(N) + ",";
    TypeSig<T>::append(s);
    s += ">";
  }
};
template <class T, class E>
struct TypeSig<Result<T, E>> {
  static void append(std::string& s) {
    s += "R<";
    TypeSig<T>::append(s);
    s += ",";
    TypeSig<E>::append(s);
    s += ">";
  }
};
template <>
struct TypeSig<Status> {
  static void append(std::string& s) { s += "st"; }
};
template <class T>
struct TypeSig<const T> : TypeSig<T> {};
template <class T, std::size_t N>
struct TypeSig<T[N]> {
  static void append(std::string& s) { TypeSig<std::array<T, N>>::append(s); }
};

// ---------------------------------------------------------------------------
// Codec<T>: encode(WireWriter&, const T&, const CodecCtx&) and
// decode(WireReader&, T&, const CodecCtx&). decode() writes into a
// value-initialised object, as the runtime always gives it; a std::string or
// a std::vector of strings or scalars that is not empty is replaced, reusing
// its capacity.

template <class T, class = void>
struct Codec;

// ---------------------------------------------------------------------------
// Room: a value whose codec can bound its encoding is written into space
// reserved once, through a RoomWriter (wire_codec.h), instead of leaf by leaf
// through WireWriter with a capacity check each. Scalar codecs declare kRoom,
// the most bytes any value takes; strings, vectors, optionals, arrays and
// structs declare addRoom(v, c, n, depth), which adds the value's bound to n
// or returns false where there is none (a struct sent in another field order
// than declared, a member whose codec has no room path, a value above
// kMaxRoom, a value nested deeper than kMaxNesting from `depth`, the level
// it sits at: the writer's path then refuses it), and encodeIn(w, v, c),
// which writes the value and returns the writer. Structs and vectors enter
// room from WireWriter themselves (encodeRoomOr). Instructions per value
// and times are in docs/benchmarks.md ("Values encoded into room reserved
// once").

template <class T>
concept HasFixedRoom = requires { Codec<T>::kRoom; };
template <class T>
concept HasRoom = requires { &Codec<T>::encodeIn; };

/// The most room a value is encoded into at once; a larger one goes through
/// WireWriter, its elements each into their own room. The bound is up to
/// twelve times the bytes a value of one-byte integers takes, and the
/// buffer keeps what it reserved until trimmed.
inline constexpr std::size_t kMaxRoom = 64 * 1024;

/// Adds the room `v`, sitting at nesting level `depth`, needs to `n`; false
/// if it has no bound, if it nests deeper than kMaxNesting, or (checked at
/// each element of a vector or array, so that a large value is not walked
/// whole before its parts are tried each on their own) once `n` is above
/// kMaxRoom.
template <class T>
[[gnu::always_inline]] inline bool roomOf(const T& v, const CodecCtx& c, std::size_t& n, int depth) {
  if constexpr (HasFixedRoom<T>) {
    static_assert(HasRoom<T>, "a codec with kRoom needs encodeIn() too");
    n += Codec<T>::kRoom;
    return true;
  } else if constexpr (HasRoom<T>) {
    return Codec<T>::addRoom(v, c, n, depth);
  } else {
    return false;
  }
}

/// Writes `v` into room that roomOf() bounded.
template <class T>
[[gnu::always_inline]] inline RoomWriter writeIn(RoomWriter w, const T& v, const CodecCtx& c) {
  if constexpr (HasRoom<T>) {
    return Codec<T>::encodeIn(w, v, c);
  } else {
    std::abort();  // roomOf() returned false for this type: never reached
  }
}

/// Encodes `v` into room reserved once when its codec bounds it within
/// kMaxRoom, else through `checked` (the leaf-by-leaf path).
template <class T, class F>
[[gnu::always_inline]] inline void encodeRoomOr(WireWriter& w, const T& v, const CodecCtx& c, F&& checked) {
  std::size_t n = 0;
  if (Codec<T>::addRoom(v, c, n, w.depth()) && n <= kMaxRoom) {
    w.endRoom(Codec<T>::encodeIn(w.beginRoom(n), v, c));
  } else {
    checked();
  }
}

template <class T>
struct Codec<T, std::enable_if_t<std::is_integral_v<T>>> {
  template <class W>
  [[gnu::always_inline]] static void put(W& w, T v) {
    if constexpr (std::is_same_v<T, bool>) {
      w.leafUnsigned(v ? 1 : 0);
    } else if constexpr (std::is_signed_v<T> && !std::is_same_v<T, char>) {
      w.leafSigned(v);
    } else {
      w.leafUnsigned(static_cast<std::make_unsigned_t<T>>(v));
    }
  }
  static void encode(WireWriter& w, T v, const CodecCtx&) { put(w, v); }
  static constexpr std::size_t kRoom = kLeafRoom;
  [[gnu::always_inline]] static RoomWriter encodeIn(RoomWriter w, T v, const CodecCtx&) {
    put(w, v);
    return w;
  }
  [[gnu::always_inline]] static void decode(WireReader& r, T& v, const CodecCtx&) {
    if constexpr (std::is_same_v<T, bool>) {
      v = r.leafUnsigned(1, "bool") != 0;
    } else if constexpr (std::is_signed_v<T> && !std::is_same_v<T, char>) {
      std::int64_t x = unzigzag(r.leafInteger());
      if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max()) {
        WireReader::fail("value out of range for a signed integer");
      }
      v = static_cast<T>(x);
    } else {
      using U = std::make_unsigned_t<T>;
      v = static_cast<T>(static_cast<U>(r.leafInteger(std::numeric_limits<U>::max(), "an unsigned integer")));
    }
  }
};

template <>
struct Codec<float> {
  static void encode(WireWriter& w, float v, const CodecCtx&) { w.leafFloat(v); }
  static constexpr std::size_t kRoom = kLeafRoom;
  [[gnu::always_inline]] static RoomWriter encodeIn(RoomWriter w, float v, const CodecCtx&) {
    w.leafFloat(v);
    return w;
  }
  [[gnu::always_inline]] static void decode(WireReader& r, float& v, const CodecCtx&) { v = r.leafFloat(); }
};
template <>
struct Codec<double> {
  static void encode(WireWriter& w, double v, const CodecCtx&) { w.leafDouble(v); }
  static constexpr std::size_t kRoom = kLeafRoom;
  [[gnu::always_inline]] static RoomWriter encodeIn(RoomWriter w, double v, const CodecCtx&) {
    w.leafDouble(v);
    return w;
  }
  [[gnu::always_inline]] static void decode(WireReader& r, double& v, const CodecCtx&) { v = r.leafDouble(); }
};
template <>
struct Codec<std::string> {
  static void encode(WireWriter& w, const std::string& v, const CodecCtx&) { w.leafBytes(v.data(), v.size()); }
  static bool addRoom(const std::string& v, const CodecCtx&, std::size_t& n, int) {
    n += kLeafRoom + v.size();
    return true;
  }
  [[gnu::always_inline]] static RoomWriter encodeIn(RoomWriter w, const std::string& v, const CodecCtx&) {
    w.leafBytes(v.data(), v.size());
    return w;
  }
  static void decode(WireReader& r, std::string& v, const CodecCtx&) {
    std::string_view b = r.leafBytes();
    if (b.size() <= v.size()) {
      // A kept string as long or longer: cut to length (no fill) and the
      // bytes copied over.
      v.resize(b.size());
      copySmall(v.data(), b.data(), b.size());
    } else if (v.empty()) {
      // append() on an empty string skips assign()'s general replace: SmallList100
      // decoding went from 14,398 to 10,197 instructions (docs/benchmarks.md).
      v.append(b.data(), b.size());
    } else if (b.size() <= v.capacity()) {
      // A kept string that has room: its length set and the bytes copied
      // over. assign() takes replace()'s general path: an 11-byte string
      // took 74 instructions that way and 62 this (callgrind,
      // StreamSmallMsgFromServer's client).
      v.resize(b.size());
      copySmall(v.data(), b.data(), b.size());
    } else {
      v.assign(b.data(), b.size());
    }
  }
};

template <class T>
struct Codec<T, std::enable_if_t<IsEnum<T>::value>> {
  static void encode(WireWriter& w, T v, const CodecCtx&) {
    w.leafSigned(static_cast<std::int64_t>(static_cast<std::underlying_type_t<T>>(v)));
  }
  static constexpr std::size_t kRoom = kLeafRoom;
  [[gnu::always_inline]] static RoomWriter encodeIn(RoomWriter w, T v, const CodecCtx&) {
    w.leafSigned(static_cast<std::int64_t>(static_cast<std::underlying_type_t<T>>(v)));
    return w;
  }
  static void decode(WireReader& r, T& v, const CodecCtx&) {
    using U = std::underlying_type_t<T>;
    std::int64_t x = r.leafSigned();
    if constexpr (std::is_signed_v<U>) {
      if (x < std::numeric_limits<U>::min() || x > std::numeric_limits<U>::max()) {
        WireReader::fail("enum value out of range");
      }
    } else if constexpr (sizeof(U) < 8) {
      if (x < 0 || static_cast<std::uint64_t>(x) > std::numeric_limits<U>::max()) {
        WireReader::fail("enum value out of range");
      }
    }
    v = static_cast<T>(static_cast<U>(x));
  }
};

/// Byte vectors travel as one length-prefixed leaf.
template <class T>
inline constexpr bool kIsByte = std::is_same_v<T, std::uint8_t> || std::is_same_v<T, std::int8_t>;

template <class T, class A>
struct Codec<std::vector<T, A>> {
  static void encode(WireWriter& w, const std::vector<T, A>& v, const CodecCtx& c) {
    if constexpr (kIsByte<T>) {
      w.leafBytes(v.data(), v.size());
    } else {
      encodeRoomOr(w, v, c, [&] {
        w.leafUnsigned(v.size());
        if constexpr (std::is_same_v<T, bool>) {
          for (bool b : v) Codec<bool>::encode(w, b, c);
        } else {
          for (const T& e : v) Codec<T>::encode(w, e, c);
        }
      });
    }
  }
  static bool addRoom(const std::vector<T, A>& v, const CodecCtx& c, std::size_t& n, int depth) {
    if constexpr (kIsByte<T>) {
      n += kLeafRoom + v.size();
    } else if constexpr (HasFixedRoom<T>) {
      n += kLeafRoom + v.size() * Codec<T>::kRoom;
    } else {
      n += kLeafRoom;
      for (const T& e : v) {
        if (n > kMaxRoom || !roomOf(e, c, n, depth)) return false;
      }
    }
    return true;
  }
  static RoomWriter encodeIn(RoomWriter w, const std::vector<T, A>& v, const CodecCtx& c) {
    if constexpr (kIsByte<T>) {
      w.leafBytes(v.data(), v.size());
    } else {
      w.leafUnsigned(v.size());
      if constexpr (std::is_same_v<T, bool>) {
        for (bool b : v) w = writeIn<bool>(w, b, c);
      } else {
        for (const T& e : v) w = writeIn(w, e, c);
      }
    }
    return w;
  }
  static void decode(WireReader& r, std::vector<T, A>& v, const CodecCtx& c) {
    if constexpr (kIsByte<T>) {
      // From pointers of the element's own type: one memmove, where chars
      // into bytes took a loop (DocumentProcessingCB's service, 256-byte
      // chunks: 2,015 -> 1,932 instructions a call, callgrind).
      std::string_view b = r.leafBytes();
      const auto* p = reinterpret_cast<const T*>(b.data());
      if (b.size() == v.size()) {
        // A kept vector as long: copied over inline (assign() called
        // memmove for LargeMessage's 32 bytes).
        copyUpTo128(v.data(), p, b.size());
      } else {
        v.assign(p, p + b.size());
      }
    } else {
      std::uint64_t n = r.leafUnsigned();
      r.chargeAllocation(n, sizeof(T));
      if constexpr (std::is_same_v<T, bool>) {
        v.resize(static_cast<std::size_t>(n));
        for (std::size_t i = 0; i < n; ++i) {
          bool b;
          Codec<bool>::decode(r, b, c);
          v[i] = b;
        }
      } else if constexpr (std::is_same_v<T, std::string>) {
        // Into an empty vector: one allocation, each string built from its
        // bytes in place (MediumList100 decoding: 170,007 -> 166,607).
        if (v.empty()) {
          v.reserve(static_cast<std::size_t>(n));
          for (std::size_t i = 0; i < n; ++i) v.emplace_back(r.leafBytes());
        } else {
          v.resize(static_cast<std::size_t>(n));
          for (T& e : v) Codec<T>::decode(r, e, c);
        }
      } else if constexpr (std::is_arithmetic_v<T> || std::is_enum_v<T>) {
        // Into an empty vector: one allocation and no zero-filling first
        // (MediumList100 decoding: 166,607 -> 163,706). Struct elements keep
        // resize(), which measured faster for them.
        if (v.empty()) {
          v.reserve(static_cast<std::size_t>(n));
          for (std::size_t i = 0; i < n; ++i) Codec<T>::decode(r, v.emplace_back(), c);
        } else {
          v.resize(static_cast<std::size_t>(n));
          for (T& e : v) Codec<T>::decode(r, e, c);
        }
      } else if constexpr (IsStruct<T>::value) {
        v.resize(static_cast<std::size_t>(n));
        Codec<T>::decodeEach(r, v.data(), v.size(), c);
      } else {
        v.resize(static_cast<std::size_t>(n));
        for (T& e : v) Codec<T>::decode(r, e, c);
      }
    }
  }
};

// ---------------------------------------------------------------------------
// A reference this side cannot take

/// While decodeCounted reads a value that may carry references: where the
/// first reference this program cannot take leaves its exception (a class
/// it cannot stand in for, a stand-in's constructor that threw). That
/// reference reads as null and decoding goes on, so that the references
/// after it are read and counted too; null outside decodeCounted.
inline thread_local std::exception_ptr* tlsRefFailure = nullptr;

/// In decodeRef's handler of such a failure: keeps the exception being
/// handled if it is the value's first, and returns true (the reference
/// reads as null); false outside decodeCounted (it is thrown on).
inline bool deferRefFailure() noexcept {
  std::exception_ptr* failure = tlsRefFailure;
  if (!failure) return false;
  if (!*failure) *failure = std::current_exception();
  return true;
}

/// True while the value being read has failed already: a set's or map's
/// duplicate (two references read as null) is no fault of the message.
inline bool refFailurePending() noexcept { return tlsRefFailure && *tlsRefFailure; }

template <class T, class C, class A>
struct Codec<std::set<T, C, A>> {
  static void encode(WireWriter& w, const std::set<T, C, A>& v, const CodecCtx& c) {
    w.leafUnsigned(v.size());
    for (const T& e : v) Codec<T>::encode(w, e, c);
  }
  static void decode(WireReader& r, std::set<T, C, A>& v, const CodecCtx& c) {
    v.clear();  // the target may be a kept value (kept_values.h)
    std::uint64_t n = r.leafUnsigned();
    r.chargeAllocation(n, sizeof(T) + 32);
    for (std::uint64_t i = 0; i < n; ++i) {
      T e{};
      Codec<T>::decode(r, e, c);
      if (!v.insert(std::move(e)).second && !refFailurePending()) WireReader::fail("duplicate element in a set");
    }
  }
};

template <class K, class V, class C, class A>
struct Codec<std::map<K, V, C, A>> {
  static void encode(WireWriter& w, const std::map<K, V, C, A>& v, const CodecCtx& c) {
    w.leafUnsigned(v.size());
    for (const auto& [k, e] : v) {
      Codec<K>::encode(w, k, c);
      Codec<V>::encode(w, e, c);
    }
  }
  static void decode(WireReader& r, std::map<K, V, C, A>& v, const CodecCtx& c) {
    v.clear();  // the target may be a kept value (kept_values.h)
    std::uint64_t n = r.leafUnsigned();
    r.chargeAllocation(n, sizeof(K) + sizeof(V) + 32);
    for (std::uint64_t i = 0; i < n; ++i) {
      K k{};
      Codec<K>::decode(r, k, c);
      V e{};
      Codec<V>::decode(r, e, c);
      if (!v.emplace(std::move(k), std::move(e)).second && !refFailurePending()) {
        WireReader::fail("duplicate key in a map");
      }
    }
  }
};

template <class T>
struct Codec<std::optional<T>> {
  static void encode(WireWriter& w, const std::optional<T>& v, const CodecCtx& c) {
    if (!v) {
      w.defaultLeaf();
    } else {
      w.leafHead(1);
      w.enterNested();
      Codec<T>::encode(w, *v, c);
      w.leaveNested();
    }
  }
  static bool addRoom(const std::optional<T>& v, const CodecCtx& c, std::size_t& n, int depth) {
    n += kLeafRoom;
    return !v || (depth < kMaxNesting && roomOf(*v, c, n, depth + 1));
  }
  static RoomWriter encodeIn(RoomWriter w, const std::optional<T>& v, const CodecCtx& c) {
    if (!v) {
      w.defaultLeaf();
      return w;
    }
    w.leafHead(1);
    return writeIn(w, *v, c);
  }
  static void decode(WireReader& r, std::optional<T>& v, const CodecCtx& c) {
    if (r.leafUnsigned(1, "optional presence")) {
      r.enterNested();
      // Into the value that is there, if any: a kept value's storage is reused.
      Codec<T>::decode(r, v ? *v : v.emplace(), c);
      r.leaveNested();
    } else {
      v.reset();
    }
  }
};

/// Result: which alternative (0 value, 1 error), then that value.
template <class T, class E>
struct Codec<Result<T, E>> {
  static void encode(WireWriter& w, const Result<T, E>& v, const CodecCtx& c) {
    w.enterNested();
    if (v.ok()) {
      w.defaultLeaf();
      Codec<T>::encode(w, std::get<0>(v.v_), c);
    } else {
      w.leafHead(1);
      Codec<E>::encode(w, std::get<1>(v.v_), c);
    }
    w.leaveNested();
  }
  static void decode(WireReader& r, Result<T, E>& v, const CodecCtx& c) {
    r.enterNested();
    if (r.leafUnsigned(1, "Result alternative")) {
      Codec<E>::decode(r, v.v_.template emplace<1>(), c);
    } else {
      Codec<T>::decode(r, v.v_.template emplace<0>(), c);
    }
    r.leaveNested();
  }
};

/// Status: kind (0 ok, 1 framework, 2 application), then for a framework
/// error its error, endpoint state and message, for an application error
/// its code's enum type, the code and the message.
template <>
struct Codec<Status> {
  static void encode(WireWriter& w, const Status& v, const CodecCtx&) {
    w.leafUnsigned(static_cast<std::uint64_t>(v.kind_));
    if (v.kind_ == Status::Kind::kFramework) {
      w.leafUnsigned(static_cast<std::uint64_t>(v.framework_));
      w.leafUnsigned(static_cast<std::uint64_t>(v.state_));
      w.leafBytes(v.message_.data(), v.message_.size());
    } else if (v.kind_ == Status::Kind::kApplication) {
      w.leafBytes(v.codeType_.data(), v.codeType_.size());
      w.leafSigned(v.code_);
      w.leafBytes(v.message_.data(), v.message_.size());
    }
  }
  /// `v` with another message (the runtime cuts one too long to send).
  static Status withMessage(Status v, std::string message) {
    v.message_ = std::move(message);
    return v;
  }
  static void decode(WireReader& r, Status& v, const CodecCtx&) {
    v = Status{};
    v.kind_ = static_cast<Status::Kind>(r.leafUnsigned(2, "Status kind"));
    if (v.kind_ == Status::Kind::kFramework) {
      v.framework_ = static_cast<FrameworkError>(r.leafUnsigned(255, "Status framework error"));
      v.state_ = static_cast<EndpointState>(r.leafUnsigned(3, "Status endpoint state"));
      v.message_.assign(r.leafBytes());
    } else if (v.kind_ == Status::Kind::kApplication) {
      v.codeType_.assign(r.leafBytes());
      v.code_ = r.leafSigned();
      v.message_.assign(r.leafBytes());
    }
  }
};

template <class T>
struct Codec<std::shared_ptr<T>> {
  static void encode(WireWriter& w, const std::shared_ptr<T>& v, const CodecCtx& c) {
    if (!v) {
      w.defaultLeaf();
    } else {
      w.leafHead(1);
      w.enterNested();
      Codec<std::remove_const_t<T>>::encode(w, *v, c);
      w.leaveNested();
    }
  }
  static void decode(WireReader& r, std::shared_ptr<T>& v, const CodecCtx& c) {
    if (r.leafUnsigned(1, "shared_ptr presence")) {
      using M = std::remove_const_t<T>;
      r.chargeAllocation(1, sizeof(M));
      r.enterNested();
      auto p = std::make_shared<M>();
      Codec<M>::decode(r, *p, c);
      v = std::move(p);
      r.leaveNested();
    } else {
      v.reset();
    }
  }
};

template <class T, std::size_t N>
struct Codec<std::array<T, N>> {
  static void encode(WireWriter& w, const std::array<T, N>& v, const CodecCtx& c) {
    for (const T& e : v) Codec<T>::encode(w, e, c);
  }
  static bool addRoom(const std::array<T, N>& v, const CodecCtx& c, std::size_t& n, int depth) {
    for (const T& e : v) {
      if (n > kMaxRoom || !roomOf(e, c, n, depth)) return false;
    }
    return true;
  }
  static RoomWriter encodeIn(RoomWriter w, const std::array<T, N>& v, const CodecCtx& c) {
    for (const T& e : v) w = writeIn(w, e, c);
    return w;
  }
  static void decode(WireReader& r, std::array<T, N>& v, const CodecCtx& c) {
    for (T& e : v) Codec<T>::decode(r, e, c);
  }
};
template <class T, std::size_t N>
struct Codec<T[N]> {
  static void encode(WireWriter& w, const T (&v)[N], const CodecCtx& c) {
    for (const T& e : v) Codec<T>::encode(w, e, c);
  }
  static void decode(WireReader& r, T (&v)[N], const CodecCtx& c) {
    for (T& e : v) Codec<T>::decode(r, e, c);
  }
};

/// Per-field encode/decode function tables of a struct, indexed by the
/// field's declaration index.
/// A value written inline wherever it is encoded: a number, an enum or a
/// string (StructFieldTable::kInlineWriter, one-way calls' encoders).
template <class M>
inline constexpr bool kInlineLeaf = std::is_arithmetic_v<M> || std::is_enum_v<M> || std::is_same_v<M, std::string>;

template <class S>
struct StructFieldTable {
  using Enc = void (*)(WireWriter&, const S&, const CodecCtx&);
  using Dec = void (*)(WireReader&, S&, const CodecCtx&);
  static constexpr std::size_t kCount = std::tuple_size_v<std::decay_t<decltype(StructTraits<S>::kFields)>>;

  template <std::size_t I>
  static void encodeField(WireWriter& w, const S& s, const CodecCtx& c) {
    constexpr auto f = std::get<I>(StructTraits<S>::kFields);
    using M = typename decltype(f)::Member;
    Codec<M>::encode(w, s.*(f.ptr), c);
  }
  template <std::size_t I>
  static void decodeField(WireReader& r, S& s, const CodecCtx& c) {
    constexpr auto f = std::get<I>(StructTraits<S>::kFields);
    using M = typename decltype(f)::Member;
    Codec<M>::decode(r, s.*(f.ptr), c);
  }
  template <std::size_t... I>
  static constexpr std::array<Enc, kCount> makeEnc(std::index_sequence<I...>) {
    return {&encodeField<I>...};
  }
  template <std::size_t... I>
  static constexpr std::array<Dec, kCount> makeDec(std::index_sequence<I...>) {
    return {&decodeField<I>...};
  }
  static constexpr std::array<Enc, kCount> kEnc = makeEnc(std::make_index_sequence<kCount>{});
  static constexpr std::array<Dec, kCount> kDec = makeDec(std::make_index_sequence<kCount>{});

  /// A struct of a few leaves (numbers, enums, strings) is written inline
  /// where it is encoded. With encodeChecked() apart, a streamed
  /// SmallMessage's encoding took 93 -> 70 instructions (callgrind), and
  /// codec_bench's encode/Small 173 -> 119 an iteration (Large 1,787 ->
  /// 1,692, LargeList100 166,332 -> 170,082, MediumList100 unchanged).
  /// Structs of more fields, or with any field other than a number, an enum
  /// or a string, keep a writer of their own: inlining every struct's made
  /// LargeMessage's encoding 52 -> 61-68 ns.
  static constexpr bool kInlineWriter = kCount <= 8 && []<std::size_t... I>(std::index_sequence<I...>) {
    return (kInlineLeaf<typename std::decay_t<decltype(std::get<I>(StructTraits<S>::kFields))>::Member> && ...);
  }(std::make_index_sequence<kCount>{});

  /// Every field in declaration order, each call inlined.
  template <std::size_t... I>
  static void encodeAll(WireWriter& w, const S& s, const CodecCtx& c, std::index_sequence<I...>) {
    (encodeField<I>(w, s, c), ...);
  }
  /// Room: every field's bound, and every field written into it in order.
  template <std::size_t I>
  [[gnu::always_inline]] static bool roomOfField(const S& s, const CodecCtx& c, std::size_t& n, int depth) {
    constexpr auto f = std::get<I>(StructTraits<S>::kFields);
    using M = typename decltype(f)::Member;
    return roomOf<M>(s.*(f.ptr), c, n, depth);
  }
  template <std::size_t I>
  [[gnu::always_inline]] static RoomWriter writeField(RoomWriter w, const S& s, const CodecCtx& c) {
    constexpr auto f = std::get<I>(StructTraits<S>::kFields);
    using M = typename decltype(f)::Member;
    return writeIn<M>(w, s.*(f.ptr), c);
  }
  template <std::size_t... I>
  static bool roomAll(const S& s, const CodecCtx& c, std::size_t& n, int depth, std::index_sequence<I...>) {
    return (roomOfField<I>(s, c, n, depth) && ...);
  }
  template <std::size_t... I>
  [[gnu::always_inline]] static RoomWriter writeAllInline(RoomWriter w, const S& s, const CodecCtx& c,
                                                          std::index_sequence<I...>) {
    ((w = writeField<I>(w, s, c)), ...);
    return w;
  }
  /// The same, as a function of its own for structs not written inline.
  template <std::size_t... I>
  static RoomWriter writeAll(RoomWriter w, const S& s, const CodecCtx& c, std::index_sequence<I...> seq) {
    return writeAllInline(w, s, c, seq);
  }
  template <std::size_t... I>
  static void decodeAll(WireReader& r, S& s, const CodecCtx& c, std::index_sequence<I...>) {
    (decodeField<I>(r, s, c), ...);
  }
};

// ---------------------------------------------------------------------------
// References and the decode budget

/// Whether a value of T may carry object references or value names, which
/// a receiver counts as it reads them (docs/objects.md §4). Conservative:
/// true for any type not known to be plain, and for a type whose structs
/// nest deeper than D (a type that contains itself).
template <class T, int D, class = void>
struct MayCarryRefsAt : std::true_type {};
template <class T, int D>
struct MayCarryRefsAt<T, D, std::enable_if_t<std::is_arithmetic_v<T> || IsEnum<T>::value>> : std::false_type {};
template <int D>
struct MayCarryRefsAt<std::string, D> : std::false_type {};
template <class T, class A, int D>
struct MayCarryRefsAt<std::vector<T, A>, D> : MayCarryRefsAt<std::remove_cv_t<T>, D> {};
template <class T, int D>
struct MayCarryRefsAt<std::optional<T>, D> : MayCarryRefsAt<std::remove_cv_t<T>, D> {};
template <class T, std::size_t N, int D>
struct MayCarryRefsAt<std::array<T, N>, D> : MayCarryRefsAt<std::remove_cv_t<T>, D> {};
template <class T, std::size_t N, int D>
struct MayCarryRefsAt<T[N], D> : MayCarryRefsAt<std::remove_cv_t<T>, D> {};
template <class T, int D>
struct MayCarryRefsAt<std::shared_ptr<T>, D> : MayCarryRefsAt<std::remove_cv_t<T>, D> {};
template <class T, class E, int D>
struct MayCarryRefsAt<Result<T, E>, D>
    : std::bool_constant<MayCarryRefsAt<std::remove_cv_t<T>, D>::value || MayCarryRefsAt<std::remove_cv_t<E>, D>::value> {};
template <int D>
struct MayCarryRefsAt<Status, D> : std::false_type {};
template <class T, class C, class A, int D>
struct MayCarryRefsAt<std::set<T, C, A>, D> : MayCarryRefsAt<std::remove_cv_t<T>, D> {};
template <class K, class V, class C, class A, int D>
struct MayCarryRefsAt<std::map<K, V, C, A>, D>
    : std::bool_constant<MayCarryRefsAt<std::remove_cv_t<K>, D>::value || MayCarryRefsAt<std::remove_cv_t<V>, D>::value> {};
template <class... T, int D>
struct MayCarryRefsAt<std::tuple<T...>, D> : std::bool_constant<(MayCarryRefsAt<std::remove_cvref_t<T>, D>::value || ...)> {
};
template <class S, int D, class = std::make_index_sequence<StructFieldTable<S>::kCount>>
struct StructMayCarryRefs;
template <class S, int D, std::size_t... I>
struct StructMayCarryRefs<S, D, std::index_sequence<I...>>
    : std::bool_constant<(MayCarryRefsAt<std::remove_cv_t<typename std::decay_t<decltype(std::get<I>(
                                             StructTraits<S>::kFields))>::Member>,
                                         D - 1>::value ||
                          ...)> {};
template <class S, int D>
struct MayCarryRefsAt<S, D, std::enable_if_t<IsStruct<S>::value>>
    : std::conditional_t<(D <= 0), std::true_type, StructMayCarryRefs<S, D>> {};
template <class T>
inline constexpr bool kMayCarryRefs = MayCarryRefsAt<std::remove_cv_t<T>, 8>::value;

[[noreturn, gnu::cold, gnu::noinline]] inline void failCountedOverBudget() {
  throw InvalidMessageError("a message that may carry references decodes into more memory than maxDecodeBytes allows");
}

/// Runs `decode`, which reads a whole T. Past maxDecodeBytes a T that may
/// carry references fails as an invalid message, which faults the
/// connection: the references the sender counted after the point where
/// decoding stopped would never be read, so neither side could settle
/// them. A T without references throws DecodeBudgetError, which fails only
/// its call or reply. A reference this side cannot take fails the value
/// once it is read whole (tlsRefFailure), so that its call or reply fails
/// alone and the references it holds are let go with it.
template <class T, class F>
[[gnu::always_inline]] inline void decodeCounted(F&& decode) {
  if constexpr (kMayCarryRefs<T>) {
    std::exception_ptr refFailure;
    struct Scope {  // nested decodes (a stand-in's constructor that calls) keep their own
      std::exception_ptr* outer;
      ~Scope() { tlsRefFailure = outer; }
    } scope{std::exchange(tlsRefFailure, &refFailure)};
    try {
      decode();
    } catch (const DecodeBudgetError&) {
      failCountedOverBudget();
    }
    if (refFailure) [[unlikely]] {
      std::rethrow_exception(refFailure);
    }
  } else {
    decode();
  }
}

/// True when `p` sends or receives all `n` fields in declaration order.
inline bool isIdentityPlan(const FieldPlan& p, std::size_t n) { return p.inOrderCount == n; }

// Structs and parameter lists: with an identity plan (both sides declare the
// type alike) every field's codec is inlined in order; otherwise one call
// per field through the table, in plan order. With every other fast path in
// place, encoding MediumList100 takes 55,735 instructions with the identity
// path and 71,131 without, decoding 155,806 and 167,305 (docs/benchmarks.md,
// "Codec fast paths").
template <class S>
struct Codec<S, std::enable_if_t<IsStruct<S>::value>> {
  using Table = StructFieldTable<S>;
  static void encode(WireWriter& w, const S& s, const CodecCtx& c) {
    encodeRoomOr(w, s, c, [&] { encodeChecked(w, s, c); });
  }
  /// Field by field, each leaf checking its own room: a struct without a
  /// bound or over kMaxRoom, one nested deeper than kMaxNesting (the writer
  /// refuses it), or one the peer declares otherwise. A function
  /// of its own, so that encode()'s room path does not save and restore the
  /// six registers only this path uses (14 instructions a streamed
  /// SmallMessage).
  [[gnu::noinline]] static void encodeChecked(WireWriter& w, const S& s, const CodecCtx& c) {
    const FieldPlan& p = c.sendStructs[StructIndex<S>::value];
    w.enterNested();
    if (isIdentityPlan(p, Table::kCount)) {
      Table::encodeAll(w, s, c, std::make_index_sequence<Table::kCount>{});
    } else {
      for (std::uint32_t k = 0; k < p.count; ++k) Table::kEnc[p.order[k]](w, s, c);
    }
    w.leaveNested();
  }
  /// Room only in declaration order: a peer that declares the struct
  /// otherwise gets it through the plan above.
  static bool addRoom(const S& s, const CodecCtx& c, std::size_t& n, int depth) {
    return depth < kMaxNesting && isIdentityPlan(c.sendStructs[StructIndex<S>::value], Table::kCount) &&
           Table::roomAll(s, c, n, depth + 1, std::make_index_sequence<Table::kCount>{});
  }
  [[gnu::always_inline]] static RoomWriter encodeIn(RoomWriter w, const S& s, const CodecCtx& c) {
    if constexpr (Table::kInlineWriter) {
      return Table::writeAllInline(w, s, c, std::make_index_sequence<Table::kCount>{});
    } else {
      return Table::writeAll(w, s, c, std::make_index_sequence<Table::kCount>{});
    }
  }
  static void decode(WireReader& r, S& s, const CodecCtx& c) {
    const FieldPlan& p = c.recvStructs[StructIndex<S>::value];
    r.enterNested();
    if (isIdentityPlan(p, Table::kCount)) {
      Table::decodeAll(r, s, c, std::make_index_sequence<Table::kCount>{});
    } else {
      decodeByPlan(r, s, c, p);
    }
    r.leaveNested();
  }
  /// decode() of `n` elements in a row (a vector's): the plan looked up and
  /// the nesting counted once for all of them, as siblings at one depth.
  static void decodeEach(WireReader& r, S* e, std::size_t n, const CodecCtx& c) {
    if (n == 0) return;
    const FieldPlan& p = c.recvStructs[StructIndex<S>::value];
    r.enterNested();
    if (isIdentityPlan(p, Table::kCount)) {
      for (S* end = e + n; e != end; ++e) Table::decodeAll(r, *e, c, std::make_index_sequence<Table::kCount>{});
    } else {
      for (S* end = e + n; e != end; ++e) decodeByPlan(r, *e, c, p);
    }
    r.leaveNested();
  }

 private:
  // Out of line: with the reset below inline, GCC stopped inlining this
  // codec into a method's dispatch, and a streamed SmallMessage took 117
  // instructions to decode instead of 69 (callgrind, StreamSmallMsgFromServer).
  [[gnu::noinline]] static void decodeByPlan(WireReader& r, S& s, const CodecCtx& c, const FieldPlan& p) {
    // Fields the peer lacks keep their defaults, also in a kept value
    // (kept_values.h), which starts from whatever it held.
    if (p.count < Table::kCount) s = S{};
    for (std::uint32_t k = 0; k < p.count; ++k) Table::kDec[p.order[k]](r, s, c);
  }
};

/// Encodes a parameter tuple following `plan` (local parameter indices in
/// wire order).
template <class Tuple>
struct TupleFieldTable {
  static constexpr std::size_t kCount = std::tuple_size_v<Tuple>;
  using Enc = void (*)(WireWriter&, const Tuple&, const CodecCtx&);
  using Dec = void (*)(WireReader&, Tuple&, const CodecCtx&);
  template <std::size_t I>
  static void encodeAt(WireWriter& w, const Tuple& t, const CodecCtx& c) {
    using E = std::remove_cv_t<std::remove_reference_t<std::tuple_element_t<I, Tuple>>>;
    Codec<E>::encode(w, std::get<I>(t), c);
  }
  template <std::size_t I>
  static void decodeAt(WireReader& r, Tuple& t, const CodecCtx& c) {
    using E = std::tuple_element_t<I, Tuple>;
    Codec<E>::decode(r, std::get<I>(t), c);
  }
  template <std::size_t... I>
  static constexpr std::array<Enc, kCount> makeEnc(std::index_sequence<I...>) {
    return {&encodeAt<I>...};
  }
  template <std::size_t... I>
  static constexpr std::array<Dec, kCount> makeDec(std::index_sequence<I...>) {
    return {&decodeAt<I>...};
  }
  static constexpr std::array<Enc, kCount> kEnc = makeEnc(std::make_index_sequence<kCount>{});
  static constexpr std::array<Dec, kCount> kDec = makeDec(std::make_index_sequence<kCount>{});

  template <std::size_t... I>
  static void encodeAll(WireWriter& w, const Tuple& t, const CodecCtx& c, std::index_sequence<I...>) {
    (encodeAt<I>(w, t, c), ...);
  }
  template <std::size_t... I>
  static void decodeAll(WireReader& r, Tuple& t, const CodecCtx& c, std::index_sequence<I...>) {
    (decodeAt<I>(r, t, c), ...);
  }
};

template <class Tuple>
void encodeWithPlan(WireWriter& w, const Tuple& t, const FieldPlan& p, const CodecCtx& c) {
  using Table = TupleFieldTable<Tuple>;
  if (isIdentityPlan(p, Table::kCount)) {
    Table::encodeAll(w, t, c, std::make_index_sequence<Table::kCount>{});
  } else {
    for (std::uint32_t k = 0; k < p.count; ++k) Table::kEnc[p.order[k]](w, t, c);
  }
}
template <class Tuple>
void decodeWithPlan(WireReader& r, Tuple& t, const FieldPlan& p, const CodecCtx& c) {
  using Table = TupleFieldTable<Tuple>;
  if (isIdentityPlan(p, Table::kCount)) {
    Table::decodeAll(r, t, c, std::make_index_sequence<Table::kCount>{});
  } else {
    for (std::uint32_t k = 0; k < p.count; ++k) Table::kDec[p.order[k]](r, t, c);
  }
}

}  // namespace myelin::detail
