// Unit tests of the leaf encoding: varints, zigzag, defaults and runs, and
// the strict reader's refusals.
#include "myelin/detail/wire_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace myelin::detail {
namespace {

std::vector<std::uint8_t> bytes(const ByteBuffer& b) { return {b.data(), b.data() + b.size()}; }

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

}  // namespace
}  // namespace myelin::detail
