// Remote objects over a real service process (docs/objects.md): remote
// construction with arguments, instance methods of every return mode,
// destruction, lifetimes under concurrent use, and bad object ids from the
// wire, which fault only their own connection.
#include <gtest/gtest.h>
#include <myelin/myelin.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "objects.h"
#include "runtime/endpoint_impl.h"
#include "service_fixture.h"
#include "tcp_proxy.h"

namespace myelin_test {
namespace {

using objs::Counter;
using objs::Notebook;

class Objects : public ServiceTest {
 protected:
  /// Waits until the service has destroyed `n` more Counters than `base`
  /// (destruction follows the release asynchronously).
  static objs::Lifetimes waitDestroyed(const objs::Lifetimes& base, std::int64_t n) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    objs::Lifetimes now = Counter::lifetimes();
    while (now.destroyed < base.destroyed + n && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      now = Counter::lifetimes();
    }
    return now;
  }
};

TEST_F(Objects, ConstructorArgumentsTravelAndInstanceMethodsRunOnThatInstance) {
  Counter a(10);
  Counter b("bee", 100);
  EXPECT_EQ(a.add(5), 15);
  EXPECT_EQ(b.add(1), 101);
  EXPECT_EQ(a.get(), 15);
  EXPECT_EQ(b.get(), 101);
  EXPECT_EQ(a.name(), "");
  EXPECT_EQ(b.name(), "bee");
  EXPECT_EQ(Counter::version(), 7) << "static methods mix with instance methods";
}

TEST_F(Objects, EveryReturnModeWorksOnAnInstance) {
  Counter c(0);
  for (int i = 0; i < 100; ++i) c.bump();
  auto later = c.addLater(1000);
  EXPECT_EQ(later.value(10000), 1100) << "calls of one thread run in order";
  EXPECT_EQ(c.get(), 1100);
  try {
    c.fail("on purpose");
    FAIL() << "the service's exception did not reach the caller";
  } catch (const myelin::RemoteCallError& e) {
    EXPECT_NE(std::string(e.what()).find("on purpose"), std::string::npos) << e.what();
  }
  EXPECT_EQ(c.get(), 1100) << "a failed call leaves the object usable";
}

TEST_F(Objects, DestroyingTheProxyDestroysTheRemoteInstance) {
  auto base = Counter::lifetimes();
  {
    Counter c(41);
    c.add(1);
    EXPECT_EQ(Counter::lifetimes().constructed, base.constructed + 1);
  }
  auto after = waitDestroyed(base, 1);
  EXPECT_EQ(after.destroyed, base.destroyed + 1);
  EXPECT_EQ(after.lastValue, 42);
}

TEST_F(Objects, AThrowingRemoteConstructorThrowsHere) {
  auto base = Counter::lifetimes();
  try {
    Counter bad("negative", -1);
    FAIL() << "the service's constructor threw, so this one must";
  } catch (const myelin::RemoteCallError& e) {
    EXPECT_EQ(std::string(e.what()), "the constructor of objs::Counter failed: a counter cannot start below zero");
  }
  try {
    Counter bad("invalid", 1);
    FAIL() << "the service's constructor threw, so this one must";
  } catch (const myelin::RemoteCallError& e) {
    EXPECT_EQ(std::string(e.what()), "the constructor of objs::Counter failed: a reply the constructor got was invalid")
        << "the constructor's failure, not this call's message";
  }
  Counter ok("fine", 1);
  EXPECT_EQ(ok.get(), 1) << "the connection still works";
  auto now = Counter::lifetimes();
  EXPECT_EQ(now.constructed, base.constructed + 1) << "only the third constructor completed";
}

TEST_F(Objects, AClassWithoutConstructorsIsBuiltByItsFirstCall) {
  Notebook a, b;
  a.write("one");
  a.write("two");
  b.write("other");
  EXPECT_EQ(a.lines(), (std::vector<std::string>{"one", "two"}));
  EXPECT_EQ(b.lines(), (std::vector<std::string>{"other"}));
}

TEST_F(Objects, AOneWayFirstCallBuildsTheObjectAndARefusedOneLeavesNothing) {
  // The first call on a Notebook is fire-and-forget: it builds the peer's
  // object first. Arguments the service cannot take are refused on this
  // thread, one when the whole call is encoded (a message one byte over
  // the service's 1 MiB), one while it is encoded (far larger): neither
  // leaves, and the calls around them arrive in order.
  Notebook n;
  n.jot("one");
  const std::uint64_t limit = ep_.peerMaxMessageSize();
  ASSERT_EQ(limit, 1u << 20);
  try {
    n.jot(std::string(limit, 't'));
    FAIL() << "expected UnsendableValueError";
  } catch (const myelin::UnsendableValueError& e) {
    EXPECT_NE(std::string(e.what()).find("maxMessageSize"), std::string::npos) << e.what();
  }
  n.jot("two");
  try {
    n.jot(std::string(16 * limit, 'h'));
    FAIL() << "expected UnsendableValueError";
  } catch (const myelin::UnsendableValueError& e) {
    EXPECT_NE(std::string(e.what()).find("refused before it was encoded whole"), std::string::npos) << e.what();
  }
  n.jot("three");
  EXPECT_EQ(n.lines(), (std::vector<std::string>{"one", "two", "three"}));
  EXPECT_TRUE(ep_.isConnected());
}

TEST_F(Objects, InstanceCallsGoToTheObjectsEndpointWhateverIsCurrent) {
  myelin::Endpoint other = connect();  // connect() makes it this thread's endpoint
  myelin::EndpointCtx back(ep_);
  Counter here(1);  // on ep_
  {
    myelin::EndpointCtx ctx(other);
    Counter there(2);
    EXPECT_EQ(here.add(1), 2) << "called while another endpoint is current";
    EXPECT_EQ(there.add(1), 3);
  }
  other.disconnect();
  EXPECT_EQ(here.get(), 2);
}

TEST_F(Objects, CallsSentBeforeTheReleaseRunBeforeTheDestructor) {
  // One thread floods fire-and-forget calls, another destroys the proxy
  // right after: the release may reach the service first, or be processed
  // first (another lane), yet every call must run on the object before it
  // is destroyed (the release counts the calls, docs/objects.md §4).
  constexpr int kCalls = 20000;
  for (int round = 0; round < 5; ++round) {
    auto base = Counter::lifetimes();
    auto c = std::make_unique<Counter>(0);
    std::thread caller([&] {
      myelin::EndpointCtx ctx(ep_);
      for (int i = 0; i < kCalls; ++i) c->bump();
    });
    caller.join();
    std::thread destroyer([&] {
      myelin::EndpointCtx ctx(ep_);
      c.reset();
    });
    destroyer.join();
    auto after = waitDestroyed(base, 1);
    ASSERT_EQ(after.destroyed, base.destroyed + 1) << "round " << round;
    EXPECT_EQ(after.lastValue, kCalls) << "round " << round << ": calls lost or run after the destructor";
  }
}

TEST_F(Objects, ManyThreadsCreateCallAndDestroyObjectsConcurrently) {
  auto base = Counter::lifetimes();
  constexpr int kThreads = 6, kObjects = 60;
  std::atomic<int> wrong{0};
  Counter shared(0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      myelin::EndpointCtx ctx(ep_);
      for (int i = 0; i < kObjects; ++i) {
        Counter mine(t * 1000 + i);
        mine.bump();
        if (mine.add(1) != t * 1000 + i + 2) ++wrong;
        shared.bump();
        if (i % 7 == 0) {
          auto v = mine.addLater(10);
          if (v.value(10000) != t * 1000 + i + 12) ++wrong;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  // The workers' fire-and-forget bumps travel on their own lanes: nothing
  // orders them before this thread's next call until they are confirmed.
  ASSERT_TRUE(ep_.waitForIdle(10000));
  EXPECT_EQ(shared.add(0), kThreads * kObjects);
  auto after = waitDestroyed(base, kThreads * kObjects);
  EXPECT_EQ(after.constructed, base.constructed + kThreads * kObjects + 1);
  EXPECT_EQ(after.destroyed, base.destroyed + kThreads * kObjects) << "each object destroyed once; `shared` lives";
}

TEST_F(Objects, ClosingTheConnectionDestroysTheObjectsItHeld) {
  auto base = Counter::lifetimes();
  myelin::Endpoint other = connect();
  myelin::EndpointCtx back(ep_);
  std::vector<std::unique_ptr<Counter>> held;
  {
    myelin::EndpointCtx ctx(other);
    for (int i = 0; i < 5; ++i) held.push_back(std::make_unique<Counter>(i));
  }
  other.disconnect();
  auto after = waitDestroyed(base, 5);
  EXPECT_EQ(after.destroyed, base.destroyed + 5);
  EXPECT_THROW(held[0]->add(1), myelin::ConnectionClosedError) << "the object's endpoint is gone";
  held.clear();  // releasing proxies of a closed endpoint sends nothing and does not crash
  EXPECT_EQ(Counter::version(), 7) << "this connection is untouched";
}

TEST_F(Objects, FramedSizesOfInstanceCallsAndTheRelease) {
  // docs/wire-format.md §2: an instance call adds its object id to the
  // static call's frame; RELEASE carries the id and the two counts.
  TcpProxy proxy(service_->port());
  auto ep = myelin::ConnectionInfo().setConnectAddress("127.0.0.1:" + std::to_string(proxy.port())).connect();
  myelin::EndpointCtx ctx(ep);
  auto c = std::make_unique<Counter>(0);  // object 1 of this fresh connection
  EXPECT_EQ(framedSize(proxy, [&] { c->bump(); }), 5u);  // 05 41 00 m 01
  EXPECT_EQ(framedSize(proxy, [&] { c->add(5); }), 6u);  // 06 42 00 m 01 0a
  EXPECT_EQ(framedSize(proxy, [&] { c.reset(); }), 6u);  // 05 0b 00 01 01 02
  ep.disconnect();
}

TEST_F(Objects, ACallOnAnObjectIdTheServiceNeverExportedFaultsOnlyThatConnection) {
  myelin::Endpoint bad = connect();
  myelin::EndpointCtx back(ep_);
  {
    myelin::EndpointCtx ctx(bad);
    Notebook forged;
    myelin::detail::bindRemoteObject(forged, bad.impl().get(), 999 << 1, myelin::detail::ClassHooks<Notebook>::data);
    EXPECT_THROW(forged.lines(), myelin::ConnectionClosedError);
  }
  EXPECT_EQ(bad.getState(), myelin::EndpointState::kClosed) << bad.getError();
  Counter c(3);
  EXPECT_EQ(c.add(1), 4) << "other connections keep working";
}

TEST_F(Objects, ACallNamingAnObjectOfAnotherClassFaultsOnlyThatConnection) {
  myelin::Endpoint bad = connect();
  myelin::EndpointCtx back(ep_);
  {
    myelin::EndpointCtx ctx(bad);
    Counter real(5);
    Notebook confused;  // a Notebook method on the Counter's id
    // Made by hand: this side's import map would refuse to name one object
    // as two classes.
    auto* core = new myelin::detail::ObjectCore(true);
    core->ep = bad.impl();
    core->id = myelin::detail::ObjectAccess::core(real)->id;
    core->received = 1;
    core->cls_hooks = &myelin::detail::ClassHooks<Notebook>::data;
    myelin::detail::ObjectAccess::bind(confused, core);
    EXPECT_THROW(confused.write("not a notebook"), myelin::ConnectionClosedError);
  }
  EXPECT_FALSE(bad.isConnected()) << "the service faulted the connection";
  EXPECT_NE(bad.getError().find("closed"), std::string::npos) << bad.getError();
  Counter c(3);
  EXPECT_EQ(c.add(1), 4) << "other connections keep working";
}

TEST_F(Objects, AReleaseOfMoreReferencesThanSentFaultsOnlyThatConnection) {
  myelin::Endpoint bad = connect();
  myelin::EndpointCtx ctx(bad);
  Counter c(1);
  EXPECT_EQ(c.add(1), 2);
  auto* core = myelin::detail::ObjectAccess::core(c);
  bad.impl()->sendRelease(core->id, 5, 0);  // it holds one reference, not five
  bad.impl()->flush();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (bad.isConnected() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_FALSE(bad.isConnected());
  EXPECT_THROW(c.add(1), myelin::ConnectionClosedError);
}

}  // namespace
}  // namespace myelin_test
