// Status, Result, CallTimeout and coroutines over a real service process
// (docs/async-and-errors.md): application and framework errors arrive as
// values, sync calls stop waiting at their deadline without disturbing the
// connection, and coroutines await remote calls on both sides.
#include <gtest/gtest.h>
#include <myelin/myelin.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "results.h"
#include "results_client.h"
#include "service_fixture.h"

myelin::Async<std::int64_t> res::Probe::twice(std::int64_t v) {
  myelin::Async<std::int64_t> out;
  std::thread([out, v]() mutable { out.setValue(2 * v); }).detach();
  return out;
}

namespace myelin_test {
namespace {

using myelin::CallTimeout;
using myelin::FrameworkError;
using myelin::Status;
using res::Item;
using res::Store;
using res::StoreError;
using Results = ServiceTest;

std::int64_t msSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
}

TEST_F(Results, AStatusCarriesSuccessOrTheServicesApplicationError) {
  Store::clear();
  for (const char* name : {"a", "b", "c"}) EXPECT_TRUE(Store::put({name, 1}).isOk()) << name;
  Status full = Store::put({"d", 1});
  ASSERT_TRUE(full.isAppError()) << full.getFormattedMessage();
  EXPECT_EQ(full.getCode<StoreError>(), StoreError::kFull);
  EXPECT_TRUE(full.is(StoreError::kFull));
  EXPECT_EQ(full.message(), "the store holds 3 items");
  EXPECT_EQ(full.getFormattedMessage(), "res::StoreError 2: the store holds 3 items");

  Status other = Store::failOther();
  EXPECT_FALSE(other.getCode<StoreError>().has_value()) << "a code of another enum is not a StoreError";
  EXPECT_EQ(other.getCode<res::OtherError>(), res::OtherError::kBoom);
}

TEST_F(Results, AHandlerThatThrowsGivesAStatusMethodAFrameworkError) {
  Status s = Store::throwing();
  ASSERT_TRUE(s.isFrameworkError());
  EXPECT_EQ(s.frameworkError(), FrameworkError::kRemoteFailure);
  EXPECT_NE(s.message().find("the handler threw"), std::string::npos) << s.message();
  EXPECT_EQ(ep_.getState(), myelin::EndpointState::kConnected);
}

TEST_F(Results, AResultCarriesTheValueOrTheError) {
  Store::clear();
  ASSERT_TRUE(Store::put({"pear", 4}).isOk());
  auto found = Store::get("pear");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->name, "pear");
  EXPECT_EQ(found->qty, 4);
  auto missing = Store::get("plum");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error(), StoreError::kNotFound);

  auto later = Store::getLater("pear");
  auto laterMissing = Store::getLater("plum");
  ASSERT_TRUE(later.value(10'000).ok());
  EXPECT_EQ(later.value().value().qty, 4);
  EXPECT_EQ(laterMissing.value(10'000).error(), StoreError::kNotFound);
}

TEST_F(Results, StatusesAndResultsTravelAsParametersAndFields) {
  res::Report r;
  r.status = Status(StoreError::kNotFound, "nothing");
  r.item = StoreError::kFull;
  r.counts = {std::int64_t{3}, StoreError::kNotFound, std::int64_t{0}};
  res::Report back = Store::echo(r);
  EXPECT_EQ(back.status, r.status);
  EXPECT_EQ(back.item, r.item);
  EXPECT_EQ(back.counts, r.counts);

  std::vector<Status> many{Status{}, Status(res::OtherError::kBoom, "x"),
                           Status::framework(FrameworkError::kCanceled, myelin::EndpointState::kConnected, "y")};
  EXPECT_EQ(Store::echoStatuses(many), many);
}

TEST_F(Results, AStatusMethodOnAClosedEndpointReturnsAFrameworkError) {
  ep_.disconnect();
  Status s = Store::put({"x", 1});
  ASSERT_TRUE(s.isFrameworkError());
  EXPECT_EQ(s.frameworkError(), FrameworkError::kConnectionClosed);
  EXPECT_EQ(s.endpointState(), myelin::EndpointState::kClosed);
  EXPECT_THROW(Store::get("x"), myelin::ConnectionClosedError) << "a Result cannot carry it: it throws";
}

TEST_F(Results, ASyncCallStopsWaitingAtItsDeadline) {
  auto t0 = std::chrono::steady_clock::now();
  {
    CallTimeout t(30);
    EXPECT_THROW(Store::sleepValue(800), myelin::TimeoutError);
    EXPECT_TRUE(t.isSyncRequestTimedOut());
  }
  {
    CallTimeout t(30);
    Store::sleepVoid(800);  // returns: a void method cannot carry the timeout
    EXPECT_TRUE(t.isSyncRequestTimedOut());
  }
  {
    CallTimeout t(30);
    Status s = Store::sleepStatus(800);
    EXPECT_TRUE(t.isSyncRequestTimedOut());
    ASSERT_TRUE(s.isFrameworkError());
    EXPECT_EQ(s.frameworkError(), FrameworkError::kTimedOut);
  }
  EXPECT_LT(msSince(t0), 800) << "none of the three waited for its reply";
  // The late replies are dropped; the next call on this thread gets its own.
  EXPECT_EQ(Store::sleepValue(0), 0);
  EXPECT_GE(Store::sleepsDone(), 3);
  EXPECT_EQ(ep_.getState(), myelin::EndpointState::kConnected);
}

TEST_F(Results, ACallInTimeReturnsNormallyAndAnExpiredScopeSendsNothing) {
  {
    CallTimeout t(10'000);
    EXPECT_EQ(Store::sleepValue(1), 1);
    EXPECT_FALSE(t.isSyncRequestTimedOut());
  }
  std::int64_t before = Store::sleepsDone();
  {
    CallTimeout t(0);
    EXPECT_THROW(Store::sleepValue(1), myelin::TimeoutError);
    EXPECT_TRUE(t.isSyncRequestTimedOut());
  }
  EXPECT_EQ(Store::sleepsDone(), before) << "a call whose deadline had passed was not sent";
}

TEST_F(Results, TimeoutsRacingRepliesLeaveTheConnectionHealthy) {
  int timedOut = 0;
  int answered = 0;
  for (int i = 0; i < 200; ++i) {
    CallTimeout t(static_cast<std::uint32_t>(1 + i % 3));
    try {
      EXPECT_EQ(Store::sleepValue(i % 4), i % 4);
      ++answered;
    } catch (const myelin::TimeoutError&) {
      EXPECT_TRUE(t.isSyncRequestTimedOut());
      ++timedOut;
    }
  }
  EXPECT_EQ(timedOut + answered, 200);
  EXPECT_EQ(Store::sleepValue(0), 0);
  EXPECT_EQ(ep_.getState(), myelin::EndpointState::kConnected);
}

myelin::Async<std::int64_t> sumOfThree(std::int64_t a, std::int64_t b, std::int64_t c) {
  std::int64_t x = co_await Store::addLater(a, b);
  std::int64_t y = co_await Store::addLater(x, c);
  co_return y;
}

TEST_F(Results, AClientCoroutineAwaitsRemoteCallsInTurn) {
  EXPECT_EQ(sumOfThree(1, 2, 3).value(10'000), 6);
  std::vector<myelin::Async<std::int64_t>> sums;
  for (std::int64_t i = 0; i < 50; ++i) sums.push_back(sumOfThree(i, i, i));
  for (std::int64_t i = 0; i < 50; ++i) EXPECT_EQ(sums[static_cast<std::size_t>(i)].value(10'000), 3 * i);
}

TEST_F(Results, AServiceCoroutineAwaitsACallBackToTheClient) {
  EXPECT_EQ(Store::askClient(5).value(10'000), 11);
  std::vector<myelin::Async<std::int64_t>> answers;
  for (std::int64_t i = 0; i < 100; ++i) answers.push_back(Store::askClient(i));
  for (std::int64_t i = 0; i < 100; ++i) EXPECT_EQ(answers[static_cast<std::size_t>(i)].value(10'000), 2 * i + 1);
  auto failed = Store::failAfterAwait(3);
  ASSERT_TRUE(failed.wait(10'000));
  EXPECT_TRUE(failed.isError());
  EXPECT_NE(failed.errorMessage().find("failed after the await with 6"), std::string::npos) << failed.errorMessage();
}

}  // namespace
}  // namespace myelin_test
