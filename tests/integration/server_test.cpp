// A service's bookkeeping of its connections (docs/architecture.md): a
// connection that closes leaves the service at once, so its socket and
// state go without waiting for the next connection to arrive. Service and
// clients run in this process.
#include <gtest/gtest.h>
#include <myelin/myelin.h>

#include <atomic>
#include <string>
#include <thread>

#include "eventually.h"
#include "runtime/endpoint_impl.h"
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

}  // namespace
}  // namespace myelin_test
