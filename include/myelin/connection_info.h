// ConnectionInfo: builder that connects a client or starts a service, and
// Server, the handle of a running service.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "myelin/config.h"
#include "myelin/endpoint.h"

namespace myelin {

namespace detail {
class ServerImpl;
}

/// A running service: accepts connections on its port until stop().
///
/// @par Thread Safety
/// Every member may be called from any thread.
class Server {
 public:
  Server() = default;
  explicit Server(std::shared_ptr<detail::ServerImpl> impl) : impl_(std::move(impl)) {}
  /// The port it listens on (useful after listening on port 0).
  std::uint16_t port() const;
  /// Stops accepting and closes every connection; pending calls on them end
  /// with errors. Returns when every connection's onDisconnect has run (no
  /// notice runs after it); called from an onConnect or onDisconnect, it
  /// does not wait (a later call from another thread does). Idempotent.
  void stop();
  /// Blocks until stop() is called.
  void wait();
  /// Endpoints currently connected.
  std::vector<Endpoint> endpoints() const;
  explicit operator bool() const { return impl_ != nullptr; }

 private:
  std::shared_ptr<detail::ServerImpl> impl_;
};

/// TLS settings of a ConnectionInfo (docs/tls.md).
struct TlsConfig {
  bool enabled = false;
  std::string certFile;  ///< PEM certificate chain: the service's, or the client's for mutual TLS
  std::string keyFile;   ///< PEM private key of certFile
  std::string caFile;    ///< PEM CA certificates the peer's certificate is checked against ("": the system's)
  /// Check the peer's certificate. Default: clients do; services do not ask
  /// for one. On a service, true requires a client certificate signed by
  /// caFile (mutual TLS).
  std::optional<bool> verifyPeer;
  std::string hostname;  ///< name the service's certificate must carry ("": the host of the connect address)
  /// TLS 1.3 cipher suites in order of preference, as OpenSSL names them,
  /// separated by ':' ("": kDefaultTlsCipherSuites, whatever the system's
  /// OpenSSL configuration says). A service's order decides between the
  /// suites both sides allow (for TLS 1.2 too, with OpenSSL's own list).
  std::string cipherSuites;
};

/// The TLS 1.3 cipher suites used when none are set: AES-128-GCM first.
/// It carried the list benchmarks with TLS 1-5 % faster than AES-256-GCM,
/// OpenSSL's first choice (docs/benchmarks.md); all three suites stay
/// allowed, and a client that puts ChaCha20-Poly1305 first gets it.
inline constexpr const char* kDefaultTlsCipherSuites =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";

/// How to reach a peer or where to listen, plus the endpoint settings.
///
/// @code
///   auto ep = myelin::ConnectionInfo().setConnectAddress("localhost:55100").connect();
///   auto srv = myelin::ConnectionInfo().setListenAddress("0.0.0.0:0").start();
/// @endcode
class ConnectionInfo {
 public:
  /// "host:port" to listen on; port 0 picks a free port.
  ConnectionInfo& setListenAddress(std::string hostPort);
  /// "host:port" of the service to connect to.
  ConnectionInfo& setConnectAddress(std::string hostPort);
  ConnectionInfo& setConfig(const EndpointConfig& config);
  /// Threads that run calls from peers (default: number of CPUs, at least 2).
  ConnectionInfo& setServiceThreads(unsigned n);
  /// TLS on or off (off by default). A service needs its certificate chain
  /// and key (PEM files); a client gives them only for mutual TLS. Files are
  /// loaded by connect()/start(), which throw InvalidConfigurationError
  /// naming a file that cannot be used. Both sides must agree: a plain peer
  /// is refused with a clear error on both sides.
  ConnectionInfo& setOpenSsl(bool enable, std::string certFile = "", std::string keyFile = "");
  /// PEM file of the CA certificates that sign the peer's certificate
  /// (default: the system's store).
  ConnectionInfo& setTlsCaFile(std::string caFile);
  /// Client: check the service's certificate and name (default true).
  /// Service: require and check a client certificate (mutual TLS; default
  /// false).
  ConnectionInfo& setTlsVerifyPeer(bool verify);
  /// Client: the name the service's certificate must carry, when it is not
  /// the host of the connect address (e.g. connecting to an IP address).
  ConnectionInfo& setTlsHostname(std::string name);
  /// TLS 1.3 cipher suites in order of preference, e.g.
  /// "TLS_AES_256_GCM_SHA384" to allow only that one (default:
  /// kDefaultTlsCipherSuites; TLS 1.2 keeps OpenSSL's own list). A list
  /// in which OpenSSL knows no suite makes connect()/start() throw
  /// InvalidConfigurationError naming it.
  ConnectionInfo& setTlsCipherSuites(std::string suites);
  const TlsConfig& tls() const { return tls_; }

  /// Called for each new connection after its handshake, on a thread of
  /// that connection's notices (it may block and make calls; other
  /// connections' notices do not wait for it).
  ConnectionInfo& setOnConnect(std::function<void(Endpoint)> cb);
  /// Called when a connection closes or faults (including a failed
  /// handshake, which gets no onConnect); getError() says why. It runs on
  /// the connection's notices thread after its onConnect returned, once.
  ConnectionInfo& setOnDisconnect(std::function<void(Endpoint)> cb);

  const std::string& listenAddress() const { return listen_; }
  const std::string& connectAddress() const { return connect_; }
  const EndpointConfig& config() const { return config_; }

  /// Connects, performs the handshake and makes the endpoint current on
  /// this thread. Throws ConnectionClosedError if the service cannot be
  /// reached or the handshake fails.
  Endpoint connect() const;
  /// Starts a service in the background and returns its handle.
  Server start() const;
  /// Starts a service and blocks serving until it is stopped.
  void listen() const;

 private:
  std::string listen_;
  std::string connect_;
  EndpointConfig config_;
  TlsConfig tls_;
  unsigned serviceThreads_ = 0;
  std::function<void(Endpoint)> onConnect_;
  std::function<void(Endpoint)> onDisconnect_;
};

}  // namespace myelin
