// Unit tests of the HELLO schema descriptor (docs/wire-format.md §3): encode
// and decode round trips, strict rejection of malformed descriptors, and the
// LocalSchema registry's method tables.
#include "schema/local_schema.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "myelin/errors.h"

namespace myelin::detail {
namespace {

MethodInfo method(std::string name, CallMode mode, std::string ret, std::vector<NamedSig> params = {}) {
  MethodInfo m;
  m.name = std::move(name);
  m.mode = mode;
  m.returnSig = std::move(ret);
  m.params = std::move(params);
  return m;
}

SchemaDescriptor sampleDescriptor() {
  SchemaDescriptor d;
  d.structs.push_back({"geo::Point", {{"x", "i32"}, {"y", "i32"}, {"label", "s"}}});
  d.structs.push_back({"geo::Empty", {}});
  d.structs.push_back({"geo::Shape", {{"points", "v<S:geo::Point>"}, {"tags", "m<s,o<u64>>"}}});
  d.enums.push_back({"geo::Color",
                     {{"kMin", std::numeric_limits<std::int64_t>::min()},
                      {"kMinusOne", -1},
                      {"kZero", 0},
                      {"kBig", 1'000'000'007},
                      {"kMax", std::numeric_limits<std::int64_t>::max()}}});
  d.enums.push_back({"geo::Nothing", {}});
  ClassSchema calc;
  calc.name = "svc::Calc";
  calc.implemented.push_back(method("add", CallMode::kSync, "i32", {{"a", "i32"}, {"b", "i32"}}));
  calc.implemented.push_back(method("fire", CallMode::kAsyncVoid, "", {{"msg", "s"}}));
  calc.implemented.push_back(method("fetch", CallMode::kAsync, "S:geo::Shape", {}));
  calc.called.push_back(method("notify", CallMode::kAsyncVoid, "", {{"what", "E:geo::Color"}}));
  calc.called.push_back(method("ask", CallMode::kSync, "b", {}));
  calc.called.push_back(method("later", CallMode::kAsync, "v<u8>", {{"n", "u32"}, {"p", "S:geo::Point"}}));
  d.classes.push_back(calc);
  d.classes.push_back({"svc::Nothing", {}, {}});
  return d;
}

ByteBuffer encoded(const SchemaDescriptor& d) {
  ByteBuffer b;
  d.encode(b);
  return b;
}

std::vector<std::uint8_t> bytesOf(const SchemaDescriptor& d) {
  ByteBuffer b = encoded(d);
  return std::vector<std::uint8_t>(b.data(), b.data() + b.size());
}

SchemaDescriptor decodeBytes(const std::vector<std::uint8_t>& v) { return SchemaDescriptor::decode(v.data(), v.size()); }

void expectSameMethods(const std::vector<MethodInfo>& a, const std::vector<MethodInfo>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_EQ(a[i].mode, b[i].mode);
    EXPECT_EQ(a[i].returnSig, b[i].returnSig);
    ASSERT_EQ(a[i].params.size(), b[i].params.size());
    for (std::size_t p = 0; p < a[i].params.size(); ++p) {
      EXPECT_EQ(a[i].params[p].name, b[i].params[p].name);
      EXPECT_EQ(a[i].params[p].sig, b[i].params[p].sig);
    }
  }
}

void expectSame(const SchemaDescriptor& a, const SchemaDescriptor& b) {
  ASSERT_EQ(a.structs.size(), b.structs.size());
  for (std::size_t i = 0; i < a.structs.size(); ++i) {
    EXPECT_EQ(a.structs[i].name, b.structs[i].name);
    ASSERT_EQ(a.structs[i].fields.size(), b.structs[i].fields.size());
    for (std::size_t f = 0; f < a.structs[i].fields.size(); ++f) {
      EXPECT_EQ(a.structs[i].fields[f].name, b.structs[i].fields[f].name);
      EXPECT_EQ(a.structs[i].fields[f].sig, b.structs[i].fields[f].sig);
    }
  }
  ASSERT_EQ(a.enums.size(), b.enums.size());
  for (std::size_t i = 0; i < a.enums.size(); ++i) {
    EXPECT_EQ(a.enums[i].name, b.enums[i].name);
    EXPECT_EQ(a.enums[i].values, b.enums[i].values);
  }
  ASSERT_EQ(a.classes.size(), b.classes.size());
  for (std::size_t i = 0; i < a.classes.size(); ++i) {
    EXPECT_EQ(a.classes[i].name, b.classes[i].name);
    expectSameMethods(a.classes[i].implemented, b.classes[i].implemented);
    expectSameMethods(a.classes[i].called, b.classes[i].called);
  }
}

/// "MYLN", version 2: the start of every valid descriptor.
std::vector<std::uint8_t> header() { return {'M', 'Y', 'L', 'N', 0x02}; }

TEST(SchemaDescriptor, RoundTripsStructsEnumsAndClasses) {
  SchemaDescriptor d = sampleDescriptor();
  SchemaDescriptor back = decodeBytes(bytesOf(d));
  expectSame(d, back);
  // Every call mode survives, in both roles.
  EXPECT_EQ(back.classes[0].implemented[0].mode, CallMode::kSync);
  EXPECT_EQ(back.classes[0].implemented[1].mode, CallMode::kAsyncVoid);
  EXPECT_EQ(back.classes[0].implemented[2].mode, CallMode::kAsync);
  EXPECT_EQ(back.classes[0].called[0].mode, CallMode::kAsyncVoid);
  EXPECT_EQ(back.classes[0].called[1].mode, CallMode::kSync);
  EXPECT_EQ(back.classes[0].called[2].mode, CallMode::kAsync);
  // Negative enum values, including the extremes, come back exactly.
  EXPECT_EQ(back.enums[0].values[0].second, std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(back.enums[0].values[1].second, -1);
  EXPECT_EQ(back.enums[0].values[4].second, std::numeric_limits<std::int64_t>::max());
  // Decoded methods carry no dispatch function.
  EXPECT_EQ(back.classes[0].implemented[0].dispatch, nullptr);
  // Re-encoding the decoded descriptor gives the same bytes.
  EXPECT_EQ(bytesOf(back), bytesOf(d));
}

TEST(SchemaDescriptor, EmptyDescriptorIsMagicVersionAndFourZeroCounts) {
  std::vector<std::uint8_t> b = bytesOf(SchemaDescriptor{});
  std::vector<std::uint8_t> want = header();
  want.insert(want.end(), {0x00, 0x00, 0x00, 0x00});  // structs, enums, classes, limits
  EXPECT_EQ(b, want);
  SchemaDescriptor d = decodeBytes(b);
  EXPECT_TRUE(d.structs.empty());
  EXPECT_TRUE(d.enums.empty());
  EXPECT_TRUE(d.classes.empty());
}

TEST(SchemaDescriptor, EnumValuesAreZigzagged) {
  SchemaDescriptor d;
  d.enums.push_back({"E", {{"a", -1}, {"b", 1}, {"c", -64}}});
  std::vector<std::uint8_t> want = header();
  // 0 structs, 1 enum "E" with 3 values, 0 classes, 0 limits.
  want.insert(want.end(), {0x00, 0x01, 0x01, 'E', 0x03, 0x01, 'a', 0x01, 0x01, 'b', 0x02, 0x01, 'c', 0x7f, 0x00, 0x00});
  EXPECT_EQ(bytesOf(d), want);
}

TEST(SchemaDescriptor, RejectsBadMagic) {
  std::vector<std::uint8_t> good = bytesOf(sampleDescriptor());
  for (std::size_t i = 0; i < 4; ++i) {
    std::vector<std::uint8_t> b = good;
    b[i] ^= 0x20;
    EXPECT_THROW(decodeBytes(b), InvalidMessageError) << "magic byte " << i;
  }
}

TEST(SchemaDescriptor, RejectsOtherProtocolVersions) {
  for (std::uint8_t v : {0x00, 0x01, 0x03, 0x7f}) {  // 1: before the limits
    std::vector<std::uint8_t> b = bytesOf(SchemaDescriptor{});
    b[4] = v;
    EXPECT_THROW(decodeBytes(b), InvalidMessageError) << "version " << int(v);
  }
  // A multi-byte version that is not 2.
  std::vector<std::uint8_t> b = {'M', 'Y', 'L', 'N', 0x82, 0x01, 0x00, 0x00, 0x00, 0x00};
  EXPECT_THROW(decodeBytes(b), InvalidMessageError);
  // An overlong encoding of 2 is not version 2.
  std::vector<std::uint8_t> overlong = {'M', 'Y', 'L', 'N', 0x82, 0x00, 0x00, 0x00, 0x00, 0x00};
  EXPECT_THROW(decodeBytes(overlong), InvalidMessageError);
}

TEST(SchemaDescriptor, RejectsCountsLargerThanTheRemainingBytes) {
  // Struct count 5 with nothing after it.
  std::vector<std::uint8_t> b = header();
  b.push_back(0x05);
  EXPECT_THROW(decodeBytes(b), InvalidMessageError);
  // A struct count of 2^40: rejected from the count, not by allocating.
  b = header();
  b.insert(b.end(), {0x80, 0x80, 0x80, 0x80, 0x80, 0x20, 0x00, 0x00});
  EXPECT_THROW(decodeBytes(b), InvalidMessageError);
  // Field count larger than what is left.
  b = header();
  b.insert(b.end(), {0x01, 0x01, 'S', 0x09, 0x01, 'f', 0x01, 'b', 0x00, 0x00});
  EXPECT_THROW(decodeBytes(b), InvalidMessageError);
  // Enum value count larger than what is left.
  b = header();
  b.insert(b.end(), {0x00, 0x01, 0x01, 'E', 0x7f, 0x00});
  EXPECT_THROW(decodeBytes(b), InvalidMessageError);
  // Class count, method count and parameter count.
  b = header();
  b.insert(b.end(), {0x00, 0x00, 0x03, 0x01, 'C', 0x00, 0x00});
  EXPECT_THROW(decodeBytes(b), InvalidMessageError);
  b = header();
  b.insert(b.end(), {0x00, 0x00, 0x01, 0x01, 'C', 0x40, 0x00});
  EXPECT_THROW(decodeBytes(b), InvalidMessageError);
  b = header();
  b.insert(b.end(), {0x00, 0x00, 0x01, 0x01, 'C', 0x01, 0x01, 'm', 0x00, 0x00, 0x30, 0x00});
  EXPECT_THROW(decodeBytes(b), InvalidMessageError);
  // Limit count larger than what is left.
  b = header();
  b.insert(b.end(), {0x00, 0x00, 0x00, 0x05, 0x01, 'x', 0x01});
  EXPECT_THROW(decodeBytes(b), InvalidMessageError);
  // The same descriptor with a correct parameter count of 0 decodes.
  b = header();
  b.insert(b.end(), {0x00, 0x00, 0x01, 0x01, 'C', 0x01, 0x01, 'm', 0x00, 0x00, 0x00, 0x00, 0x00});
  SchemaDescriptor d = decodeBytes(b);
  ASSERT_EQ(d.classes.size(), 1u);
  ASSERT_EQ(d.classes[0].implemented.size(), 1u);
  EXPECT_EQ(d.classes[0].implemented[0].name, "m");
}

TEST(SchemaDescriptor, CarriesTheSidesLimitsByName) {
  ByteBuffer out;
  sampleDescriptor().encode(out, HelloLimits{1u << 20});
  std::vector<std::uint8_t> b(out.data(), out.data() + out.size());
  SchemaDescriptor d = decodeBytes(b);
  EXPECT_EQ(d.limits.maxMessageSize, 1u << 20);
  expectSame(d, sampleDescriptor());
  // The limits close the descriptor: one entry, "maxMessageSize", 2^20.
  const std::vector<std::uint8_t> entry = {0x01, 0x0e, 'm', 'a', 'x', 'M', 'e', 's', 's', 'a',
                                           'g',  'e',  'S', 'i', 'z', 'e', 0x80, 0x80, 0x40};
  ASSERT_GE(b.size(), entry.size());
  EXPECT_TRUE(std::equal(entry.begin(), entry.end(), b.end() - static_cast<std::ptrdiff_t>(entry.size())));
  // None announced: an empty list, and 0 read back.
  EXPECT_FALSE(decodeBytes(bytesOf(sampleDescriptor())).limits.maxMessageSize.has_value());
  // A limit this side does not know is skipped, before or after a known one.
  std::vector<std::uint8_t> withOthers = header();
  withOthers.insert(withOthers.end(), {0x00, 0x00, 0x00, 0x03, 0x03, 'f', 'o', 'o', 0x85, 0x01});
  withOthers.insert(withOthers.end(), entry.begin() + 1, entry.end());
  withOthers.insert(withOthers.end(), {0x03, 'b', 'a', 'r', 0x00});
  EXPECT_EQ(decodeBytes(withOthers).limits.maxMessageSize, 1u << 20);
  // A limit cut short is an error, like any other short descriptor.
  withOthers.pop_back();
  EXPECT_THROW(decodeBytes(withOthers), InvalidMessageError);
}

TEST(SchemaDescriptor, NamesAreLimitedTo4096Bytes) {
  auto withStructName = [](std::size_t n) {
    SchemaDescriptor d;
    d.structs.push_back({std::string(n, 'n'), {}});
    return bytesOf(d);
  };
  EXPECT_EQ(decodeBytes(withStructName(4096)).structs[0].name.size(), 4096u);
  EXPECT_THROW(decodeBytes(withStructName(4097)), InvalidMessageError);

  // The limit applies to every kind of name and signature.
  auto expectRejected = [](const SchemaDescriptor& d, const char* what) {
    EXPECT_THROW(decodeBytes(bytesOf(d)), InvalidMessageError) << what;
  };
  std::string big(4097, 'x');
  SchemaDescriptor d;
  d.structs.push_back({"S", {{big, "u8"}}});
  expectRejected(d, "field name");
  d = {};
  d.structs.push_back({"S", {{"f", big}}});
  expectRejected(d, "field sig");
  d = {};
  d.enums.push_back({big, {}});
  expectRejected(d, "enum name");
  d = {};
  d.enums.push_back({"E", {{big, 1}}});
  expectRejected(d, "enum value name");
  d = {};
  d.classes.push_back({big, {}, {}});
  expectRejected(d, "class name");
  d = {};
  d.classes.push_back({"C", {method(big, CallMode::kSync, "")}, {}});
  expectRejected(d, "method name");
  d = {};
  d.classes.push_back({"C", {}, {method("m", CallMode::kSync, big)}});
  expectRejected(d, "return sig");
  d = {};
  d.classes.push_back({"C", {method("m", CallMode::kSync, "", {{big, "u8"}})}, {}});
  expectRejected(d, "parameter name");
  d = {};
  d.classes.push_back({"C", {}, {method("m", CallMode::kSync, "", {{"p", big}})}});
  expectRejected(d, "parameter sig");
}

TEST(SchemaDescriptor, RejectsUnknownCallModes) {
  for (int mode : {5, 6, 0x7f, 0xff}) {
    SchemaDescriptor d;
    d.classes.push_back({"C", {method("m", static_cast<CallMode>(mode), "")}, {}});
    EXPECT_THROW(decodeBytes(bytesOf(d)), InvalidMessageError) << "mode " << mode;
    SchemaDescriptor c;
    c.classes.push_back({"C", {}, {method("m", static_cast<CallMode>(mode), "")}});
    EXPECT_THROW(decodeBytes(bytesOf(c)), InvalidMessageError) << "called, mode " << mode;
  }
}

TEST(SchemaDescriptor, RejectsTrailingBytes) {
  for (std::uint8_t extra : {0x00, 0x01, 0xff}) {
    std::vector<std::uint8_t> b = bytesOf(sampleDescriptor());
    b.push_back(extra);
    EXPECT_THROW(decodeBytes(b), InvalidMessageError);
  }
}

TEST(SchemaDescriptor, EveryTruncationIsRejected) {
  std::vector<std::uint8_t> good = bytesOf(sampleDescriptor());
  ASSERT_GT(good.size(), 100u);
  for (std::size_t n = 0; n < good.size(); ++n) {
    // Copy the prefix into its own allocation so that reading past it is
    // caught by the address sanitizer.
    std::vector<std::uint8_t> prefix(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
    const std::uint8_t* p = prefix.empty() ? nullptr : prefix.data();
    EXPECT_THROW(SchemaDescriptor::decode(p, n), InvalidMessageError) << "prefix of " << n << " bytes";
  }
  EXPECT_NO_THROW(decodeBytes(good));
}

TEST(LocalSchema, AssignsWireIdsInDescriptorOrderAndCalledIdsInRegistrationOrder) {
  LocalSchema s;
  EXPECT_EQ(s.addClass("b::Second", Role::kCalls, {method("x", CallMode::kSync, ""), method("y", CallMode::kSync, "")}),
            0);
  s.addClass("a::First", Role::kImplements, {method("p", CallMode::kSync, ""), method("q", CallMode::kAsync, "u8")});
  EXPECT_EQ(s.addClass("a::First", Role::kCalls, {method("r", CallMode::kAsyncVoid, "")}), 2);
  s.addClass("b::Second", Role::kImplements, {method("z", CallMode::kSync, "")});

  const SchemaDescriptor& d = s.frozen();
  ASSERT_EQ(d.classes.size(), 2u);
  EXPECT_EQ(d.classes[0].name, "b::Second");
  EXPECT_EQ(d.classes[1].name, "a::First");

  // Implemented: all classes in descriptor order, each class's methods in order.
  const auto& impl = s.implementedFlat();
  ASSERT_EQ(impl.size(), 3u);
  EXPECT_EQ(impl[0].cls, 0u);
  EXPECT_EQ(impl[0].method, 0u);
  EXPECT_EQ(impl[1].cls, 1u);
  EXPECT_EQ(impl[1].method, 0u);
  EXPECT_EQ(impl[2].cls, 1u);
  EXPECT_EQ(impl[2].method, 1u);
  // Called: registration order.
  const auto& called = s.calledFlat();
  ASSERT_EQ(called.size(), 3u);
  EXPECT_EQ(called[0].cls, 0u);
  EXPECT_EQ(called[0].method, 0u);
  EXPECT_EQ(called[1].cls, 0u);
  EXPECT_EQ(called[1].method, 1u);
  EXPECT_EQ(called[2].cls, 1u);
  EXPECT_EQ(called[2].method, 0u);
}

TEST(LocalSchema, StructsAndEnumsAreRegisteredOnceByName) {
  LocalSchema s;
  EXPECT_EQ(s.addStruct("p::A", {{"x", "u8"}}), 0);
  EXPECT_EQ(s.addStruct("p::B", {}), 1);
  EXPECT_EQ(s.addStruct("p::A", {{"x", "u8"}}), 0);
  s.addEnum("p::E", {{"k", -3}});
  s.addEnum("p::E", {{"k", -3}});
  const SchemaDescriptor& d = s.frozen();
  EXPECT_EQ(d.structs.size(), 2u);
  ASSERT_EQ(d.enums.size(), 1u);
  EXPECT_EQ(d.enums[0].values[0].second, -3);
}

TEST(LocalSchema, RegistrationAfterFreezingOrTwiceInOneRoleThrows) {
  LocalSchema s;
  s.addStruct("p::Known", {});
  s.addClass("p::C", Role::kImplements, {method("m", CallMode::kSync, "")});
  EXPECT_THROW(s.addClass("p::C", Role::kImplements, {method("n", CallMode::kSync, "")}), InvalidConfigurationError);
  s.frozen();
  EXPECT_THROW(s.addStruct("p::New", {}), InvalidConfigurationError);
  EXPECT_THROW(s.addEnum("p::NewE", {}), InvalidConfigurationError);
  EXPECT_THROW(s.addClass("p::D", Role::kCalls, {}), InvalidConfigurationError);
  // A struct already known still resolves to its index.
  EXPECT_EQ(s.addStruct("p::Known", {}), 0);
  // Freezing twice keeps the tables as they were.
  s.frozen();
  EXPECT_EQ(s.implementedFlat().size(), 1u);
}

}  // namespace
}  // namespace myelin::detail
