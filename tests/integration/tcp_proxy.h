// A byte-counting TCP forwarder for tests that measure what goes over the
// socket: clients connect to it, it connects to the target and copies both
// ways, counting bytes per direction (and keeping them, when asked, for
// tests that parse the stream, or holding them back to pass on in one write,
// or passing the service's bytes on in small pieces, so that the client's
// reads end inside frames).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace myelin_test {

class TcpProxy {
 public:
  explicit TcpProxy(std::uint16_t targetPort, bool keepBytes = false) : target_(targetPort), keep_(keepBytes) {
    lfd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(lfd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(lfd_, 4) != 0) {
      throw std::runtime_error("proxy: cannot listen");
    }
    socklen_t len = sizeof a;
    ::getsockname(lfd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { acceptOne(); });
  }
  ~TcpProxy() {
    ::shutdown(lfd_, SHUT_RDWR);
    if (acceptor_.joinable()) acceptor_.join();
    ::close(lfd_);
    for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
    for (auto& t : pumps_) t.join();
    for (int fd : fds_) ::close(fd);
  }
  std::uint16_t port() const { return port_; }
  std::uint64_t clientToService() const { return c2s_.load(); }
  std::uint64_t serviceToClient() const { return s2c_.load(); }
  /// Flips a bit in the last byte of the next chunk the client sends.
  void corruptNextClientChunk() { corrupt_.store(true); }
  /// Holds what the client sends (still counted) until releaseClientBytes(),
  /// which passes it all on in one write: the service reads it at once.
  void holdClientBytes() {
    std::lock_guard lock(holdMu_);
    holding_ = true;
  }
  void releaseClientBytes() {
    std::lock_guard lock(holdMu_);
    holding_ = false;
    if (!held_.empty()) sendAll(fds_[1], held_.data(), static_cast<ssize_t>(held_.size()));
    held_.clear();
  }
  /// Passes what the service sends on in pieces of `piece` bytes, waiting
  /// `pauseUs` after each: the client reads them one by one (0: whole).
  void chopServiceBytes(std::size_t piece, int pauseUs) {
    chopPause_.store(pauseUs);
    chop_.store(piece);
  }
  /// What the client sent so far (only with keepBytes).
  std::string clientBytes() {
    std::lock_guard lock(keptMu_);
    return kept_[0];
  }

 private:
  void acceptOne() {
    int c = ::accept(lfd_, nullptr, nullptr);
    if (c < 0) return;
    int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(target_);
    if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(c);
      ::close(s);
      return;
    }
    int one = 1;
    ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ::setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fds_ = {c, s};
    pumps_.emplace_back([this, c, s] { pump(c, s, c2s_, 0); });
    pumps_.emplace_back([this, c, s] { pump(s, c, s2c_, 1); });
  }
  void pump(int from, int to, std::atomic<std::uint64_t>& count, int dir) {
    std::vector<char> buf(1 << 16);
    for (;;) {
      ssize_t n = ::recv(from, buf.data(), buf.size(), 0);
      if (n <= 0) break;
      count += static_cast<std::uint64_t>(n);
      if (dir == 0 && corrupt_.exchange(false)) buf[static_cast<std::size_t>(n) - 1] ^= 0x01;
      if (keep_) {
        std::lock_guard lock(keptMu_);
        kept_[dir].append(buf.data(), static_cast<std::size_t>(n));
      }
      if (dir == 0) {  // under holdMu_: held bytes go ahead of later ones
        std::lock_guard lock(holdMu_);
        if (holding_) {
          held_.append(buf.data(), static_cast<std::size_t>(n));
          continue;
        }
        if (!sendAll(to, buf.data(), n)) return;
      } else if (const std::size_t piece = chop_.load()) {
        for (ssize_t off = 0; off < n; off += static_cast<ssize_t>(piece)) {
          const ssize_t len = std::min<ssize_t>(static_cast<ssize_t>(piece), n - off);
          if (!sendAll(to, buf.data() + off, len)) return;
          std::this_thread::sleep_for(std::chrono::microseconds(chopPause_.load()));
        }
      } else if (!sendAll(to, buf.data(), n)) {
        return;
      }
    }
    ::shutdown(to, SHUT_WR);
  }
  static bool sendAll(int to, const char* data, ssize_t n) {
    for (ssize_t off = 0; off < n;) {
      ssize_t w = ::send(to, data + off, static_cast<std::size_t>(n - off), MSG_NOSIGNAL);
      if (w <= 0) return false;
      off += w;
    }
    return true;
  }

  std::uint16_t target_;
  bool keep_;
  std::atomic<bool> corrupt_{false};
  std::atomic<std::size_t> chop_{0};
  std::atomic<int> chopPause_{0};
  std::mutex keptMu_;
  std::string kept_[2];
  std::mutex holdMu_;
  bool holding_ = false;
  std::string held_;
  int lfd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<std::uint64_t> c2s_{0}, s2c_{0};
  std::thread acceptor_;
  std::vector<std::thread> pumps_;
  std::vector<int> fds_;
};

/// Bytes a single call adds on the socket, measured through a counting proxy.
template <class F>
std::uint64_t framedSize(TcpProxy& proxy, F&& call) {
  // No burst in progress: the count has held still for 20 ms (up to 5 s).
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  std::uint64_t before = proxy.clientToService();
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const std::uint64_t now = proxy.clientToService();
    const bool still = now == before;
    before = now;
    if (still || std::chrono::steady_clock::now() > deadline) break;
  }
  call();
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (proxy.clientToService() == before && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return proxy.clientToService() - before;
}

}  // namespace myelin_test
