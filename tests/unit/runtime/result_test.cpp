// Result<T, E>, Status and CallTimeout on their own, and coroutines over
// local Async values: construction and access, the wire form of Result and
// Status (round trips, strict decoding), deadlines of stacked scopes.
#include "myelin/result.h"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "myelin/async.h"
#include "myelin/control.h"
#include "myelin/detail/codec.h"

namespace result_test {
enum class StoreError : std::int32_t { kNotFound = 1, kFull = 2 };
enum class NetError { kDown = 1 };
enum PlainError : std::uint8_t { kPlainBad = 3 };
struct Item {
  std::string name;
  std::int64_t qty = 0;
  bool operator==(const Item&) const = default;
};
}  // namespace result_test

using namespace result_test;
template <>
struct myelin::detail::EnumTraits<StoreError> {
  static constexpr std::string_view kName = "result_test::StoreError";
  static constexpr std::array<EnumValue, 2> kValues{{{"kNotFound", 1}, {"kFull", 2}}};
};
using myelin::FrameworkError;
using myelin::Result;
using myelin::Status;
using myelin::detail::ByteBuffer;
using myelin::detail::Codec;
using myelin::detail::CodecCtx;
using myelin::detail::WireReader;
using myelin::detail::WireWriter;

namespace {

template <class T>
ByteBuffer enc(const T& v) {
  ByteBuffer b;
  WireWriter w(b);
  Codec<T>::encode(w, v, CodecCtx{});
  w.finish();
  return b;
}

template <class T>
T dec(const ByteBuffer& b) {
  WireReader r(b.data(), b.size());
  T v{};
  Codec<T>::decode(r, v, CodecCtx{});
  r.finish();
  return v;
}

Result<std::string, StoreError> lookup(bool found) {
  if (!found) return StoreError::kNotFound;
  return "apple";  // converts to std::string only
}

TEST(Result, HoldsAValueOrAnErrorConstructedImplicitly) {
  auto ok = lookup(true);
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(static_cast<bool>(ok));
  EXPECT_EQ(ok.value(), "apple");
  EXPECT_EQ(*ok, "apple");
  EXPECT_EQ(ok->size(), 5u);
  EXPECT_THROW(ok.error(), std::logic_error);

  auto bad = lookup(false);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error(), StoreError::kNotFound);
  EXPECT_THROW(bad.value(), std::logic_error);
  EXPECT_EQ(bad.valueOr("pear"), "pear");
  EXPECT_EQ(ok.valueOr("pear"), "apple");

  Result<Item, StoreError> def;
  EXPECT_TRUE(def.ok()) << "a default Result holds a default value";
  EXPECT_EQ(def.value(), Item{});
  EXPECT_EQ(lookup(true), lookup(true));
  EXPECT_NE(lookup(true), lookup(false));
  std::string moved = lookup(true).value();
  EXPECT_EQ(moved, "apple");
}

TEST(Result, TravelsAsItsAlternativeAndThatValue) {
  Result<std::int32_t, StoreError> v = 7;
  Result<std::int32_t, StoreError> e = StoreError::kFull;
  Result<std::int32_t, StoreError> zero = 0;
  EXPECT_EQ(dec<decltype(v)>(enc(v)), v);
  EXPECT_EQ(dec<decltype(e)>(enc(e)), e);
  EXPECT_EQ(dec<decltype(zero)>(enc(zero)), zero);
  EXPECT_EQ(enc(zero).size(), 2u) << "a default value is two default leaves, the alternative and the value";
  Result<std::string, std::int32_t> text = std::string("x");
  EXPECT_EQ(dec<decltype(text)>(enc(text)), text);
  EXPECT_EQ(myelin::detail::typeSig<decltype(text)>(), "R<s,i32>");
  EXPECT_EQ(myelin::detail::typeSig<std::vector<Status>>(), "v<st>");
  EXPECT_EQ(myelin::detail::typeSig<decltype(v)>(), "R<i32,E:result_test::StoreError>");
}

TEST(Result, RefusesAnAlternativeThatDoesNotExist) {
  ByteBuffer b;
  WireWriter w(b);
  w.leafUnsigned(2);  // alternative 2
  w.leafUnsigned(1);
  w.finish();
  WireReader r(b.data(), b.size());
  Result<std::int32_t, StoreError> v;
  EXPECT_THROW(Codec<decltype(v)>::decode(r, v, CodecCtx{}), myelin::InvalidMessageError);
}

Status put(int n) {
  if (n > 2) return {StoreError::kFull, "no room for " + std::to_string(n)};
  if (n < 0) return NetError::kDown;
  return {};
}

TEST(Status, SuccessFrameworkAndApplicationErrors) {
  Status ok = put(1);
  EXPECT_TRUE(ok.isOk());
  EXPECT_EQ(ok.getFormattedMessage(), "ok");
  EXPECT_FALSE(ok.getCode<StoreError>().has_value());

  Status full = put(3);
  EXPECT_TRUE(full.isAppError());
  EXPECT_FALSE(full.isOk());
  ASSERT_TRUE(full.getCode<StoreError>().has_value());
  EXPECT_EQ(*full.getCode<StoreError>(), StoreError::kFull);
  EXPECT_TRUE(full.is(StoreError::kFull));
  EXPECT_FALSE(full.is(StoreError::kNotFound));
  EXPECT_FALSE(full.getCode<NetError>().has_value()) << "a code of another enum type is not this one";
  EXPECT_EQ(full.codeType(), "result_test::StoreError");
  EXPECT_EQ(full.codeValue(), 2);
  EXPECT_EQ(full.message(), "no room for 3");
  EXPECT_EQ(full.getFormattedMessage(), "result_test::StoreError 2: no room for 3");

  Status down = put(-1);
  EXPECT_TRUE(down.is(NetError::kDown));
  EXPECT_EQ(down.getFormattedMessage(), "result_test::NetError 1");
  Status plain = kPlainBad;
  EXPECT_TRUE(plain.is(kPlainBad));

  Status fw = Status::framework(FrameworkError::kTimedOut, myelin::EndpointState::kConnected, "no reply in 5 ms");
  EXPECT_TRUE(fw.isFrameworkError());
  EXPECT_EQ(fw.frameworkError(), FrameworkError::kTimedOut);
  EXPECT_EQ(fw.getFormattedMessage(), "timed out (endpoint connected): no reply in 5 ms");
  EXPECT_FALSE(fw.getCode<StoreError>().has_value());
}

TEST(Status, TravelsWithEverythingItCarries) {
  for (const Status& s : {Status{}, put(3), put(-1),
                          Status::framework(FrameworkError::kConnectionClosed, myelin::EndpointState::kFaulted,
                                            "peer gone")}) {
    Status back = dec<Status>(enc(s));
    EXPECT_EQ(back, s) << s.getFormattedMessage();
    EXPECT_EQ(back.getFormattedMessage(), s.getFormattedMessage());
  }
  EXPECT_EQ(dec<Status>(enc(put(3))).getCode<StoreError>(), StoreError::kFull)
      << "the code's type is recognised on the other side by its name";
  EXPECT_LE(enc(Status{}).size(), 1u) << "success is one default leaf";
  std::vector<Status> many{Status{}, put(3), Status{}};
  EXPECT_EQ(dec<std::vector<Status>>(enc(many)), many);
}

TEST(Status, RefusesKindsAndStatesOutOfRange) {
  auto decodeOf = [](std::initializer_list<std::uint64_t> leaves) {
    ByteBuffer b;
    WireWriter w(b);
    for (auto l : leaves) w.leafUnsigned(l);
    w.finish();
    WireReader r(b.data(), b.size());
    Status s;
    Codec<Status>::decode(r, s, CodecCtx{});
    r.finish();
  };
  EXPECT_THROW(decodeOf({3}), myelin::InvalidMessageError);
  EXPECT_THROW(decodeOf({1, 2, 4}), myelin::InvalidMessageError);
}

TEST(CallTimeout, StackedScopesKeepTheEarliestDeadline) {
  EXPECT_EQ(myelin::CallTimeout::currentDeadlineNs(), 0);
  {
    myelin::CallTimeout outer(10'000);
    std::int64_t d1 = myelin::CallTimeout::currentDeadlineNs();
    EXPECT_GT(d1, 0);
    EXPECT_LE(outer.remainingMs(), 10'000u);
    {
      myelin::CallTimeout longer(60'000);
      EXPECT_EQ(myelin::CallTimeout::currentDeadlineNs(), d1) << "a longer inner scope cannot extend the outer";
      EXPECT_LE(longer.remainingMs(), 10'000u);
      myelin::CallTimeout shorter(5);
      EXPECT_LT(myelin::CallTimeout::currentDeadlineNs(), d1);
      myelin::CallTimeout::noteSyncTimeout();
      EXPECT_TRUE(shorter.isSyncRequestTimedOut());
      EXPECT_TRUE(longer.isSyncRequestTimedOut());
    }
    EXPECT_TRUE(outer.isSyncRequestTimedOut()) << "every enclosing scope saw its call time out";
    EXPECT_EQ(myelin::CallTimeout::currentDeadlineNs(), d1);
  }
  {
    myelin::CallTimeout brief(5);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(brief.remainingMs(), 0u);
  }
  EXPECT_EQ(myelin::CallTimeout::currentDeadlineNs(), 0);
  myelin::CallTimeout fresh(10);
  EXPECT_FALSE(fresh.isSyncRequestTimedOut());
}

TEST(CallTimeout, AScopeThatEndsOutOfOrderUnlinksItself) {
  // As a scope held across a co_await would: made first, ended first.
  auto* first = new myelin::CallTimeout(10'000);
  {
    myelin::CallTimeout second(5'000);
    std::int64_t d2 = myelin::CallTimeout::currentDeadlineNs();
    delete first;
    EXPECT_EQ(myelin::CallTimeout::currentDeadlineNs(), d2) << "the innermost scope still applies";
    myelin::CallTimeout::noteSyncTimeout();  // walks the chain: must not reach the deleted scope
    EXPECT_TRUE(second.isSyncRequestTimedOut());
  }
  EXPECT_EQ(myelin::CallTimeout::currentDeadlineNs(), 0) << "nothing is left pointing at the deleted scope";
}

myelin::Async<std::int64_t> doubled(myelin::Async<std::int64_t> in) {
  std::int64_t v = co_await in;
  co_return v * 2;
}

myelin::Async<std::int64_t> chained(myelin::Async<std::int64_t> a, myelin::Async<std::int64_t> b) {
  std::int64_t x = co_await doubled(a);
  std::int64_t y = co_await b;
  co_return x + y;
}

TEST(Coroutines, AnAsyncCoroutineResumesWhenWhatItAwaitsCompletes) {
  myelin::Async<std::int64_t> a;
  myelin::Async<std::int64_t> b;
  myelin::Async<std::int64_t> sum = chained(a, b);
  EXPECT_FALSE(sum.isReady()) << "suspended at its first co_await";
  std::thread t([&] {
    a.setValue(20);
    b.setValue(2);
  });
  EXPECT_EQ(sum.value(5000), 42);
  t.join();
  EXPECT_EQ(doubled(myelin::Async<std::int64_t>(4)).value(0), 8) << "a ready value does not suspend";
}

TEST(Coroutines, AnErrorAwaitedEndsTheCoroutineWithThatError) {
  myelin::Async<std::int64_t> a;
  myelin::Async<std::int64_t> out = doubled(a);
  a.setError("the store is gone");
  ASSERT_TRUE(out.wait(5000));
  EXPECT_TRUE(out.isError());
  EXPECT_EQ(out.errorMessage(), "the store is gone");
  EXPECT_THROW(out.value(), myelin::RemoteCallError);
}

}  // namespace
