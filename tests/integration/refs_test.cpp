// Object references as values over a real service process (docs/objects.md
// §5): the client hands the service references to its own objects, the
// service calls them back during and after its calls, references return as
// the same objects, and an object lives until every local, remote and
// in-flight reference is gone, also when a connection drops.
#include <gtest/gtest.h>
#include <pthread.h>
#include <myelin/myelin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <thread>
#include <vector>

#include "refs.h"
#include "failing_allocations.h"
#include "refs_gen.h"  // the structs' traits, for kMayCarryRefs
#include "runtime/endpoint_impl.h"
#include "service_fixture.h"

namespace refs {
namespace {
std::atomic<std::int64_t> listenersAlive{0};
// onPoi throws at this rank, and leaves its thread's next two allocations
// to fail (-1: never); the name of the thread it threw on.
std::atomic<std::int64_t> throwAtRank{-1};
std::mutex threwOnMu;
std::string threwOn;
}  // namespace

Listener::Listener() { ++listenersAlive; }
Listener::~Listener() { --listenersAlive; }
myelin::AsyncVoid Listener::onPoi(const Poi& p) {
  ++pois_;
  if (p.rank == throwAtRank.load()) {
    std::runtime_error e("the listener refuses this point of interest, with a reason too long to store inline");
    {
      char name[16] = {};
      pthread_getname_np(pthread_self(), name, sizeof name);
      std::lock_guard lock(threwOnMu);
      threwOn = name;
    }
    // The runtime's copy of the reason fails (it reports "out of memory"
    // instead), and so does the text of its report to the service, which
    // then leaves the thread.
    failing_allocations::failFor(0, 2);
    throw e;
  }
  return {};
}
std::int64_t Listener::onValue(std::int64_t v) { return total_ += v; }
std::int64_t Listener::total() const { return total_; }
std::int64_t Listener::pois() const { return pois_; }

}  // namespace refs

namespace myelin_test {
namespace {

using myelin::ClassRef;
using refs::Guide;
using refs::Listener;

// Past maxDecodeBytes these fault the connection (they may carry references
// the receiver counts as it reads them), where plain values fail alone.
static_assert(myelin::detail::IsStruct<refs::Subscription>::value);
static_assert(myelin::detail::kMayCarryRefs<refs::Subscription>);
static_assert(myelin::detail::kMayCarryRefs<std::vector<ClassRef<Listener>>>);
static_assert(myelin::detail::kMayCarryRefs<std::map<std::string, refs::Tagged>>);
static_assert(myelin::detail::kMayCarryRefs<std::shared_ptr<refs::Subscription>>);
static_assert(myelin::detail::kMayCarryRefs<myelin::Result<std::int32_t, refs::Subscription>>);
static_assert(myelin::detail::kMayCarryRefs<std::tuple<const std::vector<std::string>&, Guide&>>);

class Refs : public ServiceTest {
 protected:
  void SetUp() override {
    ServiceTest::SetUp();
    // Both sides let go of what an earlier test's connection held once they
    // have read that connection's close, or once a call still running
    // returns: that may be after this test began, and would move the counts
    // this test compares from. Also a check that they let go.
    ASSERT_TRUE(eventually([] {
      refs::Counts c = Guide::counts();
      return c.guidesMade == c.guidesDestroyed && c.listenersHeld == 0 && refs::listenersAlive.load() == 0;
    })) << "what an earlier test's connection made is still held";
    aliveBefore_ = refs::listenersAlive.load();
  }
  std::int64_t aliveBefore_ = 0;
};

TEST_F(Refs, TheServiceCallsTheClientBackAfterItsCallReturned) {
  Listener me;
  Guide g(me, "Lisbon");
  EXPECT_EQ(g.city(), "Lisbon");
  g.streamLater(200);
  ASSERT_TRUE(eventually([&] { return me.pois() == 200; })) << me.pois() << " of 200 points arrived";
}

TEST_F(Refs, AReferenceParameterIsCalledBackDuringTheCall) {
  Listener me;
  Guide g("Rome");
  EXPECT_EQ(g.callBack(me, 5), 5);
  EXPECT_EQ(g.callBack(me, 7), 12);
  EXPECT_EQ(me.total(), 12);
}

TEST_F(Refs, AClassRefKeepsTheClientsObjectAliveForThePeer) {
  Guide g("Oslo");
  {
    auto mine = myelin::makeRef<Listener>();
    EXPECT_FALSE(mine.isRemote());
    g.hold(mine);
  }
  EXPECT_EQ(refs::listenersAlive.load(), aliveBefore_ + 1) << "the service still refers to it";
  EXPECT_EQ(g.callHeld(3), 3);
  EXPECT_EQ(g.callHeld(4), 7);
  g.dropHeld();
  EXPECT_TRUE(eventually([&] { return refs::listenersAlive.load() == aliveBefore_; }))
      << "the service's release destroys the listener";
}

TEST_F(Refs, AConnectionClosedOutOfMemoryStillLetsGoOfTheObjectsItsPeerHeld) {
  // On connections of their own, each made on a thread of its own, the
  // service holds a listener of ours: the connection's export is its only
  // reference. The thread closes its connection with its allocations
  // failing, from each one on in turn and each one alone: the goodbye may
  // not be made (disconnect() throws std::bad_alloc and is called again),
  // the reason may fall back to one that needs no memory, and the task that
  // lets go of the exports on a pool thread may not be queued. Whatever
  // failed, the listener goes, at the latest when the endpoint ends (with
  // its handles and the thread that connected it, which keeps it as its
  // default). Before, one allocation listing the exports and the task's
  // failing after it lost them: the listener lived for good.
  for (bool once : {false, true}) {
    for (int failAt = 0; failAt < 12; ++failAt) {
      const std::string round = std::string(once ? "one allocation " : "every allocation from ") +
                                std::to_string(failAt) + " failing";
      std::thread([&] {
        myelin::Endpoint other = connect();
        Guide g("Bergen");
        g.hold(myelin::makeRef<Listener>());
        EXPECT_EQ(refs::listenersAlive.load(), aliveBefore_ + 1) << round << ": the service holds it";
        if (once) {
          failing_allocations::failOnce(failAt);
        } else {
          failing_allocations::failAfter(failAt);
        }
        bool threw = false;
        try {
          other.disconnect();
        } catch (const std::bad_alloc&) {
          threw = true;
        }
        failing_allocations::stop();
        if (threw) other.disconnect();
        EXPECT_EQ(other.getState(), myelin::EndpointState::kClosed) << round;
      }).join();
      EXPECT_TRUE(eventually([&] { return refs::listenersAlive.load() == aliveBefore_; }))
          << round << ": the listener is still held";
    }
  }
  EXPECT_EQ(Guide("Turku").city(), "Turku") << "this test's own connection is untouched";
}

TEST_F(Refs, ReferencesComeBackAsTheSameObjects) {
  auto mine = myelin::makeRef<Listener>();
  Guide g("Paris");
  ClassRef<Listener> back = g.echo(mine);
  EXPECT_FALSE(back.isRemote()) << "our own object comes back as itself, not as a stand-in";
  EXPECT_EQ(back.get(), mine.get());
  EXPECT_TRUE(back == mine);
  EXPECT_EQ(g.echoLater(mine).value(10000).get(), mine.get());

  EXPECT_TRUE(g.isSelf(g)) << "the service receives its own object";
  ClassRef<Guide> self = g.self();
  ASSERT_TRUE(self);
  EXPECT_TRUE(self.isRemote());
  EXPECT_EQ(self->city(), "Paris") << "a stand-in for the service's object calls it";
  EXPECT_TRUE(g.isSelfRef(self));
  EXPECT_TRUE(self == ClassRef<Guide>(g)) << "one stand-in per object of the peer";
  EXPECT_FALSE(g.echo(nullptr)) << "the null reference travels as null";
}

TEST_F(Refs, AProxyNotConstructedYetIsConstructedWhenPassed) {
  Guide g("Bergen");
  refs::Note n;  // declares no constructor: nothing exists on the service yet
  EXPECT_EQ(g.readNote(n), "");
  n.set("fjords");
  EXPECT_EQ(g.readNote(n), "fjords") << "the service received its own Note";
}

TEST_F(Refs, AReferenceThisProgramCannotStandInForFailsOnlyThatCall) {
  Guide g("Turin");
  try {
    g.tour();
    FAIL() << "a Tour has no constructor a stand-in could be made with";
  } catch (const myelin::InvalidMessageError& e) {
    EXPECT_NE(std::string(e.what()).find("refs::Tour"), std::string::npos) << e.what();
  }
  EXPECT_EQ(g.city(), "Turin") << "the connection is fine";
}

TEST_F(Refs, AReferenceThisProgramCannotTakeStillLetsGoOfTheReferencesAfterIt) {
  // Each reply holds a Tour, which this program cannot stand in for, and
  // then a guide the service made for it alone: the guide is read and let
  // go with the failed reply, so the service destroys it. A reply read only
  // up to the Tour would leave the guide exported until the connection
  // closes.
  Guide g("Turin");
  auto base = Guide::counts();
  try {
    g.plan("Oslo");
    FAIL() << "a Tour has no constructor a stand-in could be made with";
  } catch (const myelin::InvalidMessageError& e) {
    EXPECT_NE(std::string(e.what()).find("refs::Tour"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(eventually([&] { return Guide::counts().guidesDestroyed == base.guidesDestroyed + 1; }))
      << "the guide after the Tour in the failed reply is still held";
  {
    // The failed value stays in the state until its last handle goes (its
    // references are let go on the thread that drops it, not the reader).
    auto later = g.planLater("Bergen");
    ASSERT_TRUE(later.wait(10000));
    ASSERT_TRUE(later.isError());
    EXPECT_NE(later.errorMessage().find("refs::Tour"), std::string::npos) << later.errorMessage();
  }
  EXPECT_TRUE(eventually([&] { return Guide::counts().guidesDestroyed == base.guidesDestroyed + 2; }))
      << "the guide after the Tour in the failed Async reply is still held";
  EXPECT_EQ(Guide::counts().guidesMade, base.guidesMade + 2);
  EXPECT_EQ(g.city(), "Turin") << "the connection is fine";
}

TEST_F(Refs, AReplyThatComesAfterItsCallerStoppedWaitingLetsGoOfItsReferences) {
  // The service answers each call after 1.5 s, for a caller that waits
  // 250 ms: the reply comes late, is read, and what it names is let go.
  // Dropped unread, each would stay exported until the connection closes.
  // One at a time: a call queued behind a running one would find its
  // deadline passed when its turn came, and not run.
  auto base = Guide::counts();
  {
    myelin::CallTimeout t(250);
    EXPECT_THROW(Guide::openAfter(1500, "Rome"), myelin::TimeoutError);
  }
  EXPECT_TRUE(eventually([&] { return Guide::counts().guidesMade == base.guidesMade + 1; }))
      << "the service did not run the call (its deadline passed before its turn?)";
  EXPECT_TRUE(eventually([&] { return Guide::counts().guidesDestroyed == base.guidesDestroyed + 1; }))
      << "the guide named in a late reply is still held";
  {
    myelin::CallTimeout t(250);
    EXPECT_THROW(Guide("Milan", 1500), myelin::TimeoutError);
  }
  EXPECT_TRUE(eventually([&] { return Guide::counts().guidesMade == base.guidesMade + 2; }))
      << "the service did not run the constructor (its deadline passed before its turn?)";
  EXPECT_TRUE(eventually([&] { return Guide::counts().guidesDestroyed == base.guidesDestroyed + 2; }))
      << "the guide a remote constructor made for a caller that stopped waiting is still held";
  // Our own object, which only the late reply still names: it is destroyed
  // once the reply is read (on a pool thread, where its destructor may call).
  Guide g("Genoa");
  {
    auto mine = myelin::makeRef<Listener>();
    myelin::CallTimeout t(250);
    EXPECT_THROW(g.echoAfter(1500, mine), myelin::TimeoutError);
  }
  EXPECT_TRUE(eventually([&] { return refs::listenersAlive.load() == aliveBefore_; }))
      << "the listener named in a late reply is still held";
  EXPECT_EQ(g.city(), "Genoa") << "the connection is fine";
}

TEST_F(Refs, ACallThatRunsOutOfMemoryBeforeItLeavesLeavesNothingBehind) {
  // One allocation of this thread's call fails, each in turn, from the
  // first until the call goes through without reaching it: sync and Async
  // calls that export a new object. Each failed call leaves no export, no
  // pending entry (the next call gets its own reply, not a dangling or
  // earlier one's) and a lane that still sends.
  Guide g("Siena");
  for (bool async : {false, true}) {
    for (int failAt = 0;; ++failAt) {
      ASSERT_LT(failAt, 100) << "the call never went through";
      bool ranOut = false;
      {
        auto mine = myelin::makeRef<Listener>();
        failing_allocations::failOnce(failAt);
        try {
          ClassRef<Listener> back = async ? g.echoLater(mine).value(10000) : g.echo(mine);
          failing_allocations::stop();
          EXPECT_EQ(back.get(), mine.get());
        } catch (const std::bad_alloc&) {
          failing_allocations::stop();
          ranOut = true;
        }
      }
      ASSERT_EQ(ep_.getState(), myelin::EndpointState::kConnected)
          << (async ? "Async" : "sync") << ", allocation " << failAt << ": " << ep_.getError();
      // An Async call that ran out of memory after it left completes later,
      // on this thread's lane, when this thread next calls or waits: its
      // listener is counted after the loop.
      if (!async) {
        EXPECT_TRUE(eventually([&] { return refs::listenersAlive.load() == aliveBefore_; }))
            << "sync, allocation " << failAt << ": the listener is still held";
      }
      if (!ranOut) break;
    }
    // Only now: a call between the failed ones would leave room in the
    // lists the failed ones would have grown.
    EXPECT_EQ(g.city(), "Siena") << (async ? "Async" : "sync") << ": the next call gets its own reply";
    EXPECT_TRUE(eventually([&] { return refs::listenersAlive.load() == aliveBefore_; }))
        << (async ? "Async" : "sync") << ": a listener of a failed call is still held";
  }
}

TEST_F(Refs, AReplyThatRunsOutOfMemoryWhileItIsReadFailsOnlyItsCall) {
  // This thread reads its sync call's reply itself while it waits. Its
  // allocations fail from each one on in turn (and then each one alone)
  // until the call goes through: the reply's string cannot be made, nor,
  // at first, the reason the call failed. The call ends with std::bad_alloc
  // or InvalidMessageError, the connection stays up, and the next call gets
  // its own reply. Before, a reason that could not be made faulted the
  // connection. A reply decodes into the storage the last one of its type
  // left on this thread, so each round's string is four times as long as
  // the last's: its decode must allocate. A reply the reader thread read
  // tried nothing: a first round that went through runs again (at most
  // three times). What the first call of this process allocates (the lists
  // a lane is entered in) is made first, so that the sweep starts at the
  // reply.
  std::size_t length = 40;
  EXPECT_EQ(Guide("Porto").city(), "Porto");
  for (bool once : {false, true}) {
    const char* kind = once ? "one allocation" : "every allocation from";
    int unread = 0;
    for (int failAt = 0;; ++failAt) {
      ASSERT_LT(failAt, 10) << "the call never went through";
      length *= 4;
      const std::string city(length, 'c');
      Guide g(city);
      bool failed = true;
      if (once) {
        failing_allocations::failOnce(failAt);
      } else {
        failing_allocations::failAfter(failAt);
      }
      try {
        std::string got = g.city();
        failing_allocations::stop();
        EXPECT_EQ(got, city);
        failed = false;
      } catch (const std::bad_alloc&) {
        failing_allocations::stop();
      } catch (const myelin::InvalidMessageError& e) {
        failing_allocations::stop();
        EXPECT_NE(std::string(e.what()).find("could not be taken"), std::string::npos) << e.what();
      }
      ASSERT_EQ(ep_.getState(), myelin::EndpointState::kConnected)
          << kind << " " << failAt << " failing: " << ep_.getError();
      EXPECT_EQ(g.city(), city) << kind << " " << failAt << " failing: the next call gets its own reply";
      if (!failed) {
        // The endpoint's reader thread read the reply (it does when this
        // thread is not watching the socket yet): the round tried nothing.
        if (failAt == 0 && unread++ < 3) {
          failAt = -1;
          length /= 4;  // this thread's storage for the reply is as it was
          continue;
        }
        EXPECT_GT(failAt, 0) << kind << ": no allocation of the call failed";
        break;
      }
    }
  }
}

TEST_F(Refs, ACloseThatRunsOutOfMemoryStillEndsTheCallsItFails) {
  // Another thread waits on a sync call the service answers only after
  // 1.5 s when this thread disconnects, its allocations failing from each
  // one on in turn until the disconnect goes through. Whether or not
  // disconnect() ran out of memory, once the connection is closed the
  // waiting call ends with ConnectionClosedError at once. Before, a close
  // that ran out of memory while it listed the lanes to fail left the
  // caller waiting for good: no reply comes on a closed connection. The
  // call carries no object of ours (a close that runs out of memory after
  // it ended the calls may keep our exports alive: async-and-errors.md)
  // and makes none on the service later (the tests after this one count
  // them).
  myelin::EndpointCtx back(ep_);  // calls without a context go to the last connection made
  const auto base = Guide::counts();
  int rounds = 0;
  for (int failAt = 0;; ++failAt) {
    ASSERT_LT(failAt, 100) << "disconnect() never went through";
    myelin::Endpoint other = connect();
    ClassRef<Guide> g;
    {
      myelin::EndpointCtx ctx(other);
      g = Guide::open("Tromso");
    }
    struct Outcome {
      std::atomic<bool> ended{false};
      std::string what;
    };
    auto outcome = std::make_shared<Outcome>();
    // Holding copies: if the call never ends, the thread is let go and the
    // test fails without waiting for it.
    std::thread caller([outcome, other, g] {
      try {
        myelin::EndpointCtx ctx(other);
        (void)g->echoAfter(1500, ClassRef<Listener>());
        outcome->what = "returned";
      } catch (const myelin::ConnectionClosedError&) {
        outcome->what = "closed";
      } catch (const std::exception& e) {
        outcome->what = e.what();
      }
      outcome->ended = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the call is pending
    bool ranOut = false;
    failing_allocations::failAfter(failAt);
    try {
      other.disconnect();
      failing_allocations::stop();
    } catch (const std::bad_alloc&) {
      failing_allocations::stop();
      ranOut = true;
    }
    if (other.isConnected()) other.disconnect();  // ran out before it closed anything
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1000);
    while (!outcome->ended && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!outcome->ended) {
      caller.detach();
      FAIL() << "allocation " << failAt << " failing: the pending call was not ended";
    }
    caller.join();
    EXPECT_EQ(outcome->what, "closed") << "allocation " << failAt << " failing";
    if (!ranOut) {
      rounds = failAt + 1;
      break;
    }
  }
  // Each round's guide dies with its connection.
  EXPECT_TRUE(eventually([&] { return Guide::counts().guidesDestroyed == base.guidesDestroyed + rounds; }));
}

TEST_F(Refs, AWaitThatRunsOutOfMemoryLeavesItsLaneToOthers) {
  // While a sync call waits, its thread runs what comes on its lane (here
  // the service's call back of the listener) and may watch the socket for
  // the reader. Its allocations fail, each one alone and then every one
  // from the n-th on, until the call goes through; each round runs on a new
  // thread, whose first run of a lane allocates. A wait that throws gives
  // the lane and the watch back, and the call ends as after a CallTimeout.
  // Before, the lane stayed taken, what came on it later (the release of
  // the listener) never ran, and the listener lived until the connection
  // closed; with only the lane given back, the reply was written into the
  // ended call's stack.
  Guide g("Bergamo");
  for (bool once : {true, false}) {
    const char* kind = once ? "one allocation" : "every allocation from";
    for (int failAt = 0;; ++failAt) {
      ASSERT_LT(failAt, 100) << kind << ": the call never went through";
      bool ranOut = false;
      std::thread([&] {
        myelin::EndpointCtx ctx(ep_);
        auto mine = myelin::makeRef<Listener>();
        if (once) {
          failing_allocations::failOnce(failAt);
        } else {
          failing_allocations::failAfter(failAt);
        }
        try {
          EXPECT_EQ(g.callBack(*mine, 5), 5);
          failing_allocations::stop();
        } catch (const std::bad_alloc&) {
          failing_allocations::stop();
          ranOut = true;
        } catch (const myelin::RemoteCallError&) {
          // The service's call back, run on this thread, ran out of memory.
          failing_allocations::stop();
          ranOut = true;
        } catch (const std::exception& e) {
          failing_allocations::stop();
          ADD_FAILURE() << kind << " " << failAt << ": " << e.what();
        }
      }).join();
      ASSERT_EQ(ep_.getState(), myelin::EndpointState::kConnected)
          << kind << " " << failAt << ": " << ep_.getError();
      EXPECT_TRUE(eventually([&] { return refs::listenersAlive.load() == aliveBefore_; }))
          << kind << " " << failAt << ": the listener is still held";
      EXPECT_EQ(g.city(), "Bergamo") << kind << " " << failAt;
      if (!ranOut) {
        EXPECT_GT(failAt, once ? 8 : 4) << kind << ": the sweep ended before the allocations of the call's wait";
        break;
      }
    }
  }
}

TEST_F(Refs, AFrameThatThrowsWhereNoCallerWaitsFaultsOnlyItsConnection) {
  // The service's one-way calls run here where no caller waits: on the
  // reader or a pool thread (a lane's turn), on a RemoteThread's own thread
  // (its executor), or as a RemoteThreadPool's frames on the pool. One of
  // them throws, and the runtime runs out of memory reporting it. Before,
  // that bad_alloc left the thread and ended the process (std::terminate),
  // or, thrown while the reason was copied, kept the listener the call was
  // made on alive for good; now that connection faults, saying why, the
  // listener goes with its last reference, and the process goes on.
  const std::vector<std::vector<std::string>> threads = {
      {"myelin-reader", "myelin-pool"}, {"myelin-pinned"}, {"myelin-pool"}};
  for (std::int64_t how = 0; how < 3; ++how) {
    myelin::Endpoint conn = connect();
    myelin::EndpointCtx ctx(conn);
    auto me = myelin::makeRef<Listener>();
    refs::throwAtRank = 3;
    {
      Guide g(*me, "Lisbon");
      g.streamLaterIn(10, how);
      EXPECT_TRUE(eventually([&] { return conn.getState() == myelin::EndpointState::kFaulted; }))
          << "how " << how << ": state " << static_cast<int>(conn.getState()) << ", " << conn.getError();
    }
    refs::throwAtRank = -1;
    EXPECT_NE(conn.getError().find("a frame of the peer's could not be run: std::bad_alloc"), std::string::npos)
        << "how " << how << ": " << conn.getError();
    {
      std::lock_guard lock(refs::threwOnMu);
      const auto& names = threads[static_cast<std::size_t>(how)];
      EXPECT_NE(std::find(names.begin(), names.end(), refs::threwOn), names.end())
          << "how " << how << ": threw on " << refs::threwOn;
      refs::threwOn.clear();
    }
    if (how < 2) {
      // In order: what was queued behind the call that threw is dropped.
      EXPECT_EQ(me->pois(), 4) << "how " << how << ": calls queued behind it ran on the faulted connection";
    } else {
      // Side by side, the call before it may still be on its way to its
      // handler when the connection faults, and is dropped then.
      EXPECT_GE(me->pois(), 3) << "how " << how;
    }
    me = {};
    EXPECT_TRUE(eventually([&] { return refs::listenersAlive.load() == aliveBefore_; }))
        << "how " << how << ": the listener is still held";
  }
  // The test's own connection was never touched.
  myelin::EndpointCtx back(ep_);
  EXPECT_EQ(ep_.getState(), myelin::EndpointState::kConnected) << ep_.getError();
  EXPECT_EQ(Guide("Porto").city(), "Porto");
}

TEST_F(Refs, StructFieldsCarryReferences) {
  Listener me;
  Guide g("Bern");
  g.subscribe(refs::Subscription{me, "museums"});
  EXPECT_EQ(g.callHeld(2), 2);
  EXPECT_EQ(me.total(), 2);
  g.dropHeld();
}

TEST_F(Refs, AnObjectTheServiceMadeLivesWhileTheClientRefersToIt) {
  auto base = Guide::counts();
  ClassRef<Guide> a = Guide::open("Vienna");
  EXPECT_EQ(Guide::counts().guidesMade, base.guidesMade + 1);
  EXPECT_TRUE(a.isRemote());
  ClassRef<Guide> b = a;
  a.reset();
  EXPECT_EQ(b->city(), "Vienna");
  b.reset();
  EXPECT_TRUE(eventually([&] { return Guide::counts().guidesDestroyed == base.guidesDestroyed + 1; }));
}

TEST_F(Refs, ReferencesInACallThatNeverLeftAreTakenBack) {
  // The service takes messages of up to 1 MiB (service_main.cpp): these
  // calls are refused on this thread after their references were encoded.
  const std::string tooLarge(1u << 20, 'p');
  Guide g("Lyon");
  // Our object: its export is taken back, so dropping our last reference
  // destroys it (an export entry left behind would hold it until the
  // connection closes).
  {
    auto mine = myelin::makeRef<Listener>();
    EXPECT_THROW(g.subscribe(refs::Subscription{mine, tooLarge}), myelin::UnsendableValueError);
  }
  EXPECT_TRUE(eventually([&] { return refs::listenersAlive.load() == aliveBefore_; }))
      << "nothing may hold the listener the refused call named";
  // The service's object: the mention is taken back, so our release counts
  // only the message that left and the service destroys the object.
  auto base = Guide::counts();
  {
    ClassRef<Guide> other = Guide::open("Nantes");
    EXPECT_THROW(g.isSelfPadded(*other, tooLarge), myelin::UnsendableValueError);
    EXPECT_FALSE(g.isSelfPadded(*other, "short"));
  }
  EXPECT_TRUE(eventually([&] { return Guide::counts().guidesDestroyed == base.guidesDestroyed + 1; }))
      << "the service still waits for a message naming its guide that never left";
  EXPECT_EQ(g.city(), "Lyon");
}

TEST_F(Refs, ACallCarryingAReferencePastTheServicesDecodeLimitFaultsTheConnection) {
  // The service decodes at most 8 MiB a message (service_main.cpp). A call
  // whose reference comes after 400,000 empty strings (12.8 MB decoded)
  // cannot fail alone, as a call of plain values does: the service stops
  // reading before the reference, which this side counted as sent, so
  // neither side could settle it. The connection faults instead.
  Guide g("Lille");
  EXPECT_TRUE(g.isSelfAfter(std::vector<std::string>(1000), g));
  EXPECT_THROW(g.isSelfAfter(std::vector<std::string>(400000), g), myelin::ConnectionClosedError);
  EXPECT_FALSE(ep_.isConnected());
}

TEST_F(Refs, AReferenceInAResultTooLargeForTheCallerIsTakenBack) {
  myelin::EndpointConfig cfg;
  cfg.maxMessageSize = 64 * 1024;
  myelin::Endpoint small = myelin::ConnectionInfo().setConnectAddress(service_->address()).setConfig(cfg).connect();
  myelin::EndpointCtx ctx(small);
  auto base = Guide::counts();
  {
    Guide g("Graz");
    EXPECT_EQ(g.selfTagged(10).tag.size(), 10u);
    EXPECT_THROW(g.selfTagged(100000), myelin::RemoteCallError);
    auto later = g.selfTaggedLater(100000);
    ASSERT_TRUE(later.wait(10000));
    EXPECT_TRUE(later.isError());
    EXPECT_NE(later.errorMessage().find("maxMessageSize"), std::string::npos) << later.errorMessage();
  }
  EXPECT_TRUE(eventually([&] { return Guide::counts().guidesDestroyed == base.guidesDestroyed + 1; }))
      << "the service's exports of the guide in the refused results must be taken back";
  // A refused result holding the service's last reference to our listener:
  // its mention is taken back before the result goes, so the release the
  // service sends then counts only what reached us.
  {
    Guide g("Linz");
    g.hold(myelin::makeRef<Listener>());
    EXPECT_EQ(refs::listenersAlive.load(), aliveBefore_ + 1) << "the service holds it";
    EXPECT_THROW(g.takeHeldTagged(100000), myelin::RemoteCallError);
    EXPECT_TRUE(eventually([&] { return refs::listenersAlive.load() == aliveBefore_; }))
        << "the service let go of the listener with the refused result";
  }
  EXPECT_TRUE(small.isConnected());
}

TEST_F(Refs, AProxysClassRefOutlivesTheProxy) {
  auto base = Guide::counts();
  ClassRef<Guide> kept;
  {
    Guide g("Prague");
    kept = g;
  }
  EXPECT_EQ(kept->city(), "Prague") << "the reference keeps the service's object";
  EXPECT_EQ(Guide::counts().guidesDestroyed, base.guidesDestroyed);
  kept.reset();
  EXPECT_TRUE(eventually([&] { return Guide::counts().guidesDestroyed == base.guidesDestroyed + 1; }));
}

TEST_F(Refs, ACallOnADestroyedClientObjectFailsWithoutHarm) {
  Guide g("Athens");
  {
    Listener gone;
    g.hold(gone);
  }
  // The service's call back reaches a tombstone: it fails, and the failure
  // comes back through the service's own call.
  EXPECT_THROW(g.callHeld(1), myelin::RemoteCallError);
  g.dropHeld();
  EXPECT_EQ(g.city(), "Athens") << "the connection is fine";
}

TEST_F(Refs, AReferenceToAnotherConnectionsObjectIsRefusedBeforeSending) {
  myelin::Endpoint other = connect();
  myelin::EndpointCtx back(ep_);
  ClassRef<Guide> foreign;
  {
    myelin::EndpointCtx ctx(other);
    foreign = Guide::open("Madrid");
  }
  Guide g("Dublin");
  EXPECT_THROW(g.isSelfRef(foreign), myelin::WrongEndpointOnStackError);
  EXPECT_EQ(g.city(), "Dublin") << "nothing was sent; the connection is fine";
  EXPECT_EQ(foreign->city(), "Madrid");
}

TEST_F(Refs, ADisconnectDropsEveryReferenceOnBothSides) {
  auto base = Guide::counts();
  myelin::Endpoint other = connect();
  myelin::EndpointCtx back(ep_);
  std::vector<ClassRef<Guide>> guides;
  {
    myelin::EndpointCtx ctx(other);
    for (int i = 0; i < 4; ++i) {
      guides.push_back(Guide::open("City " + std::to_string(i)));
      auto mine = myelin::makeRef<Listener>();
      guides.back()->hold(mine);
    }
  }
  EXPECT_EQ(refs::listenersAlive.load(), aliveBefore_ + 4) << "held by the service only";
  other.disconnect();
  EXPECT_TRUE(eventually([&] { return refs::listenersAlive.load() == aliveBefore_; }))
      << "the client's exports die with the connection";
  EXPECT_TRUE(eventually([&] { return Guide::counts().guidesDestroyed == base.guidesDestroyed + 4; }))
      << "the service's exports die with the connection";
  EXPECT_THROW(guides[0]->city(), myelin::ConnectionClosedError);
  guides.clear();  // releasing stand-ins of a closed connection sends nothing
  EXPECT_EQ(Guide::counts().listenersHeld, base.listenersHeld);
}

TEST_F(Refs, ManyThreadsPassAndDropReferencesConcurrently) {
  auto base = Guide::counts();
  constexpr int kThreads = 4, kRounds = 50;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      myelin::EndpointCtx ctx(ep_);
      ClassRef<Guide> g = Guide::open("T" + std::to_string(t));
      for (int r = 0; r < kRounds; ++r) {
        auto mine = myelin::makeRef<Listener>();
        g->hold(mine);
        g->hold(mine);
        if (g->callHeld(1) != 1 + 2) ++failures;  // one listener held twice: totals 1, then 2
        if (g->echo(mine) != mine) ++failures;
        g->dropHeld();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_TRUE(eventually([&] { return refs::listenersAlive.load() == aliveBefore_; }))
      << refs::listenersAlive.load() - aliveBefore_ << " listeners left";
  EXPECT_TRUE(eventually([&] { return Guide::counts().guidesDestroyed == base.guidesDestroyed + kThreads; }));
  EXPECT_EQ(Guide::counts().listenersHeld, base.listenersHeld);
}

/// A reference to object `id` of `ep`'s peer as class `T`, made without
/// the peer ever having sent it (and outside the import map, which refuses
/// to name one object as two classes): what a broken peer can send.
template <class T>
ClassRef<T> forge(const myelin::Endpoint& ep, std::uint64_t id) {
  auto* core = new myelin::detail::ObjectCore(true);
  core->ep = ep.impl();
  core->id = id;
  core->received = 1;
  core->cls_hooks = &myelin::detail::ClassHooks<T>::data;
  return myelin::detail::ClassRefAccess::adopt<T>(core, nullptr);
}

TEST_F(Refs, AForgedReferenceFaultsOnlyItsConnection) {
  myelin::Endpoint bad = connect();
  myelin::EndpointCtx back(ep_);
  {
    myelin::EndpointCtx ctx(bad);
    Guide g("Nowhere");
    EXPECT_THROW(g.isSelfRef(forge<Guide>(bad, 999)), myelin::ConnectionClosedError);
  }
  EXPECT_FALSE(bad.isConnected());
  Guide g("Riga");
  EXPECT_EQ(g.city(), "Riga") << "this connection is untouched";
}

TEST_F(Refs, AReferenceOfTheWrongClassFaultsOnlyItsConnection) {
  myelin::Endpoint bad = connect();
  myelin::EndpointCtx back(ep_);
  {
    myelin::EndpointCtx ctx(bad);
    Guide g("Nowhere");
    std::uint64_t guideId = myelin::detail::ObjectAccess::core(g)->id;
    // The service's own Guide, sent back where a Listener is expected.
    EXPECT_THROW(g.echo(forge<Listener>(bad, guideId)), myelin::ConnectionClosedError);
  }
  EXPECT_FALSE(bad.isConnected());
  Guide g("Tallinn");
  EXPECT_EQ(g.city(), "Tallinn") << "this connection is untouched";
}

}  // namespace
}  // namespace myelin_test
