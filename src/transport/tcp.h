// TCP plumbing over standalone Asio: address parsing, connect with a
// deadline, a listener, and the scatter/gather I/O the endpoint's send and
// receive paths use (TCP_NODELAY on every socket), with TLS (tls.h) when a
// session is started on it.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace myelin::detail {

class TlsContext;
class TlsSession;

/// "host:port" or "[v6]:port" split into parts; throws
/// InvalidConfigurationError if malformed.
struct HostPort {
  std::string host;
  std::uint16_t port = 0;
  static HostPort parse(const std::string& s);
};

/// A connected TCP socket. send/recv may be called from different threads
/// at the same time (one sender and one receiver at a time).
class TcpSocket {
 public:
  TcpSocket();
  ~TcpSocket();
  TcpSocket(const TcpSocket&) = delete;
  TcpSocket& operator=(const TcpSocket&) = delete;

  /// Connects within `timeoutMs`; throws ConnectionClosedError with the
  /// reason on failure.
  static std::unique_ptr<TcpSocket> connect(const std::string& hostPort, int timeoutMs);

  /// Runs the TLS handshake (docs/tls.md); from then on every read and
  /// write goes through the session and the socket stays non-blocking.
  /// Throws ConnectionClosedError (TlsPlainPeerError for a plain peer).
  void startTls(const TlsContext& ctx, const std::string& host, int timeoutMs);
  /// TLS protocol, cipher and peer certificate ("" without TLS).
  std::string tlsInfo() const;
  /// With TLS: plaintext may wait inside the session though the socket is
  /// not readable; a reader must call recvSome before it polls.
  bool inputBuffered() const;
  /// With TLS: encrypted records wait for the socket (sendSome with count 0
  /// writes them).
  bool outputPending() const;
  /// The reason of a failed recvSome/sendSome (errno `err`, or TLS's own).
  std::string errorText(int err) const;

  /// Makes reads non-blocking (recvSome returns -1 with EAGAIN when nothing
  /// is there); sendAll keeps blocking semantics either way.
  void setNonBlocking();
  /// Writes every byte of the iovecs (blocking). Returns false if the
  /// connection is broken, or, with `timeoutMs` >= 0, if the peer has not
  /// taken them all within that time (errno ETIMEDOUT): a peer that never
  /// reads cannot hold the caller.
  bool sendAll(iovec* iov, int count, int timeoutMs = -1);
  /// Writes what the socket takes now without blocking (the socket must be
  /// non-blocking). Returns bytes written, or -1 with errno (EAGAIN when the
  /// send buffer is full). With TLS the bytes taken are encrypted; records
  /// the socket did not take yet wait in the session (outputPending).
  long sendSome(const iovec* iov, int count);
  /// Reads what is available, blocking until at least one byte. Returns
  /// bytes read, 0 at end of stream, -1 on error (errno kept).
  long recvSome(void* buf, std::size_t n);
  /// Waits until readable or `timeoutMs` passed; false on timeout.
  bool waitReadable(int timeoutMs);
  /// Shuts both directions down; a blocked recvSome returns. Idempotent.
  void shutdown();
  int fd() const;
  std::string peerAddress() const;

 private:
  friend class TcpListener;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<TlsSession> tls_;
};

/// A listening socket.
class TcpListener {
 public:
  /// Binds and listens; throws InvalidConfigurationError on failure.
  explicit TcpListener(const std::string& hostPort);
  ~TcpListener();
  std::uint16_t port() const;
  /// Blocks for the next connection; nullptr once closed.
  std::unique_ptr<TcpSocket> accept();
  /// Makes a blocked accept() return nullptr. Idempotent.
  void close();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace myelin::detail
