// TCP sockets over standalone Asio (see tcp.h). The data path uses the
// native descriptor with sendmsg/recv so one thread can send while another
// blocks receiving, which Asio's socket object does not promise.
#include "transport/tcp.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <asio.hpp>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "myelin/errors.h"
#include "transport/tls.h"

namespace myelin::detail {

namespace {
asio::io_context& ioContext() {
  static asio::io_context* ctx = new asio::io_context();  // sockets only; never run
  return *ctx;
}
}  // namespace

HostPort HostPort::parse(const std::string& s) {
  HostPort hp;
  std::size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon + 1 == s.size()) {
    throw InvalidConfigurationError("address '" + s + "' is not host:port");
  }
  hp.host = s.substr(0, colon);
  if (hp.host.size() >= 2 && hp.host.front() == '[' && hp.host.back() == ']') {
    hp.host = hp.host.substr(1, hp.host.size() - 2);
  }
  if (hp.host.empty()) hp.host = "0.0.0.0";
  unsigned long port = 0;
  for (std::size_t i = colon + 1; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') throw InvalidConfigurationError("address '" + s + "' has a bad port");
    port = port * 10 + static_cast<unsigned long>(s[i] - '0');
    if (port > 65535) throw InvalidConfigurationError("address '" + s + "' has a port above 65535");
  }
  hp.port = static_cast<std::uint16_t>(port);
  return hp;
}

struct TcpSocket::Impl {
  asio::ip::tcp::socket sock{ioContext()};
  std::atomic<bool> shut{false};
};

TcpSocket::TcpSocket() : impl_(std::make_unique<Impl>()) {}
TcpSocket::~TcpSocket() {
  tls_.reset();
  std::error_code ec;
  impl_->sock.close(ec);
}

std::unique_ptr<TcpSocket> TcpSocket::connect(const std::string& hostPort, int timeoutMs) {
  HostPort hp = HostPort::parse(hostPort);
  asio::ip::tcp::resolver resolver(ioContext());
  std::error_code ec;
  auto results = resolver.resolve(hp.host, std::to_string(hp.port), ec);
  if (ec) throw NoBackendServiceError("cannot resolve '" + hostPort + "': " + ec.message());
  std::string lastError = "no address";
  for (const auto& entry : results) {
    auto s = std::make_unique<TcpSocket>();
    auto& sock = s->impl_->sock;
    sock.open(entry.endpoint().protocol(), ec);
    if (ec) {
      lastError = ec.message();
      continue;
    }
    sock.non_blocking(true, ec);
    sock.connect(entry.endpoint(), ec);
    if (ec == asio::error::in_progress || ec == asio::error::would_block) {
      pollfd p{sock.native_handle(), POLLOUT, 0};
      int r = ::poll(&p, 1, timeoutMs);
      if (r <= 0) {
        lastError = r == 0 ? "timed out" : std::strerror(errno);
        continue;
      }
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(sock.native_handle(), SOL_SOCKET, SO_ERROR, &err, &len);
      ec = err ? std::error_code(err, std::system_category()) : std::error_code();
    }
    if (ec) {
      lastError = ec.message();
      continue;
    }
    sock.non_blocking(false, ec);
    sock.set_option(asio::ip::tcp::no_delay(true), ec);
    return s;
  }
  throw NoBackendServiceError("cannot connect to '" + hostPort + "': " + lastError);
}

void TcpSocket::startTls(const TlsContext& ctx, const std::string& host, int timeoutMs) {
  tls_ = TlsSession::handshake(ctx, fd(), host, peerAddress(), timeoutMs);
}

std::string TcpSocket::tlsInfo() const { return tls_ ? tls_->describe() : std::string(); }
bool TcpSocket::inputBuffered() const { return tls_ && tls_->inputBuffered(); }
bool TcpSocket::outputPending() const { return tls_ && tls_->outputPending(); }

std::string TcpSocket::errorText(int err) const {
  if (tls_ && err == EPROTO) {
    std::string e = tls_->lastError();
    if (!e.empty()) return e;
  }
  return std::strerror(err);
}

bool TcpSocket::sendAll(iovec* iov, int count, int timeoutMs) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = timeoutMs < 0 ? Clock::time_point{} : Clock::now() + std::chrono::milliseconds(timeoutMs);
  // With TLS, sendSome() encrypts and a zero count writes the records that
  // still wait in the session.
  while (count > 0 || outputPending()) {
    long n = sendSome(iov, count);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
      int waitMs = -1;
      if (timeoutMs >= 0) {
        auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0) {
          errno = ETIMEDOUT;
          return false;
        }
        waitMs = static_cast<int>(left);
      }
      pollfd p{fd(), POLLOUT, 0};
      ::poll(&p, 1, waitMs);
      continue;
    }
    auto left = static_cast<std::size_t>(n);
    while (count > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --count;
    }
    if (count > 0 && left) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return true;
}

long TcpSocket::sendSome(const iovec* iov, int count) {
  if (tls_) return tls_->send(iov, count);
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = static_cast<std::size_t>(count < IOV_MAX ? count : IOV_MAX);
  for (;;) {
    ssize_t n = ::sendmsg(impl_->sock.native_handle(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    return static_cast<long>(n);
  }
}

long TcpSocket::recvSome(void* buf, std::size_t n) {
  if (tls_) return tls_->recv(buf, n);
  for (;;) {
    ssize_t r = ::recv(impl_->sock.native_handle(), buf, n, 0);
    if (r < 0 && errno == EINTR) continue;
    return static_cast<long>(r);
  }
}

bool TcpSocket::waitReadable(int timeoutMs) {
  if (inputBuffered()) return true;
  pollfd p{impl_->sock.native_handle(), POLLIN, 0};
  for (;;) {
    int r = ::poll(&p, 1, timeoutMs);
    if (r < 0 && errno == EINTR) continue;
    return r > 0;
  }
}

void TcpSocket::setNonBlocking() {
  int fd = impl_->sock.native_handle();
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

void TcpSocket::shutdown() {
  if (impl_->shut.exchange(true)) return;
  ::shutdown(impl_->sock.native_handle(), SHUT_RDWR);
}

int TcpSocket::fd() const { return impl_->sock.native_handle(); }

std::string TcpSocket::peerAddress() const {
  std::error_code ec;
  auto ep = impl_->sock.remote_endpoint(ec);
  if (ec) return "?";
  return ep.address().to_string() + ":" + std::to_string(ep.port());
}

struct TcpListener::Impl {
  asio::ip::tcp::acceptor acceptor{ioContext()};
  std::atomic<bool> closed{false};
};

TcpListener::TcpListener(const std::string& hostPort) : impl_(std::make_unique<Impl>()) {
  HostPort hp = HostPort::parse(hostPort);
  std::error_code ec;
  auto addr = asio::ip::make_address(hp.host == "localhost" ? "127.0.0.1" : hp.host, ec);
  if (ec) throw InvalidConfigurationError("listen address '" + hostPort + "': " + ec.message());
  asio::ip::tcp::endpoint ep(addr, hp.port);
  auto& a = impl_->acceptor;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw InvalidConfigurationError("cannot listen on '" + hostPort + "': " + ec.message());
}

TcpListener::~TcpListener() { close(); }

std::uint16_t TcpListener::port() const {
  std::error_code ec;
  return impl_->acceptor.local_endpoint(ec).port();
}

std::unique_ptr<TcpSocket> TcpListener::accept() {
  while (!impl_->closed.load()) {
    // poll with a timeout so close() is noticed without racing a blocked
    // accept() against the descriptor being closed.
    pollfd p{impl_->acceptor.native_handle(), POLLIN, 0};
    int r = ::poll(&p, 1, 100);
    if (r <= 0 || impl_->closed.load()) continue;
    auto s = std::make_unique<TcpSocket>();
    std::error_code ec;
    impl_->acceptor.accept(s->impl_->sock, ec);
    if (ec) continue;
    s->impl_->sock.set_option(asio::ip::tcp::no_delay(true), ec);
    return s;
  }
  return nullptr;
}

void TcpListener::close() { impl_->closed.store(true); }

}  // namespace myelin::detail
