// RemoteThread and RemoteThreadPool over a real service process
// (docs/objects.md §7): a pinned scope runs on one service thread of its
// own, keeping its thread-local state and its order; a pool scope runs its
// calls in parallel, never more at once than it allows, and wait() covers
// fire-and-forget calls.
#include <gtest/gtest.h>
#include <myelin/myelin.h>

#include <algorithm>
#include <chrono>
#include <latch>
#include <numeric>
#include <set>
#include <thread>
#include <vector>

#include "service_fixture.h"
#include "threads.h"
#include "threads_client.h"

std::int64_t thr::Probe::ping(std::int64_t v) {
  if (v < 0) std::this_thread::sleep_for(std::chrono::milliseconds(30));
  return v + 1;
}

namespace myelin_test {
namespace {

using thr::Worker;
using RemoteThreads = ServiceTest;

std::vector<std::int64_t> upTo(std::int64_t n) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

TEST_F(RemoteThreads, ARemoteThreadRunsEveryCallOnOneThreadOfItsOwn) {
  std::uint64_t first = 0;
  {
    myelin::RemoteThread pinned;
    first = Worker::threadId();
    for (std::int64_t i = 1; i <= 50; ++i) {
      ASSERT_EQ(Worker::bumpThreadLocal(), i) << "the thread's local state carries over";
      ASSERT_EQ(Worker::threadId(), first);
    }
  }
  myelin::RemoteThread again;
  EXPECT_EQ(Worker::bumpThreadLocal(), 1) << "a new scope gets a fresh thread";
}

TEST_F(RemoteThreads, ARemoteThreadKeepsTheOrderOfEveryKindOfCall) {
  Worker::clearRecorded();
  {
    myelin::RemoteThread pinned;
    for (std::int64_t i = 0; i < 200; ++i) Worker::record(i);
    EXPECT_EQ(Worker::recorded(), upTo(200));
  }
  for (std::int64_t i = 200; i < 300; ++i) Worker::record(i);
  EXPECT_EQ(Worker::recorded(), upTo(300)) << "calls after the scope follow it in order";
}

TEST_F(RemoteThreads, ACallWaitingForItsCallBackKeepsTheCallsBehindItWaiting) {
  // Without a scope: while the service's call waits for our answer, only
  // its continuations may run on the lane, not the call sent after it.
  Worker::clearRecorded();
  Worker::recordAround(0);
  Worker::record(2);
  EXPECT_EQ(Worker::recorded(), upTo(3));
}

TEST_F(RemoteThreads, TheServiceMayCallBackFromARemoteThread) {
  myelin::RemoteThread pinned;
  for (std::int64_t i = 0; i < 20; ++i) ASSERT_EQ(Worker::callBack(i), i + 1);
  EXPECT_EQ(Worker::bumpThreadLocal(), 1) << "still the scope's one thread";
}

TEST_F(RemoteThreads, CallsOfAPoolMayCallBackWhileOthersRun) {
  myelin::RemoteThreadPool pool(2);
  std::vector<myelin::Async<std::int64_t>> calls;
  for (std::int64_t i = 0; i < 40; ++i) calls.push_back(Worker::callBackLater(i));
  for (std::int64_t i = 0; i < 40; ++i) ASSERT_EQ(calls[static_cast<std::size_t>(i)].value(10000), i + 1);
  EXPECT_TRUE(pool.wait(10000));
}

TEST_F(RemoteThreads, EachCallingThreadGetsItsOwnRemoteThread) {
  constexpr int kThreads = 3;
  std::vector<std::uint64_t> ids(kThreads);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  // Every scope lives until all have made their calls: a service thread
  // that ended may leave its id to the next one started.
  std::latch allCalled(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      myelin::EndpointCtx ctx(ep_);
      myelin::RemoteThread pinned;
      ids[t] = Worker::threadId();
      for (std::int64_t i = 1; i <= 20; ++i) {
        if (Worker::bumpThreadLocal() != i || Worker::threadId() != ids[t]) ++failures;
      }
      allCalled.arrive_and_wait();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(std::set<std::uint64_t>(ids.begin(), ids.end()).size(), static_cast<std::size_t>(kThreads));
}

TEST_F(RemoteThreads, APoolRunsItsCallsAtTheSameTime) {
  myelin::RemoteThreadPool pool(3);
  std::vector<myelin::Async<bool>> calls;
  for (int i = 0; i < 3; ++i) calls.push_back(Worker::rendezvous(3, 1));
  for (auto& c : calls) EXPECT_TRUE(c.value(10000)) << "three calls were inside at once";
  EXPECT_TRUE(pool.wait(10000));
}

TEST_F(RemoteThreads, APoolNeverRunsMoreCallsAtOnceThanItAllows) {
  Worker::resetPeak();
  {
    myelin::RemoteThreadPool pool(2);
    for (int i = 0; i < 12; ++i) Worker::hold(5);
    ASSERT_TRUE(pool.wait(10000));
  }
  EXPECT_LE(Worker::peakHolders(), 2);
  EXPECT_GE(Worker::peakHolders(), 1);
}

TEST_F(RemoteThreads, EveryCallAPoolRanIsCountedInTheStatistics) {
  // A pool's calls run on several service threads at once: each must still
  // count once in the connection's callsExecuted.
  const std::uint64_t before = Worker::callsExecuted();
  constexpr std::uint64_t kCalls = 20000;
  {
    myelin::RemoteThreadPool pool(4);
    for (std::uint64_t i = 0; i < kCalls; ++i) Worker::tick();
    ASSERT_TRUE(pool.wait(20000));
  }
  // Both callsExecuted() calls count themselves.
  EXPECT_EQ(Worker::callsExecuted() - before, kCalls + 1);
}

TEST_F(RemoteThreads, WaitCoversFireAndForgetCallsOfEveryQueue) {
  Worker::clearRecorded();
  myelin::RemoteThreadPool pool(4);
  for (std::int64_t i = 0; i < 50; ++i) Worker::record(i);
  pool.detachActiveQueue();
  for (std::int64_t i = 50; i < 100; ++i) Worker::record(i);
  ASSERT_TRUE(pool.waitForActiveQueueIdle(10000));
  ASSERT_TRUE(pool.wait(10000));
  auto got = Worker::recorded();
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, upTo(100)) << "every call ran once, in some order";
}

TEST_F(RemoteThreads, CallsAreInOrderAgainAfterAPool) {
  Worker::clearRecorded();
  {
    myelin::RemoteThreadPool pool(4);
    for (int i = 0; i < 20; ++i) Worker::hold(1);  // still running when the scope ends
  }
  // The pool's slot is free again: this thread may get it, and its calls
  // must run one at a time, in order, after the pool's.
  for (std::int64_t i = 0; i < 100; ++i) Worker::record(i);
  EXPECT_EQ(Worker::recorded(), upTo(100));
}

TEST_F(RemoteThreads, ScopesEndedOutOfOrderLeaveNoTrace) {
  auto outer = std::make_unique<myelin::RemoteThread>();
  auto inner = std::make_unique<myelin::RemoteThreadPool>(2);
  Worker::record(1);
  outer.reset();
  inner.reset();
  Worker::clearRecorded();
  for (std::int64_t i = 0; i < 50; ++i) Worker::record(i);
  EXPECT_EQ(Worker::recorded(), upTo(50)) << "back on the thread's ordinary lane";
}

TEST_F(RemoteThreads, APoolOfNoThreadsIsRefused) {
  EXPECT_THROW(myelin::RemoteThreadPool(0), myelin::InvalidConfigurationError);
  EXPECT_THROW(myelin::RemoteThreadPool(100000), myelin::InvalidConfigurationError);
}

}  // namespace
}  // namespace myelin_test
