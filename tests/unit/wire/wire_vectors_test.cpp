// Checks the byte vectors of docs/wire-format.md §6 against the real
// encoder and decoder, using hand-written traits for the structs.
#include "myelin/detail/codec.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/values.h"
#include "wire/frame.h"

struct SmallStruct {
  std::uint32_t val1;
  std::string str;
};

template <>
struct myelin::detail::StructTraits<SmallStruct> {
  static constexpr std::string_view kName = "SmallStruct";
  static constexpr auto kFields = std::make_tuple(field("val1", &SmallStruct::val1), field("str", &SmallStruct::str));
};

namespace app {
enum class E : std::int32_t { kTwo = 2 };
}
template <>
struct myelin::detail::EnumTraits<app::E> {
  static constexpr std::string_view kName = "app::E";
  static constexpr std::array<EnumValue, 1> kValues{{{"kTwo", 2}}};
};

namespace myelin::detail {
namespace {

std::vector<std::uint8_t> hex(const char* s) {
  std::vector<std::uint8_t> out;
  while (*s) {
    if (*s == ' ') {
      ++s;
      continue;
    }
    out.push_back(static_cast<std::uint8_t>(std::stoi(std::string(s, 2), nullptr, 16)));
    s += 2;
  }
  return out;
}

struct IdentityPlans {
  std::uint16_t order[2] = {0, 1};
  FieldPlan plan{order, 2};
  CodecCtx ctx{&plan, &plan};
  IdentityPlans() { StructIndex<SmallStruct>::value = 0; }
};

template <class T>
std::vector<std::uint8_t> encode(const T& v) {
  IdentityPlans p;
  ByteBuffer b;
  WireWriter w(b);
  Codec<T>::encode(w, v, p.ctx);
  w.finish();
  return {b.data(), b.data() + b.size()};
}

template <class T>
T decode(const std::vector<std::uint8_t>& bytes) {
  IdentityPlans p;
  WireReader r(bytes.data(), bytes.size());
  T v{};
  Codec<T>::decode(r, v, p.ctx);
  r.finish();
  return v;
}

/// A call frame as the runtime builds it: kind, slot, method, then params.
template <class... A>
std::vector<std::uint8_t> callFrame(std::uint8_t kind, std::uint32_t slot, std::uint32_t method, const A&... a) {
  IdentityPlans p;
  ByteBuffer b;
  appendFrame(b, [&](WireWriter& w) {
    w.rawByte(kind);
    w.rawVarint(slot);
    w.rawVarint(method);
    (Codec<A>::encode(w, a, p.ctx), ...);
  });
  return {b.data(), b.data() + b.size()};
}

TEST(WireVectors, CallFrames) {
  EXPECT_EQ(callFrame(0x01, 0, 0), hex("03 01 00 00"));
  EXPECT_EQ(callFrame(0x01, 0, 2, std::uint32_t{123}), hex("04 01 00 02 7b"));
  EXPECT_EQ(callFrame(0x01, 0, 1, SmallStruct{123, "Hello World"}),
            hex("10 01 00 01 7b 0b 48 65 6c 6c 6f 20 57 6f 72 6c 64"));
}

TEST(WireVectors, DeadlineAndCancelFrames) {
  ByteBuffer b;
  appendFrame(b, [&](WireWriter& w) {
    w.rawByte(static_cast<std::uint8_t>(FrameType::kCallSync) | kDeadlineBit);
    w.rawVarint(0);
    w.rawVarint(1);
    w.rawU64(10'000);
  });
  EXPECT_EQ(std::vector<std::uint8_t>(b.data(), b.data() + b.size()), hex("0b 82 00 01 10 27 00 00 00 00 00 00"));
  WireReader r(b.data() + 4, b.size() - 4);
  EXPECT_EQ(r.rawU64(), 10'000u);
  b.clear();
  appendFrame(b, [&](WireWriter& w) {
    w.rawByte(static_cast<std::uint8_t>(FrameType::kCancel));
    w.rawVarint(1);
    w.rawVarint(7);
  });
  EXPECT_EQ(std::vector<std::uint8_t>(b.data(), b.data() + b.size()), hex("03 0d 01 07"));
}

TEST(WireVectors, ValueFramesAndTheNamesOfHeldValues) {
  // The value made by call 2 of the sender's lane 1, and by call 0 of the
  // holder's own lane 0 (a call made back on it).
  EXPECT_EQ(myelin::detail::heldValueId(1, 2, false), 524'293u);
  EXPECT_EQ(myelin::detail::heldValueId(0, 0, true), 3u);
  ByteBuffer b;
  appendFrame(b, [&](WireWriter& w) {
    w.rawByte(static_cast<std::uint8_t>(FrameType::kValue));
    w.rawVarint(1);
    w.rawVarint(kValueFetch);
    w.rawVarint(524'293);
  });
  EXPECT_EQ(std::vector<std::uint8_t>(b.data(), b.data() + b.size()), hex("06 00 01 01 85 80 20"));
  b.clear();
  appendFrame(b, [&](WireWriter& w) {
    w.rawByte(static_cast<std::uint8_t>(FrameType::kValue));
    w.rawVarint(1);
    w.rawVarint(kValueDrop);
    w.rawVarint(3);
    w.rawVarint(2);
  });
  EXPECT_EQ(std::vector<std::uint8_t>(b.data(), b.data() + b.size()), hex("05 00 01 02 03 02"));
}

TEST(WireVectors, ReplyFrame) {
  ByteBuffer b;
  appendFrame(b, [&](WireWriter& w) {
    w.rawByte(0x14);
    w.rawVarint(0);
    w.rawVarint(5);
    Codec<std::string>::encode(w, std::string("hi"), CodecCtx{});
  });
  EXPECT_EQ(std::vector<std::uint8_t>(b.data(), b.data() + b.size()), hex("06 14 00 05 02 68 69"));
}

TEST(WireVectors, Leaves) {
  ByteBuffer b;
  WireWriter w(b);
  for (std::uint32_t v : {0u, 0u, 7u}) Codec<std::uint32_t>::encode(w, v, {});
  w.finish();
  EXPECT_EQ(std::vector<std::uint8_t>(b.data(), b.data() + b.size()), hex("00 00 07"));
  b.clear();
  for (std::uint32_t v : {0u, 0u, 0u, 0u, 5u}) Codec<std::uint32_t>::encode(w, v, {});
  w.finish();
  EXPECT_EQ(std::vector<std::uint8_t>(b.data(), b.data() + b.size()), hex("80 00 01 05"));

  EXPECT_EQ(encode(std::int32_t{-1}), hex("01"));
  EXPECT_EQ(encode(std::int32_t{1}), hex("02"));
  EXPECT_EQ(encode(std::int32_t{-64}), hex("7f"));
  EXPECT_EQ(encode(std::uint32_t{300}), hex("ac 02"));
  EXPECT_EQ(encode(12.3f), hex("c1 88 b1 ee 0c"));
  EXPECT_EQ(encode(45.6), hex("c0 8c b1 e6 cc 99 b3 e6 cd 01"));
  EXPECT_EQ(encode(1.0f), hex("bf 80 02"));
  EXPECT_EQ(encode(std::optional<std::uint32_t>{}), hex("00"));
  EXPECT_EQ(encode(std::optional<std::uint32_t>{0}), hex("01 00"));
  EXPECT_EQ(encode(std::optional<std::uint32_t>{9}), hex("01 09"));
  EXPECT_EQ(encode(std::vector<std::uint32_t>{1, 2}), hex("02 01 02"));
  EXPECT_EQ(encode(std::vector<std::uint8_t>(3, 'A')), hex("03 41 41 41"));
  EXPECT_EQ(encode(Result<std::int32_t, app::E>(5)), hex("00 0a"));
  EXPECT_EQ(encode(Result<std::int32_t, app::E>(app::E::kTwo)), hex("01 04"));
  EXPECT_EQ(encode(Status{}), hex("00"));
  EXPECT_EQ(encode(Status(app::E::kTwo, "x")), hex("02 06 61 70 70 3a 3a 45 04 01 78"));
}

TEST(WireVectors, VectorsDecodeBack) {
  EXPECT_EQ(decode<std::int32_t>(hex("7f")), -64);
  EXPECT_EQ(decode<float>(hex("c1 88 b1 ee 0c")), 12.3f);
  EXPECT_EQ(decode<double>(hex("c0 8c b1 e6 cc 99 b3 e6 cd 01")), 45.6);
  EXPECT_EQ(decode<std::optional<std::uint32_t>>(hex("01 00")), std::optional<std::uint32_t>{0});
  auto s = decode<SmallStruct>(hex("7b 0b 48 65 6c 6c 6f 20 57 6f 72 6c 64"));
  EXPECT_EQ(s.val1, 123u);
  EXPECT_EQ(s.str, "Hello World");
  EXPECT_EQ(decode<SmallStruct>(hex("00 00")).str, "");
  EXPECT_EQ(decode<Status>(hex("02 06 61 70 70 3a 3a 45 04 01 78")).getCode<app::E>(), app::E::kTwo);
  using R = Result<std::int32_t, app::E>;
  EXPECT_EQ(decode<R>(hex("01 04")).error(), app::E::kTwo);
}

}  // namespace
}  // namespace myelin::detail
