// Unit tests of framing: length prefixes, limits checked before buffering,
// and prefix patching for bodies of every size.
#include "wire/frame.h"

#include <gtest/gtest.h>

#include <string>

namespace myelin::detail {
namespace {

TEST(Frame, PeekNeedsTheWholePrefixThenReportsTheBodyLength) {
  std::uint8_t p[] = {0x90, 0x01, 0xaa};
  EXPECT_FALSE(peekFrame(p, 1, 1 << 20).has_value());
  auto s = peekFrame(p, 3, 1 << 20);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->headerLen, 2u);
  EXPECT_EQ(s->bodyLen, 144u);
  EXPECT_EQ(s->total(), 146u);
}

TEST(Frame, OneBytePrefixesKeepEveryCheck) {
  // The inline path for one-byte prefixes: its edges behave as the general one.
  std::uint8_t one[] = {0x01};
  auto s = peekFrame(one, 1, 1024);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->headerLen, 1u);
  EXPECT_EQ(s->bodyLen, 1u);
  std::uint8_t most[] = {0x7f};
  s = peekFrame(most, 1, 1024);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->bodyLen, 127u);
  EXPECT_THROW(peekFrame(most, 1, 126), InvalidMessageError) << "a one-byte length above maxBody";
  EXPECT_FALSE(peekFrame(most, 0, 1024).has_value()) << "nothing buffered yet";
  std::uint8_t twoBytes[] = {0x80, 0x01};
  EXPECT_FALSE(peekFrame(twoBytes, 1, 1024).has_value()) << "a continuation byte is not a length";
  s = peekFrame(twoBytes, 2, 1024);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->headerLen, 2u);
  EXPECT_EQ(s->bodyLen, 128u);
}

TEST(Frame, TwoBytePrefixesKeepEveryCheck) {
  // The inline path for two-byte prefixes (128 to 16,383): its edges behave
  // as the general one, and a third byte still takes the general path.
  std::uint8_t most[] = {0xff, 0x7f};
  auto s = peekFrame(most, 2, 1 << 20);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->headerLen, 2u);
  EXPECT_EQ(s->bodyLen, 16383u);
  EXPECT_FALSE(peekFrame(most, 1, 1 << 20).has_value()) << "half a prefix";
  try {
    peekFrame(most, 2, 16382);
    ADD_FAILURE() << "a two-byte length above maxBody was taken";
  } catch (const InvalidMessageError& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds maxMessageSize"), std::string::npos) << e.what();
  }
  std::uint8_t three[] = {0x80, 0x80, 0x01};
  EXPECT_FALSE(peekFrame(three, 2, 1 << 20).has_value()) << "the second byte continues";
  s = peekFrame(three, 3, 1 << 20);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->headerLen, 3u);
  EXPECT_EQ(s->bodyLen, 16384u);
}

TEST(Frame, OversizedLengthIsRejectedBeforeTheBodyArrives) {
  std::uint8_t p[] = {0xff, 0xff, 0xff, 0xff, 0x0f};
  EXPECT_THROW(peekFrame(p, sizeof p, 1024), InvalidMessageError);
}

TEST(Frame, EmptyOverlongAndTooLongPrefixesAreRejected) {
  std::uint8_t empty[] = {0x00};
  EXPECT_THROW(peekFrame(empty, 1, 1024), InvalidMessageError);
  std::uint8_t overlong[] = {0x85, 0x00};
  EXPECT_THROW(peekFrame(overlong, 2, 1024), InvalidMessageError);
  std::uint8_t six[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
  EXPECT_THROW(peekFrame(six, 6, ~std::size_t{0}), InvalidMessageError);
}

TEST(Frame, AppendFramePatchesPrefixesOfAnySize) {
  for (std::size_t n : {1u, 127u, 128u, 16383u, 16384u, 100000u}) {
    ByteBuffer b;
    b.push(0xee);  // something already staged before this frame
    appendFrame(b, [&](WireWriter& w) {
      for (std::size_t i = 0; i < n; ++i) w.rawByte(static_cast<std::uint8_t>(i * 7));
    });
    auto span = peekFrame(b.data() + 1, b.size() - 1, 1 << 20);
    ASSERT_TRUE(span);
    EXPECT_EQ(span->bodyLen, n);
    EXPECT_EQ(span->headerLen, varintSize(n));
    EXPECT_EQ(b.size(), 1 + span->total());
    EXPECT_EQ(b.data()[0], 0xee);
    // A body moved up for a longer prefix arrives whole and in order.
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(b.data()[1 + span->headerLen + i], static_cast<std::uint8_t>(i * 7)) << n << " byte " << i;
    }
  }
}

}  // namespace
}  // namespace myelin::detail
