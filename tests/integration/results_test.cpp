// Status, Result, CallTimeout and coroutines over a real service process
// (docs/async-and-errors.md): application and framework errors arrive as
// values, sync calls stop waiting at their deadline without disturbing the
// connection, and coroutines await remote calls on both sides.
#include <gtest/gtest.h>
#include <myelin/myelin.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "results.h"
#include "results_client.h"
#include "runtime/deadline_timer.h"
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
  std::int64_t before = Store::sleepsDone();
  auto t0 = std::chrono::steady_clock::now();
  {
    CallTimeout t(30);
    EXPECT_THROW(Store::sleepValue(3000), myelin::TimeoutError);
    EXPECT_TRUE(t.isSyncRequestTimedOut());
  }
  {
    CallTimeout t(30);
    Store::sleepVoid(3000);  // returns: a void method cannot carry the timeout
    EXPECT_TRUE(t.isSyncRequestTimedOut());
  }
  {
    CallTimeout t(30);
    Status s = Store::sleepStatus(3000);
    EXPECT_TRUE(t.isSyncRequestTimedOut());
    ASSERT_TRUE(s.isFrameworkError());
    EXPECT_EQ(s.frameworkError(), FrameworkError::kTimedOut);
  }
  // A call that waited for its reply would take 3 s; 2 s leaves room for a
  // slow, shared machine.
  EXPECT_LT(msSince(t0), 2000) << "none of the three waited for its reply";
  // The late reply is dropped; the next call on this thread gets its own.
  EXPECT_EQ(Store::sleepValue(0), 0);
  // The second and third, queued behind the first on this thread's lane,
  // were past their deadline (and canceled) when their turn came: they did
  // not run. (The first ran if the service started it within 30 ms.)
  EXPECT_GE(Store::sleepsDone(), before + 1);
  EXPECT_LE(Store::sleepsDone(), before + 2);
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

TEST_F(Results, ACanceledCallEndsAtOnceAndTheServiceSeesIt) {
  std::int64_t seen = Store::canceledSeen();
  std::int64_t started = Store::slowStarted();
  auto v = Store::slowAsync(10'000);
  std::atomic<int> callbacks{0};
  v.then([&] { callbacks.fetch_add(1); });
  ASSERT_TRUE(eventually([&] { return Store::slowStarted() == started + 1; })) << "the call runs on the service";
  EXPECT_TRUE(v.cancel());
  EXPECT_TRUE(v.isReady());
  EXPECT_TRUE(v.isCanceled());
  EXPECT_FALSE(v.isSuccess());
  EXPECT_THROW(v.value(), myelin::CallCanceledError);
  EXPECT_FALSE(v.cancel()) << "only the first cancel counts";
  EXPECT_TRUE(eventually([&] { return Store::canceledSeen() == seen + 1; })) << "the service stopped early";
  EXPECT_TRUE(ep_.waitForIdle(10'000));
  EXPECT_EQ(callbacks.load(), 1) << "the late reply was dropped, its callback ran once";

  auto done = Store::addLater(1, 2);
  ASSERT_TRUE(done.wait(10'000));
  EXPECT_FALSE(done.cancel()) << "a completed call cannot be canceled";
  EXPECT_EQ(done.value(), 3);
  EXPECT_EQ(ep_.getState(), myelin::EndpointState::kConnected);
}

TEST_F(Results, ACallCanceledBeforeItsTurnDoesNotRun) {
  std::int64_t before = Store::addsRun();
  // Holds this thread's lane on the service, long enough for the CANCEL to
  // arrive first on a slow machine.
  Store::block(1500);
  auto v = Store::countedAdd(1, 2);
  EXPECT_TRUE(v.cancel());
  auto after = Store::countedAdd(2, 3);
  EXPECT_EQ(after.value(10'000), 5);
  EXPECT_EQ(Store::addsRun(), before + 1) << "only the call that was not canceled ran";
}

TEST_F(Results, AnAsyncCallPastItsDeadlineWhenItsTurnComesDoesNotRun) {
  std::int64_t before = Store::addsRun();
  Store::block(300);  // holds this thread's lane on the service, no deadline
  {
    CallTimeout t(50);
    auto v = Store::countedAdd(1, 2);  // the timer ends it; no CANCEL is sent
    ASSERT_TRUE(v.wait(10'000));
    EXPECT_TRUE(v.isTimedOut());
  }
  EXPECT_EQ(Store::countedAdd(2, 3).value(10'000), 5);
  EXPECT_EQ(Store::addsRun(), before + 1) << "the call's deadline travelled: the service did not run it";
}

TEST_F(Results, ASyncCallThatTimesOutCancelsItsWorkOnTheService) {
  std::int64_t seen = Store::canceledSeen();
  std::int64_t started = Store::workStarted();
  auto t0 = std::chrono::steady_clock::now();
  {
    CallTimeout t(200);
    EXPECT_THROW(Store::workUntilCanceled(10'000), myelin::TimeoutError);
  }
  if (Store::workStarted() == started) GTEST_SKIP() << "the service did not start the call within 200 ms";
  EXPECT_TRUE(eventually([&] { return Store::canceledSeen() == seen + 1; }));
  EXPECT_LT(Store::workUntilCanceled(0), 1);
  EXPECT_LT(msSince(t0), 10'000) << "the service stopped working when the caller gave up";
}

TEST_F(Results, CancelRacingTheReplyHasExactlyOneWinner) {
  int canceled = 0;
  int answered = 0;
  for (std::int64_t i = 0; i < 200; ++i) {
    // Replies that are ready at once and ones that come later.
    auto v = i % 2 ? Store::addLater(i, 1) : Store::countedAdd(i, 1);
    std::atomic<int> callbacks{0};
    v.then([&] { callbacks.fetch_add(1); });
    std::thread other([v]() mutable { v.cancel(); });
    other.join();
    ASSERT_TRUE(v.wait(10'000));
    if (v.isCanceled()) {
      ++canceled;
    } else {
      EXPECT_EQ(v.value(), i + 1);
      ++answered;
    }
    EXPECT_TRUE(eventually([&] { return callbacks.load() == 1; }));
  }
  EXPECT_EQ(canceled + answered, 200);
  EXPECT_TRUE(ep_.waitForIdle(10'000));
  EXPECT_EQ(Store::sleepValue(0), 0);
  EXPECT_EQ(ep_.getState(), myelin::EndpointState::kConnected);
}

TEST_F(Results, AnAsyncCallEndsAtItsDeadlineAndTheServiceKnowsIt) {
  {
    CallTimeout t(30);
    auto v = Store::slowAsync(2000);
    ASSERT_TRUE(v.wait(10'000));
    EXPECT_TRUE(v.isTimedOut());
    EXPECT_THROW(v.value(), myelin::TimeoutError);
  }
  {
    CallTimeout t(20);
    Store::noteTimedOutAfter(60);  // a fire-and-forget call runs regardless
  }
  EXPECT_TRUE(ep_.waitForIdle(10'000));
  EXPECT_TRUE(Store::lastTimedOut()) << "CallCtx::isTimedOut() saw the deadline pass";
  {
    CallTimeout t(10'000);
    Store::noteTimedOutAfter(0);
    EXPECT_EQ(Store::addLater(2, 2).value(10'000), 4) << "a call in time completes normally";
    std::int64_t left = Store::deadlineLeftMs();
    EXPECT_GT(left, 0);
    EXPECT_LE(left, 10'000);
  }
  EXPECT_TRUE(ep_.waitForIdle(10'000));
  EXPECT_FALSE(Store::lastTimedOut());
  EXPECT_EQ(Store::deadlineLeftMs(), -1) << "a call outside any CallTimeout has no deadline";
}

TEST_F(Results, CallsThatCompleteLongBeforeTheirDeadlineDoNotPileUp) {
  CallTimeout t(60'000);
  for (int round = 0; round < 10; ++round) {
    std::vector<myelin::Async<std::int64_t>> calls;
    for (std::int64_t i = 0; i < 500; ++i) calls.push_back(Store::countedAdd(i, 1));
    for (std::int64_t i = 0; i < 500; ++i) ASSERT_EQ(calls[static_cast<std::size_t>(i)].value(10'000), i + 1);
  }
  // 5,000 calls with a minute each: the timer swept the completed ones.
  EXPECT_LE(myelin::detail::DeadlineTimer::instance().size(), 2u * 1024u + 500u);
}

TEST_F(Results, AnAsyncFrameWaitsForItsCallsAndTheirCallbacks) {
  std::int64_t before = Store::reservedTotal();
  std::atomic<int> done{0};
  {
    myelin::AsyncFrame frame;
    for (std::int64_t i = 0; i < 50; ++i) {
      Store::addLater(i, 1).then([&] { done.fetch_add(1); });
      Store::reserve(1);
    }
  }
  EXPECT_EQ(done.load(), 50) << "every Async call completed and its callback ran before the scope ended";
  EXPECT_EQ(Store::reservedTotal(), before + 50) << "every AsyncStatus call ran before the scope ended";
}

TEST_F(Results, AsyncStatusFailuresReachTheFramesOnError) {
  std::vector<Status> seen;
  std::int64_t before = Store::reservedTotal();
  myelin::AsyncFrame frame;
  frame.onError([&](const Status& s) { seen.push_back(s); });
  Store::reserve(1);
  Store::reserve(20);  // the service answers kFull
  Store::reserve(-1);  // the service's method throws
  Store::reserve(2);
  ASSERT_TRUE(frame.wait(10'000));
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_TRUE(seen[0].is(StoreError::kFull)) << seen[0].getFormattedMessage();
  EXPECT_EQ(seen[0].message(), "cannot reserve 20");
  EXPECT_EQ(seen[1].frameworkError(), FrameworkError::kRemoteFailure);
  EXPECT_NE(seen[1].message().find("cannot reserve -1"), std::string::npos) << seen[1].message();
  EXPECT_EQ(frame.errorCount(), 2u);
  EXPECT_TRUE(frame.firstError().is(StoreError::kFull));
  EXPECT_EQ(Store::reservedTotal(), before + 3);
  EXPECT_EQ(ep_.getState(), myelin::EndpointState::kConnected) << "a failed AsyncStatus call does not fault the endpoint";
}

TEST_F(Results, RunsOfCallsOfTwoMethodsKeepTheirOwnNumbers) {
  // One burst: runs of AsyncStatus calls (numbered for their errors) and of
  // Async calls (numbered for their replies) of another method, for two
  // frames, read together. The calls behind the first of a run are queued
  // by their head alone (handleBuffered): each failure must reach its own
  // call's frame, and each reply its own call.
  struct Part {
    std::vector<Status> seen;
    std::vector<std::int64_t> failures;  // the amounts refused, in order
  };
  Part outerPart, innerPart;
  std::vector<std::pair<std::int64_t, myelin::Async<std::int64_t>>> sums;
  const std::int64_t before = Store::reservedTotal();
  std::int64_t reservedHere = 0;
  auto burst = [&](Part& part, std::int64_t from, std::int64_t to) {
    for (std::int64_t i = from; i < to; ++i) {
      if (i % 10 < 6) {
        const std::int64_t n = i % 3 == 0 ? 100 + i : 1;  // above 10: the service answers kFull
        if (n > 10) part.failures.push_back(n);
        reservedHere += n > 10 ? 0 : n;
        Store::reserve(n);
      } else {
        sums.emplace_back(i, Store::countedAdd(i, 1));
      }
    }
  };
  {
    myelin::AsyncFrame outer;
    outer.onError([&](const Status& s) { outerPart.seen.push_back(s); });
    burst(outerPart, 0, 300);
    {
      myelin::AsyncFrame inner;  // its calls follow the outer frame's in the burst
      inner.onError([&](const Status& s) { innerPart.seen.push_back(s); });
      burst(innerPart, 300, 600);
    }
    ASSERT_TRUE(outer.wait(20'000));
  }
  for (Part* part : {&outerPart, &innerPart}) {
    ASSERT_EQ(part->seen.size(), part->failures.size());
    for (std::size_t k = 0; k < part->seen.size(); ++k) {
      EXPECT_TRUE(part->seen[k].is(StoreError::kFull)) << k;
      EXPECT_EQ(part->seen[k].message(), "cannot reserve " + std::to_string(part->failures[k])) << k;
    }
  }
  for (auto& [i, sum] : sums) EXPECT_EQ(sum.value(10'000), i + 1) << i;
  EXPECT_EQ(Store::reservedTotal(), before + reservedHere);
  EXPECT_EQ(ep_.getState(), myelin::EndpointState::kConnected);
}

TEST_F(Results, FailuresGoToTheNearestFrameWithAHandler) {
  std::vector<Status> outerSeen;
  std::vector<Status> innerSeen;
  myelin::AsyncFrame outer;
  outer.onError([&](const Status& s) { outerSeen.push_back(s); });
  {
    myelin::AsyncFrame quiet;  // no handler: its failures go out
    Store::reserve(11);
  }
  {
    myelin::AsyncFrame handled;
    handled.onError([&](const Status& s) { innerSeen.push_back(s); });
    Store::reserve(12);
    auto failed = Store::failAfterAwait(3);  // an Async call that ends in error
  }
  ASSERT_TRUE(outer.wait(10'000));
  ASSERT_EQ(outerSeen.size(), 1u);
  EXPECT_EQ(outerSeen[0].message(), "cannot reserve 11");
  ASSERT_EQ(innerSeen.size(), 2u);
  EXPECT_EQ(innerSeen[0].message(), "cannot reserve 12");
  EXPECT_EQ(innerSeen[1].frameworkError(), FrameworkError::kRemoteFailure);
}

TEST_F(Results, AnAsyncStatusFailureWithNoFrameFaultsTheEndpoint) {
  Store::reserve(30);
  ASSERT_TRUE(eventually([&] { return ep_.getState() == myelin::EndpointState::kFaulted; }));
  EXPECT_NE(ep_.getError().find("no AsyncFrame"), std::string::npos) << ep_.getError();
}

TEST_F(Results, AFrameCanStopWaitingCancelAndDetach) {
  std::vector<Status> seen;
  {
    myelin::AsyncFrame frame(30);  // waits at most 30 ms at scope exit
    frame.onError([&](const Status& s) { seen.push_back(s); });
    auto slow = Store::slowAsync(5000);
    EXPECT_FALSE(frame.wait(20)) << "the slow call is still running";
    frame.cancel();
    EXPECT_TRUE(frame.isCanceled());
    EXPECT_TRUE(slow.isCanceled());
    EXPECT_TRUE(frame.wait(10'000));
  }
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].frameworkError(), FrameworkError::kCanceled);

  std::atomic<int> late{0};
  auto t0 = std::chrono::steady_clock::now();
  {
    myelin::AsyncFrame frame;
    frame.onError([&](const Status&) { late.fetch_add(1); });
    frame.detach();
    Store::block(1500);
    Store::reserve(40);
  }
  // A frame that waited would take the 1.5 s block and would have seen the
  // error by now.
  EXPECT_LT(msSince(t0), 1000) << "a detached frame does not wait";
  EXPECT_TRUE(eventually([&] { return late.load() == 1; })) << "its failures still reach onError";
}

TEST_F(Results, ManyShortFramesDoNotPileUpState) {
  std::int64_t before = Store::reservedTotal();
  std::atomic<int> errors{0};
  for (int i = 0; i < 3000; ++i) {
    myelin::AsyncFrame frame;
    frame.onError([&](const Status&) { errors.fetch_add(1); });
    frame.detach();
    Store::reserve(i % 100 == 0 ? 50 : 1);
  }
  ASSERT_TRUE(ep_.waitForIdle(10'000));
  EXPECT_EQ(Store::reservedTotal(), before + 2970);
  EXPECT_TRUE(eventually([&] { return errors.load() == 30; }));
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

TEST_F(Results, AServiceMethodForwardsTheAsyncOfItsOwnCall) {
  // The method keeps no handle of the Async it returns; the runtime still
  // completes it (with the client's reply), so it is not "abandoned".
  EXPECT_EQ(Store::forwardToClient(21).value(10'000), 42);
  std::vector<myelin::Async<std::int64_t>> answers;
  for (std::int64_t i = 0; i < 100; ++i) answers.push_back(Store::forwardToClient(i));
  for (std::int64_t i = 0; i < 100; ++i) EXPECT_EQ(answers[static_cast<std::size_t>(i)].value(10'000), 2 * i);
  EXPECT_TRUE(ep_.isConnected());
}

TEST_F(Results, AServiceMethodReportsToItsCallersFrameWhileItRuns) {
  std::vector<std::string> seen;
  {
    myelin::AsyncFrame frame;
    frame.onError([&](const Status& s) { seen.push_back(s.message()); });
    Store::warnTwice(7);
    ASSERT_TRUE(frame.wait(10000));
    EXPECT_EQ(frame.errorCount(), 2u);
    EXPECT_TRUE(frame.firstError().is(res::OtherError::kBoom));
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"first warning 7", "second warning 7"}));
  EXPECT_FALSE(Store::frameErrorFromSync()) << "only an AsyncStatus call has a frame to report to";
  EXPECT_EQ(ep_.getState(), myelin::EndpointState::kConnected);
}

TEST_F(Results, EachCallOfARunSeesItsOwnCallAlsoAfterOneThatThrew) {
  // One burst of one method: the service runs the calls behind the first
  // in one go (executeCall), its marks of the running call set once. Every
  // fifth call throws; the calls after it must still find their own call
  // (CallCtx) and report to their own frame in order: the first 200 calls
  // are made in one frame, the next 200 in a frame inside it, so a report
  // sent with another call's number reaches the wrong frame.
  std::vector<std::string> seen[2];
  std::vector<std::string> expected[2];
  auto burst = [&](int part, std::int64_t from, std::int64_t to) {
    for (std::int64_t i = from; i < to; ++i) {
      if (i % 5 == 2) {
        Store::warnTwice(-i);
        expected[part].push_back("res::Store::warnTwice failed: no warnings for " + std::to_string(-i));
      } else {
        Store::warnTwice(i);
        expected[part].push_back("first warning " + std::to_string(i));
        expected[part].push_back("second warning " + std::to_string(i));
      }
    }
  };
  {
    myelin::AsyncFrame outer;
    outer.onError([&](const Status& s) { seen[0].push_back(s.message()); });
    burst(0, 1, 201);
    {
      myelin::AsyncFrame inner;  // its calls follow the outer frame's in the burst
      inner.onError([&](const Status& s) { seen[1].push_back(s.message()); });
      burst(1, 201, 401);
    }
    ASSERT_TRUE(outer.wait(20'000));
  }
  for (int part : {0, 1}) {
    ASSERT_EQ(seen[part].size(), expected[part].size()) << part;
    for (std::size_t k = 0; k < seen[part].size(); ++k) EXPECT_EQ(seen[part][k], expected[part][k]) << part << " " << k;
  }
  EXPECT_EQ(ep_.getState(), myelin::EndpointState::kConnected);
}

TEST_F(Results, CancelingAFrameStopsItsAsyncStatusCallsOnTheService) {
  const std::int64_t startedBefore = Store::slowReservesStarted();
  const std::int64_t seenBefore = Store::frameCancelsSeen();
  std::size_t errors = 0;
  {
    myelin::AsyncFrame frame;
    frame.onError([&](const Status&) { ++errors; });
    for (int i = 0; i < 5; ++i) Store::slowReserve(5000);
    // The first call runs (and sees the cancel); the four queued behind it
    // on the lane are skipped. (Asked on another connection: this lane is
    // busy.)
    myelin::Endpoint probe = connect();
    ASSERT_TRUE(eventually([&] {
      myelin::EndpointCtx ctx(probe);
      return Store::slowReservesStarted() > startedBefore;
    }));
    frame.cancel();
    auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(frame.wait(10000));
    EXPECT_LT(msSince(t0), 3000) << "the running call (5 s) stopped early";
  }
  EXPECT_EQ(Store::slowReservesStarted() - startedBefore, 1);
  EXPECT_EQ(Store::frameCancelsSeen() - seenBefore, 1);
  EXPECT_EQ(errors, 0u) << "calls skipped for their frame's cancel are not failures";
  Store::reserve(1);  // the lane runs normally afterwards
  EXPECT_EQ(ep_.getState(), myelin::EndpointState::kConnected);
}

}  // namespace
}  // namespace myelin_test
