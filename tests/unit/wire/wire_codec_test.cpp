// Unit tests of the leaf encoding: varints, zigzag, defaults and runs, and
// the strict reader's refusals, on each of the reader's and writer's paths
// (one-byte inline, word at a time, near the end a word gathered from the
// six to nine bytes left, and byte by byte from five or fewer).
#include "myelin/detail/wire_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace myelin::detail {
namespace {

std::vector<std::uint8_t> bytes(const ByteBuffer& b) { return {b.data(), b.data() + b.size()}; }

/// The reference LEB128 encoding of docs/wire-format.md §1, byte by byte.
std::vector<std::uint8_t> leb128(std::uint64_t v) {
  std::vector<std::uint8_t> out;
  do {
    std::uint8_t b = v & 0x7f;
    v >>= 7;
    out.push_back(v ? (b | 0x80) : b);
  } while (v);
  return out;
}

/// 0, 1, and both sides of every varint length boundary (2^7k - 1 and 2^7k),
/// up to the largest 64-bit value.
std::vector<std::uint64_t> boundaryValues() {
  std::vector<std::uint64_t> v{0, 1};
  for (int k = 1; k <= 9; ++k) {
    v.push_back((std::uint64_t{1} << (7 * k)) - 1);
    v.push_back(std::uint64_t{1} << (7 * k));
  }
  v.push_back(~0ull);
  return v;
}

/// The float and the double whose leaves carry varint `v` (their bits
/// byte-swapped), and back: leafFloat() and leafDouble() read any varint
/// this way, with an inline path of their own for the usual lengths.
float floatOfLeaf(std::uint64_t v) {
  const std::uint32_t bits = __builtin_bswap32(static_cast<std::uint32_t>(v));
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
double doubleOfLeaf(std::uint64_t v) {
  const std::uint64_t bits = __builtin_bswap64(v);
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}
std::uint64_t leafOf(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return __builtin_bswap32(bits);
}
std::uint64_t leafOf(double d) {
  std::uint64_t bits;
  std::memcpy(&bits, &d, 8);
  return __builtin_bswap64(bits);
}

TEST(WireCodec, VarintRoundTripsEveryWidth) {
  for (std::uint64_t v : {0ull, 1ull, 127ull, 128ull, 300ull, 16383ull, 16384ull, 0xffffffffull, ~0ull}) {
    ByteBuffer b;
    WireWriter w(b);
    w.rawVarint(v);
    EXPECT_EQ(b.size(), varintSize(v));
    WireReader r(b.data(), b.size());
    EXPECT_EQ(r.rawVarint(), v);
    r.finish();
  }
}

TEST(WireCodec, VarintsAtEveryLengthBoundaryWriteTheReferenceBytes) {
  for (std::uint64_t v : boundaryValues()) {
    ByteBuffer b;
    WireWriter w(b);
    w.rawVarint(v);
    EXPECT_EQ(bytes(b), leb128(v)) << v;
    EXPECT_EQ(varintSize(v), leb128(v).size()) << v;
    std::uint8_t exact[10];
    EXPECT_EQ(putVarint(exact, v), leb128(v).size()) << v;
    EXPECT_EQ(std::vector<std::uint8_t>(exact, exact + leb128(v).size()), leb128(v)) << v;
    // As a leaf, and behind a pending run (the run is written first).
    b.clear();
    w.reset(b);
    for (int i = 0; i < 3; ++i) w.defaultLeaf();
    w.leafUnsigned(v);
    w.finish();
    std::vector<std::uint8_t> want{0x80, 0x00, 0x00};  // run of 3
    if (v == 0) {
      want[2] = 1;  // the leaf joined the run: 4 defaults
    } else {
      for (std::uint8_t x : leb128(v)) want.push_back(x);
    }
    EXPECT_EQ(bytes(b), want) << v;
  }
}

TEST(WireCodec, VarintsAtEveryLengthBoundaryReadBackOnEveryPath) {
  // Followed by 0 to 10 more bytes: a varint of four bytes or more is read
  // a word at a time in place with ten bytes or more from its start, from a
  // word gathered from the bytes left with six to nine, and byte by byte
  // with five or fewer (two and three bytes are read directly on all).
  // The bytes after it must be left alone whatever their value.
  for (std::uint64_t v : boundaryValues()) {
    for (std::size_t after : {0, 1, 5, 9, 10}) {
      for (std::uint8_t fill : {std::uint8_t{0x00}, std::uint8_t{0xff}}) {
        std::vector<std::uint8_t> in = leb128(v);
        in.insert(in.end(), after, fill);
        WireReader raw(in.data(), in.size());
        EXPECT_EQ(raw.rawVarint(), v) << v << " +" << after;
        EXPECT_EQ(raw.remaining(), after) << v << " +" << after;
        WireReader leaf(in.data(), in.size());
        EXPECT_EQ(leaf.leafUnsigned(), v) << v << " +" << after;
        EXPECT_EQ(leaf.remaining(), after) << v << " +" << after;
        WireReader integer(in.data(), in.size());  // integer fields read two bytes inline
        EXPECT_EQ(integer.leafInteger(), v) << v << " +" << after;
        EXPECT_EQ(integer.remaining(), after) << v << " +" << after;
        WireReader dbl(in.data(), in.size());  // nine and ten bytes inline
        EXPECT_EQ(leafOf(dbl.leafDouble()), v) << v << " +" << after;
        EXPECT_EQ(dbl.remaining(), after) << v << " +" << after;
        WireReader flt(in.data(), in.size());  // five bytes inline
        if (v <= 0xffffffffu) {
          EXPECT_EQ(leafOf(flt.leafFloat()), v) << v << " +" << after;
          EXPECT_EQ(flt.remaining(), after) << v << " +" << after;
        } else {
          EXPECT_THROW(flt.leafFloat(), InvalidMessageError) << v << " +" << after;
        }
      }
    }
  }
}

TEST(WireCodec, RejectsOverlongVarintsOfEveryLengthOnEveryPath) {
  // 81 80 .. 80 00: value 1 written in 2 .. 10 bytes.
  for (std::size_t len = 2; len <= 10; ++len) {
    for (std::size_t after : {0, 10}) {
      std::vector<std::uint8_t> in(len, 0x80);
      in[0] = 0x81;
      in[len - 1] = 0x00;
      in.insert(in.end(), after, 0x01);
      WireReader raw(in.data(), in.size());
      EXPECT_THROW(raw.rawVarint(), InvalidMessageError) << len << " +" << after;
      WireReader leaf(in.data(), in.size());
      EXPECT_THROW(leaf.leafUnsigned(), InvalidMessageError) << len << " +" << after;
      WireReader integer(in.data(), in.size());
      EXPECT_THROW(integer.leafInteger(), InvalidMessageError) << len << " +" << after;
      WireReader dbl(in.data(), in.size());
      EXPECT_THROW(dbl.leafDouble(), InvalidMessageError) << len << " +" << after;
      WireReader flt(in.data(), in.size());
      EXPECT_THROW(flt.leafFloat(), InvalidMessageError) << len << " +" << after;
    }
  }
}

TEST(WireCodec, RejectsVarintsAboveSixtyFourBitsOnEveryPath) {
  for (std::size_t after : {0, 10}) {
    for (std::vector<std::uint8_t> in : {std::vector<std::uint8_t>{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02},
                                         std::vector<std::uint8_t>{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x81, 0x01},
                                         std::vector<std::uint8_t>{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00}}) {
      in.insert(in.end(), after, 0x01);
      WireReader raw(in.data(), in.size());
      EXPECT_THROW(raw.rawVarint(), InvalidMessageError) << in.size();
      WireReader leaf(in.data(), in.size());
      EXPECT_THROW(leaf.leafUnsigned(), InvalidMessageError) << in.size();
      WireReader integer(in.data(), in.size());
      EXPECT_THROW(integer.leafInteger(), InvalidMessageError) << in.size();
      WireReader dbl(in.data(), in.size());
      EXPECT_THROW(dbl.leafDouble(), InvalidMessageError) << in.size();
    }
  }
}

TEST(WireCodec, RejectsVarintsThatRunPastTheEnd) {
  // Up to nine bytes, all continuing, the message ends inside the varint
  // and the error says so (read from a word gathered with zeroes above the
  // bytes left, the end looks like an overlong last byte: the length is
  // checked first). Ten or more are a varint above 64 bits.
  auto expectError = [](auto read, std::size_t len) {
    try {
      read();
      ADD_FAILURE() << len << " bytes: no error";
    } catch (const InvalidMessageError& e) {
      const char* want = len <= 9 ? "truncated" : "more than 64 bits";
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << len << " bytes: " << e.what();
    }
  };
  for (std::size_t len = 1; len <= 12; ++len) {
    std::vector<std::uint8_t> in(len, 0xff);
    WireReader raw(in.data(), in.size());
    expectError([&] { raw.rawVarint(); }, len);
    WireReader leaf(in.data(), in.size());
    expectError([&] { leaf.leafUnsigned(); }, len);
    WireReader integer(in.data(), in.size());
    expectError([&] { integer.leafInteger(); }, len);
    WireReader dbl(in.data(), in.size());
    expectError([&] { dbl.leafDouble(); }, len);
  }
}

TEST(WireCodec, RunMarkerAndVarintsStartingWith0x80AreToldApartOnEveryPath) {
  for (std::size_t after : {0, 10}) {
    std::vector<std::uint8_t> v128{0x80, 0x01};  // 128, not a run
    v128.insert(v128.end(), after, 0x05);
    WireReader r(v128.data(), v128.size());
    EXPECT_EQ(r.leafUnsigned(), 128u);
    EXPECT_EQ(r.remaining(), after);
    std::vector<std::uint8_t> run{0x80, 0x00, 0x00, 0x07};  // 3 defaults, then 7
    run.insert(run.end(), after, 0x05);
    WireReader r2(run.data(), run.size());
    for (int i = 0; i < 3; ++i) EXPECT_EQ(r2.leafUnsigned(), 0u);
    EXPECT_EQ(r2.leafUnsigned(), 7u);
    EXPECT_EQ(r2.remaining(), after);
    std::vector<std::uint8_t> cut{0x80};  // neither: truncated
    WireReader r3(cut.data(), cut.size());
    EXPECT_THROW(r3.leafUnsigned(), InvalidMessageError);
    // The same through the integer fields' inline two-byte read.
    WireReader i1(v128.data(), v128.size());
    EXPECT_EQ(i1.leafInteger(), 128u);
    EXPECT_EQ(i1.remaining(), after);
    WireReader i2(run.data(), run.size());
    for (int i = 0; i < 3; ++i) EXPECT_EQ(i2.leafInteger(), 0u);
    EXPECT_EQ(i2.leafInteger(), 7u);
    EXPECT_EQ(i2.remaining(), after);
    WireReader i3(cut.data(), cut.size());
    EXPECT_THROW(i3.leafInteger(), InvalidMessageError);
  }
}

TEST(WireCodec, RunsAtEveryLengthBoundaryOfTheirCount) {
  for (std::uint64_t extra : {0ull, 127ull, 128ull, 16383ull, 16384ull}) {
    ByteBuffer b;
    WireWriter w(b);
    for (std::uint64_t i = 0; i < extra + 3; ++i) w.defaultLeaf();
    w.leafUnsigned(9);
    std::vector<std::uint8_t> want{0x80, 0x00};
    for (std::uint8_t x : leb128(extra)) want.push_back(x);
    want.push_back(9);
    EXPECT_EQ(bytes(b), want) << extra;
    WireReader r(b.data(), b.size());
    for (std::uint64_t i = 0; i < extra + 3; ++i) ASSERT_EQ(r.leafUnsigned(), 0u);
    EXPECT_EQ(r.leafUnsigned(), 9u);
    r.finish();
  }
}

TEST(WireCodec, BytesLeavesAtTheLengthBoundaries) {
  for (std::size_t n : {1, 127, 128, 16383, 16384}) {
    std::string s(n, 'x');
    s.front() = 'a';
    s.back() = 'z';
    ByteBuffer b;
    WireWriter w(b);
    w.leafBytes(s.data(), s.size());
    w.finish();
    std::vector<std::uint8_t> want = leb128(n);
    want.insert(want.end(), s.begin(), s.end());
    EXPECT_EQ(bytes(b), want) << n;
    WireReader r(b.data(), b.size());
    EXPECT_EQ(r.leafBytes(), s) << n;
    r.finish();
    WireReader cut(b.data(), b.size() - 1);
    EXPECT_THROW(cut.leafBytes(), InvalidMessageError) << n;
  }
}

// copySmall by itself: every length from 0 to 40, from a heap block of
// exactly that size (ASan sees a read past it), into the middle of a buffer
// whose bytes on either side must stay as they were.
TEST(WireCodec, CopySmallWritesExactlyItsBytesAtEveryLength) {
  for (std::size_t n = 0; n <= 40; ++n) {
    std::unique_ptr<std::uint8_t[]> src(new std::uint8_t[n]);
    for (std::size_t i = 0; i < n; ++i) src[i] = static_cast<std::uint8_t>(i + 1);
    std::vector<std::uint8_t> dst(n + 32, 0xee);
    copySmall(dst.data() + 16, src.get(), n);
    for (std::size_t i = 0; i < dst.size(); ++i) {
      const bool inside = i >= 16 && i < 16 + n;
      ASSERT_EQ(dst[i], inside ? static_cast<std::uint8_t>(i - 16 + 1) : 0xee) << "n " << n << ", byte " << i;
    }
  }
}

// copyUpTo128 the same way, every length from 0 to 200: the inline copies
// in two overlapping words of 16, 32 and 64 bytes and memcpy beyond.
TEST(WireCodec, CopyUpTo128WritesExactlyItsBytesAtEveryLength) {
  for (std::size_t n = 0; n <= 200; ++n) {
    std::unique_ptr<std::uint8_t[]> src(new std::uint8_t[n]);
    for (std::size_t i = 0; i < n; ++i) src[i] = static_cast<std::uint8_t>(i * 7 + 1);
    std::vector<std::uint8_t> dst(n + 32, 0xee);
    copyUpTo128(dst.data() + 16, src.get(), n);
    for (std::size_t i = 0; i < dst.size(); ++i) {
      const bool inside = i >= 16 && i < 16 + n;
      ASSERT_EQ(dst[i], inside ? static_cast<std::uint8_t>((i - 16) * 7 + 1) : 0xee) << "n " << n << ", byte " << i;
    }
  }
}

// Strings up to 16 bytes are copied inline, in overlapping pieces of 8 or 4
// bytes (single bytes below 4): every length around those pieces, each byte
// distinct, and the leaves before and after intact.
TEST(WireCodec, ShortBytesLeavesKeepEveryByteAtEveryLength) {
  for (std::size_t n = 1; n <= 40; ++n) {
    std::string s;
    for (std::size_t i = 0; i < n; ++i) s.push_back(static_cast<char>('A' + i));
    ByteBuffer b;
    WireWriter w(b);
    w.leafUnsigned(7);
    w.leafBytes(s.data(), s.size());
    w.leafUnsigned(9);
    w.finish();
    std::vector<std::uint8_t> want{7, static_cast<std::uint8_t>(n)};
    want.insert(want.end(), s.begin(), s.end());
    want.push_back(9);
    EXPECT_EQ(bytes(b), want) << n;
  }
}

TEST(WireCodec, RandomLeafSequencesMatchTheReferenceEncoding) {
  // Leaves of every width, byte strings and defaults, mixed: the writer's
  // bytes equal a plain reference encoder's, and the reader returns them.
  std::mt19937_64 rng(12345);
  for (int round = 0; round < 200; ++round) {
    struct Leaf {
      bool isBytes;
      std::uint64_t value;
      std::string text;
    };
    std::vector<Leaf> leaves;
    std::vector<std::uint8_t> want;
    std::uint64_t pending = 0;
    auto flush = [&] {
      if (pending >= 3) {
        want.push_back(0x80);
        want.push_back(0x00);
        for (std::uint8_t x : leb128(pending - 3)) want.push_back(x);
      } else {
        want.insert(want.end(), pending, 0x00);
      }
      pending = 0;
    };
    ByteBuffer b;
    WireWriter w(b);
    int count = static_cast<int>(rng() % 40);
    for (int i = 0; i < count; ++i) {
      Leaf leaf{};
      switch (rng() % 4) {
        case 0:
          break;  // a default
        case 1:
          leaf.isBytes = true;
          leaf.text.assign(rng() % 200, static_cast<char>('a' + rng() % 26));
          break;
        default:
          leaf.value = rng() >> (rng() % 64);
          break;
      }
      if (leaf.isBytes) {
        w.leafBytes(leaf.text.data(), leaf.text.size());
      } else {
        w.leafUnsigned(leaf.value);
      }
      std::uint64_t head = leaf.isBytes ? leaf.text.size() : leaf.value;
      if (head == 0) {
        ++pending;
      } else {
        flush();
        for (std::uint8_t x : leb128(head)) want.push_back(x);
        want.insert(want.end(), leaf.text.begin(), leaf.text.end());
      }
      leaves.push_back(std::move(leaf));
    }
    w.finish();
    flush();
    ASSERT_EQ(bytes(b), want) << "round " << round;
    WireReader r(b.data(), b.size());
    for (const Leaf& leaf : leaves) {
      if (leaf.isBytes) {
        ASSERT_EQ(r.leafBytes(), leaf.text) << "round " << round;
      } else {
        ASSERT_EQ(r.leafUnsigned(), leaf.value) << "round " << round;
      }
    }
    r.finish();
  }
}

TEST(WireCodec, ZigzagMapsSmallMagnitudesToSmallCodes) {
  EXPECT_EQ(zigzag(0), 0u);
  EXPECT_EQ(zigzag(-1), 1u);
  EXPECT_EQ(zigzag(1), 2u);
  EXPECT_EQ(zigzag(-64), 127u);
  for (std::int64_t v : {std::int64_t{0}, std::int64_t{-1}, std::int64_t{1}, std::int64_t{-1000000}, INT64_MIN, INT64_MAX}) EXPECT_EQ(unzigzag(zigzag(v)), v);
}

TEST(WireCodec, DefaultsAreWrittenLazilyAndRunsCollapse) {
  ByteBuffer b;
  WireWriter w(b);
  w.leafUnsigned(0);
  w.leafUnsigned(0);
  EXPECT_TRUE(b.empty()) << "defaults are pending until a real leaf or finish()";
  w.leafUnsigned(7);
  EXPECT_EQ(bytes(b), (std::vector<std::uint8_t>{0x00, 0x00, 0x07}));
  b.clear();
  for (int i = 0; i < 1000; ++i) w.defaultLeaf();
  w.finish();
  // run of 1000: 80 00 varint(997)
  EXPECT_EQ(bytes(b), (std::vector<std::uint8_t>{0x80, 0x00, 0xe5, 0x07}));
  WireReader r(b.data(), b.size());
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(r.leafUnsigned(), 0u);
  r.finish();
}

TEST(WireCodec, ReaderAcceptsUncollapsedDefaults) {
  std::uint8_t in[] = {0, 0, 0, 5};
  WireReader r(in, sizeof in);
  EXPECT_EQ(r.leafUnsigned(), 0u);
  EXPECT_EQ(r.leafUnsigned(), 0u);
  EXPECT_EQ(r.leafUnsigned(), 0u);
  EXPECT_EQ(r.leafUnsigned(), 5u);
  r.finish();
}

TEST(WireCodec, FloatsRoundTripIncludingSpecialValues) {
  for (float f : {0.0f, -0.0f, 1.0f, 12.3f, -1e30f, 1e-40f, std::numeric_limits<float>::infinity()}) {
    ByteBuffer b;
    WireWriter w(b);
    w.leafFloat(f);
    w.finish();
    WireReader r(b.data(), b.size());
    float back = r.leafFloat();
    EXPECT_EQ(std::memcmp(&back, &f, 4), 0) << f;
    r.finish();
  }
  ByteBuffer b;
  WireWriter w(b);
  w.leafDouble(std::numeric_limits<double>::quiet_NaN());
  w.finish();
  WireReader r(b.data(), b.size());
  EXPECT_TRUE(std::isnan(r.leafDouble()));
}

TEST(WireCodec, FloatsAndDoublesOfEveryLeafLengthWriteAndReadTheReferenceBytes) {
  // Every varint length a float's (1-5) or a double's (1-10) leaf can take,
  // at both ends of each, written leaf by leaf and into room (with and
  // without defaults pending before it), and read back before a run of
  // defaults, which must stay unread.
  std::vector<std::uint64_t> leaves;
  for (std::uint64_t v : boundaryValues()) {
    if (v != 0) leaves.push_back(v);
  }
  leaves.push_back(0xffffffffu);  // the largest a float's inline path takes
  leaves.push_back(leafOf(12.3f));
  leaves.push_back(leafOf(45.6));
  leaves.push_back(leafOf(-0.1));
  for (std::uint64_t v : leaves) {
    for (bool isFloat : {true, false}) {
      if (isFloat && v > 0xffffffffu) continue;
      for (int pendingBefore : {0, 3}) {
        std::vector<std::uint8_t> want;
        if (pendingBefore) want = {0x80, 0x00, 0x00};  // run of 3
        for (std::uint8_t x : leb128(v)) want.push_back(x);
        auto put = [&](auto& w) {
          for (int i = 0; i < pendingBefore; ++i) w.defaultLeaf();
          if (isFloat) {
            w.leafFloat(floatOfLeaf(v));
          } else {
            w.leafDouble(doubleOfLeaf(v));
          }
        };
        ByteBuffer b;
        WireWriter w(b);
        put(w);
        w.finish();
        EXPECT_EQ(bytes(b), want) << v << (isFloat ? " float" : " double");
        std::uint8_t room[3 + 2 * kLeafRoom] = {};
        RoomWriter rw(room, 0);
        put(rw);
        EXPECT_EQ(std::vector<std::uint8_t>(room, rw.p), want) << v << (isFloat ? " float" : " double") << " in room";

        std::vector<std::uint8_t> in(want.begin() + (pendingBefore ? 3 : 0), want.end());
        in.insert(in.end(), {0x80, 0x00, 0x05});  // then 8 defaults
        for (std::size_t cut : {in.size(), in.size() - 3}) {
          WireReader r(in.data(), cut);
          if (isFloat) {
            EXPECT_EQ(leafOf(r.leafFloat()), v) << v;
          } else {
            EXPECT_EQ(leafOf(r.leafDouble()), v) << v;
          }
          EXPECT_EQ(r.remaining(), cut - leb128(v).size()) << v;
        }
      }
    }
  }
}

TEST(WireCodec, FloatAndDoubleLeavesOutOfRangeOrMalformedAreRefused) {
  auto refused = [](std::vector<std::uint8_t> in, bool isFloat, const char* want) {
    in.insert(in.end(), 10, 0x01);  // room for the inline paths
    WireReader r(in.data(), in.size());
    try {
      if (isFloat) {
        r.leafFloat();
      } else {
        r.leafDouble();
      }
      ADD_FAILURE() << want << ": no error";
    } catch (const InvalidMessageError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  // A float's fifth byte above 15: more than 32 bits.
  refused({0xff, 0xff, 0xff, 0xff, 0x10}, true, "out of range for float");
  // Its fifth byte zero: overlong.
  refused({0xff, 0xff, 0xff, 0xff, 0x00}, true, "overlong");
  // A double's ninth byte zero, its tenth zero or above 1.
  refused({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00}, false, "overlong");
  refused({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x80, 0x00}, false, "overlong");
  refused({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}, false, "more than 64 bits");
  refused({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x81}, false, "more than 64 bits");
}

TEST(WireCodec, BytesLeafCarriesLengthAndContent) {
  ByteBuffer b;
  WireWriter w(b);
  w.leafBytes("abc", 3);
  w.leafBytes("", 0);
  w.finish();
  EXPECT_EQ(bytes(b), (std::vector<std::uint8_t>{3, 'a', 'b', 'c', 0}));
  WireReader r(b.data(), b.size());
  EXPECT_EQ(r.leafBytes(), "abc");
  EXPECT_EQ(r.leafBytes(), "");
  r.finish();
}

TEST(WireCodec, RejectsTruncation) {
  std::uint8_t in[] = {0x80};
  WireReader r(in, sizeof in);
  EXPECT_THROW(r.leafUnsigned(), InvalidMessageError);
  std::uint8_t s[] = {5, 'a', 'b'};
  WireReader r2(s, sizeof s);
  EXPECT_THROW(r2.leafBytes(), InvalidMessageError);
  WireReader r3(nullptr, 0);
  EXPECT_THROW(r3.leafUnsigned(), InvalidMessageError);
  WireReader r4(nullptr, 0);
  EXPECT_THROW(r4.leafInteger(), InvalidMessageError);
}

TEST(WireCodec, RejectsOverlongAndOversizedVarints) {
  std::uint8_t overlong[] = {0x81, 0x80, 0x00};
  WireReader r(overlong, sizeof overlong);
  EXPECT_THROW(r.rawVarint(), InvalidMessageError);
  std::uint8_t eleven[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
  WireReader r2(eleven, sizeof eleven);
  EXPECT_THROW(r2.rawVarint(), InvalidMessageError);
  std::uint8_t big[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02};
  WireReader r3(big, sizeof big);
  EXPECT_THROW(r3.rawVarint(), InvalidMessageError);
}

TEST(WireCodec, RejectsTrailingBytesAndDanglingRuns) {
  std::uint8_t trailing[] = {1, 2};
  WireReader r(trailing, sizeof trailing);
  EXPECT_EQ(r.leafUnsigned(), 1u);
  EXPECT_THROW(r.finish(), InvalidMessageError);
  std::uint8_t run[] = {0x80, 0x00, 0x00};  // run of 3
  WireReader r2(run, sizeof run);
  EXPECT_EQ(r2.leafUnsigned(), 0u);
  EXPECT_THROW(r2.finish(), InvalidMessageError) << "two defaults of the run were never read";
}

TEST(WireCodec, RangeChecksOnNarrowTargets) {
  std::uint8_t two[] = {2};
  WireReader r(two, 1);
  EXPECT_THROW(r.leafUnsigned(1, "bool"), InvalidMessageError);
}

TEST(WireCodec, AllocationBudgetBoundsDecodedStorage) {
  WireReader r(nullptr, 0);
  r.setBudget(1000);
  r.chargeAllocation(10, 50);
  EXPECT_THROW(r.chargeAllocation(11, 50), InvalidMessageError);
  EXPECT_THROW(r.chargeAllocation(std::size_t{1} << 62, 8), InvalidMessageError);
}

TEST(WireCodec, NestingDepthIsBounded) {
  WireReader r(nullptr, 0);
  for (int i = 0; i < 256; ++i) r.enterNested();
  EXPECT_THROW(r.enterNested(), InvalidMessageError);
}

// A writer limited to a frame's end (what the peer accepts) refuses a value
// once writing it would pass that end, before the buffer grows further, and
// its buffer's capacity stops at the end as it grows towards it.
TEST(WireCodec, ALimitedWriterRefusesBeforeItsBufferPassesTheEnd) {
  constexpr std::size_t kEnd = 70 * 1024;
  ByteBuffer b;
  b.append("head", 4);  // the frame starts after what the buffer held
  WireWriter w;
  w.reset(b, kEnd);
  const std::string big(1 << 20, 'x');
  try {
    w.leafBytes(big.data(), big.size());
    FAIL() << "expected UnsendableValueError";
  } catch (const UnsendableValueError& e) {
    EXPECT_NE(std::string(e.what()).find("refused before it was encoded whole"), std::string::npos) << e.what();
  }
  EXPECT_EQ(b.size(), 4u) << "nothing was written";
  EXPECT_LT(b.capacity(), kEnd) << "nor did the buffer grow for it";

  // Leaf after leaf: every one below the end is written, the buffer's
  // capacity never passes the end, and the first that would pass it throws.
  std::size_t written = 0;
  bool refused = false;
  try {
    for (int i = 0; i < 100000; ++i) {
      w.leafUnsigned(0x3fffffff);  // a varint of five bytes
      written += 5;
      ASSERT_LE(b.capacity(), kEnd);
    }
  } catch (const UnsendableValueError&) {
    refused = true;
  }
  EXPECT_TRUE(refused);
  EXPECT_EQ(b.size(), 4 + written);
  EXPECT_GT(b.size() + 10, kEnd) << "refused only where a varint's room passes the end";
  EXPECT_EQ(b.capacity(), kEnd);

  // Without a limit (reset() alone) the same value is written whole.
  ByteBuffer plain;
  WireWriter unlimited(plain);
  unlimited.reset(plain);
  unlimited.leafBytes(big.data(), big.size());
  EXPECT_GT(plain.size(), big.size());
}

// A buffer that goes idle after a burst gives its storage back above the
// limit, and keeps it below (small batches do not reallocate every time).
TEST(ByteBuffer, ClearAndTrimGivesBackABurstsStorageOnlyAboveTheLimit) {
  ByteBuffer b;
  std::vector<std::uint8_t> burst(3 * 1024 * 1024, 0x11);
  b.append(burst.data(), burst.size());
  ASSERT_GE(b.capacity(), burst.size());
  b.clearAndTrim(1024 * 1024, 256 * 1024);
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.capacity(), 256u * 1024);
  // Still usable: it grows again, and its bytes are intact.
  b.append(burst.data(), 1000);
  EXPECT_EQ(b.size(), 1000u);
  EXPECT_EQ(b.data()[999], 0x11);

  b.clearAndTrim(1024 * 1024, 256 * 1024);  // at the keep size, under the limit: kept
  EXPECT_EQ(b.capacity(), 256u * 1024);
  b.append(burst.data(), 600 * 1024);
  const std::size_t grown = b.capacity();
  b.clearAndTrim(1024 * 1024, 256 * 1024);  // 1 MiB: not above the limit
  EXPECT_EQ(b.capacity(), grown);
  EXPECT_TRUE(b.empty());
}

}  // namespace
}  // namespace myelin::detail
