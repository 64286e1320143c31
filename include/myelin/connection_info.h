// ConnectionInfo: builder that connects a client or starts a service, and
// Server, the handle of a running service.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
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
  /// with errors. Idempotent.
  void stop();
  /// Blocks until stop() is called.
  void wait();
  /// Endpoints currently connected.
  std::vector<Endpoint> endpoints() const;
  explicit operator bool() const { return impl_ != nullptr; }

 private:
  std::shared_ptr<detail::ServerImpl> impl_;
};

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
  /// Called on a service thread for each new connection after its handshake.
  ConnectionInfo& setOnConnect(std::function<void(Endpoint)> cb);
  /// Called on a separate thread when a connection closes or faults
  /// (including a failed handshake); getError() says why.
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
  unsigned serviceThreads_ = 0;
  std::function<void(Endpoint)> onConnect_;
  std::function<void(Endpoint)> onDisconnect_;
};

}  // namespace myelin
