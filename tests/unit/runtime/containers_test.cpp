// The runtime's allocation-free containers: PendingTable (pending calls by
// sequence number), RingQueue (FIFO that keeps its storage) and
// InlineCallback (callbacks with small captures kept in place).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "failing_allocations.h"
#include "myelin/detail/inline_callback.h"
#include "runtime/pending_table.h"
#include "runtime/ring_queue.h"

namespace myelin::detail {
namespace {

TEST(PendingTable, TakesWhatWasInsertedOnceInAnyOrder) {
  PendingTable<int> t;
  for (std::uint32_t s = 0; s < 10; ++s) t.insert(s, static_cast<int>(s) * 10);
  EXPECT_EQ(t.size(), 10u);
  int v = -1;
  EXPECT_TRUE(t.take(7, v));
  EXPECT_EQ(v, 70);
  EXPECT_FALSE(t.take(7, v)) << "a reply to a call already answered";
  EXPECT_FALSE(t.take(10, v)) << "a reply to a call never made";
  for (std::uint32_t s : {3u, 0u, 9u, 1u, 2u, 4u, 5u, 6u, 8u}) {
    ASSERT_TRUE(t.take(s, v));
    EXPECT_EQ(v, static_cast<int>(s) * 10);
  }
  EXPECT_TRUE(t.empty());
}

TEST(PendingTable, GrowsWithTheCallsInFlightThenKeepsItsSize) {
  PendingTable<int> t;
  for (std::uint32_t s = 0; s < 1000; ++s) t.insert(s, 1);
  EXPECT_EQ(t.ringSlots(), 1024u);
  EXPECT_EQ(t.asideCount(), 0u);
  int v;
  for (std::uint32_t s = 0; s < 1000; ++s) ASSERT_TRUE(t.take(s, v));
  // A steady window of 1000 calls no longer grows it.
  for (std::uint32_t s = 1000; s < 100000; ++s) {
    t.insert(s, 1);
    if (s >= 1999) {
      ASSERT_TRUE(t.take(s - 999, v));
    }
  }
  EXPECT_EQ(t.ringSlots(), 1024u);
}

TEST(PendingTable, DrainsInRunsOfAFixedSizeWithoutAllocating) {
  // What a close does: every entry taken, in runs of 32, with nothing
  // allocated (failing_allocations), including an entry that moved aside
  // and entries added behind the drain's place between runs.
  PendingTable<std::uint32_t> t;
  t.insert(0, 0);  // pending long enough to move aside
  std::uint32_t v;
  std::uint32_t s = 1;
  for (; s < 2 * PendingTable<std::uint32_t>::kMaxSlots; ++s) {
    t.insert(s, s);
    ASSERT_TRUE(t.take(s, v));
  }
  ASSERT_EQ(t.asideCount(), 1u);
  ASSERT_EQ(t.ringSlots(), PendingTable<std::uint32_t>::kMaxSlots);
  // The block ends 1,500 slots past the ring's end: the drain takes the
  // start of the ring first, and the entries added between runs land in
  // slots it has passed.
  s += PendingTable<std::uint32_t>::kMaxSlots - 1500 - (s % PendingTable<std::uint32_t>::kMaxSlots);
  std::vector<std::uint32_t> expected{0};
  for (std::uint32_t k = 0; k < 3000; ++k, ++s) {
    t.insert(s, s);
    expected.push_back(s);
  }
  std::vector<std::uint32_t> got;
  got.reserve(4000);
  std::size_t from = 0;
  int behind = 0;
  for (int run = 0;; ++run) {
    ASSERT_LT(run, 1000);
    std::array<std::uint32_t, 32> taken{};
    std::size_t n = 0;
    failing_allocations::failAfter(0);
    const std::size_t k = t.drainSome(taken.size(), from, [&](std::uint32_t&& x) { taken[n++] = x; });
    failing_allocations::stop();
    ASSERT_EQ(k, n);
    ASSERT_LE(n, taken.size());
    got.insert(got.end(), taken.begin(), taken.begin() + static_cast<std::ptrdiff_t>(n));
    if (n == 0) break;
    if (run % 10 == 5) {  // a few more, some behind the drain's place
      if (s % PendingTable<std::uint32_t>::kMaxSlots < from) ++behind;
      t.insert(s, s);
      expected.push_back(s++);
    }
  }
  EXPECT_GT(behind, 0) << "no entry was added behind the drain's place";
  EXPECT_TRUE(t.empty());
  std::sort(got.begin(), got.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(got, expected);
}

TEST(PendingTable, ALongPendingCallMovesAsideInsteadOfGrowingTheRingForever) {
  PendingTable<int> t;
  t.insert(0, 42);  // never answered for a long time
  int v;
  const std::uint32_t n = 10 * PendingTable<int>::kMaxSlots;
  for (std::uint32_t s = 1; s < n; ++s) {
    t.insert(s, 1);
    ASSERT_TRUE(t.take(s, v));
  }
  EXPECT_LE(t.ringSlots(), PendingTable<int>::kMaxSlots);
  EXPECT_EQ(t.asideCount(), 1u);
  ASSERT_TRUE(t.take(0, v));
  EXPECT_EQ(v, 42);
  EXPECT_TRUE(t.empty());
}

TEST(PendingTable, MatchesAMapUnderRandomCompletionOrderAcrossSequenceWrap) {
  PendingTable<std::uint64_t> t;
  std::map<std::uint32_t, std::uint64_t> model;
  std::mt19937 rng(7);
  std::uint32_t next = 0xffffffffu - 5000;  // wraps during the run
  std::uint64_t v;
  for (int step = 0; step < 200000; ++step) {
    if (model.size() < 3000 && (model.empty() || rng() % 2)) {
      t.insert(next, next * 3ull);
      model[next] = next * 3ull;
      ++next;
    } else {
      auto it = model.begin();
      std::advance(it, static_cast<long>(rng() % model.size()));
      ASSERT_TRUE(t.take(it->first, v));
      EXPECT_EQ(v, it->second);
      model.erase(it);
    }
    ASSERT_EQ(t.size(), model.size());
  }
  std::size_t drained = 0;
  std::size_t from = 0;
  while (t.drainSome(64, from, [&](std::uint64_t&& x) {
    ++drained;
    EXPECT_EQ(x % 3, 0u);
  })) {
  }
  EXPECT_EQ(drained, model.size());
  EXPECT_TRUE(t.empty());
  EXPECT_FALSE(t.take(next - 1, v));
}

TEST(RingQueue, IsFifoAcrossGrowthAndWrap) {
  RingQueue<std::string> q;
  int pushed = 0, popped = 0;
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < round; ++i) q.push_back(std::to_string(pushed++));
    for (int i = 0; i < round / 2 + 1 && !q.empty(); ++i) {
      ASSERT_EQ(q.front(), std::to_string(popped++));
      q.pop_front();
    }
    ASSERT_EQ(q.size(), static_cast<std::size_t>(pushed - popped));
    for (std::size_t i = 0; i < q.size(); ++i) ASSERT_EQ(q[i], std::to_string(popped + static_cast<int>(i)));
  }
  q.clear();
  EXPECT_TRUE(q.empty());
}

TEST(RingQueue, ReleasesWhatItPops) {
  RingQueue<std::shared_ptr<int>> q;
  auto p = std::make_shared<int>(1);
  q.push_back(p);
  EXPECT_EQ(p.use_count(), 2);
  q.pop_front();
  EXPECT_EQ(p.use_count(), 1) << "a popped slot must not keep its value alive";
}

TEST(InlineCallback, RunsSmallAndLargeCallablesAndDestroysThemOnce) {
  auto token = std::make_shared<int>(0);
  int calls = 0;
  {
    InlineCallback small([token, &calls] { ++calls; });
    std::array<char, 200> big{};
    InlineCallback large([token, big, &calls] { calls += 1 + big[0]; });
    EXPECT_EQ(token.use_count(), 3);
    small();
    large();
    InlineCallback moved(std::move(large));
    EXPECT_FALSE(static_cast<bool>(large));  // NOLINT(bugprone-use-after-move): checking the moved-from state
    moved();
    InlineCallback assigned;
    assigned = std::move(small);
    assigned();
    EXPECT_EQ(token.use_count(), 3);
  }
  EXPECT_EQ(calls, 4);
  EXPECT_EQ(token.use_count(), 1) << "every capture destroyed exactly once";
}

TEST(InlineCallback, ResetEmptiesIt) {
  auto token = std::make_shared<int>(0);
  InlineCallback cb([token] {});
  cb.reset();
  EXPECT_FALSE(static_cast<bool>(cb));
  EXPECT_EQ(token.use_count(), 1);
}

}  // namespace
}  // namespace myelin::detail
