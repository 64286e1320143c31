// TLS for a connected socket, over OpenSSL (docs/tls.md): a context made
// once per ConnectionInfo (certificate, key, CA, verification), and one
// session per connection that encrypts whole batches into records and lets
// one thread send while another receives.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <memory>
#include <string>

#include "myelin/connection_info.h"
#include "myelin/errors.h"

namespace myelin::detail {

/// The handshake met a peer that speaks plain Myelin, not TLS: a service
/// answers it with a plain GOODBYE so that the peer learns why.
class TlsPlainPeerError : public ConnectionClosedError {
 public:
  using ConnectionClosedError::ConnectionClosedError;
};

/// Settings loaded into OpenSSL: certificate chain, key, CA, verification.
/// Shared by every connection made from one ConnectionInfo; read-only once
/// made.
class TlsContext {
 public:
  /// Loads the files of `cfg`; throws InvalidConfigurationError naming the
  /// file and OpenSSL's reason, or saying that Myelin was built without
  /// OpenSSL.
  static std::shared_ptr<TlsContext> create(const TlsConfig& cfg, bool server);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  bool server() const { return server_; }
  const TlsConfig& config() const { return cfg_; }

 private:
  friend class TlsSession;
  TlsContext(const TlsConfig& cfg, bool server) : cfg_(cfg), server_(server) {}
  TlsConfig cfg_;
  bool server_;
  void* ctx_ = nullptr;  // SSL_CTX
};

/// One connection's TLS state. The socket is non-blocking from the
/// handshake on. recv() may run on one thread while send() runs on another
/// (at most one of each at a time); OpenSSL's object is guarded inside.
class TlsSession {
 public:
  /// Runs the handshake on `fd` within `timeoutMs`. `host` is the name or
  /// address the client checks the service's certificate against (unused on
  /// a service). Throws ConnectionClosedError (TlsPlainPeerError for a
  /// plain peer) with the reason.
  static std::unique_ptr<TlsSession> handshake(const TlsContext& ctx, int fd, const std::string& host,
                                               const std::string& peer, int timeoutMs);
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  /// Encrypts a prefix of the iovecs (small ones together, up to a record
  /// each) and writes what the socket takes now. Returns the plaintext bytes
  /// taken (their records are sent later if the socket is full: see
  /// outputPending), or -1 with errno: EAGAIN while earlier records still
  /// wait for the socket, anything else when the connection is broken.
  /// `count` 0 only writes what waits.
  long send(const iovec* iov, int count);
  /// Records encrypted but not yet written (including any the receiving side
  /// produced, e.g. a key update's answer).
  bool outputPending() const;
  /// Reads and decrypts what is available into `buf` without blocking.
  /// Returns bytes, 0 at the end of the stream, -1 with errno (EAGAIN when
  /// nothing is there; EPROTO for a TLS failure, see lastError()).
  long recv(void* buf, std::size_t n);
  /// True when plaintext may be waiting inside the session although the
  /// socket is not readable (a recv() filled its buffer): poll would not say.
  bool inputBuffered() const;
  /// Why the last recv()/send() failed with EPROTO.
  std::string lastError() const;
  /// "TLSv1.3 TLS_AES_128_GCM_SHA256", and the peer certificate's subject
  /// if it presented one.
  std::string describe() const;

 private:
  struct Impl;
  explicit TlsSession(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace myelin::detail
