// Decoders of untrusted input shared by Myelin's fuzz tests: the HELLO
// descriptor, typed values through Codec<T>, and frame streams. Each target
// either decodes its input or throws InvalidMessageError.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "myelin/detail/codec.h"
#include "myelin/errors.h"
#include "schema/local_schema.h"
#include "wire/frame.h"

namespace myelin_fuzz {

enum class Mood : std::int16_t { kSad = -2, kOk = 0, kHappy = 3 };

struct Leaf {
  std::uint32_t id = 0;
  std::string name;
  std::optional<double> score;
  Mood mood = Mood::kOk;
};

struct Tree {
  std::vector<Leaf> leaves;
  std::map<std::string, std::int64_t> index;
  std::set<std::int32_t> ids;
  std::shared_ptr<Leaf> root;
  std::array<std::uint16_t, 3> dims{};
  std::vector<bool> flags;
  std::vector<std::uint8_t> blob;
  float f = 0;
  char c = 0;
  std::optional<std::vector<std::string>> tags;
  Leaf inner;
};

/// Recursive through a container: exercises the nesting limit.
struct Node {
  std::uint8_t tag = 0;
  std::vector<Node> kids;
};

}  // namespace myelin_fuzz

template <>
struct myelin::detail::EnumTraits<myelin_fuzz::Mood> {
  static constexpr std::string_view kName = "myelin_fuzz::Mood";
  static constexpr std::array<EnumValue, 3> kValues{{{"kSad", -2}, {"kOk", 0}, {"kHappy", 3}}};
};
template <>
struct myelin::detail::StructTraits<myelin_fuzz::Leaf> {
  using S = myelin_fuzz::Leaf;
  static constexpr std::string_view kName = "myelin_fuzz::Leaf";
  static constexpr auto kFields =
      std::make_tuple(field("id", &S::id), field("name", &S::name), field("score", &S::score), field("mood", &S::mood));
};
template <>
struct myelin::detail::StructTraits<myelin_fuzz::Tree> {
  using S = myelin_fuzz::Tree;
  static constexpr std::string_view kName = "myelin_fuzz::Tree";
  static constexpr auto kFields = std::make_tuple(
      field("leaves", &S::leaves), field("index", &S::index), field("ids", &S::ids), field("root", &S::root),
      field("dims", &S::dims), field("flags", &S::flags), field("blob", &S::blob), field("f", &S::f),
      field("c", &S::c), field("tags", &S::tags), field("inner", &S::inner));
};
template <>
struct myelin::detail::StructTraits<myelin_fuzz::Node> {
  using S = myelin_fuzz::Node;
  static constexpr std::string_view kName = "myelin_fuzz::Node";
  static constexpr auto kFields = std::make_tuple(field("tag", &S::tag), field("kids", &S::kids));
};

namespace myelin_fuzz {

using myelin::detail::ByteBuffer;
using myelin::detail::Codec;
using myelin::detail::CodecCtx;
using myelin::detail::FieldPlan;
using myelin::detail::WireReader;
using myelin::detail::WireWriter;
using Bytes = std::vector<std::uint8_t>;

/// What a decoder may allocate for one fuzz input.
inline constexpr std::size_t kDecodeBudget = 64 * 1024;
/// Largest frame body the frame target accepts.
inline constexpr std::size_t kMaxFrameBody = 512;

enum class Target : std::uint8_t { kHello, kLeaf, kTree, kNode, kU64Vector, kStringMap, kFrames, kCount };

inline const char* targetName(Target t) {
  static constexpr const char* kNames[] = {"hello", "Leaf", "Tree", "Node", "vector<u64>", "map<s,o<i32>>", "frames"};
  return kNames[static_cast<int>(t)];
}

/// Identity field plans for Leaf (0), Tree (1) and Node (2), both directions.
class Context {
 public:
  Context() {
    myelin::detail::StructIndex<Leaf>::value = 0;
    myelin::detail::StructIndex<Tree>::value = 1;
    myelin::detail::StructIndex<Node>::value = 2;
    plans_[0] = {leaf_.data(), static_cast<std::uint32_t>(leaf_.size())};
    plans_[1] = {tree_.data(), static_cast<std::uint32_t>(tree_.size())};
    plans_[2] = {node_.data(), static_cast<std::uint32_t>(node_.size())};
    ctx_ = {plans_, plans_};
  }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  const CodecCtx& ctx() const { return ctx_; }

 private:
  std::vector<std::uint16_t> leaf_{0, 1, 2, 3};
  std::vector<std::uint16_t> tree_{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  std::vector<std::uint16_t> node_{0, 1};
  FieldPlan plans_[3];
  CodecCtx ctx_;
};

/// Thrown when an input that decoded does not survive re-encoding: a bug,
/// never an acceptable outcome.
class RoundTripMismatch : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

template <class T>
Bytes encodeValue(const T& v, const CodecCtx& c) {
  ByteBuffer b;
  WireWriter w(b);
  Codec<T>::encode(w, v, c);
  w.finish();
  return Bytes(b.data(), b.data() + b.size());
}

template <class T>
T decodeValue(const std::uint8_t* p, std::size_t n, const CodecCtx& c) {
  WireReader r(p, n);
  r.setBudget(kDecodeBudget);
  T v{};
  Codec<T>::decode(r, v, c);
  r.finish();
  return v;
}

/// Decodes a value of T strictly; on success checks that its encoding
/// decodes again and re-encodes to the same bytes.
template <class T>
void decodeTyped(const std::uint8_t* p, std::size_t n, const CodecCtx& c) {
  T v = decodeValue<T>(p, n, c);
  Bytes once = encodeValue(v, c);
  try {
    T again = decodeValue<T>(once.data(), once.size(), c);
    if (encodeValue(again, c) != once) throw RoundTripMismatch("re-encoding a decoded value changed its bytes");
  } catch (const myelin::InvalidMessageError& e) {
    throw RoundTripMismatch(std::string("the encoding of a decoded value does not decode: ") + e.what());
  }
}

inline Bytes encodeHello(const myelin::detail::SchemaDescriptor& d) {
  ByteBuffer b;
  d.encode(b, d.limits);  // what it announced, announced again
  return Bytes(b.data(), b.data() + b.size());
}

inline void decodeHello(const std::uint8_t* p, std::size_t n) {
  using myelin::detail::SchemaDescriptor;
  Bytes once = encodeHello(SchemaDescriptor::decode(p, n));
  try {
    if (encodeHello(SchemaDescriptor::decode(once.data(), once.size())) != once) {
      throw RoundTripMismatch("re-encoding a decoded descriptor changed its bytes");
    }
  } catch (const myelin::InvalidMessageError& e) {
    throw RoundTripMismatch(std::string("the encoding of a decoded descriptor does not decode: ") + e.what());
  }
}

/// Parses a stream of frames as a receiver would up to the body: the length
/// prefix (bounded by kMaxFrameBody), the kind byte, and for calls the slot,
/// method and a Leaf parameter; a HELLO body is a descriptor.
inline void decodeFrames(const std::uint8_t* p, std::size_t n, const CodecCtx& c) {
  std::size_t off = 0;
  while (off < n) {
    auto span = myelin::detail::peekFrame(p + off, n - off, kMaxFrameBody);
    if (!span || span->total() > n - off) return;  // incomplete: a receiver waits for more
    const std::uint8_t* body = p + off + span->headerLen;
    WireReader r(body, span->bodyLen);
    std::uint8_t kind = r.rawByte();
    auto type = static_cast<myelin::detail::FrameType>(kind & myelin::detail::kTypeMask);
    bool isCall = type == myelin::detail::FrameType::kCallVoid || type == myelin::detail::FrameType::kCallSync ||
                  type == myelin::detail::FrameType::kCallAsync;
    if ((kind & myelin::detail::kDeadlineBit) && !isCall) WireReader::fail("deadline bit on a frame that is not a call");
    switch (type) {
      case myelin::detail::FrameType::kCallVoid:
      case myelin::detail::FrameType::kCallSync:
      case myelin::detail::FrameType::kCallAsync: {
        r.rawVarint();  // slot
        r.rawVarint();  // method
        if (kind & myelin::detail::kObjectBit) r.rawVarint();
        if (kind & myelin::detail::kDeadlineBit) r.rawU64();
        r.setBudget(kDecodeBudget);
        Leaf params;
        Codec<Leaf>::decode(r, params, c);
        r.finish();
        break;
      }
      case myelin::detail::FrameType::kBarrier:
      case myelin::detail::FrameType::kBarrierAck:
        r.rawVarint();
        r.rawVarint();
        r.finish();
        break;
      case myelin::detail::FrameType::kGoodbye:
        r.rawString(4096);
        r.finish();
        break;
      case myelin::detail::FrameType::kHello:
        decodeHello(r.position(), r.remaining());
        break;
      default:
        WireReader::fail("unknown frame type");
    }
    off += span->total();
  }
}

/// Decodes `p[0..n)` as target `t`. Returns when it decoded; throws
/// InvalidMessageError when it was rejected; anything else is a bug.
inline void decodeAs(Target t, const std::uint8_t* p, std::size_t n, const Context& cx) {
  const CodecCtx& c = cx.ctx();
  switch (t) {
    case Target::kHello:
      decodeHello(p, n);
      return;
    case Target::kLeaf:
      decodeTyped<Leaf>(p, n, c);
      return;
    case Target::kTree:
      decodeTyped<Tree>(p, n, c);
      return;
    case Target::kNode:
      decodeTyped<Node>(p, n, c);
      return;
    case Target::kU64Vector:
      decodeTyped<std::vector<std::uint64_t>>(p, n, c);
      return;
    case Target::kStringMap:
      decodeTyped<std::map<std::string, std::optional<std::int32_t>>>(p, n, c);
      return;
    case Target::kFrames:
      decodeFrames(p, n, c);
      return;
    case Target::kCount:
      break;
  }
  throw std::logic_error("no such fuzz target");
}

inline myelin::detail::SchemaDescriptor sampleDescriptor() {
  using myelin::detail::CallMode;
  using myelin::detail::MethodInfo;
  myelin::detail::SchemaDescriptor d;
  d.structs.push_back({"myelin_fuzz::Leaf", {{"id", "u32"}, {"name", "s"}, {"score", "o<f64>"}, {"mood", "E:myelin_fuzz::Mood"}}});
  d.structs.push_back({"myelin_fuzz::Node", {{"tag", "u8"}, {"kids", "v<S:myelin_fuzz::Node>"}}});
  d.enums.push_back({"myelin_fuzz::Mood", {{"kSad", -2}, {"kOk", 0}, {"kHappy", 3}}});
  MethodInfo get{"get", CallMode::kSync, "S:myelin_fuzz::Leaf", {{"id", "u32"}}, nullptr};
  MethodInfo push{"push", CallMode::kAsyncVoid, "", {{"leaf", "S:myelin_fuzz::Leaf"}, {"n", "i64"}}, nullptr};
  MethodInfo later{"later", CallMode::kAsync, "v<u8>", {}, nullptr};
  d.classes.push_back({"fuzz::Service", {get, push, later}, {later}});
  d.classes.push_back({"fuzz::Sink", {}, {push}});
  return d;
}

inline Tree sampleTree() {
  Tree t;
  t.leaves = {{1, "one", 0.5, Mood::kHappy}, {}, {300, "", std::nullopt, Mood::kSad}};
  t.index = {{"a", -1}, {"bb", 1LL << 40}};
  t.ids = {-7, 0, 9};
  t.root = std::make_shared<Leaf>(Leaf{5, "root", -0.0, Mood::kOk});
  t.dims = {1, 0, 65535};
  t.flags = {true, false, true, true};
  t.blob = {0, 1, 2, 0xff};
  t.f = 12.3f;
  t.c = 'q';
  t.tags = std::vector<std::string>{"x", "", "yz"};
  t.inner = {77, "inner", 1e300, Mood::kSad};
  return t;
}

inline Node sampleNode() {
  Node n{1, {}};
  n.kids.push_back({2, {}});
  n.kids.push_back({3, {{4, {{5, {}}}}}});
  n.kids.push_back({});
  return n;
}

/// Valid encodings to start mutating from.
inline std::vector<Bytes> seeds(Target t, const Context& cx) {
  const CodecCtx& c = cx.ctx();
  switch (t) {
    case Target::kHello:
      return {encodeHello(sampleDescriptor()), encodeHello({})};
    case Target::kLeaf:
      return {encodeValue(Leaf{42, "hello", 2.5, Mood::kSad}, c), encodeValue(Leaf{}, c)};
    case Target::kTree:
      return {encodeValue(sampleTree(), c), encodeValue(Tree{}, c)};
    case Target::kNode:
      return {encodeValue(sampleNode(), c)};
    case Target::kU64Vector:
      return {encodeValue(std::vector<std::uint64_t>{0, 0, 0, 0, 1, ~0ull, 0, 300}, c),
              encodeValue(std::vector<std::uint64_t>{}, c)};
    case Target::kStringMap:
      return {encodeValue(std::map<std::string, std::optional<std::int32_t>>{{"a", 1}, {"b", std::nullopt}, {"c", 0}}, c)};
    case Target::kFrames: {
      ByteBuffer b;
      auto call = [&](std::uint8_t kind, const Leaf& leaf) {
        myelin::detail::appendFrame(b, [&](WireWriter& w) {
          w.rawByte(kind);
          w.rawVarint(3);  // slot
          w.rawVarint(1);  // method
          Codec<Leaf>::encode(w, leaf, c);
        });
      };
      call(static_cast<std::uint8_t>(myelin::detail::FrameType::kCallSync), Leaf{9, "call", 1.0, Mood::kHappy});
      call(static_cast<std::uint8_t>(myelin::detail::FrameType::kCallVoid) | myelin::detail::kReceiverLaneBit, Leaf{});
      myelin::detail::appendFrame(b, [&](WireWriter& w) {
        w.rawByte(static_cast<std::uint8_t>(myelin::detail::FrameType::kBarrier));
        w.rawVarint(0);
        w.rawVarint(1);
      });
      myelin::detail::appendFrame(b, [&](WireWriter& w) {
        w.rawByte(static_cast<std::uint8_t>(myelin::detail::FrameType::kGoodbye));
        w.rawString("bye");
      });
      Bytes frames(b.data(), b.data() + b.size());
      ByteBuffer h;
      myelin::detail::appendFrame(h, [&](WireWriter& w) {
        w.rawByte(static_cast<std::uint8_t>(myelin::detail::FrameType::kHello));
        sampleDescriptor().encode(w.buffer());
      });
      return {frames, Bytes(h.data(), h.data() + h.size())};
    }
    case Target::kCount:
      break;
  }
  return {};
}

}  // namespace myelin_fuzz
