// Unit tests of Waiter, the per-thread wake-up object: a notification that
// comes before the wait is kept, deadlines end a wait, notifyWith publishes
// its condition while holding the waiter's mutex, and a wait that polls
// before it sleeps sees what arrives meanwhile without sleeping; a reader's
// polling (AdaptiveSpin) lengthens while its waits are short and its work
// between them long, and falls back once the waits are long or the work
// short.
#include "runtime/waiter.h"

#include "myelin/config.h"
#include "myelin/errors.h"

#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

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

/// A connected pair of local sockets: what is written to `in` is readable
/// on `out`.
struct SocketPair {
  int out = -1;
  int in = -1;
  SocketPair() {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0) {
      out = fds[0];
      in = fds[1];
    }
  }
  ~SocketPair() {
    ::close(out);
    ::close(in);
  }
};

long voluntarySwitches() {
  rusage u{};
  ::getrusage(RUSAGE_THREAD, &u);
  return u.ru_nvcsw;
}

// Bytes that come while the waiter polls before sleeping are seen without
// the thread ever blocking (no voluntary context switch): that is what the
// spin is for. A thread can also block for reasons of its own (a page fault
// that waits for a kernel lock, a sanitizer runtime's internal mutex), so
// the test tries up to five times: without the spin every try blocks in
// poll(), with it one try without a switch is enough.
TEST(Waiter, SpinningSeesWhatArrivesWithoutSleeping) {
  SocketPair sp;
  ASSERT_GE(sp.out, 0);
  Waiter w;
  std::vector<long> switches;
  for (int attempt = 0; attempt < 5; ++attempt) {
    std::atomic<bool> spinning{false};
    std::thread writer([&] {
      while (!spinning.load()) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      char c = 'x';
      EXPECT_EQ(::write(sp.in, &c, 1), 1);
    });
    const long before = voluntarySwitches();
    spinning = true;
    // The spin (30 s) outlasts the writer by far; the wait itself has no limit.
    const short events = w.waitOrReady(sp.out, POLLIN, -1, 30'000'000);
    const long after = voluntarySwitches();
    writer.join();
    ASSERT_TRUE(events & POLLIN);
    char c = 0;
    ASSERT_EQ(::read(sp.out, &c, 1), 1);
    ASSERT_EQ(c, 'x');
    switches.push_back(after - before);
    if (after == before) return;
  }
  std::string seen;
  for (long s : switches) seen += std::to_string(s) + " ";
  ADD_FAILURE() << "the waiter slept in every try although the bytes came while it polled; "
                << "voluntary switches per try: " << seen;
}

// Without bytes, a spin ends in the ordinary wait: its timeout and a
// notification both still end it.
TEST(Waiter, SpinningStillEndsAtTheTimeoutOrANotification) {
  SocketPair sp;
  ASSERT_GE(sp.out, 0);
  Waiter w;
  EXPECT_EQ(w.waitOrReady(sp.out, POLLIN, 5, 100), 0);  // 100 us of polling, then 5 ms asleep

  std::thread notifier([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    w.notify();
  });
  auto deadline = Clock::now() + kHangGuard;
  EXPECT_EQ(w.waitOrReady(sp.out, POLLIN, static_cast<int>(std::chrono::milliseconds(kHangGuard).count()), 1000), 0);
  EXPECT_LT(Clock::now(), deadline) << "the notification did not end the wait";
  notifier.join();
  EXPECT_FALSE(w.signaled) << "the wait consumes the notification";
}

TEST(AdaptiveSpin, StartsAtTheBaseAndFollowsShortWaitsBetweenLongWork) {
  AdaptiveSpin s(50, 250);
  EXPECT_EQ(s.spinUs(), 50u) << "no waits seen: pollSpinUs";
  for (int i = 0; i < 100; ++i) {  // batches: 150 us of work, then the peer answers in 100 us
    s.noteWork(150'000);
    s.noteWait(100'000);
  }
  EXPECT_NEAR(static_cast<double>(s.averageWaitNs()), 100'000.0, 1'000.0);
  EXPECT_NEAR(static_cast<double>(s.averageWorkNs()), 150'000.0, 1'000.0);
  EXPECT_EQ(s.spinUs(), 199u) << "twice the average wait (which converges from below)";
  for (int i = 0; i < 100; ++i) s.noteWork(60'000);
  EXPECT_EQ(s.spinUs(), 120u) << "twice the average work, when that is shorter (from above)";
  for (int i = 0; i < 100; ++i) s.noteWait(10'000);
  EXPECT_EQ(s.spinUs(), 50u) << "never below pollSpinUs";
  for (int i = 0; i < 100; ++i) {
    s.noteWork(400'000);
    s.noteWait(200'000);
  }
  EXPECT_EQ(s.spinUs(), 250u) << "never above pollSpinMaxUs";
}

TEST(AdaptiveSpin, SingleCallsAFewHundredMicrosecondsApartKeepTheBase) {
  // 5,000 calls/s, one per read, each a few us of work: the waits are short
  // enough to adapt to, but polling 400 us to save a wake-up for 5 us of
  // work would keep a CPU busy for little.
  AdaptiveSpin s(50, 250);
  for (int i = 0; i < 100; ++i) {
    s.noteWork(5'000);
    s.noteWait(195'000);
  }
  EXPECT_LT(s.averageWaitNs(), 250'000);
  EXPECT_EQ(s.spinUs(), 50u);
}

TEST(AdaptiveSpin, ClockReadingsAroundEachWaitSplitWorkFromWaiting) {
  AdaptiveSpin s(50, 250);
  std::int64_t t = 1'000'000'000;
  s.waitStarts(t);  // the first wait: no work before it to count
  EXPECT_EQ(s.averageWorkNs(), 0);
  s.waitEnds(t += 80'000);
  EXPECT_EQ(s.averageWaitNs(), 10'000) << "80 us, weighted 1/8";
  s.waitStarts(t += 160'000);
  EXPECT_EQ(s.averageWorkNs(), 20'000) << "160 us of work, weighted 1/8";
  s.waitEnds(t += 80'000);
  EXPECT_EQ(s.averageWaitNs(), 18'750);
  // A caller watched the socket meanwhile: that span is neither.
  s.interrupt();
  s.waitStarts(t += 3'000'000);
  EXPECT_EQ(s.averageWorkNs(), 20'000) << "the span after interrupt() is not work";
  s.waitEnds(t += 80'000);
  s.waitStarts(t += 160'000);
  EXPECT_EQ(s.averageWorkNs(), 37'500) << "counting resumes with the next wait";
}

TEST(AdaptiveSpin, LongWaitsFallBackToTheBaseAndShortOnesComeBackQuickly) {
  AdaptiveSpin s(50, 250);
  for (int i = 0; i < 100; ++i) {
    s.noteWork(200'000);
    s.noteWait(100'000);
  }
  ASSERT_GT(s.spinUs(), 50u);
  // An idle endpoint: waits of seconds count as twice the ceiling, so
  // polling drops to the base after a few of them...
  int waitsToDrop = 0;
  while (s.spinUs() > 50u) {
    s.noteWait(5'000'000'000);
    ASSERT_LT(++waitsToDrop, 20);
  }
  EXPECT_GE(waitsToDrop, 3);
  EXPECT_LE(waitsToDrop, 5);
  // A long idle spell: the average saturates at the cap on a gap.
  for (int i = 0; i < 200; ++i) s.noteWait(5'000'000'000);
  EXPECT_GE(s.averageWaitNs(), 499'000);
  EXPECT_LE(s.averageWaitNs(), 500'000) << "an idle gap counts as at most 2 * pollSpinMaxUs";
  // ...and once calls come again, a few short waits raise it again (from
  // 500 us, waits of 20 us bring the 1/8 average below 250 us in six).
  int waitsToRise = 0;
  while (s.spinUs() <= 50u) {
    s.noteWork(200'000);
    s.noteWait(20'000);
    ASSERT_LT(++waitsToRise, 40);
  }
  EXPECT_GE(waitsToRise, 5);
  EXPECT_LE(waitsToRise, 7);
  EXPECT_EQ(s.spinUs(), 250u);
  // Work is capped like a wait: one callback that ran for a second does not
  // hold the window open once the work is short again.
  s.noteWork(1'000'000'000);
  EXPECT_LE(s.averageWorkNs(), 500'000);
  int worksToDrop = 0;
  while (s.spinUs() > 50u) {
    s.noteWork(2'000);
    ASSERT_LT(++worksToDrop, 40);
  }
  EXPECT_LE(worksToDrop, 20);
}

TEST(AdaptiveSpin, AWaitOfNegativeLengthCountsAsNone) {
  AdaptiveSpin s(50, 250);
  s.noteWait(-5'000'000);  // a clock read out of order
  s.noteWork(-5'000'000);
  EXPECT_EQ(s.averageWaitNs(), 0);
  EXPECT_EQ(s.averageWorkNs(), 0);
  EXPECT_EQ(s.spinUs(), 50u);
}

TEST(AdaptiveSpin, ZeroBaseNeverPollsAndASmallCeilingKeepsTheBase) {
  AdaptiveSpin none(0, 250);
  for (int i = 0; i < 50; ++i) {
    none.noteWork(100'000);
    none.noteWait(10'000);
  }
  EXPECT_EQ(none.spinUs(), 0u) << "pollSpinUs 0 sleeps at once";
  AdaptiveSpin fixed(50, 20);
  for (int i = 0; i < 50; ++i) {
    fixed.noteWork(100'000);
    fixed.noteWait(10'000);
  }
  EXPECT_EQ(fixed.spinUs(), 50u) << "a ceiling below pollSpinUs acts as pollSpinUs";
}

TEST(AdaptiveSpin, AnEndpointConfigWithACeilingAboveOneSecondIsRefused) {
  EndpointConfig c;
  c.pollSpinMaxUs = 1'000'001;
  EXPECT_THROW(c.validate(), InvalidConfigurationError);
  c.pollSpinMaxUs = 1'000'000;
  EXPECT_NO_THROW(c.validate());
  c.pollSpinMaxUs = 0;
  EXPECT_NO_THROW(c.validate());
}

}  // namespace
}  // namespace myelin::detail
