// TLS and mutual TLS (docs/tls.md): calls over TLS in both directions, many
// calls per record, the refusal matrix (plain against TLS both ways, wrong
// CA, expired certificate, wrong host, missing or foreign client
// certificate), a corrupted record, configuration errors, and a handshake
// by `openssl s_client`. Service and clients run in this process.
#include <gtest/gtest.h>
#include <myelin/myelin.h>
#include <sys/wait.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "eventually.h"
#include "runtime/endpoint_impl.h"
#include "sym_gen.h"
#include "tcp_proxy.h"
#include "thread_names.h"
#include "tls_certs.h"

namespace sym {
extern const char* const kSide;
const char* const kSide = "tls";
}  // namespace sym

namespace myelin_test {
namespace {

using Clock = std::chrono::steady_clock;

/// Errors of the service's connections that faulted, as onDisconnect saw
/// them.
struct Faults {
  std::mutex mu;
  std::vector<std::string> errors;
  void add(const std::string& e) {
    std::lock_guard lock(mu);
    errors.push_back(e);
  }
  /// Waits up to 10 s for a fault whose error contains `part`.
  bool saw(const std::string& part) {
    return eventually([&] {
      std::lock_guard lock(mu);
      for (auto& e : errors) {
        if (e.find(part) != std::string::npos) {
          std::printf("service: %s\n", e.c_str());
          return true;
        }
      }
      return false;
    });
  }
  std::string all() {
    std::lock_guard lock(mu);
    std::string out;
    for (auto& e : errors) out += "[" + e + "] ";
    return out;
  }
};

class Tls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { pki_ = new TestPki(); }
  // A test's services are stopped by now, but their connections are torn
  // down on their own threads (OpenSSL objects freed there). Wait for it, so
  // that no teardown runs while the process exits (LeakSanitizer would see
  // half-freed OpenSSL objects). One endpoint may stay: the last connect()
  // is this thread's endpoint until it exits.
  void TearDown() override {
    EXPECT_TRUE(eventually([] { return myelin::detail::EndpointImpl::liveObjects() <= 1; }))
        << myelin::detail::EndpointImpl::liveObjects() << " endpoints still alive";
    // An endpoint destroyed on its own reader leaves that thread to end by
    // itself (OpenSSL's per-thread cleanup runs then): the next test, or the
    // process's exit and OpenSSL's cleanup, must not race with it.
    EXPECT_TRUE(eventually([] {
      auto names = threadNames();
      return names.count("myelin-reader") == 0 && names.count("myelin-notice") == 0;
    })) << "a reader or notice thread of a closed endpoint is still running";
  }
  static void TearDownTestSuite() {
    delete pki_;
    pki_ = nullptr;
  }

  /// A service with TLS on, using certificate `cert`; faults go to faults_.
  myelin::Server startService(const std::string& cert = "service", bool mutual = false) {
    myelin::EndpointConfig cfg;
    cfg.handshakeTimeoutMs = 5000;
    auto ci = myelin::ConnectionInfo()
                  .setListenAddress("127.0.0.1:0")
                  .setConfig(cfg)
                  .setOpenSsl(true, pki_->pem(cert), pki_->key(cert))
                  .setOnDisconnect([f = faults_](myelin::Endpoint ep) {
                    if (ep.getState() == myelin::EndpointState::kFaulted) f->add(ep.getError());
                  });
    if (mutual) ci.setTlsCaFile(pki_->pem("ca")).setTlsVerifyPeer(true);
    return ci.start();
  }
  myelin::Server startPlainService() {
    return myelin::ConnectionInfo()
        .setListenAddress("127.0.0.1:0")
        .setOnDisconnect([f = faults_](myelin::Endpoint ep) {
          if (ep.getState() == myelin::EndpointState::kFaulted) f->add(ep.getError());
        })
        .start();
  }
  /// A TLS client of `port` on localhost that trusts the CA `ca`.
  static myelin::ConnectionInfo client(std::uint16_t port, const std::string& ca = "ca") {
    return myelin::ConnectionInfo()
        .setConnectAddress("localhost:" + std::to_string(port))
        .setOpenSsl(true)
        .setTlsCaFile(pki_->pem(ca));
  }
  /// connect() must fail, soon; returns its message.
  static std::string refusal(const myelin::ConnectionInfo& ci) {
    auto start = Clock::now();
    std::string message;
    try {
      ci.connect();
      ADD_FAILURE() << "connect() succeeded";
    } catch (const myelin::ConnectionClosedError& e) {
      message = e.what();
    }
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(5)) << "a refusal must not wait for a timeout: " << message;
    std::printf("client: %s\n", message.c_str());
    return message;
  }

  static inline TestPki* pki_ = nullptr;
  std::shared_ptr<Faults> faults_ = std::make_shared<Faults>();
};

TEST_F(Tls, CallsFlowOverTlsInBothDirections) {
  auto server = startService();
  auto ep = client(server.port()).connect();
  EXPECT_EQ(ep.tlsInfo().rfind("TLSv1.3 ", 0), 0u) << ep.tlsInfo();
  ASSERT_TRUE(eventually([&] { return server.endpoints().size() == 1; }));
  EXPECT_EQ(server.endpoints()[0].tlsInfo().rfind("TLSv1.3 ", 0), 0u);

  remote::sym::Peer peer("bob");
  EXPECT_EQ(peer.hear("me", "hello"), 1);
  // Larger than a TLS record many times over, in both directions.
  std::string big(700 * 1024, 'x');
  for (std::size_t i = 0; i < big.size(); i += 97) big[i] = static_cast<char>('a' + i % 26);
  EXPECT_EQ(peer.hear("me", big), 2);
  auto lines = peer.lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1], "me: " + big);
  // The service calls back into this program during a call.
  EXPECT_EQ(remote::sym::Peer::askBack(), "tls");

  // Several threads at once, fire-and-forget and round trips mixed.
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      myelin::EndpointCtx ctx(ep);
      remote::sym::Peer mine("t" + std::to_string(t));
      for (int i = 0; i < 2000; ++i) mine.nudge();
      for (int i = 0; i < 200; ++i) {
        if (mine.hear("t", std::to_string(i)) != i + 1) ++wrong;
      }
      if (mine.heardLater().value(10000) != 2200) ++wrong;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_TRUE(ep.isConnected());
}

TEST_F(Tls, ManyCallsTravelInOneRecord) {
  auto server = startService();
  TcpProxy proxy(server.port(), true);
  auto ep = myelin::ConnectionInfo()
                .setConnectAddress("127.0.0.1:" + std::to_string(proxy.port()))
                .setOpenSsl(true)
                .setTlsCaFile(pki_->pem("ca"))
                .connect();
  remote::sym::Peer peer("p");
  ep.getLocalStats(true);
  constexpr int kCalls = 20000;
  for (int i = 0; i < kCalls; ++i) peer.nudge();
  ASSERT_EQ(peer.heardLater().value(20000), kCalls);
  myelin::EndpointStats stats = ep.getLocalStats();
  // Walk the client's TLS records: 5-byte headers, type 23 = application data.
  std::string bytes = proxy.clientBytes();
  std::size_t records = 0, appRecords = 0;
  for (std::size_t at = 0; at + 5 <= bytes.size();) {
    auto len = static_cast<std::size_t>(static_cast<unsigned char>(bytes[at + 3]) << 8 |
                                        static_cast<unsigned char>(bytes[at + 4]));
    ++records;
    if (bytes[at] == 23) ++appRecords;
    at += 5 + len;
  }
  ASSERT_GT(appRecords, 0u);
  std::printf("%d calls went in %zu application-data records (%zu records, %zu bytes in all); %llu socket writes\n",
              kCalls, appRecords, records, bytes.size(), static_cast<unsigned long long>(stats.socketWrites));
  // Encryption keeps the batches: a write's calls share its records (one
  // per 16 KiB; the handshake and the first calls add a few). How many calls
  // a batch holds is the runtime's doing and depends on how far the caller
  // runs ahead of the socket (~400 in a Debug build, ~20 under TSan, one
  // when each call takes longer than burstGapUs), so only the records per
  // write are asserted.
  EXPECT_GT(stats.messagesSent, static_cast<std::uint64_t>(kCalls));
  EXPECT_LE(appRecords, stats.socketWrites + stats.bytesSent / (16 * 1024) + 8) << "records must follow batches";
}

TEST_F(Tls, APlainClientIsRefusedByATlsService) {
  auto server = startService();
  std::string msg =
      refusal(myelin::ConnectionInfo().setConnectAddress("127.0.0.1:" + std::to_string(server.port())));
  EXPECT_NE(msg.find("requires TLS"), std::string::npos) << msg;
  EXPECT_TRUE(faults_->saw("does not speak TLS")) << faults_->all();
}

TEST_F(Tls, ATlsClientIsRefusedByAPlainService) {
  auto server = startPlainService();
  std::string msg = refusal(client(server.port()));
  EXPECT_NE(msg.find("does not speak TLS"), std::string::npos) << msg;
  EXPECT_TRUE(faults_->saw("speaks TLS and TLS is off")) << faults_->all();
}

TEST_F(Tls, AServiceCertificateFromAnotherCaIsRefused) {
  auto server = startService("service-other");
  std::string msg = refusal(client(server.port()));
  EXPECT_NE(msg.find("certificate verify failed: unable to get local issuer certificate"), std::string::npos) << msg;
  EXPECT_TRUE(faults_->saw("unknown ca")) << faults_->all();
}

TEST_F(Tls, AnExpiredServiceCertificateIsRefused) {
  auto server = startService("service-expired");
  std::string msg = refusal(client(server.port()));
  EXPECT_NE(msg.find("certificate has expired"), std::string::npos) << msg;
  EXPECT_TRUE(faults_->saw("alert certificate expired")) << faults_->all();
}

TEST_F(Tls, ACertificateForAnotherHostIsRefused) {
  auto server = startService("service-elsewhere");
  std::string msg = refusal(client(server.port()));
  EXPECT_NE(msg.find("hostname mismatch"), std::string::npos) << msg;
  // The same certificate is accepted for the name it carries.
  auto ep = client(server.port()).setTlsHostname("elsewhere.example").connect();
  EXPECT_TRUE(ep.isConnected());
}

TEST_F(Tls, ConnectingByAddressChecksTheAddress) {
  auto server = startService();
  auto ep = myelin::ConnectionInfo()
                .setConnectAddress("127.0.0.1:" + std::to_string(server.port()))
                .setOpenSsl(true)
                .setTlsCaFile(pki_->pem("ca"))
                .connect();
  EXPECT_TRUE(ep.isConnected());
  auto elsewhere = startService("service-elsewhere");
  std::string msg = refusal(myelin::ConnectionInfo()
                                .setConnectAddress("127.0.0.1:" + std::to_string(elsewhere.port()))
                                .setOpenSsl(true)
                                .setTlsCaFile(pki_->pem("ca")));
  EXPECT_NE(msg.find("IP address mismatch"), std::string::npos) << msg;
}

TEST_F(Tls, WithoutVerificationAnyCertificateIsTaken) {
  auto server = startService("service-other");
  auto ep = myelin::ConnectionInfo()
                .setConnectAddress("localhost:" + std::to_string(server.port()))
                .setOpenSsl(true)
                .setTlsVerifyPeer(false)
                .connect();
  remote::sym::Peer peer("p");
  EXPECT_EQ(peer.hear("me", "unverified"), 1);
}

TEST_F(Tls, MutualTlsRequiresAClientCertificateFromItsCa) {
  auto server = startService("service", true);
  // No certificate: the service refuses it (with TLS 1.3 the client learns
  // it when it reads the service's first message).
  std::string msg = refusal(client(server.port()));
  EXPECT_NE(msg.find("certificate required"), std::string::npos) << msg;
  EXPECT_TRUE(faults_->saw("peer did not return a certificate")) << faults_->all();

  // A certificate from another CA.
  msg = refusal(client(server.port()).setOpenSsl(true, pki_->pem("client-other"), pki_->key("client-other")));
  EXPECT_NE(msg.find("unknown ca"), std::string::npos) << msg;
  EXPECT_TRUE(faults_->saw("certificate verify failed: unable to get local issuer certificate")) << faults_->all();

  // The CA's client certificate: in, and the service sees who it is.
  auto ep = client(server.port()).setOpenSsl(true, pki_->pem("client"), pki_->key("client")).connect();
  remote::sym::Peer peer("p");
  EXPECT_EQ(peer.hear("me", "trusted"), 1);
  ASSERT_TRUE(eventually([&] { return server.endpoints().size() == 1; }));
  EXPECT_NE(server.endpoints()[0].tlsInfo().find("CN=test client"), std::string::npos)
      << server.endpoints()[0].tlsInfo();
}

TEST_F(Tls, ACorruptedRecordFaultsOnlyItsConnection) {
  auto server = startService();
  TcpProxy proxy(server.port());
  auto bad = myelin::ConnectionInfo()
                 .setConnectAddress("127.0.0.1:" + std::to_string(proxy.port()))
                 .setOpenSsl(true)
                 .setTlsCaFile(pki_->pem("ca"))
                 .connect();
  auto good = client(server.port()).connect();
  {
    myelin::EndpointCtx ctx(bad);
    remote::sym::Peer peer("p");
    EXPECT_EQ(peer.hear("me", "before"), 1);
    proxy.corruptNextClientChunk();
    EXPECT_THROW(peer.hear("me", "tampered"), myelin::ConnectionClosedError);
  }
  EXPECT_TRUE(faults_->saw("bad record mac")) << faults_->all();
  myelin::EndpointCtx ctx(good);
  remote::sym::Peer peer("q");
  EXPECT_EQ(peer.hear("me", "still here"), 1);
}

TEST_F(Tls, AesGcm128IsTheDefaultSuiteAndTheServicesOrderDecides) {
  auto suiteOf = [](const std::string& info) {
    std::size_t from = info.find(' ') + 1;
    return info.substr(from, info.find_first_of(" ,", from) - from);
  };
  {
    auto server = startService();
    auto ep = client(server.port()).connect();
    EXPECT_EQ(suiteOf(ep.tlsInfo()), "TLS_AES_128_GCM_SHA256") << ep.tlsInfo();
    // A client that prefers another suite still gets the service's first.
    auto other = client(server.port()).setTlsCipherSuites("TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256").connect();
    EXPECT_EQ(suiteOf(other.tlsInfo()), "TLS_AES_128_GCM_SHA256") << other.tlsInfo();
    // One that allows only another suite the service allows gets that one.
    auto only = client(server.port()).setTlsCipherSuites("TLS_AES_256_GCM_SHA384").connect();
    EXPECT_EQ(suiteOf(only.tlsInfo()), "TLS_AES_256_GCM_SHA384") << only.tlsInfo();
    // One that puts ChaCha20-Poly1305 first (no AES instructions) gets it.
    auto chacha =
        client(server.port()).setTlsCipherSuites("TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256").connect();
    EXPECT_EQ(suiteOf(chacha.tlsInfo()), "TLS_CHACHA20_POLY1305_SHA256") << chacha.tlsInfo();
    EXPECT_EQ(remote::sym::Peer("p").hear("me", "over chacha"), 1);
  }
  auto server = myelin::ConnectionInfo()
                    .setListenAddress("127.0.0.1:0")
                    .setOpenSsl(true, pki_->pem("service"), pki_->key("service"))
                    .setTlsCipherSuites("TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256")
                    .start();
  auto ep = client(server.port()).connect();
  EXPECT_EQ(suiteOf(ep.tlsInfo()), "TLS_AES_256_GCM_SHA384") << ep.tlsInfo();
  ASSERT_TRUE(eventually([&] { return server.endpoints().size() == 1; }));
  EXPECT_EQ(suiteOf(server.endpoints()[0].tlsInfo()), "TLS_AES_256_GCM_SHA384");
}

TEST_F(Tls, ConfigurationErrorsNameTheFile) {
  auto expectError = [](const myelin::ConnectionInfo& ci, bool service, const std::string& part) {
    try {
      if (service) {
        ci.start();
      } else {
        ci.connect();
      }
      ADD_FAILURE() << "no error; expected one saying " << part;
    } catch (const myelin::InvalidConfigurationError& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  auto svc = [] { return myelin::ConnectionInfo().setListenAddress("127.0.0.1:0"); };
  expectError(svc().setOpenSsl(true, "/nonexistent/cert.pem", pki_->key("service")), true, "/nonexistent/cert.pem");
  expectError(svc().setOpenSsl(true, pki_->pem("service"), pki_->key("client")), true, "key values mismatch");
  expectError(svc().setOpenSsl(true), true, "needs a certificate");
  expectError(svc().setOpenSsl(true, pki_->pem("service"), pki_->key("service")).setTlsVerifyPeer(true), true,
              "needs a CA file");
  expectError(myelin::ConnectionInfo()
                  .setConnectAddress("localhost:1")
                  .setOpenSsl(true)
                  .setTlsCaFile("/nonexistent/ca.pem"),
              false, "/nonexistent/ca.pem");
  expectError(svc().setOpenSsl(true, pki_->pem("service"), pki_->key("service")).setTlsCipherSuites("TLS_NO_SUCH"),
              true, "TLS_NO_SUCH");
}

TEST_F(Tls, OpensslSClientCompletesAHandshake) {
  auto server = startService();
  std::string cmd = "timeout 20 openssl s_client -connect 127.0.0.1:" + std::to_string(server.port()) +
                    " -servername localhost -verify_hostname localhost -CAfile " + pki_->pem("ca") +
                    " -verify_return_error -brief </dev/null 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  std::array<char, 512> buf;
  while (std::fgets(buf.data(), buf.size(), p)) out += buf.data();
  int status = ::pclose(p);
  ASSERT_TRUE(WIFEXITED(status)) << out;
  EXPECT_EQ(WEXITSTATUS(status), 0) << out;
  EXPECT_NE(out.find("Protocol version: TLSv1.3"), std::string::npos) << out;
  EXPECT_NE(out.find("Verification: OK"), std::string::npos) << out;
}

}  // namespace
}  // namespace myelin_test
