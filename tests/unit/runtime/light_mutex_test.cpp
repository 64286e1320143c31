// Unit tests of LightMutex and SpinMutex, the runtime's lane locks: each
// excludes, a thread that finds one held waits until it is given back (holds
// of a few instructions, of a millisecond and of 50 ms alike), and try_lock
// never waits.
#include "myelin/detail/light_mutex.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <type_traits>
#include <thread>
#include <vector>

namespace myelin::detail {
namespace {

template <typename M>
class LaneLock : public ::testing::Test {};
using LaneLockTypes = ::testing::Types<LightMutex, SpinMutex>;
class LaneLockNames {
 public:
  template <typename M>
  static std::string GetName(int) {
    return std::is_same_v<M, LightMutex> ? "LightMutex" : "SpinMutex";
  }
};
TYPED_TEST_SUITE(LaneLock, LaneLockTypes, LaneLockNames);

TYPED_TEST(LaneLock, TryLockTakesOnlyAFreeMutex) {
  TypeParam m;
  ASSERT_TRUE(m.try_lock());
  EXPECT_FALSE(m.try_lock());
  std::thread other([&] { EXPECT_FALSE(m.try_lock()); });
  other.join();
  m.unlock();
  EXPECT_TRUE(m.try_lock());
  m.unlock();
}

TYPED_TEST(LaneLock, ThreadsThatCollideEachGetItInTurn) {
  // Unguarded read-modify-write of a plain counter: any two threads inside
  // at once lose increments.
  TypeParam m;
  std::uint64_t counter = 0;
  constexpr int kThreads = 4, kRounds = 50'000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        std::lock_guard lock(m);
        std::uint64_t v = counter;
        if (i % 64 == 0) std::this_thread::yield();  // hold it a while now and then: others wait
        counter = v + 1;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(counter, std::uint64_t{kThreads} * kRounds);
}

TYPED_TEST(LaneLock, AThreadThatFindsItHeldWaitsUntilItIsGivenBack) {
  // 50 ms: past SpinMutex's spins and yields, into its naps.
  TypeParam m;
  m.lock();
  std::atomic<bool> started{false};
  std::atomic<bool> entered{false};
  std::thread waiter([&] {
    started.store(true);
    std::unique_lock lock(m);
    entered.store(true);
  });
  while (!started.load()) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(entered.load()) << "took a held mutex";
  m.unlock();
  waiter.join();
  EXPECT_TRUE(entered.load());
  EXPECT_TRUE(m.try_lock()) << "the waiter gave it back";
  m.unlock();
}

TYPED_TEST(LaneLock, LongHoldsStillExclude) {
  // Each hold lasts a millisecond, past SpinMutex's spins and yields: the
  // others wait in naps and must still come in one at a time.
  TypeParam m;
  std::uint64_t counter = 0;
  std::atomic<int> inside{0};
  std::atomic<bool> overlapped{false};
  constexpr int kThreads = 3, kRounds = 20;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        std::lock_guard lock(m);
        if (inside.fetch_add(1) != 0) overlapped.store(true);
        std::uint64_t v = counter;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        counter = v + 1;
        inside.fetch_sub(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(overlapped.load()) << "two threads held it at once";
  EXPECT_EQ(counter, std::uint64_t{kThreads} * kRounds);
}

}  // namespace
}  // namespace myelin::detail
