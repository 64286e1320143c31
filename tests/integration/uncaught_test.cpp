// Exceptions that leave user code the runtime runs (Async callbacks, a
// service's connection notices) go to the process's UncaughtHandler and
// end nothing else: the other callbacks run, the connection stays up, the
// notices keep their order. Also: Myelin's threads carry names.
#include <gtest/gtest.h>
#include <myelin/myelin.h>

#include <atomic>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "eventually.h"
#include "sym_gen.h"
#include "thread_names.h"

namespace sym {
extern const char* const kSide;
const char* const kSide = "in-process";
}  // namespace sym

namespace myelin_test {
namespace {

/// What the handler was given: where, and the exception's message.
class Reports {
 public:
  Reports() {
    previous_ = myelin::setUncaughtHandler([this](const char* where, std::exception_ptr e) {
      std::string what = "(not a std::exception)";
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        what = x.what();
      } catch (...) {
      }
      std::lock_guard lock(mu_);
      seen_.emplace_back(where, what);
    });
  }
  ~Reports() { myelin::setUncaughtHandler(std::move(previous_)); }

  std::vector<std::pair<std::string, std::string>> seen() const {
    std::lock_guard lock(mu_);
    return seen_;
  }
  std::size_t count() const { return seen().size(); }

 private:
  mutable std::mutex mu_;
  std::vector<std::pair<std::string, std::string>> seen_;
  myelin::UncaughtHandler previous_;
};

using Seen = std::vector<std::pair<std::string, std::string>>;

myelin::Server startServer() { return myelin::ConnectionInfo().setListenAddress("127.0.0.1:0").start(); }

std::string addressOf(const myelin::Server& s) { return "127.0.0.1:" + std::to_string(s.port()); }

// The caller waits for the value, so its own thread runs the callbacks (the
// exception used to leave through wait()).
TEST(Uncaught, ACallbackThatThrowsWhileItsCallerWaitsIsReportedAndTheNextRuns) {
  Reports reports;
  auto server = startServer();
  std::thread([&] {
    myelin::ConnectionInfo().setConnectAddress(addressOf(server)).connect();
    remote::sym::Peer peer("p");
    std::atomic<bool> secondRan{false};
    auto a = peer.heardLater();
    a.then([] { throw std::runtime_error("first callback failed"); });
    a.then([&] { secondRan = true; });
    ASSERT_TRUE(a.wait(10000));
    EXPECT_EQ(a.value(), 0);
    EXPECT_TRUE(eventually([&] { return secondRan.load(); }));
    EXPECT_EQ(reports.seen(), (Seen{{"Async callback", "first callback failed"}}));
    // The connection is as it was.
    EXPECT_EQ(peer.hear("me", "still here"), 1);
    EXPECT_EQ(peer.heardLater().value(10000), 1);
  }).join();
  server.stop();
}

// Nobody waits: the reader thread runs the callbacks, and goes on reading.
TEST(Uncaught, ACallbackThatThrowsOnTheReaderIsReportedAndTheConnectionLives) {
  Reports reports;
  auto server = startServer();
  std::thread([&] {
    myelin::ConnectionInfo().setConnectAddress(addressOf(server)).connect();
    remote::sym::Peer peer("p");
    constexpr int kCalls = 50;
    std::atomic<int> ran{0};
    for (int i = 0; i < kCalls; ++i) {
      peer.heardLater().then([&ran, i] {
        ++ran;
        if (i % 2 == 0) throw std::runtime_error("callback " + std::to_string(i));
      });
    }
    EXPECT_TRUE(eventually([&] { return ran.load() == kCalls; })) << ran.load() << " of " << kCalls << " ran";
    EXPECT_TRUE(eventually([&] { return reports.count() == kCalls / 2; })) << reports.count() << " reported";
    Seen seen = reports.seen();
    for (std::size_t k = 0; k < seen.size(); ++k) {
      // Callbacks of one thread's calls run in reply order.
      EXPECT_EQ(seen[k], (std::pair<std::string, std::string>{"Async callback", "callback " + std::to_string(2 * k)}));
    }
    EXPECT_EQ(peer.hear("me", "after"), 1);
  }).join();
  server.stop();
}

// A service's notices that throw: reported, the connection serves calls,
// its disconnect notice still comes, and stop() returns.
TEST(Uncaught, NoticesThatThrowAreReportedAndTheConnectionServes) {
  Reports reports;
  std::atomic<int> disconnects{0};
  auto server = myelin::ConnectionInfo()
                    .setListenAddress("127.0.0.1:0")
                    .setOnConnect([](myelin::Endpoint) { throw std::runtime_error("connect bookkeeping failed"); })
                    .setOnDisconnect([&](myelin::Endpoint) {
                      ++disconnects;
                      throw std::runtime_error("disconnect bookkeeping failed");
                    })
                    .start();
  std::thread([&] {
    auto ep = myelin::ConnectionInfo().setConnectAddress(addressOf(server)).connect();
    EXPECT_TRUE(eventually([&] { return reports.count() == 1; }));
    EXPECT_EQ(remote::sym::Peer::side(), "in-process");
    ep.disconnect();
  }).join();
  EXPECT_TRUE(eventually([&] { return disconnects.load() == 1; }));
  EXPECT_TRUE(eventually([&] { return reports.count() == 2; }));
  EXPECT_EQ(reports.seen(), (Seen{{"onConnect", "connect bookkeeping failed"},
                                  {"onDisconnect", "disconnect bookkeeping failed"}}));
  server.stop();
}

// Without a handler of the application's, one line goes to stderr.
TEST(Uncaught, TheDefaultHandlerWritesALineToStderr) {
  myelin::UncaughtHandler previous = myelin::setUncaughtHandler(nullptr);
  auto server = startServer();
  testing::internal::CaptureStderr();
  std::thread([&] {
    auto ep = myelin::ConnectionInfo().setConnectAddress(addressOf(server)).connect();
    remote::sym::Peer peer("p");
    auto a = peer.heardLater();
    a.then([] { throw std::runtime_error("nobody catches this"); });
    EXPECT_EQ(a.value(10000), 0);
    // value() returns once the value is there; the callback may still be
    // running on the thread that read the reply. Idle means it has ended.
    EXPECT_TRUE(ep.waitForIdle(10000));
  }).join();
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("myelin: an exception left Async callback: nobody catches this\n"), std::string::npos) << err;
  server.stop();
  myelin::setUncaughtHandler(std::move(previous));
}

// setUncaughtHandler hands back the handler it replaces.
TEST(Uncaught, SettingAHandlerReturnsThePreviousOne) {
  int calls = 0;
  myelin::UncaughtHandler first = [&](const char*, std::exception_ptr) { ++calls; };
  myelin::UncaughtHandler before = myelin::setUncaughtHandler(first);
  myelin::UncaughtHandler back = myelin::setUncaughtHandler(nullptr);
  ASSERT_TRUE(back);
  back("x", nullptr);
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(myelin::setUncaughtHandler(std::move(before)));  // the default was in place
}

// top -H, perf and gdb tell Myelin's threads from the application's.
TEST(Uncaught, MyelinsThreadsAreNamed) {
  auto server = startServer();
  std::thread([&] {
    myelin::ConnectionInfo().setConnectAddress(addressOf(server)).connect();
    EXPECT_EQ(remote::sym::Peer::side(), "in-process");
    // Each thread names itself as it starts; the client's reader may not
    // have run yet when connect() returns.
    std::multiset<std::string> names;
    // The client's reader and the service's reader of this connection.
    EXPECT_TRUE(eventually([&] {
      names = threadNames();
      return names.count("myelin-reader") >= 2;
    })) << names.count("myelin-reader") << " readers named";
    EXPECT_EQ(names.count("myelin-accept"), 1u);
  }).join();
  server.stop();
}

}  // namespace
}  // namespace myelin_test
