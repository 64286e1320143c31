// Codec<T> for every supported type: round trips, defaults and runs across
// nested structs, plan-driven evolution (inline identity path and per-field
// table path alike), decoding into non-empty targets, strict range checks.
#include "myelin/detail/codec.h"

#include "codec_test_util.h"

#include <gtest/gtest.h>

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace codec_test {
enum class Color : std::int8_t { kRed = -1, kGreen = 0, kBlue = 5 };
enum Plain : std::uint16_t { kA = 1, kB = 60000 };
struct Inner {
  std::int64_t id = 0;
  std::optional<std::string> tag;
};
struct Outer {
  bool flag = false;
  char c = 0;
  std::int8_t i8 = 0;
  std::uint16_t u16 = 0;
  std::int32_t i32 = 0;
  std::uint64_t u64 = 0;
  float f = 0;
  double d = 0;
  Color color = Color::kGreen;
  Plain plain = kA;
  std::string s;
  std::vector<Inner> inners;
  std::map<std::string, std::int32_t> m;
  std::set<std::uint32_t> set;
  std::shared_ptr<Inner> ptr;
  std::array<std::uint8_t, 3> arr{};
  std::int16_t carr[2] = {0, 0};
  std::vector<bool> bits;
  Inner nested;
};
}  // namespace codec_test

using namespace codec_test;
template <>
struct myelin::detail::EnumTraits<Color> {
  static constexpr std::string_view kName = "codec_test::Color";
  static constexpr std::array<EnumValue, 3> kValues{{{"kRed", -1}, {"kGreen", 0}, {"kBlue", 5}}};
};
template <>
struct myelin::detail::EnumTraits<Plain> {
  static constexpr std::string_view kName = "codec_test::Plain";
  static constexpr std::array<EnumValue, 2> kValues{{{"kA", 1}, {"kB", 60000}}};
};
template <>
struct myelin::detail::StructTraits<Inner> {
  static constexpr std::string_view kName = "codec_test::Inner";
  static constexpr auto kFields = std::make_tuple(field("id", &Inner::id), field("tag", &Inner::tag));
};
template <>
struct myelin::detail::StructTraits<Outer> {
  static constexpr std::string_view kName = "codec_test::Outer";
  static constexpr auto kFields = std::make_tuple(
      field("flag", &Outer::flag), field("c", &Outer::c), field("i8", &Outer::i8), field("u16", &Outer::u16),
      field("i32", &Outer::i32), field("u64", &Outer::u64), field("f", &Outer::f), field("d", &Outer::d),
      field("color", &Outer::color), field("plain", &Outer::plain), field("s", &Outer::s),
      field("inners", &Outer::inners), field("m", &Outer::m), field("set", &Outer::set), field("ptr", &Outer::ptr),
      field("arr", &Outer::arr), field("carr", &Outer::carr), field("bits", &Outer::bits),
      field("nested", &Outer::nested));
};

namespace myelin::detail {
namespace {
using test::decodeInto;
using test::enc;

/// Identity plans for Inner (index 0) and Outer (index 1).
struct Plans {
  std::vector<std::uint16_t> inner{0, 1};
  std::vector<std::uint16_t> outer;
  FieldPlan plans[2];
  CodecCtx ctx;
  Plans() {
    for (std::uint16_t i = 0; i < 19; ++i) outer.push_back(i);
    StructIndex<Inner>::value = 0;
    StructIndex<Outer>::value = 1;
    plans[0] = {inner.data(), 2};
    plans[1] = {outer.data(), static_cast<std::uint32_t>(outer.size())};
    ctx = {plans, plans};
  }
};

template <class T>
T dec(const ByteBuffer& b, const CodecCtx& c) {
  WireReader r(b.data(), b.size());
  T v{};
  Codec<T>::decode(r, v, c);
  r.finish();
  return v;
}

Outer sample() {
  Outer o;
  o.flag = true;
  o.c = 'z';
  o.i8 = -128;
  o.u16 = 65535;
  o.i32 = -123456;
  o.u64 = ~0ull;
  o.f = 12.3f;
  o.d = -45.6;
  o.color = Color::kRed;
  o.plain = kB;
  o.s = std::string(300, 'q');
  o.inners = {{1, "one"}, {}, {-3, std::string()}};
  o.m = {{"a", 1}, {"", -2}};
  o.set = {3, 1, 2};
  o.ptr = std::make_shared<Inner>(Inner{7, "p"});
  o.arr = {1, 0, 255};
  o.carr[0] = -5;
  o.bits = {true, false, true};
  o.nested = {99, std::nullopt};
  return o;
}

void expectSame(const Outer& a, const Outer& b) {
  EXPECT_EQ(a.flag, b.flag);
  EXPECT_EQ(a.c, b.c);
  EXPECT_EQ(a.i8, b.i8);
  EXPECT_EQ(a.u16, b.u16);
  EXPECT_EQ(a.i32, b.i32);
  EXPECT_EQ(a.u64, b.u64);
  EXPECT_EQ(a.f, b.f);
  EXPECT_EQ(a.d, b.d);
  EXPECT_EQ(a.color, b.color);
  EXPECT_EQ(a.plain, b.plain);
  EXPECT_EQ(a.s, b.s);
  ASSERT_EQ(a.inners.size(), b.inners.size());
  for (std::size_t i = 0; i < a.inners.size(); ++i) {
    EXPECT_EQ(a.inners[i].id, b.inners[i].id);
    EXPECT_EQ(a.inners[i].tag, b.inners[i].tag);
  }
  EXPECT_EQ(a.m, b.m);
  EXPECT_EQ(a.set, b.set);
  ASSERT_EQ(!a.ptr, !b.ptr);
  if (a.ptr) {
    EXPECT_EQ(a.ptr->id, b.ptr->id);
  }
  EXPECT_EQ(a.arr, b.arr);
  EXPECT_EQ(a.carr[0], b.carr[0]);
  EXPECT_EQ(a.carr[1], b.carr[1]);
  EXPECT_EQ(a.bits, b.bits);
  EXPECT_EQ(a.nested.id, b.nested.id);
  EXPECT_EQ(a.nested.tag, b.nested.tag);
}

TEST(Codec, EveryTypeRoundTrips) {
  Plans p;
  Outer o = sample();
  expectSame(dec<Outer>(enc(o, p.ctx), p.ctx), o);
}

TEST(Codec, DefaultStructIsOneRunMarker) {
  Plans p;
  Outer zero;
  zero.plain = static_cast<Plain>(0);  // its initialiser (kA = 1) is not the type's default
  ByteBuffer b = enc(zero, p.ctx);
  // 23 leaves (nested structs flattened, arrays expanded), all default:
  // one run marker, 80 00 varint(23 - 3).
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b.data()[0], 0x80);
  EXPECT_EQ(b.data()[1], 0x00);
  EXPECT_EQ(b.data()[2], 20);
  expectSame(dec<Outer>(b, p.ctx), zero);
  // With plain = kA the run is split around that one leaf.
  EXPECT_GT(enc(Outer{}, p.ctx).size(), 3u);
}

TEST(Codec, TypeSignatures) {
  EXPECT_EQ(typeSig<std::uint32_t>(), "u32");
  EXPECT_EQ(typeSig<long long>(), "i64");
  EXPECT_EQ(typeSig<char>(), "c");
  EXPECT_EQ(typeSig<bool>(), "b");
  EXPECT_EQ((typeSig<std::map<std::string, std::vector<Inner>>>()), "m<s,v<S:codec_test::Inner>>");
  EXPECT_EQ(typeSig<std::optional<Color>>(), "o<E:codec_test::Color>");
  EXPECT_EQ((typeSig<std::array<std::shared_ptr<float>, 4>>()), "a<4,p<f32>>");
  EXPECT_EQ(typeSig<std::set<double>>(), "set<f64>");
}

TEST(Codec, PlansSkipAndDefaultFieldsForEvolution) {
  Plans p;
  // Sender knows only Inner::tag (peer dropped `id`): plan {1}.
  std::vector<std::uint16_t> onlyTag{1};
  FieldPlan sendPlans[2] = {{onlyTag.data(), 1}, p.plans[1]};
  CodecCtx sender{sendPlans, sendPlans};
  ByteBuffer b = enc(Inner{42, "kept"}, sender);
  // Receiver reads only `tag` into its Inner; `id` keeps its initialiser.
  CodecCtx receiver{sendPlans, sendPlans};
  Inner in = dec<Inner>(b, receiver);
  EXPECT_EQ(in.id, 0);
  EXPECT_EQ(in.tag, "kept");
}

TEST(Codec, FieldPlanKnowsWhenItIsTheDeclarationOrder) {
  const std::uint16_t inOrder[] = {0, 1, 2};
  const std::uint16_t swapped[] = {1, 0};
  const std::uint16_t gap[] = {0, 2};
  EXPECT_TRUE(FieldPlan(inOrder, 3).inDeclarationOrder());
  EXPECT_TRUE(FieldPlan(inOrder, 1).inDeclarationOrder()) << "a prefix is in order (the table path takes it)";
  EXPECT_TRUE(FieldPlan(nullptr, 0).inDeclarationOrder());
  EXPECT_TRUE(FieldPlan().inDeclarationOrder());
  EXPECT_FALSE(FieldPlan(swapped, 2).inDeclarationOrder());
  EXPECT_FALSE(FieldPlan(gap, 2).inDeclarationOrder());
  EXPECT_TRUE(isIdentityPlan(FieldPlan(inOrder, 3), 3));
  EXPECT_FALSE(isIdentityPlan(FieldPlan(inOrder, 2), 3));
  EXPECT_FALSE(isIdentityPlan(FieldPlan(swapped, 2), 2));
}

TEST(Codec, IdentityAndTablePathsAgreeByteForByte) {
  Plans p;
  // The same plans with the identity flag cleared take the per-field table.
  FieldPlan tablePlans[2] = {p.plans[0], p.plans[1]};
  for (FieldPlan& fp : tablePlans) fp.forgetOrder();
  CodecCtx table{tablePlans, tablePlans};
  for (const Outer& o : {sample(), Outer{}}) {
    ByteBuffer inlined = enc(o, p.ctx);
    ByteBuffer viaTable = enc(o, table);
    EXPECT_EQ(std::vector<std::uint8_t>(inlined.data(), inlined.data() + inlined.size()),
              std::vector<std::uint8_t>(viaTable.data(), viaTable.data() + viaTable.size()));
    expectSame(dec<Outer>(inlined, table), o);
    expectSame(dec<Outer>(viaTable, p.ctx), o);
  }
}

TEST(Codec, PrefixAndReorderedPlansTakeTheTablePath) {
  Plans p;
  Inner v{5, "x"};
  // Only `id` (the peer lacks `tag`): a prefix of the declaration order.
  std::vector<std::uint16_t> idOnly{0};
  FieldPlan prefix[2] = {{idOnly.data(), 1}, p.plans[1]};
  CodecCtx pc{prefix, prefix};
  ByteBuffer b = enc(v, pc);
  EXPECT_EQ(std::vector<std::uint8_t>(b.data(), b.data() + b.size()), (std::vector<std::uint8_t>{0x0a}));
  Inner back = dec<Inner>(b, pc);
  EXPECT_EQ(back.id, 5);
  EXPECT_EQ(back.tag, std::nullopt);
  // `tag` before `id`.
  std::vector<std::uint16_t> tagFirst{1, 0};
  FieldPlan reordered[2] = {{tagFirst.data(), 2}, p.plans[1]};
  CodecCtx rc{reordered, reordered};
  b = enc(v, rc);
  EXPECT_EQ(std::vector<std::uint8_t>(b.data(), b.data() + b.size()),
            (std::vector<std::uint8_t>{0x01, 0x01, 'x', 0x0a}));
  back = dec<Inner>(b, rc);
  EXPECT_EQ(back.id, 5);
  EXPECT_EQ(back.tag, "x");
}

TEST(Codec, ParameterTuplesOnBothPaths) {
  Plans p;
  using Params = std::tuple<std::uint32_t, std::string, double>;
  Params in{300, "hello", 45.6};
  const std::uint16_t all[] = {0, 1, 2};
  const std::uint16_t lastFirst[] = {2, 0};
  FieldPlan identity(all, 3);
  FieldPlan table(all, 3);
  table.forgetOrder();
  ByteBuffer a, b;
  WireWriter wa(a), wb(b);
  encodeWithPlan(wa, in, identity, p.ctx);
  encodeWithPlan(wb, in, table, p.ctx);
  wa.finish();
  wb.finish();
  ASSERT_EQ(std::vector<std::uint8_t>(a.data(), a.data() + a.size()),
            std::vector<std::uint8_t>(b.data(), b.data() + b.size()));
  for (const FieldPlan* plan : {&identity, &table}) {
    Params out{};
    WireReader r(a.data(), a.size());
    decodeWithPlan(r, out, *plan, p.ctx);
    r.finish();
    EXPECT_EQ(out, in);
  }
  // Reordered and partial: the double, then the integer; the string stays empty.
  FieldPlan partial(lastFirst, 2);
  ByteBuffer c;
  WireWriter wc(c);
  encodeWithPlan(wc, in, partial, p.ctx);
  wc.finish();
  Params out{};
  WireReader r(c.data(), c.size());
  decodeWithPlan(r, out, partial, p.ctx);
  r.finish();
  EXPECT_EQ(out, (Params{300, "", 45.6}));
}


TEST(Codec, DecodingIntoANonEmptyStringReplacesItAndReusesItsCapacity) {
  Plans p;
  std::string s(100, 'o');
  const char* storage = s.data();
  decodeInto(enc(std::string("new"), p.ctx), s, p.ctx);
  EXPECT_EQ(s, "new");
  EXPECT_EQ(s.data(), storage) << "the new content fits: no allocation";
  decodeInto(enc(std::string("old"), p.ctx), s, p.ctx);  // the same length
  EXPECT_EQ(s, "old");
  decodeInto(enc(std::string(90, 'g'), p.ctx), s, p.ctx);  // longer, within the capacity
  EXPECT_EQ(s, std::string(90, 'g'));
  EXPECT_EQ(s.data(), storage) << "the new content fits: no allocation";
  decodeInto(enc(std::string(300, 'L'), p.ctx), s, p.ctx);
  EXPECT_EQ(s, std::string(300, 'L'));
  decodeInto(enc(std::string(), p.ctx), s, p.ctx);
  EXPECT_EQ(s, "");
  std::string fresh;
  decodeInto(enc(std::string(16, 'f'), p.ctx), fresh, p.ctx);  // just above the small-string buffer
  EXPECT_EQ(fresh, std::string(16, 'f'));
}

// A kept string with room takes the new bytes by the inline copy for short
// lengths: every length from 1 to 40 over a string of each other length.
TEST(Codec, DecodingIntoAKeptStringOfAnyLengthLeavesExactlyTheNewBytes) {
  Plans p;
  auto text = [](std::size_t n, char first) {
    std::string s;
    for (std::size_t i = 0; i < n; ++i) s.push_back(static_cast<char>(first + i));
    return s;
  };
  for (std::size_t was = 0; was <= 40; ++was) {
    for (std::size_t n = 1; n <= 40; ++n) {
      std::string target = text(was, 'a');
      target.reserve(64);
      const std::string want = text(n, 'A');
      decodeInto(enc(want, p.ctx), target, p.ctx);
      ASSERT_EQ(target, want) << was << " -> " << n;
      ASSERT_EQ(target.c_str()[n], '\0') << was << " -> " << n;
    }
  }
}

TEST(Codec, DecodingIntoNonEmptyVectorsReplacesThem) {
  Plans p;
  using Bytes = std::vector<std::uint8_t>;
  for (const Bytes& want : {Bytes{1, 0, 255}, Bytes{}, Bytes(300, 0x80)}) {
    for (Bytes target : {Bytes{}, Bytes{9, 9, 9, 9}, Bytes(1000, 7)}) {
      decodeInto(enc(want, p.ctx), target, p.ctx);
      EXPECT_EQ(target, want);
    }
  }
  using Strings = std::vector<std::string>;
  for (const Strings& want : {Strings{"x"}, Strings{"1", "2", std::string(40, '3')}, Strings{}, Strings{"", "a"}}) {
    for (Strings target : {Strings{}, Strings{"a", "b", "c", "d"}, Strings{std::string(50, 'z')}}) {
      decodeInto(enc(want, p.ctx), target, p.ctx);
      EXPECT_EQ(target, want);
    }
  }
  using Numbers = std::vector<std::uint32_t>;
  for (const Numbers& want : {Numbers{1, 300}, Numbers{}, Numbers{0, 0, 0, 0, 7}}) {
    for (Numbers target : {Numbers{}, Numbers{9, 9, 9}, Numbers{4}}) {
      decodeInto(enc(want, p.ctx), target, p.ctx);
      EXPECT_EQ(target, want);
    }
  }
  using Colors = std::vector<Color>;
  Colors colors{Color::kBlue, Color::kBlue, Color::kBlue};
  decodeInto(enc(Colors{Color::kRed, Color::kGreen}, p.ctx), colors, p.ctx);
  EXPECT_EQ(colors, (Colors{Color::kRed, Color::kGreen}));
  std::vector<double> doubles{1.5};
  decodeInto(enc(std::vector<double>{-0.0, 45.6, 1e300}, p.ctx), doubles, p.ctx);
  EXPECT_EQ(doubles, (std::vector<double>{-0.0, 45.6, 1e300}));
  std::vector<std::uint8_t> raw{1, 2, 3, 4};
  decodeInto(enc(std::vector<std::uint8_t>{9}, p.ctx), raw, p.ctx);
  EXPECT_EQ(raw, std::vector<std::uint8_t>{9});
}

TEST(Codec, StrictRangeChecks) {
  Plans p;
  EXPECT_THROW(dec<bool>(enc(std::uint32_t{2}, p.ctx), p.ctx), InvalidMessageError);
  EXPECT_THROW(dec<std::uint8_t>(enc(std::uint32_t{256}, p.ctx), p.ctx), InvalidMessageError);
  EXPECT_THROW(dec<std::int8_t>(enc(std::int32_t{128}, p.ctx), p.ctx), InvalidMessageError);
  EXPECT_THROW(dec<Color>(enc(std::int32_t{200}, p.ctx), p.ctx), InvalidMessageError);
  EXPECT_THROW(dec<std::optional<std::uint32_t>>(enc(std::uint32_t{2}, p.ctx), p.ctx), InvalidMessageError);
  EXPECT_THROW(dec<float>(enc(std::uint64_t{1} << 40, p.ctx), p.ctx), InvalidMessageError);
}

TEST(Codec, DuplicateKeysAreRejected) {
  Plans p;
  ByteBuffer b;
  WireWriter w(b);
  w.leafUnsigned(2);
  w.leafUnsigned(5);
  w.leafUnsigned(5);
  w.finish();
  EXPECT_THROW(dec<std::set<std::uint32_t>>(b, p.ctx), InvalidMessageError);
}

TEST(Codec, ElementsOfAVectorAreSiblingsOneLevelDown) {
  Plans p;
  FieldPlan tablePlans[2] = {p.plans[0], p.plans[1]};
  for (FieldPlan& fp : tablePlans) fp.forgetOrder();
  CodecCtx table{tablePlans, tablePlans};
  // 300 vectors of one Inner each, on both paths: never deeper than two.
  std::vector<std::vector<Inner>> v(300, std::vector<Inner>{{1, "x"}});
  for (const CodecCtx* c : {&p.ctx, &table}) {
    const auto back = dec<std::vector<std::vector<Inner>>>(enc(v, *c), *c);
    ASSERT_EQ(back.size(), 300u);
    for (const std::vector<Inner>& e : back) {
      ASSERT_EQ(e.size(), 1u);
      EXPECT_EQ(e[0].id, 1);
      EXPECT_EQ(e[0].tag, "x");
    }
  }
  // The elements are one level below their vector: at the limit they are
  // refused, an empty vector is not (the tag left out: a present optional
  // is one level further down).
  const ByteBuffer one = enc(std::vector<Inner>{{2, std::nullopt}}, p.ctx);
  const ByteBuffer none = enc(std::vector<Inner>{}, p.ctx);
  for (int depth : {255, 256}) {
    for (const ByteBuffer* b : {&one, &none}) {
      WireReader r(b->data(), b->size());
      for (int i = 0; i < depth; ++i) r.enterNested();
      std::vector<Inner> out;
      if (depth == 256 && b == &one) {
        EXPECT_THROW(Codec<std::vector<Inner>>::decode(r, out, p.ctx), InvalidMessageError);
      } else {
        Codec<std::vector<Inner>>::decode(r, out, p.ctx);
        r.finish();
        EXPECT_EQ(out.size(), b == &one ? 1u : 0u);
      }
    }
  }
}

TEST(Codec, RunOfDefaultsCannotExpandPastTheBudget) {
  Plans p;
  // A vector of 2^40 default Inner elements is 5 bytes on the wire.
  ByteBuffer b;
  WireWriter w(b);
  w.leafUnsigned(std::uint64_t{1} << 40);
  w.finish();
  WireReader r(b.data(), b.size());
  std::vector<Inner> v;
  EXPECT_THROW(Codec<std::vector<Inner>>::decode(r, v, p.ctx), InvalidMessageError);
  EXPECT_TRUE(v.empty());
}

// Types known to be plain (numbers, enums, strings, and containers and
// structs of them) fail alone past the budget; any other may carry
// references, and fails as an invalid message (the connection faults).
static_assert(!kMayCarryRefs<Inner>);
static_assert(!kMayCarryRefs<std::vector<Inner>>);
static_assert(!kMayCarryRefs<std::map<std::string, std::vector<std::int32_t>>>);
static_assert(!kMayCarryRefs<std::tuple<const std::string&, Color, std::optional<Inner>>>);
static_assert(!kMayCarryRefs<Outer>);  // a shared_ptr, a C array and a vector<bool> among its fields
static_assert(!kMayCarryRefs<Result<std::vector<Inner>, Color>>);
static_assert(!kMayCarryRefs<std::tuple<Status, std::int16_t[4], std::shared_ptr<Inner>>>);
static_assert(kMayCarryRefs<std::unique_ptr<Inner>>);  // no codec knows it: not known to be plain

TEST(Codec, PastTheBudgetOnlyAValueThatMayCarryReferencesReadsAsInvalid) {
  Plans p;
  ByteBuffer b;
  WireWriter w(b);
  w.leafUnsigned(std::uint64_t{1} << 40);  // 2^40 default elements
  w.finish();
  {
    WireReader r(b.data(), b.size());
    std::vector<Inner> v;
    EXPECT_THROW(decodeCounted<std::vector<Inner>>([&] { Codec<std::vector<Inner>>::decode(r, v, p.ctx); }),
                 DecodeBudgetError);
  }
  try {
    decodeCounted<std::unique_ptr<Inner>>([] { throw DecodeBudgetError("over the budget"); });
    FAIL() << "expected InvalidMessageError";
  } catch (const DecodeBudgetError&) {
    FAIL() << "a value that may carry references must not fail alone";
  } catch (const InvalidMessageError& e) {
    EXPECT_STREQ(e.what(),
                 "a message that may carry references decodes into more memory than maxDecodeBytes allows");
  }
}

TEST(Codec, AReferenceThatCannotBeTakenFailsItsValueOnlyOnceItIsReadWhole) {
  // decodeRef's handler of a reference it cannot take, as it runs there.
  auto cannotTake = [](const char* why) {
    try {
      throw std::runtime_error(why);
    } catch (const std::exception&) {
      return deferRefFailure();
    }
  };
  EXPECT_EQ(tlsRefFailure, nullptr);
  EXPECT_FALSE(cannotTake("outside")) << "outside decodeCounted the failure is thrown on";
  int readAfter = 0;
  try {
    decodeCounted<std::unique_ptr<Inner>>([&] {
      EXPECT_TRUE(cannotTake("no stand-in for X"));
      EXPECT_TRUE(refFailurePending());
      ++readAfter;  // the references after it
      // A nested read (a stand-in's constructor that calls) has a slot of
      // its own and leaves the outer one as it found it.
      decodeCounted<std::unique_ptr<Inner>>([&] { EXPECT_FALSE(refFailurePending()); });
      EXPECT_TRUE(cannotTake("no stand-in for Y"));  // the first failure is the one kept
      ++readAfter;
    });
    FAIL() << "expected the reference's failure";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "no stand-in for X");
  }
  EXPECT_EQ(readAfter, 2) << "decoding goes on past the reference";
  EXPECT_EQ(tlsRefFailure, nullptr) << "the slot goes with the read";
  decodeCounted<std::vector<Inner>>([] { EXPECT_EQ(tlsRefFailure, nullptr) << "plain values carry no slot"; });
  decodeCounted<std::unique_ptr<Inner>>([] {});  // nothing failed: nothing thrown
}

TEST(Codec, ASetWhoseReferencesFailedReadsNullsWithoutCallingThemDuplicates) {
  Plans p;
  ByteBuffer b;
  WireWriter w(b);
  w.leafUnsigned(2);
  w.leafSigned(7);
  w.leafSigned(7);
  w.finish();
  {
    WireReader r(b.data(), b.size());
    std::set<std::int64_t> v;
    EXPECT_THROW(Codec<std::set<std::int64_t>>::decode(r, v, p.ctx), InvalidMessageError)
        << "a duplicate in a value that has not failed is the sender's fault";
  }
  try {
    decodeCounted<std::unique_ptr<Inner>>([&] {
      try {
        throw std::runtime_error("no stand-in");
      } catch (const std::exception&) {
        ASSERT_TRUE(deferRefFailure());
      }
      WireReader r(b.data(), b.size());
      std::set<std::int64_t> v;
      Codec<std::set<std::int64_t>>::decode(r, v, p.ctx);  // the duplicate is a null read twice
      EXPECT_EQ(v.size(), 1u);
    });
    FAIL() << "expected the reference's failure";
  } catch (const InvalidMessageError& e) {
    FAIL() << "a failed value's nulls faulted the message: " << e.what();
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "no stand-in");
  }
}

}  // namespace
}  // namespace myelin::detail
