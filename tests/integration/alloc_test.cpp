// Heap allocations per call in steady state, counted in both processes with
// a replaced operator new: one-way, sync and Async round trips must not
// allocate once the connection is warm (buffers, lanes and pools reused), and
// lists of structs decode into kept values (kept_values.h) without allocating.
#include <gtest/gtest.h>
#include <myelin/myelin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <tuple>

#include "alloc_probe.h"
#include "count_allocations.h"
#include "service_fixture.h"

namespace myelin_test {
namespace {

struct Counts {
  std::uint64_t client;
  std::uint64_t service;
};

Counts countsNow() {
  // Read the service's counter first: the sync call's own allocations (if
  // any) land inside the window being measured, not outside it.
  std::uint64_t service = AllocProbe::allocations();
  return {alloc_count::allocations(), service};
}

/// Steady state allocates nothing per call. A pool thread that first takes
/// part during the run (to run callbacks, or to read for a reader busy with a
/// slow call, as under the sanitizers) fills its own lists and pools once: a
/// handful of allocations. The bound is far below one per batch (the largest
/// batches here are about 1,600 calls: 125 batches in the one-way run).
constexpr std::uint64_t kOneTimeAllowance = 32;
constexpr int kRuns = 3;
bool steady(const Counts& c) { return c.client <= kOneTimeAllowance && c.service <= kOneTimeAllowance; }

void report(const char* what, int run, std::uint32_t n, const Counts& d) {
  std::printf("%s, run %d: %u calls, %llu allocations in the client (%.4f per call), %llu in the service "
              "(%.4f per call)\n",
              what, run, n, static_cast<unsigned long long>(d.client), static_cast<double>(d.client) / n,
              static_cast<unsigned long long>(d.service), static_cast<double>(d.service) / n);
}

/// Calls `run(1)`, `run(2)` … until one returns true (its counts within the
/// bound) or kRuns ran: a pool thread that first takes part in a run fills
/// its lists once (more often on a slow, shared machine or under the
/// sanitizers), while an allocation per call or per batch shows in every run.
template <class Run>
void untilWithin(Run&& run) {
  for (int r = 1; r <= kRuns && !::testing::Test::HasFatalFailure(); ++r) {
    if (run(r)) return;
  }
}

class Allocations : public ServiceTest {
 protected:

  /// Runs `body(n / 4)` to warm up, then `body(n)` counting allocations
  /// and reporting the counts, again while `within` refuses them
  /// (untilWithin). Returns the counts of the last run.
  template <class Body, class Within>
  Counts measure(const char* what, std::uint32_t n, Body&& body, Within&& within) {
    body(n / 4);
    Counts d{};
    untilWithin([&](int run) {
      Counts before = countsNow();
      body(n);
      Counts after = countsNow();
      d = {after.client - before.client, after.service - before.service};
      report(what, run, n, d);
      return within(d);
    });
    RecordProperty(std::string(what) + "_client", static_cast<int>(d.client));
    RecordProperty(std::string(what) + "_service", static_cast<int>(d.service));
    return d;
  }

};

void expectNoneInSteadyState(const Counts& c, std::uint32_t calls) {
  EXPECT_LE(c.client, kOneTimeAllowance) << "client allocations over " << calls << " calls";
  EXPECT_LE(c.service, kOneTimeAllowance) << "service allocations over " << calls << " calls";
}

TEST_F(Allocations, CounterSeesAllocations) {
  // The counter itself works in both processes (else zeros below prove nothing).
  std::uint64_t a = alloc_count::allocations();
  auto* p = new std::uint64_t(7);
  EXPECT_GT(alloc_count::allocations(), a);
  delete p;
  std::uint64_t s1 = AllocProbe::allocations();
  AllocProbe::asyncEcho({1, std::string(100, 'x')}).wait();  // a long string is a heap allocation
  EXPECT_GT(AllocProbe::allocations(), s1);
}

TEST_F(Allocations, OneWayCallsAllocateNothing) {
  std::uint64_t expected = AllocProbe::oneWaySum();
  Counts c = measure("one-way", 200000, [&](std::uint32_t n) {
    for (std::uint32_t i = 0; i < n; ++i) AllocProbe::oneWay(i);
    for (std::uint32_t i = 0; i < n; ++i) expected += i;
    // A sync call on the same thread runs after every one-way call before it.
    ASSERT_EQ(AllocProbe::oneWaySum(), expected);
  }, steady);
  expectNoneInSteadyState(c, 200000);
}

TEST_F(Allocations, SyncCallsAllocateNothing) {
  Counts c = measure("sync", 20000, [&](std::uint32_t n) {
    for (std::uint32_t i = 0; i < n; ++i) ASSERT_EQ(AllocProbe::syncEcho(i), i);
  }, steady);
  expectNoneInSteadyState(c, 20000);
}

// Windowed Async calls: each reply's callback checks it and makes the next
// call, as the round-trip benchmarks do.
class Window {
 public:
  explicit Window(std::uint32_t total) : total_(total) {}
  void start(std::uint32_t window) {
    for (std::uint32_t i = 0; i < window && i < total_; ++i) issue();
  }
  void waitDone() {
    while (done_.load() < total_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::uint32_t wrong() const { return wrong_.load(); }

 private:
  void issue() {
    std::uint32_t v = issued_.fetch_add(1);
    auto a = AllocProbe::asyncEcho({v, "Hello World"});
    a.then([this, a, v] {
      if (!a.isSuccess() || a.value().val1 != v || a.value().str != "Hello World") wrong_.fetch_add(1);
      if (issued_.load() < total_) issue();
      done_.fetch_add(1);
    });
  }
  const std::uint32_t total_;
  std::atomic<std::uint32_t> issued_{0}, done_{0}, wrong_{0};
};

TEST_F(Allocations, AsyncRoundTripsWithCallbacksAllocateNothing) {
  constexpr std::uint32_t kWindow = 128;
  std::uint32_t wrong = 0;
  {
    Window warm(25000);
    warm.start(kWindow);
    warm.waitDone();
    wrong += warm.wrong();
  }
  // The window's first calls come from this thread, whose pool of Async
  // states is empty (states are freed where their callbacks run): counted
  // from then on, while every call is made by the callback of the last.
  constexpr std::uint32_t kCalls = 100000;
  constexpr std::uint32_t n = kCalls - kWindow;
  Counts d{};
  untilWithin([&](int run) {
    Window w(kCalls);
    w.start(kWindow);
    Counts before = countsNow();
    w.waitDone();
    Counts after = countsNow();
    wrong += w.wrong();
    d = {after.client - before.client, after.service - before.service};
    report("async", run, n, d);
    return steady(d);
  });
  EXPECT_EQ(wrong, 0u);
  expectNoneInSteadyState(d, n);
}

// A list of 100 structs holds 202 heap blocks (the array, two vectors a
// struct, one long string). The service decodes the argument into the last
// call's, left in its thread's slot, so after the first call on a thread it
// allocates nothing; fresh decoding allocates 202 times a call.
TEST_F(Allocations, ListArgumentsDecodeIntoKeptValues) {
  std::vector<MediumStruct> list(100, makeMedium());
  list[7].optStr = "seven";
  list[9].vec2.push_back(std::string(40, 'x'));  // a long string: its own block
  // Each thread decodes into its own slot: a service thread that first ran
  // the method during the measured calls (a pool thread standing in for a
  // busy reader, as under the sanitizers) decodes its first list fresh,
  // 100 structs with two blocks each, the list's array and the long string.
  std::uint32_t threadsBefore = 0;
  std::uint32_t joined = 0;
  auto within = [&](const Counts& c) {
    joined = AllocProbe::countStringsThreads() - threadsBefore;
    std::printf("list argument: %u service threads ran their first call during the measured ones\n", joined);
    return c.client <= kOneTimeAllowance && c.service <= kOneTimeAllowance + joined * (100u * 2 + 2);
  };
  Counts c = measure("list argument", 2000, [&](std::uint32_t n) {
    threadsBefore = AllocProbe::countStringsThreads();
    for (std::uint32_t i = 0; i < n; ++i) ASSERT_EQ(AllocProbe::countStrings(list), 100u * 4 + 1 + 1);
  }, within);
  EXPECT_LE(c.client, kOneTimeAllowance);
  EXPECT_LE(c.service, kOneTimeAllowance + joined * (100u * 2 + 2)) << "service allocations over 2000 calls";
}

bool sameLists(const std::vector<MediumStruct>& a, const std::vector<MediumStruct>& b) {
  auto fields = [](const MediumStruct& m) {
    return std::tie(m.val1, m.val2, m.str1, m.str2, m.vec1, m.vec2, m.floatVal, m.doubleVal, m.optStr);
  };
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [&](const MediumStruct& x, const MediumStruct& y) { return fields(x) == fields(y); });
}

// A method that returns its list argument (`return list;`) copies it over
// the result it returned last on its thread, kept once that reply was sent
// (result_slot.h): the service allocates nothing per call, where a fresh
// copy made 202 blocks (the array, two vectors a struct, a long string).
// The client decodes each reply into the last one's kept value. Each call
// marks another struct (its optional engaged, with a short string), so the
// copies differ from call to call.
TEST_F(Allocations, EchoedListsCopyOverTheLastResult) {
  std::vector<MediumStruct> list(100, makeMedium());
  list[9].vec2.push_back(std::string(40, 'x'));
  std::uint32_t threadsBefore = 0;
  std::uint32_t joined = 0;
  // A service thread that ran its first echo during the measured calls
  // decodes its first argument and copies its first result fresh.
  auto within = [&](const Counts& c) {
    joined = AllocProbe::echoListThreads() - threadsBefore;
    std::printf("list echo: %u service threads ran their first call during the measured ones\n", joined);
    return c.client <= kOneTimeAllowance && c.service <= kOneTimeAllowance + joined * 2 * (100u * 2 + 3);
  };
  std::uint32_t mark = 0;
  Counts c = measure("list echo", 2000, [&](std::uint32_t n) {
    threadsBefore = AllocProbe::echoListThreads();
    for (std::uint32_t i = 0; i < n; ++i, ++mark) {
      list[mark % 100].optStr = "mark";
      myelin::Async<std::vector<MediumStruct>> a = AllocProbe::echoList(list);
      ASSERT_TRUE(sameLists(a.value(), list)) << "call " << mark;
      list[mark % 100].optStr.reset();
    }
  }, within);
  EXPECT_LE(c.client, kOneTimeAllowance);
  EXPECT_LE(c.service, kOneTimeAllowance + joined * 2 * (100u * 2 + 3)) << "service allocations over 2000 calls";
}

// A result the method still holds (it kept a copy of the Async) is not
// taken for the next copy: the kept Async keeps its value, and every reply
// is the list sent.
TEST_F(Allocations, AResultTheMethodStillHoldsStaysWithIt) {
  std::vector<MediumStruct> list(20, makeMedium());
  for (std::int32_t i = 0; i < 200; ++i) {
    for (std::size_t k = 0; k < list.size(); ++k) list[k].val1 = i * 100 + static_cast<std::int32_t>(k);
    myelin::Async<std::vector<MediumStruct>> a = AllocProbe::echoListHeld(list);
    ASSERT_TRUE(sameLists(a.value(), list)) << "call " << i;
  }
  EXPECT_TRUE(AllocProbe::heldResultsIntact()) << "an Async the service kept lost its value";
}

// The reply's value is kept when its Async ends, and the next reply of that
// type decodes into it: the client allocates nothing per call. Each reply
// marks another struct (an optional and a long string), so each decode also
// has to clear what the kept value held. The service's method builds a new
// list each time (its own allocations, not counted).
TEST_F(Allocations, ListRepliesDecodeIntoKeptValues) {
  constexpr std::uint32_t kSize = 100;
  const MediumStruct model = makeMedium();
  std::uint32_t mark = 0;
  auto check = [&](std::uint32_t n) {
    for (std::uint32_t i = 0; i < n; ++i, ++mark) {
      myelin::Async<std::vector<MediumStruct>> a = AllocProbe::mediumList(kSize, mark);
      const std::vector<MediumStruct>& got = a.value();
      ASSERT_EQ(got.size(), kSize);
      for (std::uint32_t k = 0; k < kSize; ++k) {
        ASSERT_EQ(got[k].val1, static_cast<std::int32_t>(k));
        ASSERT_EQ(got[k].str2, model.str2);
        if (k == mark % kSize) {
          ASSERT_EQ(got[k].optStr, std::optional<std::string>("mark"));
          ASSERT_EQ(got[k].vec2.size(), 3u);
          ASSERT_EQ(got[k].vec2[2], std::string(40, 'm'));
        } else {
          ASSERT_FALSE(got[k].optStr.has_value()) << "struct " << k << " of reply " << mark;
          ASSERT_EQ(got[k].vec2, model.vec2) << "struct " << k << " of reply " << mark;
        }
      }
    }
  };
  // The marked struct moves on each call: where it lands, vec2 grows and
  // takes a long string, two new blocks. The other 99 structs reuse theirs.
  // Fresh decoding makes 203 blocks a reply.
  check(100);
  std::uint64_t made = 0;
  untilWithin([&](int run) {
    std::uint64_t before = alloc_count::allocations();
    check(2000);
    made = alloc_count::allocations() - before;
    std::printf("list reply, run %d: 2000 calls, %llu allocations in the client\n", run,
                static_cast<unsigned long long>(made));
    return made <= 2 * 2000 + kOneTimeAllowance;
  });
  EXPECT_LE(made, 2 * 2000 + kOneTimeAllowance);
}

}  // namespace
}  // namespace myelin_test
