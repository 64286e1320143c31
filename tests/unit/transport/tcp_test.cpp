// Unit tests of Myelin's TCP layer on 127.0.0.1: address parsing, listening
// on an ephemeral port, gathered sends received in order, shutdown waking a
// blocked receive, connect failures, and closing a listener.
#include "transport/tcp.h"

#include <gtest/gtest.h>

#include <sys/uio.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "myelin/errors.h"

namespace myelin::detail {
namespace {

constexpr int kConnectTimeoutMs = 10000;

std::string localAddress(std::uint16_t port) { return "127.0.0.1:" + std::to_string(port); }

TEST(HostPort, ParsesHostAndPort) {
  HostPort hp = HostPort::parse("127.0.0.1:80");
  EXPECT_EQ(hp.host, "127.0.0.1");
  EXPECT_EQ(hp.port, 80);
  hp = HostPort::parse("example.org:65535");
  EXPECT_EQ(hp.host, "example.org");
  EXPECT_EQ(hp.port, 65535);
  hp = HostPort::parse("localhost:0");
  EXPECT_EQ(hp.host, "localhost");
  EXPECT_EQ(hp.port, 0);
}

TEST(HostPort, StripsBracketsFromIpv6Hosts) {
  HostPort hp = HostPort::parse("[::1]:9");
  EXPECT_EQ(hp.host, "::1");
  EXPECT_EQ(hp.port, 9);
  hp = HostPort::parse("[fe80::1:2]:1234");
  EXPECT_EQ(hp.host, "fe80::1:2");
  EXPECT_EQ(hp.port, 1234);
}

TEST(HostPort, EmptyHostMeansAnyAddress) {
  HostPort hp = HostPort::parse(":5");
  EXPECT_EQ(hp.host, "0.0.0.0");
  EXPECT_EQ(hp.port, 5);
}

TEST(HostPort, RejectsMalformedAddresses) {
  for (const char* bad : {"nohost", "h:", "h:70000", "h:65536", "h:12x", "h:-1", "h: 1", "", ":"}) {
    EXPECT_THROW(HostPort::parse(bad), InvalidConfigurationError) << "'" << bad << "'";
  }
  // A very long all-digit port must not wrap around into range.
  EXPECT_THROW(HostPort::parse("h:18446744073709551696"), InvalidConfigurationError);
}

TEST(TcpListener, EphemeralPortIsNonzero) {
  TcpListener l("127.0.0.1:0");
  EXPECT_NE(l.port(), 0);
}

TEST(TcpListener, BadListenAddressThrows) {
  EXPECT_THROW(TcpListener("not-an-ip-address:0"), InvalidConfigurationError);
  EXPECT_THROW(TcpListener("127.0.0.1"), InvalidConfigurationError);
}

/// A connected pair over loopback.
struct Pair {
  TcpListener listener{"127.0.0.1:0"};
  std::unique_ptr<TcpSocket> client;
  std::unique_ptr<TcpSocket> server;
  Pair() {
    client = TcpSocket::connect(localAddress(listener.port()), kConnectTimeoutMs);
    server = listener.accept();
  }
};

TEST(TcpSocket, ConnectAndAcceptGiveAConnectedPair) {
  Pair p;
  ASSERT_NE(p.client, nullptr);
  ASSERT_NE(p.server, nullptr);
  EXPECT_GE(p.client->fd(), 0);
  EXPECT_GE(p.server->fd(), 0);
  EXPECT_EQ(p.client->peerAddress(), localAddress(p.listener.port()));
  EXPECT_EQ(p.server->peerAddress().rfind("127.0.0.1:", 0), 0u) << p.server->peerAddress();
}

/// Reads exactly `n` bytes (or until end of stream / error).
std::vector<std::uint8_t> recvExactly(TcpSocket& s, std::size_t n) {
  std::vector<std::uint8_t> got;
  got.reserve(n);
  std::uint8_t buf[4096];
  while (got.size() < n) {
    if (!s.waitReadable(30000)) break;  // guards against a hang only
    long r = s.recvSome(buf, sizeof buf);
    if (r <= 0) break;
    got.insert(got.end(), buf, buf + r);
  }
  return got;
}

TEST(TcpSocket, SendAllGathersIovecsAndTheBytesArriveInOrder) {
  Pair p;
  ASSERT_NE(p.server, nullptr);
  // Pieces of different sizes, an empty one among them, and one large
  // enough that the kernel takes it in several partial writes.
  std::vector<std::vector<std::uint8_t>> pieces;
  pieces.push_back({1, 2, 3});
  pieces.push_back({});
  pieces.push_back(std::vector<std::uint8_t>(1000, 0));
  pieces.push_back(std::vector<std::uint8_t>(3 << 20, 0));
  pieces.push_back({0xfe});
  std::vector<std::uint8_t> expected;
  std::uint32_t x = 12345;
  for (auto& piece : pieces) {
    for (auto& b : piece) {
      x = x * 1103515245u + 12345u;
      b = static_cast<std::uint8_t>(x >> 16);
    }
    expected.insert(expected.end(), piece.begin(), piece.end());
  }
  std::vector<iovec> iov;
  for (auto& piece : pieces) iov.push_back({piece.data(), piece.size()});

  bool sent = false;
  std::thread sender([&] { sent = p.client->sendAll(iov.data(), static_cast<int>(iov.size())); });
  std::vector<std::uint8_t> got = recvExactly(*p.server, expected.size());
  sender.join();
  EXPECT_TRUE(sent);
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_TRUE(got == expected) << "bytes differ or arrived out of order";
}

TEST(TcpSocket, SendAllHandlesMoreIovecsThanOneSendmsgTakes) {
  Pair p;
  ASSERT_NE(p.server, nullptr);
  constexpr int kCount = 3000;  // above IOV_MAX (1024 on Linux)
  std::vector<std::uint8_t> data(kCount * 3);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i * 7 + i / 256);
  std::vector<iovec> iov;
  for (int i = 0; i < kCount; ++i) iov.push_back({data.data() + i * 3, 3});

  bool sent = false;
  std::thread sender([&] { sent = p.client->sendAll(iov.data(), kCount); });
  std::vector<std::uint8_t> got = recvExactly(*p.server, data.size());
  sender.join();
  EXPECT_TRUE(sent);
  EXPECT_TRUE(got == data);
}

// A peer that never reads cannot hold a sender with a time limit (the
// HELLO of a handshake): sendAll gives up with ETIMEDOUT.
TEST(TcpSocket, SendAllWithATimeLimitGivesUpOnAPeerThatNeverReads) {
  Pair p;
  ASSERT_NE(p.server, nullptr);
  // More than both sockets' buffers hold: the server side never reads.
  std::vector<std::uint8_t> data(64 << 20, 0x5a);
  iovec v{data.data(), data.size()};
  errno = 0;
  EXPECT_FALSE(p.client->sendAll(&v, 1, 200));
  EXPECT_EQ(errno, ETIMEDOUT);
}

TEST(TcpSocket, BothDirectionsWork) {
  Pair p;
  ASSERT_NE(p.server, nullptr);
  char ping[] = "ping";
  iovec a{ping, 4};
  ASSERT_TRUE(p.client->sendAll(&a, 1));
  EXPECT_EQ(recvExactly(*p.server, 4), (std::vector<std::uint8_t>{'p', 'i', 'n', 'g'}));
  char pong[] = "pong";
  iovec b{pong, 4};
  ASSERT_TRUE(p.server->sendAll(&b, 1));
  EXPECT_EQ(recvExactly(*p.client, 4), (std::vector<std::uint8_t>{'p', 'o', 'n', 'g'}));
}

TEST(TcpSocket, ShutdownWakesABlockedRecv) {
  Pair p;
  ASSERT_NE(p.server, nullptr);
  std::atomic<bool> started{false};
  long result = 1;
  std::thread reader([&] {
    std::uint8_t buf[16];
    started = true;
    result = p.client->recvSome(buf, sizeof buf);
  });
  while (!started.load()) std::this_thread::yield();
  p.client->shutdown();
  p.client->shutdown();  // idempotent
  reader.join();
  EXPECT_TRUE(result == 0 || result == -1) << result;
  // The peer sees the end of the stream.
  std::uint8_t buf[16];
  ASSERT_TRUE(p.server->waitReadable(30000));
  EXPECT_EQ(p.server->recvSome(buf, sizeof buf), 0);
}

TEST(TcpSocket, PeerCloseEndsTheStream) {
  Pair p;
  ASSERT_NE(p.server, nullptr);
  p.server.reset();
  std::uint8_t buf[16];
  ASSERT_TRUE(p.client->waitReadable(30000));
  EXPECT_EQ(p.client->recvSome(buf, sizeof buf), 0);
}

TEST(TcpSocket, WaitReadableTimesOutWithoutData) {
  Pair p;
  ASSERT_NE(p.server, nullptr);
  EXPECT_FALSE(p.client->waitReadable(0));
  EXPECT_FALSE(p.client->waitReadable(20));
}

TEST(TcpSocket, ConnectToAClosedPortFindsNoBackendAndNamesTheAddress) {
  std::uint16_t port;
  {
    TcpListener l("127.0.0.1:0");
    port = l.port();
  }  // closed: nothing listens on the port any more
  std::string addr = localAddress(port);
  try {
    TcpSocket::connect(addr, kConnectTimeoutMs);
    ADD_FAILURE() << "connected to " << addr << " with nothing listening";
  } catch (const NoBackendServiceError& e) {
    EXPECT_NE(std::string(e.what()).find(addr), std::string::npos) << e.what();
    const ConnectionClosedError& base = e;  // code that catches the broader error still does
    EXPECT_EQ(base.state(), myelin::EndpointState::kClosed);
  }
}

TEST(TcpSocket, ConnectToAMalformedAddressThrowsConfigurationError) {
  EXPECT_THROW(TcpSocket::connect("nohost", kConnectTimeoutMs), InvalidConfigurationError);
}

TEST(TcpListener, CloseMakesABlockedAcceptReturnNull) {
  TcpListener l("127.0.0.1:0");
  std::atomic<bool> started{false};
  std::unique_ptr<TcpSocket> accepted = std::make_unique<TcpSocket>();
  std::thread t([&] {
    started = true;
    accepted = l.accept();
  });
  while (!started.load()) std::this_thread::yield();
  l.close();
  l.close();  // idempotent
  t.join();
  EXPECT_EQ(accepted, nullptr);
}

TEST(TcpListener, AcceptAfterCloseReturnsNull) {
  TcpListener l("127.0.0.1:0");
  l.close();
  EXPECT_EQ(l.accept(), nullptr);
}

}  // namespace
}  // namespace myelin::detail
