// Malformed input from the network: a raw socket speaks broken Myelin to a
// real service process. Each case must fault only that connection, with a
// clear error, while the service keeps serving its other connections.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <myelin/myelin.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "calc.h"
#include "schema/local_schema.h"
#include "service_fixture.h"
#include "wire/frame.h"

namespace myelin_test {
namespace {

using Bytes = std::vector<std::uint8_t>;
using myelin::detail::ByteBuffer;

/// A hand-driven TCP peer.
class RawPeer {
 public:
  explicit RawPeer(std::uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) throw std::runtime_error("connect failed");
  }
  ~RawPeer() { ::close(fd_); }
  void send(const Bytes& b) { ASSERT_EQ(::send(fd_, b.data(), b.size(), MSG_NOSIGNAL), static_cast<ssize_t>(b.size())); }
  void send(const ByteBuffer& b) { send(Bytes(b.data(), b.data() + b.size())); }
  void finishSending() { ::shutdown(fd_, SHUT_WR); }
  void shutdownBoth() { ::shutdown(fd_, SHUT_RDWR); }
  /// Reads and drops what the service sends until it closes the connection.
  void readUntilClosed() {
    std::uint8_t tmp[65536];
    while (::recv(fd_, tmp, sizeof tmp, 0) > 0) {
    }
  }
  /// Sends what the service takes of `b` until it closes the connection.
  void sendUntilClosed(const ByteBuffer& b) {
    std::size_t off = 0;
    while (off < b.size()) {
      ssize_t n = ::send(fd_, b.data() + off, b.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;
      off += static_cast<std::size_t>(n);
    }
  }

  /// Reads one frame (the service's HELLO) and returns its body.
  Bytes readFrame() {
    Bytes buf;
    for (;;) {
      if (auto span = myelin::detail::peekFrame(buf.data(), buf.size(), 1 << 24); span && buf.size() >= span->total()) {
        return Bytes(buf.begin() + static_cast<long>(span->headerLen), buf.begin() + static_cast<long>(span->total()));
      }
      std::uint8_t tmp[4096];
      ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
      if (n <= 0) throw std::runtime_error("service closed before its HELLO");
      buf.insert(buf.end(), tmp, tmp + n);
    }
  }

  /// True if the service closes the connection within `ms`.
  bool closedByService(int ms) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      std::uint8_t tmp[4096];
      ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
      if (n <= 0) return true;
    }
    return false;
  }

 private:
  int fd_ = -1;
};

/// Our HELLO: we call Calc::one(uint32_t v), Calc::sleepMs(uint32_t ms) and
/// Calc::echo(std::string s); we name a maxMessageSize if given.
ByteBuffer helloFrame(std::optional<std::uint64_t> maxMessageSize = std::nullopt) {
  myelin::detail::SchemaDescriptor d;
  myelin::detail::ClassSchema c;
  c.name = "myelin_test::Calc";
  myelin::detail::MethodInfo m;
  m.name = "one";
  m.mode = myelin::detail::CallMode::kAsyncVoid;
  m.params = {{"v", "u32"}};
  c.called.push_back(m);
  m.name = "sleepMs";
  m.mode = myelin::detail::CallMode::kSync;
  m.params = {{"ms", "u32"}};
  c.called.push_back(m);
  m.name = "echo";
  m.returnSig = "s";
  m.params = {{"s", "s"}};
  c.called.push_back(m);
  m.name = "readValue";
  m.returnSig = "i64";
  m.params = {{"v", "ar<i64>"}};
  c.called.push_back(m);
  d.classes.push_back(c);
  ByteBuffer b;
  myelin::detail::appendFrame(b, [&](myelin::detail::WireWriter& w) {
    w.rawByte(static_cast<std::uint8_t>(myelin::detail::FrameType::kHello));
    d.encode(w.buffer(), myelin::detail::HelloLimits{maxMessageSize});
  });
  return b;
}

/// The service's wire id of Calc's method `name`, from its HELLO.
std::uint8_t methodId(const Bytes& helloBody, const std::string& name) {
  auto d = myelin::detail::SchemaDescriptor::decode(helloBody.data() + 1, helloBody.size() - 1);
  int id = 0;
  for (const auto& c : d.classes) {
    for (const auto& m : c.implemented) {
      if (c.name == "myelin_test::Calc" && m.name == name) return static_cast<std::uint8_t>(id);
      ++id;
    }
  }
  throw std::runtime_error("service does not implement Calc::" + name);
}

class BadInput : public ServiceSuite {
 protected:
  void SetUp() override {
    good_ = connect();
    faultsBefore_ = Calc::faults().size();
  }

  /// A raw peer that completed the handshake; `one` is Calc::one's id
  /// (and the service's HELLO is kept in hello_).
  RawPeer handshaken(std::uint8_t& one) {
    RawPeer p(service_->port());
    p.send(helloFrame());
    hello_ = p.readFrame();
    one = methodId(hello_, "one");
    return p;
  }

  /// The service closed `peer`, recorded a fault mentioning `what`, and still
  /// serves the good connection.
  void expectFaulted(RawPeer& peer, const std::string& what) {
    EXPECT_TRUE(peer.closedByService(5000)) << "the service kept a broken connection open";
    std::vector<std::string> faults;
    for (int i = 0; i < 200; ++i) {  // the fault is recorded on its own thread
      faults = Calc::faults();
      if (faults.size() > faultsBefore_) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_EQ(faults.size(), faultsBefore_ + 1) << "exactly this connection faulted";
    EXPECT_NE(faults.back().find(what), std::string::npos) << faults.back();
    EXPECT_EQ(Calc::add(20, 22), 42) << "other connections keep working";
    EXPECT_TRUE(good_.isConnected());
  }

  myelin::Endpoint good_;
  std::size_t faultsBefore_ = 0;
  Bytes hello_;
};

TEST_F(BadInput, GarbageInsteadOfHandshake) {
  RawPeer p(service_->port());
  std::string junk = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  junk.resize(200, 'x');
  p.send(Bytes(junk.begin(), junk.end()));
  expectFaulted(p, "not a HELLO");
}

TEST_F(BadInput, HelloWithBadMagic) {
  RawPeer p(service_->port());
  p.send(Bytes{0x06, 0x09, 'N', 'O', 'P', 'E', 0x01});
  expectFaulted(p, "bad magic");
}

TEST_F(BadInput, AHelloAnnouncingAMaxMessageSizeBelowTheLeast) {
  RawPeer p(service_->port());
  p.send(helloFrame(1023));
  expectFaulted(p, "announced a maxMessageSize of 1023 bytes, below 1024");
}

TEST_F(BadInput, TruncatedHandshake) {
  RawPeer p(service_->port());
  ByteBuffer h = helloFrame();
  p.send(Bytes(h.data(), h.data() + h.size() / 2));
  p.finishSending();
  expectFaulted(p, "handshake");
}

TEST_F(BadInput, OversizedLengthIsRefusedBeforeAllocating) {
  std::uint8_t one;
  RawPeer p = handshaken(one);
  p.send(Bytes{0x80, 0x80, 0x80, 0x08, 0x01});  // 16 MiB > the service's 1 MiB limit
  expectFaulted(p, "exceeds maxMessageSize");
}

TEST_F(BadInput, BadVarint) {
  std::uint8_t one;
  RawPeer p = handshaken(one);
  p.send(Bytes{0x0d, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x00, 0x00});
  expectFaulted(p, "bad varint");
}

TEST_F(BadInput, UnknownMethodId) {
  std::uint8_t one;
  RawPeer p = handshaken(one);
  p.send(Bytes{0x04, 0x01, 0x00, 0xe7, 0x07});  // method 999
  expectFaulted(p, "method id 999");
}

TEST_F(BadInput, TrailingBytesAfterTheLastParameter) {
  std::uint8_t one;
  RawPeer p = handshaken(one);
  p.send(Bytes{0x04, 0x01, 0x00, one, 0x05});  // a valid call first
  p.send(Bytes{0x05, 0x01, 0x00, one, 0x05, 0x09});
  expectFaulted(p, "trailing bytes");
}

TEST_F(BadInput, ACallInAFrameOfAnotherModeThanItsMethods) {
  std::uint8_t one;
  RawPeer p = handshaken(one);
  p.send(Bytes{0x04, 0x01, 0x00, one, 0x05});  // a valid call first: CALL_VOID, as Calc::one is AsyncVoid
  ByteBuffer b;
  myelin::detail::appendFrame(b, [&](myelin::detail::WireWriter& w) {
    w.rawByte(static_cast<std::uint8_t>(myelin::detail::FrameType::kCallSync));
    w.rawVarint(0);
    w.rawVarint(one);
    w.leafUnsigned(5);
  });
  p.send(b);
  expectFaulted(p, "invalid call of myelin_test::Calc::one: call mode does not match");
}

TEST_F(BadInput, TruncatedFrame) {
  std::uint8_t one;
  RawPeer p = handshaken(one);
  p.send(Bytes{0x10, 0x01, 0x00});
  p.finishSending();
  expectFaulted(p, "truncated message");
}

TEST_F(BadInput, ValueFrameOfAnUnknownOperation) {
  std::uint8_t one;
  RawPeer p = handshaken(one);
  p.send(Bytes{0x04, 0x00, 0x00, 0x07, 0x01});  // VALUE slot 0 op 7
  expectFaulted(p, "unknown VALUE operation 7");
}

TEST_F(BadInput, FetchOfAValueNotHeld) {
  std::uint8_t one;
  RawPeer p = handshaken(one);
  p.send(Bytes{0x04, 0x00, 0x00, 0x01, 0x03});  // FETCH value 3
  expectFaulted(p, "FETCH of value 3, which this side does not hold");
}

TEST_F(BadInput, DropOfAValueNotHeld) {
  std::uint8_t one;
  RawPeer p = handshaken(one);
  p.send(Bytes{0x05, 0x00, 0x00, 0x02, 0x03, 0x00});  // DROP value 3 after 0 mentions
  expectFaulted(p, "DROP of value 3, which this side does not hold");
}

TEST_F(BadInput, ValueFrameCutOff) {
  std::uint8_t one;
  RawPeer p = handshaken(one);
  p.send(Bytes{0x04, 0x00, 0x00, 0x02, 0x03});  // DROP without its mentions
  expectFaulted(p, "truncated");
}

TEST_F(BadInput, CreditForALaneOfTheSenders) {
  std::uint8_t one;
  RawPeer p = handshaken(one);
  p.send(Bytes{0x03, 0x0f, 0x00, 0x10});  // CREDIT with R = 0
  expectFaulted(p, "CREDIT for a lane of the sender's");
}

TEST_F(BadInput, DeadlineBitOnAMessageThatIsNotACall) {
  std::uint8_t one;
  RawPeer p = handshaken(one);
  p.send(Bytes{0x03, 0x87, 0x00, 0x01});  // BARRIER with the deadline bit
  expectFaulted(p, "deadline bit on a message that is not a call");
}

TEST_F(BadInput, ACallWhoseDeadlineIsCutOff) {
  std::uint8_t one;
  RawPeer p = handshaken(one);
  p.send(Bytes{0x06, 0x81, 0x00, one, 0x10, 0x27, 0x00});  // 3 of the deadline's 8 bytes
  expectFaulted(p, "64-bit field is cut off");
}

TEST_F(BadInput, CancelOfACallThatNeverCame) {
  std::uint8_t one;
  RawPeer p = handshaken(one);
  p.send(Bytes{0x03, 0x0d, 0x00, 0x05});  // CANCEL slot 0 seq 5: no call was received on it
  expectFaulted(p, "CANCEL of call 5, which never came");
}

TEST_F(BadInput, LaneOfAnUnknownMode) {
  std::uint8_t one;
  RawPeer p = handshaken(one);
  p.send(Bytes{0x04, 0x0c, 0x00, 0x07, 0x01});  // LANE slot 0 mode 7
  expectFaulted(p, "unknown lane mode");
}

TEST_F(BadInput, LaneOfTooManyThreads) {
  std::uint8_t one;
  RawPeer p = handshaken(one);
  p.send(Bytes{0x05, 0x0c, 0x00, 0x02, 0xe8, 0x07});  // LANE slot 0 parallel 1000
  expectFaulted(p, "threads");
}

TEST_F(BadInput, LaneForALaneOfTheReceiver) {
  std::uint8_t one;
  RawPeer p = handshaken(one);
  p.send(Bytes{0x04, 0x1c, 0x00, 0x01, 0x01});  // the receiver-lane bit set
  expectFaulted(p, "LANE for a lane of our own");
}

TEST_F(BadInput, ObjectBitOnAMessageThatIsNotACall) {
  std::uint8_t one;
  RawPeer p = handshaken(one);
  p.send(Bytes{0x03, 0x47, 0x00, 0x01});  // BARRIER with the object bit
  expectFaulted(p, "object bit");
}

TEST_F(BadInput, ObjectCallWithoutItsObjectId) {
  std::uint8_t one;
  RawPeer p = handshaken(one);
  p.send(Bytes{0x03, 0x42, 0x00, one});  // CALL_SYNC with the object bit, then nothing
  expectFaulted(p, "truncated");
}

TEST_F(BadInput, ReleaseOfAnObjectNeverExported) {
  std::uint8_t one;
  RawPeer p = handshaken(one);
  p.send(Bytes{0x05, 0x0b, 0x00, 0x07, 0x01, 0x00});  // RELEASE object 7
  expectFaulted(p, "never exported");
}

TEST_F(BadInput, ReplyToACallNeverMade) {
  std::uint8_t one;
  RawPeer p = handshaken(one);
  p.send(Bytes{0x03, 0x14, 0x00, 0x05});
  expectFaulted(p, "does not exist");
}

TEST_F(BadInput, SecondHello) {
  std::uint8_t one;
  RawPeer p = handshaken(one);
  p.send(helloFrame());
  expectFaulted(p, "second HELLO");
}

}  // namespace
}  // namespace myelin_test

namespace myelin_test {
namespace {

TEST_F(BadInput, APeerThatIgnoresFlowControlIsCutOffAtMaxAllocQueuedBytes) {
  // The test service allows 32 MiB of queued messages (service_main.cpp).
  // A sync call that sleeps holds the lane; 40 MiB of calls pile up behind
  // it, sent without waiting for credit as a well-behaved peer would. (The
  // sleep outlasts the flood even under sanitizers, and what the service
  // sends back is read, so its writes never hold up its reading.)
  std::uint8_t one;
  RawPeer p = handshaken(one);
  const std::uint8_t sleepMs = methodId(hello_, "sleepMs");
  const std::uint8_t echo = methodId(hello_, "echo");
  ByteBuffer b;
  myelin::detail::appendFrame(b, [&](myelin::detail::WireWriter& w) {
    w.rawByte(static_cast<std::uint8_t>(myelin::detail::FrameType::kCallSync));
    w.rawVarint(0);
    w.rawVarint(sleepMs);
    w.leafUnsigned(10000);
  });
  const std::string big(64 * 1024, 'x');
  for (int i = 0; i < 640; ++i) {
    myelin::detail::appendFrame(b, [&](myelin::detail::WireWriter& w) {
      w.rawByte(static_cast<std::uint8_t>(myelin::detail::FrameType::kCallSync));
      w.rawVarint(0);
      w.rawVarint(echo);
      myelin::detail::Codec<std::string>::encode(w, big, myelin::detail::CodecCtx{});
    });
  }
  std::atomic<bool> closed{false};
  std::thread drain([&] {
    p.readUntilClosed();
    closed.store(true);
  });
  std::atomic<bool> sendEnded{false};
  std::thread sender([&] {
    p.sendUntilClosed(b);
    sendEnded.store(true);
  });
  // The service cuts the peer off: it records the fault and closes its side.
  // It stopped reading with its receive buffer full, so no window opens for
  // the rest of the flood: the peer's blocked send ends only when the
  // service resets the connection (data arriving after its shutdown, or its
  // socket closed with data unread).
  std::vector<std::string> faults;
  for (int i = 0; i < 3000; ++i) {
    faults = Calc::faults();
    if (faults.size() > faultsBefore_ && closed.load() && sendEnded.load()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const bool closedByService = closed.load();
  const bool resetByService = sendEnded.load();
  p.shutdownBoth();  // lets the test end if the service failed
  sender.join();
  drain.join();
  EXPECT_TRUE(closedByService) << "the service kept the connection open";
  EXPECT_TRUE(resetByService) << "the service's socket stayed open: the flooding peer's send never ended";
  ASSERT_EQ(faults.size(), faultsBefore_ + 1) << "exactly this connection faulted";
  EXPECT_NE(faults.back().find("more than maxAllocQueuedBytes"), std::string::npos) << faults.back();
  EXPECT_EQ(Calc::add(20, 22), 42) << "other connections keep working";
  EXPECT_TRUE(good_.isConnected());
}

TEST_F(BadInput, ACallNamingAValueNotHeld) {
  std::uint8_t one;
  RawPeer p = handshaken(one);
  const std::uint8_t readValue = methodId(hello_, "readValue");
  ByteBuffer b;
  myelin::detail::appendFrame(b, [&](myelin::detail::WireWriter& w) {
    w.rawByte(static_cast<std::uint8_t>(myelin::detail::FrameType::kCallSync));
    w.rawVarint(0);
    w.rawVarint(readValue);
    w.leafUnsigned(7);  // held value 7: no call made it
  });
  p.send(b);
  expectFaulted(p, "value 7, which this side does not hold");
}

}  // namespace
}  // namespace myelin_test
