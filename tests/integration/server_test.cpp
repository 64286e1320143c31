// A service's bookkeeping of its connections (docs/architecture.md): a
// connection that closes leaves the service at once, so its socket and
// state go without waiting for the next connection to arrive; its connect
// and disconnect notices run in order, and stop() waits for them. Service
// and clients run in this process.
#include <gtest/gtest.h>
#include <myelin/myelin.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "eventually.h"
#include "runtime/endpoint_impl.h"
#include "transport/tcp.h"
#include "sym_gen.h"

namespace sym {
extern const char* const kSide;
const char* const kSide = "in-process";
}  // namespace sym

namespace myelin_test {
namespace {

using myelin::detail::EndpointImpl;

TEST(Server, ClosedConnectionsAreForgottenWithoutANewOneArriving) {
  std::atomic<int> disconnects{0};
  auto server = myelin::ConnectionInfo()
                    .setListenAddress("127.0.0.1:0")
                    .setOnDisconnect([&](myelin::Endpoint) { ++disconnects; })
                    .start();
  const std::string address = "127.0.0.1:" + std::to_string(server.port());
  const std::size_t before = EndpointImpl::liveObjects();
  // Clients on a thread of their own: a thread's last connect() stays its
  // endpoint until the thread exits.
  std::thread([&] {
    for (int i = 0; i < 3; ++i) {
      auto ep = myelin::ConnectionInfo().setConnectAddress(address).connect();
      EXPECT_EQ(remote::sym::Peer::side(), "in-process");
      ep.disconnect();
    }
  }).join();
  EXPECT_TRUE(eventually([&] { return disconnects.load() == 3; })) << disconnects.load() << " disconnects seen";
  // Before, a service kept each closed connection (its socket open) until
  // it accepted the next one.
  EXPECT_TRUE(eventually([&] { return EndpointImpl::liveObjects() == before; }))
      << EndpointImpl::liveObjects() - before << " endpoints still alive, with no connection left";
  EXPECT_TRUE(server.endpoints().empty());
  // The service still takes new connections.
  std::thread([&] {
    myelin::ConnectionInfo().setConnectAddress(address).connect();
    EXPECT_EQ(remote::sym::Peer::side(), "in-process");
  }).join();
  server.stop();
  EXPECT_TRUE(eventually([&] { return EndpointImpl::liveObjects() == before; }));
}

// A user keeps a table of connections: added on connect, removed on
// disconnect. The removal must not come first, even when the client leaves
// while the service's onConnect is still running.
TEST(Server, DisconnectNoticeFollowsTheConnectNoticeOfItsConnection) {
  std::mutex mu;
  std::vector<std::string> events;
  std::atomic<int> disconnects{0};
  std::atomic<bool> connectReturned{false};
  auto server = myelin::ConnectionInfo()
                    .setListenAddress("127.0.0.1:0")
                    .setOnConnect([&](myelin::Endpoint) {
                      // Slow bookkeeping: the client is gone before it ends.
                      std::this_thread::sleep_for(std::chrono::milliseconds(300));
                      std::lock_guard lock(mu);
                      events.push_back("connect");
                      connectReturned = true;
                    })
                    .setOnDisconnect([&](myelin::Endpoint) {
                      {
                        std::lock_guard lock(mu);
                        events.push_back(connectReturned ? "disconnect" : "disconnect before connect returned");
                      }
                      ++disconnects;
                    })
                    .start();
  const std::string address = "127.0.0.1:" + std::to_string(server.port());
  std::thread([&] {
    auto ep = myelin::ConnectionInfo().setConnectAddress(address).connect();
    ep.disconnect();
  }).join();
  ASSERT_TRUE(eventually([&] { return disconnects.load() == 1; }));
  {
    std::lock_guard lock(mu);
    EXPECT_EQ(events, (std::vector<std::string>{"connect", "disconnect"}));
  }
  server.stop();
}

// A connection refused in its handshake gets a disconnect notice and no
// connect notice.
TEST(Server, FailedHandshakeGetsOnlyADisconnectNotice) {
  std::atomic<int> connects{0};
  std::atomic<int> disconnects{0};
  auto server = myelin::ConnectionInfo()
                    .setListenAddress("127.0.0.1:0")
                    .setOnConnect([&](myelin::Endpoint) { ++connects; })
                    .setOnDisconnect([&](myelin::Endpoint ep) {
                      EXPECT_FALSE(ep.getError().empty());
                      ++disconnects;
                    })
                    .start();
  {
    // Not a Myelin peer: it sends bytes that are no HELLO and hangs up.
    auto s = myelin::detail::TcpSocket::connect("127.0.0.1:" + std::to_string(server.port()), 5000);
    char junk[] = "GET / HTTP/1.1\r\n\r\n";
    iovec v{junk, sizeof junk - 1};
    s->sendAll(&v, 1);
  }
  EXPECT_TRUE(eventually([&] { return disconnects.load() == 1; }));
  EXPECT_EQ(connects.load(), 0);
  server.stop();
}

// When stop() returns, every connection's notices have run: none runs
// later, against state the user has torn down.
TEST(Server, StopReturnsAfterTheLastNotice) {
  std::atomic<bool> connected{false};
  std::atomic<bool> noticed{false};
  auto server = myelin::ConnectionInfo()
                    .setListenAddress("127.0.0.1:0")
                    .setOnConnect([&](myelin::Endpoint) { connected = true; })
                    .setOnDisconnect([&](myelin::Endpoint ep) {
                      std::this_thread::sleep_for(std::chrono::milliseconds(200));
                      EXPECT_EQ(ep.getError(), "service stopped");
                      noticed = true;
                    })
                    .start();
  const std::string address = "127.0.0.1:" + std::to_string(server.port());
  std::atomic<bool> done{false};
  std::thread client([&] {
    auto ep = myelin::ConnectionInfo().setConnectAddress(address).connect();
    while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  });
  ASSERT_TRUE(eventually([&] { return connected.load(); }));
  server.stop();
  EXPECT_TRUE(noticed.load()) << "stop() returned before the connection's disconnect notice ran";
  done = true;
  client.join();
}

// stop() from a notice's own thread closes the service without waiting for
// the notices queued behind the one that called it; a later stop() (here
// the main thread's) waits for them.
TEST(Server, StopFromANoticeDoesNotWaitForItselfButALaterStopDoes) {
  std::optional<myelin::Server> server;
  std::atomic<bool> stopped{false};
  std::atomic<int> disconnects{0};
  std::mutex mu;
  std::unique_lock startLock(mu);  // the notice waits until `server` is set
  server = myelin::ConnectionInfo()
               .setListenAddress("127.0.0.1:0")
               .setOnConnect([&](myelin::Endpoint) {
                 {
                   std::lock_guard lock(mu);
                   server->stop();
                 }
                 stopped = true;
                 // The disconnect notice waits behind this one.
                 std::this_thread::sleep_for(std::chrono::milliseconds(200));
               })
               .setOnDisconnect([&](myelin::Endpoint) { ++disconnects; })
               .start();
  const std::string address = "127.0.0.1:" + std::to_string(server->port());
  startLock.unlock();
  std::thread([&] {
    auto ep = myelin::ConnectionInfo().setConnectAddress(address).connect();
    EXPECT_TRUE(eventually([&] { return !ep.isConnected(); }));
  }).join();
  ASSERT_TRUE(eventually([&] { return stopped.load(); }));
  server->stop();
  EXPECT_EQ(disconnects.load(), 1) << "a second stop() returned before the last notice ran";
}

}  // namespace
}  // namespace myelin_test
