// Symmetric peers over a real service process (docs/objects.md §6): both
// programs implement sym::Peer; each calls the other's statics and
// instances through remote::sym::Peer, also from inside the other's calls.
#include <gtest/gtest.h>
#include <myelin/myelin.h>

#include <chrono>
#include <functional>
#include <thread>

#include "service_fixture.h"
#include "sym_gen.h"

namespace sym {
extern const char* const kSide;
const char* const kSide = "client";
}  // namespace sym

namespace myelin_test {
namespace {

using Symmetric = ServiceTest;

TEST_F(Symmetric, StaticMethodsRunWhereTheyAreCalled) {
  EXPECT_EQ(sym::Peer::side(), "client") << "the class itself is local";
  EXPECT_EQ(remote::sym::Peer::side(), "service") << "the proxy calls the peer";
}

TEST_F(Symmetric, AProxyConstructsAndUsesThePeersInstance) {
  std::int64_t before = remote::sym::Peer::alive();
  {
    remote::sym::Peer bob("bob");
    EXPECT_EQ(remote::sym::Peer::alive(), before + 1);
    EXPECT_EQ(bob.name(), "bob");
    EXPECT_EQ(bob.hear("client", "hi"), 1);
    EXPECT_EQ(bob.hear("client", "there"), 2);
    bob.nudge();
    EXPECT_EQ(bob.heardLater().value(10000), 3) << "calls of one thread run in order";
    EXPECT_EQ(bob.lines(), (std::vector<std::string>{"client: hi", "client: there"}));
    remote::sym::Peer anon;
    EXPECT_EQ(anon.name(), "anonymous");
  }
  EXPECT_TRUE(eventually([&] { return remote::sym::Peer::alive() == before; }));
}

TEST_F(Symmetric, LocalInstancesAreOrdinaryObjects) {
  sym::Peer me("me");
  EXPECT_EQ(me.hear("self", "note"), 1);
  EXPECT_EQ(me.lines(), std::vector<std::string>{"self: note"});
}

TEST_F(Symmetric, ThePeerCallsBackDuringItsCall) {
  EXPECT_EQ(remote::sym::Peer::askBack(), "client");
}

TEST_F(Symmetric, ThePeerConstructsAnObjectHereAndReleasesIt) {
  std::int64_t before = sym::Peer::alive();
  EXPECT_EQ(remote::sym::Peer::greetBack("ann", "hello"), before + 1) << "the service's Peer was made here";
  EXPECT_TRUE(eventually([&] { return sym::Peer::alive() == before; }))
      << "the service's proxy was destroyed, so our instance is too";
}

TEST_F(Symmetric, ManyThreadsTalkBothWays) {
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      myelin::EndpointCtx ctx(ep_);
      remote::sym::Peer p("p" + std::to_string(t));
      for (int i = 0; i < 50; ++i) {
        if (p.hear("t", std::to_string(i)) != i + 1) ++failures;
        if (remote::sym::Peer::askBack() != "client") ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace myelin_test
