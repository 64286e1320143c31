// Values encoded into room reserved once (RoomWriter, codec.h "Room"): the
// same bytes as leaf by leaf through WireWriter, and as the per-field table
// a peer with another field order gets, for random values full of
// defaults and runs, wherever the writer's pending defaults stand; never a
// byte past the bound the codec computed; values above the most room at once
// and structs sent in another field order take the checked path; values
// nested deeper than a reader takes are refused on either path.
#include "myelin/detail/codec.h"

#include "codec_test_util.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace room_test {
enum class Mood : std::int16_t { kLow = -300, kNone = 0, kHigh = 7 };
struct Leaf {
  std::int32_t id = 0;
  std::optional<std::string> tag;
};
/// Every member has a room path.
struct Roomy {
  bool flag = false;
  std::uint16_t u16 = 0;
  std::int64_t i64 = 0;
  std::uint64_t u64 = 0;
  float f = 0;
  double d = 0;
  Mood mood = Mood::kNone;
  std::string s;
  std::vector<std::uint32_t> nums;
  std::vector<std::string> words;
  std::vector<std::uint8_t> bytes;
  std::vector<bool> bits;
  std::array<std::int32_t, 2> pair{};
  std::optional<Leaf> maybe;
  std::vector<Leaf> leaves;
  Leaf last;
};
/// One ten-byte leaf: the tightest room, and none to spare for defaults
/// pending before it but the writer's own 12 bytes.
struct Lone {
  double d = 0;
};
/// Room for its string and leaves, none for its map: all through WireWriter.
struct Mixed {
  std::string s;
  std::map<std::uint32_t, std::string> m;
  std::vector<Leaf> leaves;
};
/// A type that holds vectors of itself.
struct Node {
  std::int32_t v = 0;
  std::vector<Node> kids;
};
bool operator==(const Leaf& a, const Leaf& b) { return a.id == b.id && a.tag == b.tag; }
bool operator==(const Node& a, const Node& b) { return a.v == b.v && a.kids == b.kids; }
bool operator==(const Roomy& a, const Roomy& b) {
  return a.flag == b.flag && a.u16 == b.u16 && a.i64 == b.i64 && a.u64 == b.u64 && a.f == b.f && a.d == b.d &&
         a.mood == b.mood && a.s == b.s && a.nums == b.nums && a.words == b.words && a.bytes == b.bytes &&
         a.bits == b.bits && a.pair == b.pair && a.maybe == b.maybe && a.leaves == b.leaves && a.last == b.last;
}
}  // namespace room_test

using namespace room_test;
template <>
struct myelin::detail::EnumTraits<Mood> {
  static constexpr std::string_view kName = "room_test::Mood";
  static constexpr std::array<EnumValue, 3> kValues{{{"kLow", -300}, {"kNone", 0}, {"kHigh", 7}}};
};
template <>
struct myelin::detail::StructTraits<Leaf> {
  static constexpr std::string_view kName = "room_test::Leaf";
  static constexpr auto kFields = std::make_tuple(field("id", &Leaf::id), field("tag", &Leaf::tag));
};
template <>
struct myelin::detail::StructTraits<Lone> {
  static constexpr std::string_view kName = "room_test::Lone";
  static constexpr auto kFields = std::make_tuple(field("d", &Lone::d));
};
template <>
struct myelin::detail::StructTraits<Mixed> {
  static constexpr std::string_view kName = "room_test::Mixed";
  static constexpr auto kFields =
      std::make_tuple(field("s", &Mixed::s), field("m", &Mixed::m), field("leaves", &Mixed::leaves));
};
template <>
struct myelin::detail::StructTraits<Node> {
  static constexpr std::string_view kName = "room_test::Node";
  static constexpr auto kFields = std::make_tuple(field("v", &Node::v), field("kids", &Node::kids));
};
template <>
struct myelin::detail::StructTraits<Roomy> {
  static constexpr std::string_view kName = "room_test::Roomy";
  static constexpr auto kFields = std::make_tuple(
      field("flag", &Roomy::flag), field("u16", &Roomy::u16), field("i64", &Roomy::i64), field("u64", &Roomy::u64),
      field("f", &Roomy::f), field("d", &Roomy::d), field("mood", &Roomy::mood), field("s", &Roomy::s),
      field("nums", &Roomy::nums), field("words", &Roomy::words), field("bytes", &Roomy::bytes),
      field("bits", &Roomy::bits), field("pair", &Roomy::pair), field("maybe", &Roomy::maybe),
      field("leaves", &Roomy::leaves), field("last", &Roomy::last));
};

namespace myelin::detail {
namespace {

using Bytes = std::vector<std::uint8_t>;
Bytes bytesOf(const ByteBuffer& b) { return Bytes(b.data(), b.data() + b.size()); }

/// Plans for Leaf, Roomy, Lone, Mixed and Node (indices 0 to 4): in
/// declaration order (`room`), and the same order with the flag cleared,
/// which takes the per-field table and WireWriter (`checked`).
struct Plans {
  std::vector<std::uint16_t> order;
  FieldPlan identity[5];
  FieldPlan table[5];
  CodecCtx room;
  CodecCtx checked;
  Plans() {
    for (std::uint16_t i = 0; i < 16; ++i) order.push_back(i);
    StructIndex<Leaf>::value = 0;
    StructIndex<Roomy>::value = 1;
    StructIndex<Lone>::value = 2;
    StructIndex<Mixed>::value = 3;
    StructIndex<Node>::value = 4;
    const std::uint32_t counts[5] = {2, 16, 1, 3, 2};
    for (int i = 0; i < 5; ++i) identity[i] = {order.data(), counts[i]};
    for (int i = 0; i < 5; ++i) {
      table[i] = identity[i];
      table[i].forgetOrder();
    }
    room = {identity, identity};
    checked = {table, table};
  }
};

/// Random values with about half of everything at its default, so that
/// defaults come singly, in pairs and in runs, inside and across members.
class Maker {
 public:
  explicit Maker(std::uint32_t seed) : rng_(seed) {}

  Roomy roomy() {
    Roomy r;
    r.flag = coin();
    r.u16 = static_cast<std::uint16_t>(number(16));
    r.i64 = coin() ? static_cast<std::int64_t>(number(64)) : -static_cast<std::int64_t>(number(40));
    r.u64 = number(64);
    r.f = coin() ? 0.0f : static_cast<float>(number(20)) / 7.0f;
    r.d = coin() ? 0.0 : -static_cast<double>(number(40)) / 3.0;
    r.mood = coin() ? Mood::kNone : (coin() ? Mood::kLow : Mood::kHigh);
    r.s = text();
    for (std::size_t i = count(); i > 0; --i) r.nums.push_back(static_cast<std::uint32_t>(number(32)));
    for (std::size_t i = count(); i > 0; --i) r.words.push_back(text());
    const std::string b = text();
    r.bytes.assign(b.begin(), b.end());
    for (std::size_t i = count(); i > 0; --i) r.bits.push_back(coin());
    r.pair = {static_cast<std::int32_t>(number(31)), -static_cast<std::int32_t>(number(20))};
    if (coin()) r.maybe = leaf();
    for (std::size_t i = count(); i > 0; --i) r.leaves.push_back(leaf());
    r.last = leaf();
    return r;
  }
  Leaf leaf() {
    Leaf l;
    l.id = coin() ? 0 : static_cast<std::int32_t>(number(31)) - (1 << 20);
    if (coin()) l.tag = text();
    return l;
  }
  bool coin() { return rng_() & 1; }
  /// 0 half the time, else up to `bits` bits (varints of every length).
  std::uint64_t number(int bits) {
    if (coin()) return 0;
    const int width = 1 + static_cast<int>(rng_() % static_cast<std::uint32_t>(bits));
    const std::uint64_t v = (std::uint64_t{rng_()} << 32) | rng_();
    return width == 64 ? v : v & ((std::uint64_t{1} << width) - 1);
  }
  std::size_t count() { return coin() ? 0 : rng_() % 5; }
  /// Empty half the time, else 1 to 200 bytes (lengths of one and two bytes).
  std::string text() {
    if (coin()) return {};
    std::string s(1 + rng_() % 200, ' ');
    for (char& ch : s) ch = static_cast<char>(rng_());
    return s;
  }

 private:
  std::mt19937 rng_;
};

/// The leaves of a Leaf and of a Roomy written one by one through
/// WireWriter, as docs/wire-format.md lays them out: the reference.
void leavesOf(WireWriter& w, const Leaf& l) {
  w.leafSigned(l.id);
  if (l.tag) {
    w.leafHead(1);
    w.leafBytes(l.tag->data(), l.tag->size());
  } else {
    w.defaultLeaf();
  }
}
void leavesOf(WireWriter& w, const Roomy& r) {
  w.leafUnsigned(r.flag);
  w.leafUnsigned(r.u16);
  w.leafSigned(r.i64);
  w.leafUnsigned(r.u64);
  w.leafFloat(r.f);
  w.leafDouble(r.d);
  w.leafSigned(static_cast<std::int64_t>(r.mood));
  w.leafBytes(r.s.data(), r.s.size());
  w.leafUnsigned(r.nums.size());
  for (std::uint32_t n : r.nums) w.leafUnsigned(n);
  w.leafUnsigned(r.words.size());
  for (const std::string& s : r.words) w.leafBytes(s.data(), s.size());
  w.leafBytes(r.bytes.data(), r.bytes.size());
  w.leafUnsigned(r.bits.size());
  for (bool b : r.bits) w.leafUnsigned(b);
  for (std::int32_t x : r.pair) w.leafSigned(x);
  if (r.maybe) {
    w.leafHead(1);
    leavesOf(w, *r.maybe);
  } else {
    w.defaultLeaf();
  }
  w.leafUnsigned(r.leaves.size());
  for (const Leaf& l : r.leaves) leavesOf(w, l);
  leavesOf(w, r.last);
}
void leavesOf(WireWriter& w, const Lone& l) { w.leafDouble(l.d); }
void leavesOf(WireWriter& w, const Mixed& x) {
  w.leafBytes(x.s.data(), x.s.size());
  w.leafUnsigned(x.m.size());
  for (const auto& [k, v] : x.m) {
    w.leafUnsigned(k);
    w.leafBytes(v.data(), v.size());
  }
  w.leafUnsigned(x.leaves.size());
  for (const Leaf& l : x.leaves) leavesOf(w, l);
}
void leavesOf(WireWriter& w, const Node& n) {
  w.leafSigned(n.v);
  w.leafUnsigned(n.kids.size());
  for (const Node& k : n.kids) leavesOf(w, k);
}
void leavesOf(WireWriter& w, const std::vector<Leaf>& v) {
  w.leafUnsigned(v.size());
  for (const Leaf& l : v) leavesOf(w, l);
}
void leavesOf(WireWriter& w, const std::vector<std::uint64_t>& v) {
  w.leafUnsigned(v.size());
  for (std::uint64_t n : v) w.leafUnsigned(n);
}

/// `before` default leaves, the value, `after` default leaves and a last
/// leaf of 9, as a message would carry it among other arguments; through
/// the value's codec, or leaf by leaf (`c` null).
template <class T>
Bytes framed(const T& v, const CodecCtx* c, int before, int after) {
  ByteBuffer b;
  WireWriter w(b);
  for (int i = 0; i < before; ++i) w.defaultLeaf();
  if (c) {
    Codec<T>::encode(w, v, *c);
  } else {
    leavesOf(w, v);
  }
  for (int i = 0; i < after; ++i) w.defaultLeaf();
  w.leafUnsigned(9);
  w.finish();
  return bytesOf(b);
}

TEST(CodecRoom, RoomAndCheckedPathsAgreeByteForByte) {
  Plans p;
  Maker make(20261124);
  for (int i = 0; i < 3000; ++i) {
    const Roomy v = make.roomy();
    std::size_t bound = 0;
    ASSERT_TRUE(Codec<Roomy>::addRoom(v, p.room, bound, 0));
    ASSERT_FALSE(Codec<Roomy>::addRoom(v, p.checked, bound, 0)) << "another field order has no room";
    const int before = i % 5;
    const int after = (i / 5) % 4;
    const Bytes viaRoom = framed(v, &p.room, before, after);
    ASSERT_EQ(viaRoom, framed(v, nullptr, before, after)) << "value " << i;
    ASSERT_EQ(viaRoom, framed(v, &p.checked, before, after)) << "value " << i;
    WireReader r(viaRoom.data(), viaRoom.size());
    for (int k = 0; k < before; ++k) ASSERT_TRUE(r.leafIsDefault());
    Roomy back;
    Codec<Roomy>::decode(r, back, p.room);
    for (int k = 0; k < after; ++k) ASSERT_TRUE(r.leafIsDefault());
    ASSERT_EQ(r.leafUnsigned(), 9u);
    r.finish();
    ASSERT_TRUE(back == v) << "value " << i;
  }
}

TEST(CodecRoom, AllDefaultValueIsOneRunWithTheDefaultsAround) {
  Plans p;
  // 2 pending + 18 leaves of a default Roomy (one a member, the pair's two,
  // the last Leaf's two) + 1 after: one run of 21.
  const Bytes b = framed(Roomy{}, &p.room, 2, 1);
  EXPECT_EQ(b, (Bytes{0x80, 0x00, 21 - 3, 9}));
  EXPECT_EQ(b, framed(Roomy{}, nullptr, 2, 1));
}

/// Encodes `v` after `before` pending defaults into a buffer already large
/// enough (so that reserving moves nothing) and filled with a marker byte;
/// fails unless every byte past the room its codec bounded keeps the
/// marker. Returns the bytes with the defaults after it written.
template <class T>
Bytes encodeWithinBound(const T& v, const CodecCtx& c, int before) {
  std::size_t bound = 0;
  EXPECT_TRUE(Codec<T>::addRoom(v, c, bound, 0));
  EXPECT_LE(bound, kMaxRoom);
  ByteBuffer b;
  const std::size_t capacity = bound + kLeafRoom + 64;
  std::uint8_t* start = b.reserveTail(capacity);
  std::fill(start, start + capacity, 0xa5);
  WireWriter w(b);
  for (int k = 0; k < before; ++k) w.defaultLeaf();
  Codec<T>::encode(w, v, c);
  EXPECT_EQ(b.data(), start) << "the buffer moved: room was not reserved once";
  EXPECT_LE(b.size(), bound + kLeafRoom);
  std::size_t touched = 0;
  for (std::size_t k = bound + kLeafRoom; k < capacity; ++k) touched += start[k] != 0xa5;
  EXPECT_EQ(touched, 0u) << "bytes written past the room reserved";
  w.finish();
  return bytesOf(b);
}

TEST(CodecRoom, WritesNothingPastItsBound) {
  Plans p;
  Maker make(7);
  for (int i = 0; i < 2000; ++i) {
    const Roomy v = make.roomy();
    const int before = i % 4;
    Bytes b = encodeWithinBound(v, p.room, before);
    b.push_back(9);  // framed()'s last leaf
    ASSERT_EQ(b, framed(v, nullptr, before, 0)) << "value " << i;
    if (::testing::Test::HasFailure()) FAIL() << "value " << i;
  }
}

TEST(CodecRoom, LongStringsAndTenByteIntegersStayWithinTheirBound) {
  Plans p;
  // The bound's tightest cases: every string has a two-byte length, every
  // integer takes ten bytes.
  Roomy v;
  for (int i = 0; i < 200; ++i) v.words.push_back(std::string(128 + i % 50, static_cast<char>('a' + i % 26)));
  v.u64 = ~std::uint64_t{0};
  v.i64 = std::numeric_limits<std::int64_t>::min();
  v.d = -1.0 / 3.0;
  Bytes leafByLeaf = framed(v, nullptr, 0, 0);
  leafByLeaf.pop_back();  // framed()'s last leaf
  EXPECT_EQ(encodeWithinBound(v, p.room, 0), leafByLeaf);
}

TEST(CodecRoom, EveryLeafWritesWithinTwelveBytesOfRoomPlusItsBytes) {
  // What the bounds rest on: after k pending defaults (their marker
  // included), a leaf writes at most kLeafRoom + 10 bytes plus a byte
  // string's own, and with none pending at most 10 plus the string's.
  const std::string text(300, 'x');
  for (std::uint64_t k : {0ull, 1ull, 2ull, 3ull, 130ull, 20000ull, 1ull << 62}) {
    for (int kind = 0; kind < 4; ++kind) {
      for (std::size_t n : {std::size_t{1}, std::size_t{16}, std::size_t{127}, std::size_t{128}, std::size_t{300}}) {
        std::array<std::uint8_t, 400> room;
        room.fill(0xa5);
        RoomWriter w{room.data(), k};
        std::size_t own = 10;
        switch (kind) {
          case 0: w.leafUnsigned(~std::uint64_t{0}); break;
          case 1: w.leafSigned(std::numeric_limits<std::int64_t>::min()); break;
          case 2: w.leafDouble(-1.0 / 3.0); break;
          default:
            w.leafBytes(text.data(), n);
            own += n;
        }
        const std::size_t allowed = (k ? kLeafRoom : 0) + own;
        for (std::size_t i = allowed; i < room.size(); ++i) {
          ASSERT_EQ(room[i], 0xa5) << "pending " << k << ", leaf kind " << kind << ", byte " << i;
        }
        EXPECT_EQ(w.pending, 0u);
        EXPECT_LE(static_cast<std::size_t>(w.p - room.data()), allowed);
      }
    }
  }
}

TEST(CodecRoom, DefaultsPendingBeforeTheRoomHaveTheirOwnTwelveBytes) {
  Plans p;
  // A lone ten-byte leaf after a run of defaults: its marker (3 bytes and
  // more) has only the writer's extra 12 bytes of room.
  for (int before : {1, 2, 3, 200, 20000}) {
    Bytes b = encodeWithinBound(Lone{-1.0 / 3.0}, p.room, before);
    b.push_back(9);
    EXPECT_EQ(b, framed(Lone{-1.0 / 3.0}, nullptr, before, 0)) << before << " defaults before";
  }
}

TEST(CodecRoom, TheRoomEndsWhereTheBufferEnds) {
  Plans p;
  // The bound (12) and the writer's 12 reserved at the very end of a
  // 256-byte buffer, 12 bytes short: it must grow. Without the writer's 12
  // the lone double after three defaults (13 bytes) would run one byte past
  // the allocation (which the ASan build reports).
  ByteBuffer b;
  b.reserveTail(256);
  ASSERT_EQ(b.capacity(), 256u);
  b.commit(256 - kLeafRoom);
  WireWriter w(b);
  for (int k = 0; k < 3; ++k) w.defaultLeaf();
  Codec<Lone>::encode(w, Lone{-1.0 / 3.0}, p.room);
  w.finish();
  EXPECT_GT(b.capacity(), 256u) << "room reserved for the bound but not for the defaults before it";
  const Bytes tail(b.data() + 256 - kLeafRoom, b.data() + b.size());
  Bytes reference = framed(Lone{-1.0 / 3.0}, nullptr, 3, 0);
  reference.pop_back();  // framed()'s last leaf
  EXPECT_EQ(tail, reference);
}

TEST(CodecRoom, AStructWithAMemberWithoutRoomGoesThroughTheWriter) {
  Plans p;
  Maker make(5);
  Mixed x;
  x.s = make.text();
  x.m = {{0, ""}, {7, "seven"}, {300, std::string(200, 'm')}};
  for (int i = 0; i < 20; ++i) x.leaves.push_back(make.leaf());
  std::size_t bound = 0;
  EXPECT_FALSE(Codec<Mixed>::addRoom(x, p.room, bound, 0)) << "a map has no bound";
  const Bytes viaCodec = framed(x, &p.room, 2, 1);
  EXPECT_EQ(viaCodec, framed(x, nullptr, 2, 1));
  WireReader r(viaCodec.data(), viaCodec.size());
  ASSERT_TRUE(r.leafIsDefault());
  ASSERT_TRUE(r.leafIsDefault());
  Mixed back;
  Codec<Mixed>::decode(r, back, p.room);
  EXPECT_EQ(back.s, x.s);
  EXPECT_EQ(back.m, x.m);
  EXPECT_TRUE(back.leaves == x.leaves);
}

TEST(CodecRoom, ATypeHoldingVectorsOfItselfKeepsItsBytes) {
  Plans p;
  // A chain 200 deep whose every node has 19 leaf children, and a wide
  // tree: above the most room at once near the root, within it lower down.
  Node root;
  Node* at = &root;
  for (int depth = 0; depth < 200; ++depth) {
    at->v = depth - 100;
    at->kids.resize(20);
    for (int k = 1; k < 20; ++k) at->kids[static_cast<std::size_t>(k)].v = depth * 20 + k;
    at = &at->kids[0];
  }
  Node wide;
  wide.kids.resize(3000);
  for (std::size_t i = 0; i < wide.kids.size(); ++i) wide.kids[i] = Node{static_cast<std::int32_t>(i), {Node{1, {}}}};
  for (const Node* n : {&root, &wide}) {
    std::size_t bound = 0;
    EXPECT_FALSE(Codec<Node>::addRoom(*n, p.room, bound, 0)) << "above kMaxRoom";
    const Bytes viaCodec = framed(*n, &p.room, 1, 2);
    ASSERT_EQ(viaCodec, framed(*n, nullptr, 1, 2));
    WireReader r(viaCodec.data(), viaCodec.size());
    ASSERT_TRUE(r.leafIsDefault());
    Node back;
    Codec<Node>::decode(r, back, p.room);
    EXPECT_TRUE(back == *n);
  }
  // A node low down the chain has room of its own.
  const Node* low = &root;
  for (int depth = 0; depth < 190; ++depth) low = &low->kids[0];
  Bytes lowBytes = encodeWithinBound(*low, p.room, 3);
  lowBytes.push_back(9);
  EXPECT_EQ(lowBytes, framed(*low, nullptr, 3, 0));
}

TEST(CodecRoom, LargeValuesTakeTheCheckedPathTheirElementsTheirOwnRoom) {
  Plans p;
  Maker make(99);
  std::vector<Leaf> many(5000);
  for (Leaf& l : many) l = make.leaf();
  std::size_t bound = 0;
  ASSERT_FALSE(Codec<std::vector<Leaf>>::addRoom(many, p.room, bound, 0));
  ASSERT_GT(bound, kMaxRoom);
  const Bytes viaRoom = framed(many, &p.room, 1, 0);
  EXPECT_EQ(viaRoom, framed(many, nullptr, 1, 0));
  // One 12-byte leaf too many for room at once: the buffer grows with what
  // is written, never to the bound.
  std::vector<std::uint64_t> numbers(kMaxRoom / kLeafRoom);
  for (std::uint64_t& n : numbers) n = make.number(64) % 100;
  ByteBuffer b;
  WireWriter w(b);
  Codec<std::vector<std::uint64_t>>::encode(w, numbers, p.room);
  w.finish();
  EXPECT_LT(b.capacity(), kMaxRoom / 2) << "reserved for the bound: took the room";
  Bytes reference = framed(numbers, nullptr, 0, 0);
  reference.pop_back();  // framed()'s last leaf
  EXPECT_EQ(bytesOf(b), reference);
  // One leaf fewer fits: reserved once, for the whole bound.
  numbers.pop_back();
  ByteBuffer fits;
  WireWriter wf(fits);
  Codec<std::vector<std::uint64_t>>::encode(wf, numbers, p.room);
  EXPECT_GE(fits.capacity(), kMaxRoom);

  WireReader r(viaRoom.data(), viaRoom.size());
  ASSERT_TRUE(r.leafIsDefault());
  std::vector<Leaf> back;
  Codec<std::vector<Leaf>>::decode(r, back, p.room);
  EXPECT_EQ(r.leafUnsigned(), 9u);
  r.finish();
  EXPECT_TRUE(back == many);
}

/// A chain of `n` nodes, each the only child of the one above: n levels.
Node chain(int n) {
  Node root;
  Node* at = &root;
  for (int i = 1; i < n; ++i) {
    at->v = i;
    at->kids.resize(1);
    at = &at->kids[0];
  }
  return root;
}

/// Encodes `v` alone and decodes it back.
template <class T>
T roundTrip(const T& v, const CodecCtx& c) {
  T back{};
  test::decodeInto(test::enc(v, c), back, c);
  return back;
}

TEST(CodecRoom, ValuesNestedDeeperThanAnyPeerDecodesAreRefusedWhenEncoded) {
  Plans p;
  for (const CodecCtx* c : {&p.room, &p.checked}) {
    SCOPED_TRACE(c == &p.room ? "room" : "checked");
    // As deep as a reader takes: encoded and decoded back whole.
    const Node deepest = chain(kMaxNesting);
    EXPECT_TRUE(roundTrip(deepest, *c) == deepest);
    // One level more is the writer's error, before the reader's.
    EXPECT_THROW(test::enc(chain(kMaxNesting + 1), *c), UnsendableValueError);
    EXPECT_THROW(test::enc(chain(5000), *c), UnsendableValueError);
    // A present optional, a shared pointer and a Result count a level each,
    // as the reader counts them.
    const std::optional<Node> opt = chain(kMaxNesting - 1);
    EXPECT_TRUE(roundTrip(opt, *c) == opt);
    EXPECT_THROW(test::enc(std::optional<Node>(chain(kMaxNesting)), *c), UnsendableValueError);
    EXPECT_NO_THROW(test::enc(std::optional<Node>(), *c));
    const auto shared = std::make_shared<Node>(chain(kMaxNesting - 1));
    EXPECT_TRUE(*roundTrip(shared, *c) == *shared);
    EXPECT_THROW(test::enc(std::make_shared<Node>(chain(kMaxNesting)), *c), UnsendableValueError);
    const Result<Node, std::string> result = chain(kMaxNesting - 1);
    EXPECT_TRUE(roundTrip(result, *c).value() == result.value());
    EXPECT_THROW(test::enc(Result<Node, std::string>(chain(kMaxNesting)), *c), UnsendableValueError);
    // Counted from where the writer stands, in room too: 200 levels down,
    // 56 more fit and 57 do not, and the writer is back at 200 after.
    ByteBuffer b;
    WireWriter w(b);
    for (int i = 0; i < 200; ++i) w.enterNested();
    Codec<Node>::encode(w, chain(kMaxNesting - 200), *c);
    EXPECT_EQ(w.depth(), 200);
    EXPECT_THROW(Codec<Node>::encode(w, chain(kMaxNesting - 199), *c), UnsendableValueError);
    // Elements of a vector are siblings: many chains side by side are as
    // deep as one.
    const std::vector<Node> side(50, chain(kMaxNesting));
    EXPECT_TRUE(roundTrip(side, *c) == side);
  }
}

}  // namespace
}  // namespace myelin::detail
