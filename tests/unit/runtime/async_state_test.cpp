// Unit tests of myelin::Async<T> and its shared state without an endpoint:
// completing once, callbacks before and after completion, errors, waiting
// across threads, shared copies and freeing the state.
#include "myelin/async.h"
#include "myelin/errors.h"

#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace myelin {
namespace {

/// A value type that counts its constructions and destructions, to see when
/// the state holding it is freed.
struct Tracked {
  static inline std::atomic<int> created{0};
  static inline std::atomic<int> destroyed{0};
  static int live() { return created.load() - destroyed.load(); }

  int v = 0;
  Tracked() { ++created; }
  explicit Tracked(int x) : v(x) { ++created; }
  Tracked(const Tracked& o) : v(o.v) { ++created; }
  Tracked(Tracked&& o) noexcept : v(o.v) { ++created; }
  Tracked& operator=(const Tracked&) = default;
  ~Tracked() { ++destroyed; }
};

TEST(Async, ReadyConstructionHoldsTheValue) {
  Async<int> a(5);
  EXPECT_TRUE(a.isReady());
  EXPECT_TRUE(a.isSuccess());
  EXPECT_FALSE(a.isError());
  EXPECT_EQ(a.error(), AsyncError::kNone);
  EXPECT_TRUE(a.errorMessage().empty());
  EXPECT_TRUE(a.wait(0));
  EXPECT_EQ(a.value(), 5);
  EXPECT_EQ(a.value(0), 5);
  EXPECT_FALSE(a.setValue(6));
  EXPECT_FALSE(a.setError("late"));
  EXPECT_EQ(a.value(), 5);
  EXPECT_TRUE(a.isSuccess());
}

TEST(Async, DefaultConstructedIsPending) {
  Async<int> a;
  EXPECT_FALSE(a.isReady());
  EXPECT_FALSE(a.isSuccess());
  EXPECT_FALSE(a.isError());
  EXPECT_EQ(a.error(), AsyncError::kNone);
}

TEST(Async, SetValueCompletesExactlyOnce) {
  Async<std::string> a;
  EXPECT_TRUE(a.setValue("first"));
  EXPECT_FALSE(a.setValue("second"));
  EXPECT_FALSE(a.setError("too late"));
  EXPECT_TRUE(a.isSuccess());
  EXPECT_FALSE(a.isError());
  EXPECT_EQ(a.error(), AsyncError::kNone);
  EXPECT_EQ(a.value(), "first");
}

TEST(Async, SetErrorCompletesExactlyOnce) {
  Async<std::string> a;
  EXPECT_TRUE(a.setError("boom"));
  EXPECT_FALSE(a.setError("again"));
  EXPECT_FALSE(a.setValue("value after error"));
  EXPECT_TRUE(a.isReady());
  EXPECT_TRUE(a.isError());
  EXPECT_FALSE(a.isSuccess());
  EXPECT_EQ(a.error(), AsyncError::kRemoteError);
  EXPECT_EQ(a.errorMessage(), "boom");
  try {
    a.value();
    ADD_FAILURE() << "value() of an error state returned";
  } catch (const RemoteCallError& e) {
    EXPECT_STREQ(e.what(), "boom");
  }
}

TEST(Async, ConnectionClosedStateThrowsConnectionClosedError) {
  Async<int> a;
  EXPECT_TRUE(a.state()->completeWithError(AsyncError::kConnectionClosed, "peer went away"));
  EXPECT_TRUE(a.isError());
  EXPECT_EQ(a.error(), AsyncError::kConnectionClosed);
  EXPECT_THROW(a.value(), ConnectionClosedError);
  EXPECT_FALSE(a.setValue(1));
}

TEST(Async, ValueTimesOutWhenNotReady) {
  Async<int> a;
  EXPECT_FALSE(a.wait(0));
  EXPECT_FALSE(a.wait(20));
  EXPECT_THROW(a.value(20), TimeoutError);
  EXPECT_FALSE(a.isReady());
  // Still completable afterwards.
  EXPECT_TRUE(a.setValue(3));
  EXPECT_EQ(a.value(20), 3);
}

TEST(Async, ThenBeforeCompletionRunsOnceInlineOnTheCompletingThread) {
  Async<int> a;
  int runs = 0;
  int seen = -1;
  std::thread::id ranOn;
  a.then([&] {
    ++runs;
    seen = a.value(0);
    ranOn = std::this_thread::get_id();
  });
  EXPECT_EQ(runs, 0);
  std::thread::id setter;
  std::thread t([&] {
    setter = std::this_thread::get_id();
    EXPECT_TRUE(a.setValue(9));
    // No dispatcher: the callback has run by the time setValue returns.
    EXPECT_EQ(runs, 1);
  });
  t.join();
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(seen, 9);
  EXPECT_EQ(ranOn, setter);
  EXPECT_FALSE(a.setValue(10));
  EXPECT_FALSE(a.setError("x"));
  EXPECT_EQ(runs, 1);
}

TEST(Async, ThenAfterCompletionRunsOnceImmediately) {
  Async<int> a(1);
  int runs = 0;
  std::thread::id ranOn;
  const Async<int>& self = a.then([&] {
    ++runs;
    ranOn = std::this_thread::get_id();
  });
  EXPECT_EQ(&self, &a);
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(ranOn, std::this_thread::get_id());
  EXPECT_FALSE(a.setValue(2));
  EXPECT_EQ(runs, 1);
}

TEST(Async, ThenRunsOnErrorToo) {
  Async<int> a;
  int runs = 0;
  a.then([&] {
    ++runs;
    EXPECT_TRUE(a.isError());
    EXPECT_EQ(a.errorMessage(), "bad");
  });
  EXPECT_TRUE(a.setError("bad"));
  EXPECT_EQ(runs, 1);
}

TEST(Async, CallbacksRunInRegistrationOrder) {
  Async<int> a;
  std::vector<int> order;
  a.then([&] { order.push_back(1); }).then([&] { order.push_back(2); });
  a.then([&] { order.push_back(3); });
  a.setValue(0);
  a.then([&] { order.push_back(4); });
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3, 4}));
}

TEST(Async, DispatcherReplacesInlineCallbacks) {
  struct Seen {
    int calls = 0;
    detail::AsyncStateBase* self = nullptr;
  } seen;
  Async<int> a;
  a.state()->setCallbackDispatcher(
      [](detail::AsyncStateBase* self, void* arg) {
        auto* s = static_cast<Seen*>(arg);
        ++s->calls;
        s->self = self;
      },
      &seen);
  int runs = 0;
  a.then([&] { ++runs; });
  EXPECT_TRUE(a.setValue(4));
  EXPECT_EQ(seen.calls, 1);
  EXPECT_EQ(seen.self, a.state());
  EXPECT_EQ(runs, 0);  // the dispatcher decides when callbacks run
  a.state()->runCallbacks();
  EXPECT_EQ(runs, 1);
  // Once released, later callbacks run at once.
  a.then([&] { ++runs; });
  EXPECT_EQ(runs, 2);
  EXPECT_FALSE(a.setValue(5));
  EXPECT_EQ(seen.calls, 1);
}

TEST(Async, WaitInOneThreadIsWokenBySetValueInAnother) {
  Async<int> a;
  std::atomic<bool> started{false};
  bool ready = false;
  int got = 0;
  std::thread waiter([&, a] {
    started = true;
    ready = a.wait(30000);  // generous: only guards against a hang
    if (ready) got = a.value(0);
  });
  std::thread setter([&, a]() mutable {
    while (!started.load()) std::this_thread::yield();
    EXPECT_TRUE(a.setValue(42));
  });
  setter.join();
  waiter.join();
  EXPECT_TRUE(ready);
  EXPECT_EQ(got, 42);
}

TEST(Async, ManyWaitersAreAllWoken) {
  Async<int> a;
  constexpr int kThreads = 4;
  std::atomic<int> started{0};
  std::atomic<int> woke{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < kThreads; ++i) {
    ts.emplace_back([&, a] {
      ++started;
      if (a.wait(30000) && a.value(0) == 7) ++woke;
    });
  }
  while (started.load() < kThreads) std::this_thread::yield();
  EXPECT_TRUE(a.setValue(7));
  for (auto& t : ts) t.join();
  EXPECT_EQ(woke.load(), kThreads);
}

TEST(Async, ConcurrentSetValueHasExactlyOneWinnerAndKeepsItsValue) {
  for (int round = 0; round < 200; ++round) {
    Async<std::string> a;
    std::atomic<int> go{0};
    bool won[2] = {false, false};
    std::thread t[2];
    for (int i = 0; i < 2; ++i) {
      t[i] = std::thread([&, i] {
        ++go;
        while (go.load() < 2) {
        }
        // Longer than any small-string buffer, so each value owns memory.
        won[i] = a.setValue(std::string(64, static_cast<char>('a' + i)));
      });
    }
    for (auto& th : t) th.join();
    ASSERT_NE(won[0], won[1]) << "round " << round;
    ASSERT_EQ(a.value(0), std::string(64, won[0] ? 'a' : 'b')) << "round " << round;
  }
}

TEST(Async, CallbacksRacingTheCompletionRunExactlyOnce) {
  // Registration and completion take no lock in the common case; whatever
  // the interleaving, each callback runs exactly once. (Order holds among
  // callbacks added before the completion; one added after it runs at once
  // on its own thread, possibly beside earlier ones still running.)
  for (int round = 0; round < 2000; ++round) {
    Async<int> a;
    std::atomic<int> firstRuns{0}, secondRuns{0}, thirdRuns{0};
    std::atomic<bool> go{false};
    std::thread completer([&] {
      while (!go.load()) {
      }
      a.setValue(round);
    });
    std::thread other([&, copy = a] {
      while (!go.load()) {
      }
      copy.then([&] { ++thirdRuns; });
    });
    go = true;
    a.then([&] { ++firstRuns; });
    a.then([&] { ++secondRuns; });
    completer.join();
    other.join();
    ASSERT_EQ(firstRuns.load(), 1) << "round " << round;
    ASSERT_EQ(secondRuns.load(), 1) << "round " << round;
    ASSERT_EQ(thirdRuns.load(), 1) << "round " << round;
    ASSERT_EQ(a.value(), round);
  }
}

TEST(Async, AWaiterRacingTheCompletionIsNeverLeftBehind) {
  for (int round = 0; round < 2000; ++round) {
    Async<int> a;
    std::atomic<bool> go{false};
    std::thread completer([&] {
      while (!go.load()) {
      }
      a.setValue(round);
    });
    go = true;
    ASSERT_TRUE(a.wait(10000)) << "round " << round;
    completer.join();
    ASSERT_EQ(a.value(), round);
  }
}

TEST(Async, AReleasedStateIsPooledAndPoisonedUnderASan) {
  const void* first;
  {
    Async<int> a;
    first = a.state();
  }
#if defined(__SANITIZE_ADDRESS__)
  // Pooled, not freed: ASan must still see a use after the release.
  EXPECT_TRUE(__asan_address_is_poisoned(static_cast<const char*>(first) + 16));
#endif
  Async<int> b;
  EXPECT_EQ(static_cast<const void*>(b.state()), first) << "the thread's pool hands the same block back";
  b.setValue(5);
  EXPECT_EQ(b.value(), 5);
}

TEST(Async, CopiesShareOneState) {
  Async<int> a;
  Async<int> b = a;
  Async<int> c;
  c = b;
  EXPECT_EQ(a.state(), b.state());
  EXPECT_EQ(a.state(), c.state());
  EXPECT_TRUE(c.setValue(11));
  EXPECT_TRUE(a.isReady());
  EXPECT_EQ(a.value(), 11);
  EXPECT_EQ(b.value(), 11);
  EXPECT_FALSE(a.setValue(12));
  Async<int> d(std::move(a));
  EXPECT_EQ(d.state(), b.state());
  EXPECT_EQ(d.value(), 11);
}

TEST(Async, StateIsFreedWithItsLastCopy) {
  int before = Tracked::live();
  {
    Async<Tracked> a{Tracked(1)};
    EXPECT_EQ(Tracked::live(), before + 1);
    {
      Async<Tracked> b = a;
      Async<Tracked> c;
      c = b;
      EXPECT_EQ(Tracked::live(), before + 1);  // one shared value; c's own pending state held none
    }
    EXPECT_EQ(Tracked::live(), before + 1);
    EXPECT_EQ(a.value().v, 1);
  }
  EXPECT_EQ(Tracked::live(), before);
}

TEST(Async, CallbackHoldingACopyIsReleasedAfterCompletion) {
  int before = Tracked::live();
  int runs = 0;
  {
    Async<Tracked> a;
    a.then([keep = a, &runs] {
      ++runs;
      EXPECT_EQ(keep.value(0).v, 3);
    });
    EXPECT_TRUE(a.setValue(Tracked(3)));
    EXPECT_EQ(runs, 1);
    EXPECT_EQ(Tracked::live(), before + 1);
  }
  // The callback (and its copy) went away when it ran, so the last handle
  // freed the state and its value.
  EXPECT_EQ(Tracked::live(), before);

  {
    Async<Tracked> a{Tracked(4)};
    a.then([keep = a, &runs] { ++runs; });
    EXPECT_EQ(runs, 2);
  }
  EXPECT_EQ(Tracked::live(), before);
}

TEST(Async, ACallbackTakesTheAsyncAsItsArgument) {
  int before = Tracked::live();
  int runs = 0;
  {
    Async<Tracked> a;
    const void* state = a.state();
    a.then([&](const Async<Tracked>& done) {
      ++runs;
      EXPECT_EQ(done.state(), state);
      EXPECT_TRUE(done.isSuccess());
      EXPECT_EQ(done.value(0).v, 5);
    });
    EXPECT_TRUE(a.setValue(Tracked(5)));
    EXPECT_EQ(runs, 1);
    // Registered after completion: runs at once, with the same Async.
    a.then([&](const Async<Tracked>& done) {
      ++runs;
      EXPECT_EQ(done.state(), state);
    });
    EXPECT_EQ(runs, 2);
    EXPECT_EQ(Tracked::live(), before + 1);
  }
  // The argument held no reference of its own: the last handle freed the
  // state (once: ASan reports a second free).
  EXPECT_EQ(Tracked::live(), before);
}

TEST(Async, ACallbackMayKeepACopyOfItsArgument) {
  int before = Tracked::live();
  std::optional<Async<Tracked>> kept;
  {
    Async<Tracked> a;
    a.then([&](const Async<Tracked>& done) { kept = done; });
    EXPECT_TRUE(a.setValue(Tracked(6)));
  }
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->value(0).v, 6);
  EXPECT_EQ(Tracked::live(), before + 1);
  kept.reset();
  EXPECT_EQ(Tracked::live(), before);
}

// A callback that takes the Async as its argument holds no reference of its
// own: where it runs on the thread that completes the value, or on the one
// that registers it, the handle it was registered on may be the last one,
// and the callback may drop it (replacing the handle with the next call's).
TEST(Async, ACallbackMayDropTheLastHandleWhileItRuns) {
  const int before = Tracked::live();
  int seen = 0;
  {  // registered after completion: runs inside then()
    std::optional<Async<Tracked>> cur;
    cur.emplace(Tracked(8));
    cur->then([&](const Async<Tracked>& a) {
      cur.reset();
      seen = a.value(0).v;
    });
    EXPECT_FALSE(cur.has_value());
  }
  EXPECT_EQ(seen, 8);
  EXPECT_EQ(Tracked::live(), before);
  {  // registered before: runs inside setValue(), called on that handle
    std::optional<Async<Tracked>> cur;
    cur.emplace();
    cur->then([&](const Async<Tracked>& a) {
      cur.reset();
      seen = a.value(0).v;
    });
    EXPECT_TRUE(cur->setValue(Tracked(9)));
    EXPECT_FALSE(cur.has_value());
  }
  EXPECT_EQ(seen, 9);
  EXPECT_EQ(Tracked::live(), before);
  {  // a second callback, queued behind the first
    std::optional<Async<Tracked>> cur;
    cur.emplace();
    cur->then([] {});
    cur->then([&](const Async<Tracked>& a) {
      cur.reset();
      seen = a.value(0).v;
    });
    EXPECT_TRUE(cur->setValue(Tracked(10)));
  }
  EXPECT_EQ(seen, 10);
  EXPECT_EQ(Tracked::live(), before);
}

TEST(Async, ACallbackTakingTheAsyncSeesItsError) {
  Async<int> a;
  std::string message;
  a.then([&](const Async<int>& done) {
    EXPECT_TRUE(done.isError());
    message = done.errorMessage();
  });
  EXPECT_TRUE(a.setError("no value"));
  EXPECT_EQ(message, "no value");
}

// An exception that leaves a callback goes to the UncaughtHandler wherever
// the callback runs: completing the value does not throw it, then() on a
// complete value does not throw it, and the callbacks after it still run.
TEST(Async, AnExceptionFromACallbackGoesToTheHandlerWhereverItRuns) {
  std::vector<std::string> seen;
  UncaughtHandler previous = setUncaughtHandler([&](const char* where, std::exception_ptr e) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      seen.push_back(std::string(where) + ": " + x.what());
    }
  });
  Async<int> pending;
  bool laterRan = false;
  pending.then([] { throw std::runtime_error("registered first"); });
  pending.then([&] { laterRan = true; });
  EXPECT_NO_THROW(pending.setValue(3));
  EXPECT_TRUE(laterRan);
  Async<int> ready(5);
  EXPECT_NO_THROW(ready.then([] { throw std::runtime_error("run at once"); }));
  setUncaughtHandler(std::move(previous));
  EXPECT_EQ(seen, (std::vector<std::string>{"Async callback: registered first", "Async callback: run at once"}));
}

}  // namespace
}  // namespace myelin
