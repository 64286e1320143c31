// Unit tests of Waiter, the per-thread wake-up object: a notification that
// comes before the wait is kept, deadlines end a wait, and notifyWith
// publishes its condition while holding the waiter's mutex.
#include "runtime/waiter.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

namespace myelin::detail {
namespace {

using Clock = std::chrono::steady_clock;
/// Only guards against a hang; never reached when the code is right.
constexpr auto kHangGuard = std::chrono::seconds(30);

TEST(Waiter, NotifyBeforeWaitIsNotLost) {
  Waiter w;
  w.notify();
  auto deadline = Clock::now() + kHangGuard;
  w.waitUntil(deadline);
  EXPECT_LT(Clock::now(), deadline) << "the earlier notification was lost";
  EXPECT_FALSE(w.signaled) << "the wait consumes the notification";
}

TEST(Waiter, NotifyBeforePlainWaitIsNotLost) {
  Waiter w;
  w.notify();
  w.wait();  // would block forever if the notification were lost
  EXPECT_FALSE(w.signaled);
}

TEST(Waiter, NotificationsDoNotAccumulate) {
  Waiter w;
  w.notify();
  w.notify();
  w.waitUntil(Clock::now() + kHangGuard);
  // Both notifications were consumed by one wait; the next wait runs to its deadline.
  auto deadline = Clock::now() + std::chrono::milliseconds(20);
  w.waitUntil(deadline);
  EXPECT_GE(Clock::now(), deadline);
}

TEST(Waiter, WaitUntilReturnsAtTheDeadlineWithoutANotification) {
  Waiter w;
  auto deadline = Clock::now() + std::chrono::milliseconds(20);
  w.waitUntil(deadline);
  EXPECT_GE(Clock::now(), deadline);
  EXPECT_FALSE(w.signaled);
  // A deadline in the past returns at once.
  w.waitUntil(Clock::now() - std::chrono::seconds(1));
  EXPECT_FALSE(w.signaled);
}

TEST(Waiter, NotifyFromAnotherThreadWakesAWaiter) {
  Waiter w;
  std::atomic<bool> done{false};
  std::thread t([&] {
    done = true;
    w.notify();
  });
  auto deadline = Clock::now() + kHangGuard;
  while (!done.load() && Clock::now() < deadline) w.waitUntil(deadline);
  t.join();
  EXPECT_TRUE(done.load());
  EXPECT_LT(Clock::now(), deadline);
}

TEST(Waiter, NotifyWithPublishesWhileHoldingTheMutex) {
  Waiter w;
  bool published = false;
  bool lockedDuringPublish = false;
  w.notifyWith([&] {
    // Another thread must not be able to take the mutex while we publish.
    lockedDuringPublish = std::async(std::launch::async, [&] {
                            if (!w.mu.try_lock()) return true;
                            w.mu.unlock();
                            return false;
                          }).get();
    published = true;
  });
  EXPECT_TRUE(lockedDuringPublish);
  EXPECT_TRUE(published);
  EXPECT_TRUE(w.signaled);
  // The mutex is free again afterwards.
  ASSERT_TRUE(w.mu.try_lock());
  w.mu.unlock();
}

TEST(Waiter, NotifyWithWakesAnOwnerWaitingForTheCondition) {
  Waiter w;
  bool flag = false;  // the owner's condition, guarded by w.mu
  std::thread t([&] { w.notifyWith([&] { flag = true; }); });
  auto deadline = Clock::now() + kHangGuard;
  bool seen = false;
  while (Clock::now() < deadline) {
    {
      std::lock_guard lock(w.mu);
      seen = flag;
    }
    if (seen) break;
    w.waitUntil(deadline);
  }
  t.join();
  w.barrier();
  EXPECT_TRUE(seen);
}

TEST(Waiter, BarrierWaitsForARunningNotifyWith) {
  Waiter w;
  std::atomic<bool> inPublish{false};
  std::atomic<bool> release{false};
  std::atomic<bool> publishFinished{false};
  std::thread t([&] {
    w.notifyWith([&] {
      inPublish = true;
      while (!release.load()) std::this_thread::yield();
      publishFinished = true;
    });
  });
  while (!inPublish.load()) std::this_thread::yield();
  std::atomic<bool> barrierPassed{false};
  std::atomic<bool> bStarted{false};
  std::thread b([&] {
    bStarted = true;
    w.barrier();
    barrierPassed = true;
    // barrier() can only return after the publish finished.
    EXPECT_TRUE(publishFinished.load());
  });
  while (!bStarted.load()) std::this_thread::yield();
  EXPECT_FALSE(barrierPassed.load()) << "barrier() returned while notifyWith() was still publishing";
  release = true;
  b.join();
  t.join();
  EXPECT_TRUE(barrierPassed.load());
}

}  // namespace
}  // namespace myelin::detail
