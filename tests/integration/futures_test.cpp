// Remote futures over a real service process (docs/async-and-errors.md §2):
// an AsyncRef handed from call to call keeps its value on the service (the
// bytes on the socket say so), travels once when value() asks for it, waits
// where the order of lanes requires, carries failures to where the value is
// read, and is forgotten by the service when the last handle goes.
#include <gtest/gtest.h>
#include <myelin/myelin.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "futures.h"
#include "futures_client.h"
#include "service_fixture.h"

myelin::Async<std::int64_t> fut::Tally::twice(std::int64_t v) { return 2 * v; }

namespace myelin_test {
namespace {

using fut::Image;
using fut::Studio;
using myelin::AsyncRef;
using Futures = ServiceTest;

constexpr std::int32_t kImageBytes = 256 * 1024;

/// What Studio::encode answers for the image Studio::load makes, after
/// `sharpenings` calls of sharpen by `amount`.
std::vector<std::uint8_t> expectedSummary(const std::string& name, std::int32_t bytes, int sharpenings, float amount,
                                          std::int32_t quality) {
  std::uint32_t sum = 0;
  for (std::int32_t i = 0; i < bytes; ++i) {
    auto p = static_cast<std::uint8_t>(static_cast<std::size_t>(i) * 7 + name.size());
    if (sharpenings % 2) p ^= 1;
    sum += p;
  }
  std::vector<std::uint8_t> out;
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(sum >> (8 * i)));
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(static_cast<std::uint32_t>(bytes) >> (8 * i)));
  out.push_back(static_cast<std::uint8_t>(quality));
  out.push_back(static_cast<std::uint8_t>(static_cast<float>(sharpenings) * amount * 10.0f + 0.5f));
  return out;
}

std::uint64_t bytesOnTheSocket(myelin::Endpoint& ep) {
  myelin::EndpointStats st = ep.getLocalStats();
  return st.bytesSent + st.bytesReceived;
}

TEST_F(Futures, AChainRunsOnTheServiceAndOnlyItsResultTravels) {
  ep_.getLocalStats(true);
  std::vector<std::uint8_t> summary = Studio::encode(Studio::sharpen(Studio::load("cat", kImageBytes), 0.6f), 90).value();
  EXPECT_EQ(summary, expectedSummary("cat", kImageBytes, 1, 0.6f, 90));
  // Three calls, two empty answers and one short reply; the 256 KiB image
  // never crossed the connection.
  EXPECT_LT(bytesOnTheSocket(ep_), 512u);

  // A value handed back by the service stays there too.
  summary = Studio::encode(Studio::identity(Studio::load("owl", kImageBytes)), 7).value();
  EXPECT_EQ(summary, expectedSummary("owl", kImageBytes, 0, 0.0f, 7));
  EXPECT_LT(bytesOnTheSocket(ep_), 1024u);
}

TEST_F(Futures, TheValueTravelsOnceAndOnlyWhenValueIsCalled) {
  AsyncRef<Image> dog = Studio::load("dog", kImageBytes);
  EXPECT_TRUE(dog.isRemote());
  ASSERT_TRUE(dog.wait(10000));
  EXPECT_TRUE(dog.isSuccess());
  ep_.getLocalStats(true);
  ASSERT_TRUE(dog.wait());  // waiting moves nothing
  EXPECT_EQ(bytesOnTheSocket(ep_), 0u);

  const Image& img = dog.value();
  ASSERT_EQ(img.pixels.size(), static_cast<std::size_t>(kImageBytes));
  EXPECT_EQ(img.name, "dog");
  EXPECT_EQ(img.pixels[10], static_cast<std::uint8_t>(10 * 7 + 3));
  std::uint64_t fetched = bytesOnTheSocket(ep_);
  EXPECT_GE(fetched, static_cast<std::uint64_t>(kImageBytes));
  EXPECT_LT(fetched, static_cast<std::uint64_t>(kImageBytes) + 256);

  // A copy of the handle shares the fetched value.
  AsyncRef<Image> again = dog;
  EXPECT_EQ(again.value().pixels, img.pixels);
  EXPECT_EQ(again.fetch().value().name, "dog");
  EXPECT_EQ(bytesOnTheSocket(ep_), fetched);
}

TEST_F(Futures, TheServiceWaitsForAValueThatIsCompletedLater) {
  AsyncRef<std::int64_t> late = Studio::later(20, 100);
  EXPECT_FALSE(late.isReady()) << "the service completes it 100 ms later";
  EXPECT_EQ(Studio::plus(late, AsyncRef<std::int64_t>(22)), 42);  // the second one travels inline
  EXPECT_EQ(Studio::plus(late, late), 40);
  EXPECT_EQ(late.value(), 20);
  EXPECT_EQ(Studio::plus(AsyncRef<std::int64_t>(), 5), 5) << "a default AsyncRef holds a default value";
}

TEST_F(Futures, AFailureIsReportedWhereTheValueIsRead) {
  AsyncRef<std::int64_t> bad = Studio::failing(3);
  ASSERT_TRUE(bad.wait(10000));
  EXPECT_TRUE(bad.isError());
  EXPECT_NE(bad.errorMessage().find("no value for 3"), std::string::npos) << bad.errorMessage();
  EXPECT_THROW(bad.value(), myelin::RemoteCallError);
  // Passed on, the failure is read on the service, whose method then throws.
  try {
    Studio::plus(bad, 1);
    ADD_FAILURE() << "plus of a failed value returned";
  } catch (const myelin::RemoteCallError& e) {
    EXPECT_NE(std::string(e.what()).find("no value for 3"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ep_.getState(), myelin::EndpointState::kConnected);
  EXPECT_EQ(Studio::plus(1, 2), 3);
}

TEST_F(Futures, AValuePassedOnByAnotherThreadWaitsForTheCallThatMakesIt) {
  // Made on this thread's lane, named on other threads' lanes: the service
  // must have run `later` before it reads the name, whatever the lanes do.
  for (int round = 0; round < 20; ++round) {
    AsyncRef<std::int64_t> v = Studio::later(round, round % 3);
    std::vector<std::thread> threads;
    std::atomic<int> right{0};
    for (int t = 0; t < 3; ++t) {
      threads.emplace_back([this, &right, round, t, mine = v] {
        myelin::EndpointCtx ctx(ep_);
        if (Studio::plus(mine, t) == round + t) right.fetch_add(1);
        if (mine.value() == round) right.fetch_add(1);
      });
    }
    v = AsyncRef<std::int64_t>();  // this thread's handle goes early
    for (auto& th : threads) th.join();
    EXPECT_EQ(right.load(), 6) << "round " << round;
  }
  EXPECT_TRUE(eventually([] { return Studio::valuesHeld() == 0; })) << Studio::valuesHeld();
}

TEST_F(Futures, TheServiceForgetsAValueWhenTheLastHandleGoes) {
  {
    std::vector<AsyncRef<Image>> kept;
    for (int i = 0; i < 10; ++i) kept.push_back(Studio::load("k" + std::to_string(i), 1000));
    for (int i = 0; i < 200; ++i) {
      AsyncRef<Image> passing = Studio::load("p", 1000);
      if (i % 2) Studio::encode(passing, 1).value();
    }
    EXPECT_TRUE(eventually([] { return Studio::valuesHeld() == 10; })) << Studio::valuesHeld();
    EXPECT_EQ(Studio::encode(kept[4], 2).value(), expectedSummary("k4", 1000, 0, 0.0f, 2));
  }
  EXPECT_TRUE(eventually([] { return Studio::valuesHeld() == 0; })) << Studio::valuesHeld();
}

TEST_F(Futures, AValuePassedToAnotherConnectionTravelsInline) {
  AsyncRef<Image> img = Studio::load("fox", kImageBytes);
  myelin::Endpoint other = connect();
  std::vector<std::uint8_t> summary;
  {
    myelin::EndpointCtx ctx(other);
    other.getLocalStats(true);
    summary = Studio::encode(img, 5).value();
    EXPECT_GE(other.getLocalStats().bytesSent, static_cast<std::uint64_t>(kImageBytes));
  }
  EXPECT_EQ(summary, expectedSummary("fox", kImageBytes, 0, 0.0f, 5));
  other.disconnect();
}

TEST_F(Futures, AnAsyncFrameWaitsForTheAnswersAndHearsOfFailures) {
  std::atomic<int> errors{0};
  AsyncRef<std::int64_t> slow;
  {
    myelin::AsyncFrame frame;
    frame.onError([&](const myelin::Status& s) {
      if (s.message().find("no value for 9") != std::string::npos) errors.fetch_add(1);
    });
    slow = Studio::later(5, 50);
    (void)Studio::failing(9);
    frame.cancel();  // an AsyncRef call is not ended on this side
  }
  EXPECT_TRUE(slow.isReady()) << "the frame waited for the answer";
  EXPECT_EQ(slow.value(), 5);
  EXPECT_EQ(errors.load(), 1);
}

myelin::Async<std::int64_t> sumOf(AsyncRef<std::int64_t> a, AsyncRef<std::int64_t> b) {
  std::int64_t x = co_await a;
  std::int64_t y = co_await b;
  co_return x + y;
}

TEST_F(Futures, ACoroutineAwaitsTheValues) {
  myelin::Async<std::int64_t> sum = sumOf(Studio::later(30, 20), Studio::later(12, 1));
  ASSERT_TRUE(sum.wait(10000));
  EXPECT_TRUE(sum.isSuccess()) << static_cast<int>(sum.error()) << " " << sum.errorMessage();
  EXPECT_EQ(sum.value(), 42);
}


TEST_F(Futures, AValueCompletedByACallbackOnTheLaneIsWaitedForWithoutHanging) {
  // viaClient completes its value when the client's answer to Tally::twice
  // comes back: that callback is queued on the lane behind plus(), which
  // waits for the value.
  myelin::CallTimeout limit(10000);
  EXPECT_EQ(Studio::plus(Studio::viaClient(5), 1), 11);
  EXPECT_FALSE(limit.isSyncRequestTimedOut());
}

TEST_F(Futures, AFailedValueLeavesTheEndpointIdle) {
  AsyncRef<std::int64_t> bad = Studio::failing(4);
  EXPECT_THROW(bad.value(), myelin::RemoteCallError);
  EXPECT_TRUE(ep_.waitForIdle(5000)) << "every call and callback is done";
}

TEST_F(Futures, ACallThatWasNeverSentDoesNotKeepTheValue) {
  {
    AsyncRef<std::int64_t> v = Studio::later(1, 0);
    ASSERT_TRUE(v.wait(10000));
    myelin::CallTimeout none(0);  // the call below runs out before it is sent
    EXPECT_THROW(Studio::plus(v, 1), myelin::TimeoutError);
  }
  EXPECT_TRUE(eventually([] { return Studio::valuesHeld() == 0; })) << Studio::valuesHeld();
}

TEST_F(Futures, CancelingOneFetchLeavesTheValueToTheOtherHandles) {
  AsyncRef<Image> img = Studio::load("elk", 1000);
  myelin::Async<Image> f = img.fetch();
  EXPECT_FALSE(f.cancel()) << "a shared fetch is not canceled";
  EXPECT_EQ(img.value().name, "elk");
}

TEST_F(Futures, ValueOnAnotherThreadKeepsItsTimeout) {
  AsyncRef<std::int64_t> slow = Studio::later(6, 3000);
  std::thread other([&] {
    myelin::EndpointCtx ctx(ep_);
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_THROW(slow.value(100), myelin::TimeoutError);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(2000));
    EXPECT_EQ(slow.value(), 6);
  });
  other.join();
}

TEST_F(Futures, AValueThrottleCountsAsyncRefCallsAndFetchesAlike) {
  myelin::EndpointConfig cfg;
  cfg.asyncValueThrottle = 4;
  myelin::Endpoint throttled =
      myelin::ConnectionInfo().setConnectAddress(service_->address()).setConfig(cfg).connect();
  myelin::EndpointCtx ctx(throttled);
  for (int i = 0; i < 20; ++i) {
    AsyncRef<std::int64_t> v = Studio::later(i, 0);
    EXPECT_EQ(v.value(5000), i);
  }
  std::atomic<bool> done{false};
  std::thread watchdog([&] {
    for (int i = 0; i < 500 && !done.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!done.load()) throttled.disconnect();  // unblocks a call stuck at the throttle
  });
  EXPECT_EQ(Studio::encode(Studio::load("ant", 10), 3).value(5000), expectedSummary("ant", 10, 0, 0.0f, 3));
  done.store(true);
  watchdog.join();
  EXPECT_TRUE(throttled.isConnected()) << "the call was held at the throttle";
}

TEST(AsyncRefLocal, AnEmptyHandleHoldsADefaultValueAndCannotBeCompleted) {
  AsyncRef<std::int64_t> empty;
  EXPECT_TRUE(empty.isReady());
  EXPECT_EQ(empty.value(), 0);
  EXPECT_THROW(empty.setValue(3), std::logic_error);
  myelin::Async<std::int64_t> later;
  AsyncRef<std::int64_t> pending(later);
  EXPECT_FALSE(pending.isReady());
  EXPECT_TRUE(pending.setValue(3));
  EXPECT_EQ(later.value(), 3) << "copies share the value";
}

}  // namespace
}  // namespace myelin_test
