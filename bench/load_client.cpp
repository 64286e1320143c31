// Load program of the Myelin benchmarks: one-way call throughput, sync
// round-trip latency of echoBytes, and the same round trips over a raw TCP
// socket for comparison. Prints a plain-text table; exits non-zero on error.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <myelin/myelin.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "load.h"
#include "resident_memory.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kPayloadSizes[] = {1, 64, 1024};
constexpr std::int64_t kIdleTimeoutMs = 120000;

struct Options {
  std::string connect;         // "" = start the service as a child process
  double durationS = 10.0;     // one-way flood (throughput and memory)
  std::size_t latencyCalls = 20000;
  std::size_t warmupCalls = 1000;
};

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--connect host:port] [--duration S] [--calls N] [--quick]\n"
               "  --connect   use a running load_service instead of starting one\n"
               "  --duration  seconds of one-way calls (default 2)\n"
               "  --calls     measured round trips per payload size (default 20000)\n"
               "  --quick     0.2 s of one-way calls and 2000 round trips per size\n",
               argv0);
  std::exit(2);
}

Options parseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage(argv[0]);
      return argv[++i];
    };
    if (a == "--connect") {
      o.connect = next();
    } else if (a == "--duration") {
      o.durationS = std::stod(next());
    } else if (a == "--calls") {
      o.latencyCalls = std::stoul(next());
    } else if (a == "--quick") {
      o.durationS = 0.2;
      o.latencyCalls = 2000;
    } else {
      usage(argv[0]);
    }
  }
  if (o.durationS <= 0 || o.latencyCalls == 0) usage(argv[0]);
  return o;
}

// ---------------------------------------------------------------------------
// The service as a child process: reads the port it prints, stops it by
// closing its standard input.

class ServiceChild {
 public:
  explicit ServiceChild(const std::string& path) {
    int in[2];
    int out[2];
    if (::pipe(in) != 0 || ::pipe(out) != 0) throw std::runtime_error("pipe failed");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, in[1]);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    std::vector<char*> args{const_cast<char*>(path.c_str()), nullptr};
    int rc = posix_spawn(&pid_, path.c_str(), &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(in[0]);
    ::close(out[1]);
    if (rc != 0) {
      ::close(in[1]);
      ::close(out[0]);
      throw std::runtime_error("cannot start " + path + ": " + std::strerror(rc));
    }
    stdin_ = in[1];
    ::fcntl(stdin_, F_SETFD, FD_CLOEXEC);
    FILE* f = ::fdopen(out[0], "r");
    unsigned port = 0;
    bool ok = f && std::fscanf(f, "PORT %u", &port) == 1;
    if (f) std::fclose(f);
    if (!ok) {
      stop();
      throw std::runtime_error(path + " did not print its port");
    }
    address_ = "127.0.0.1:" + std::to_string(port);
  }
  ~ServiceChild() { stop(); }
  ServiceChild(const ServiceChild&) = delete;
  ServiceChild& operator=(const ServiceChild&) = delete;

  const std::string& address() const { return address_; }

  void stop() {
    if (stdin_ >= 0) {
      ::close(stdin_);
      stdin_ = -1;
    }
    if (pid_ <= 0) return;
    for (int i = 0; i < 500; ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  std::string address_;
};

// ---------------------------------------------------------------------------
// Raw TCP baseline: frames of a 4-byte length plus payload, blocking sockets,
// TCP_NODELAY, one frame in flight.

void writeAll(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) throw std::runtime_error(std::string("raw tcp send: ") + std::strerror(errno));
    p += k;
    n -= static_cast<std::size_t>(k);
  }
}

/// Reads one frame into `buf` (header included); false on a clean EOF
/// before the first byte.
bool readFrame(int fd, std::vector<char>& buf) {
  std::size_t have = 0;
  std::size_t want = 4;
  if (buf.size() < 4) buf.resize(4);
  while (have < want) {
    ssize_t k = ::recv(fd, buf.data() + have, buf.size() - have, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k == 0 && have == 0) return false;
    if (k <= 0) throw std::runtime_error("raw tcp: connection lost mid-frame");
    have += static_cast<std::size_t>(k);
    if (want == 4 && have >= 4) {
      std::uint32_t len;
      std::memcpy(&len, buf.data(), 4);
      want = 4 + len;
      if (buf.size() < want) buf.resize(want);
    }
  }
  return true;
}

void setNoDelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/// Echo server on 127.0.0.1 serving one connection on its own thread.
class RawEchoServer {
 public:
  RawEchoServer() {
    listenFd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    if (listenFd_ < 0 || ::bind(listenFd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listenFd_, 1) != 0 || ::getsockname(listenFd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      throw std::runtime_error(std::string("raw tcp listen: ") + std::strerror(errno));
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~RawEchoServer() {
    ::shutdown(listenFd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    ::close(listenFd_);
  }
  RawEchoServer(const RawEchoServer&) = delete;
  RawEchoServer& operator=(const RawEchoServer&) = delete;

  std::uint16_t port() const { return port_; }

 private:
  void serve() {
    int fd = ::accept4(listenFd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    setNoDelay(fd);
    std::vector<char> buf(64 * 1024);
    try {
      while (readFrame(fd, buf)) {
        std::uint32_t len;
        std::memcpy(&len, buf.data(), 4);
        writeAll(fd, buf.data(), 4 + std::size_t{len});
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "raw echo server: %s\n", e.what());
    }
    ::close(fd);
  }

  int listenFd_ = -1;
  std::uint16_t port_ = 0;
  std::thread thread_;
};

class RawEchoClient {
 public:
  explicit RawEchoClient(std::uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      throw std::runtime_error(std::string("raw tcp connect: ") + std::strerror(errno));
    }
    setNoDelay(fd_);
  }
  ~RawEchoClient() { ::close(fd_); }
  RawEchoClient(const RawEchoClient&) = delete;
  RawEchoClient& operator=(const RawEchoClient&) = delete;

  /// Sends `payload` and returns true if the echo matches it.
  bool roundTrip(const std::string& payload) {
    auto len = static_cast<std::uint32_t>(payload.size());
    out_.resize(4 + payload.size());
    std::memcpy(out_.data(), &len, 4);
    std::memcpy(out_.data() + 4, payload.data(), payload.size());
    writeAll(fd_, out_.data(), out_.size());
    if (!readFrame(fd_, in_)) throw std::runtime_error("raw tcp: echo server closed");
    std::uint32_t got;
    std::memcpy(&got, in_.data(), 4);
    return got == len && std::memcmp(in_.data() + 4, payload.data(), payload.size()) == 0;
  }

 private:
  int fd_ = -1;
  std::vector<char> out_;
  std::vector<char> in_ = std::vector<char>(64 * 1024);
};

// ---------------------------------------------------------------------------
// Measurements.

struct LatencyStats {
  double meanUs = 0;
  double p50Us = 0;
  double p99Us = 0;
  double maxUs = 0;
};

LatencyStats summarize(std::vector<std::int64_t>& ns) {
  std::sort(ns.begin(), ns.end());
  LatencyStats s;
  double total = 0;
  for (auto v : ns) total += static_cast<double>(v);
  auto at = [&](double q) {
    auto i = static_cast<std::size_t>(q * static_cast<double>(ns.size() - 1) + 0.5);
    return static_cast<double>(ns[i]) / 1000.0;
  };
  s.meanUs = total / static_cast<double>(ns.size()) / 1000.0;
  s.p50Us = at(0.50);
  s.p99Us = at(0.99);
  s.maxUs = static_cast<double>(ns.back()) / 1000.0;
  return s;
}

std::string makePayload(std::size_t size) {
  std::string s(size, '\0');
  for (std::size_t i = 0; i < size; ++i) s[i] = static_cast<char>('A' + i % 58);
  return s;
}

/// Runs warm-up plus measured round trips of `roundTrip(payload)`, which
/// returns false on a wrong echo. The first byte varies per call so that a
/// stale reply cannot pass.
template <class F>
LatencyStats measure(const Options& o, std::size_t size, std::uint64_t& mismatches, F&& roundTrip) {
  std::string payload = makePayload(size);
  std::vector<std::int64_t> ns;
  ns.reserve(o.latencyCalls);
  for (std::size_t i = 0; i < o.warmupCalls + o.latencyCalls; ++i) {
    payload[0] = static_cast<char>('a' + i % 26);
    auto t0 = Clock::now();
    bool ok = roundTrip(payload);
    auto t1 = Clock::now();
    if (!ok) ++mismatches;
    if (i >= o.warmupCalls) ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
  }
  return summarize(ns);
}

struct ThroughputResult {
  std::uint64_t sent = 0;
  std::uint64_t delivered = 0;
  double sendS = 0;
  double totalS = 0;
  bool idle = false;
};

ThroughputResult runThroughput(myelin::Endpoint& ep, double durationS) {
  ThroughputResult r;
  const std::uint64_t before = bench::Load::count();
  const auto t0 = Clock::now();
  const auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(durationS));
  std::uint32_t v = 0;
  do {
    for (int k = 0; k < 256; ++k) bench::Load::one(v++);
    r.sent += 256;
  } while (Clock::now() < deadline);
  const auto t1 = Clock::now();
  r.idle = ep.waitForIdle(kIdleTimeoutMs);
  const auto t2 = Clock::now();
  r.delivered = bench::Load::count() - before;
  r.sendS = std::chrono::duration<double>(t1 - t0).count();
  r.totalS = std::chrono::duration<double>(t2 - t0).count();
  return r;
}

void printLatencyRow(const char* size, const char* transport, const LatencyStats& s) {
  std::printf("  %-8s %-8s %9.2f %9.2f %9.2f %10.2f\n", size, transport, s.meanUs, s.p50Us, s.p99Us, s.maxUs);
}

int run(const Options& o) {
  std::unique_ptr<ServiceChild> child;
  std::string address = o.connect;
  if (address.empty()) {
    child = std::make_unique<ServiceChild>(MYELIN_LOAD_SERVICE);
    address = child->address();
  }
  myelin::Endpoint ep = myelin::ConnectionInfo().setConnectAddress(address).connect();
  int failures = 0;

#ifdef NDEBUG
  const char* build = "optimised";
#else
  const char* build = "debug (figures not representative)";
#endif
  std::printf("Myelin load benchmark\n");
  std::printf("  service        %s (%s)\n", address.c_str(), child ? "child process" : "--connect");
  std::printf("  build          %s\n", build);
  std::printf("  hardware thr.  %u\n\n", std::thread::hardware_concurrency());

  for (std::uint32_t v : {0u, 1u, 0xffffffffu}) {
    if (bench::Load::echo(v) != v) {
      std::printf("ERROR: echo(%u) returned a different value\n", v);
      ++failures;
    }
  }

  // (a) One-way throughput, and the memory a flood leaves behind.
  const auto clientBefore = bench::residentMemoryKb();
  const std::vector<std::uint64_t> serviceBefore = bench::Load::residentKb();
  ThroughputResult t = runThroughput(ep, o.durationS);
  const auto clientAfter = bench::residentMemoryKb();
  const std::vector<std::uint64_t> serviceAfter = bench::Load::residentKb();
  std::printf("One-way calls: Load::one(u32) from one thread for %.2f s, then waitForIdle()\n", o.durationS);
  std::printf("  calls sent           %12llu\n", static_cast<unsigned long long>(t.sent));
  std::printf("  calls run (count())  %12llu\n", static_cast<unsigned long long>(t.delivered));
  std::printf("  send rate            %12.0f calls/s  (%.3f s sending)\n", static_cast<double>(t.sent) / t.sendS,
              t.sendS);
  std::printf("  end-to-end rate      %12.0f calls/s  (%.3f s until idle)\n", static_cast<double>(t.sent) / t.totalS,
              t.totalS);
  std::printf("  resident memory, KiB (before -> after the flood; peak)\n");
  std::printf("    client             %8llu -> %8llu; peak %8llu\n",
              static_cast<unsigned long long>(clientBefore[0]), static_cast<unsigned long long>(clientAfter[0]),
              static_cast<unsigned long long>(clientAfter[1]));
  if (serviceBefore.size() == 2 && serviceAfter.size() == 2) {
    std::printf("    service            %8llu -> %8llu; peak %8llu\n",
                static_cast<unsigned long long>(serviceBefore[0]), static_cast<unsigned long long>(serviceAfter[0]),
                static_cast<unsigned long long>(serviceAfter[1]));
  }
  std::printf("    limits: staging %u calls / %u KiB per lane, write backlog 8 MiB per endpoint\n",
              myelin::EndpointConfig{}.maxBatchMsgs, myelin::EndpointConfig{}.maxMsgBatchSize / 1024);
  // A lane keeps its queue's storage until it has stayed dry for
  // idleLaneTrimMs: what the service holds once that has passed.
  const std::uint32_t settleMs = myelin::EndpointConfig{}.idleLaneTrimMs + 1000;
  std::this_thread::sleep_for(std::chrono::milliseconds(settleMs));
  const std::vector<std::uint64_t> serviceSettled = bench::Load::residentKb();
  if (serviceSettled.size() == 2) {
    std::printf("    service, %u ms idle  %8llu (lanes give back a burst's storage after %u ms dry)\n", settleMs,
                static_cast<unsigned long long>(serviceSettled[0]), myelin::EndpointConfig{}.idleLaneTrimMs);
  }
  if (!t.idle) {
    std::printf("  ERROR: waitForIdle() timed out or the endpoint closed: %s\n", ep.getError().c_str());
    ++failures;
  }
  if (t.delivered != t.sent) {
    std::printf("  ERROR: the service ran %llu calls, %llu were sent\n",
                static_cast<unsigned long long>(t.delivered), static_cast<unsigned long long>(t.sent));
    ++failures;
  }

  // (b) + (c) Round-trip latency, Myelin and raw TCP.
  RawEchoServer rawServer;
  RawEchoClient rawClient(rawServer.port());
  std::printf("\nRound trips, one in flight: %zu measured after %zu warm-up, microseconds\n", o.latencyCalls,
              o.warmupCalls);
  std::printf("  (myelin: Load::echoBytes(s) to the service; raw tcp: length-prefixed echo over\n"
              "   loopback to a thread of this process, blocking sockets, TCP_NODELAY)\n");
  std::printf("  %-8s %-8s %9s %9s %9s %10s\n", "payload", "path", "mean", "p50", "p99", "max");
  for (std::size_t size : kPayloadSizes) {
    std::uint64_t myelinBad = 0;
    std::uint64_t rawBad = 0;
    LatencyStats m =
        measure(o, size, myelinBad, [](const std::string& p) { return bench::Load::echoBytes(p) == p; });
    LatencyStats r = measure(o, size, rawBad, [&rawClient](const std::string& p) { return rawClient.roundTrip(p); });
    std::string label = std::to_string(size) + " B";
    printLatencyRow(label.c_str(), "myelin", m);
    printLatencyRow(label.c_str(), "raw tcp", r);
    std::printf("  %-8s %-8s %8.2fx %9s %8.2fx\n", label.c_str(), "ratio", m.meanUs / r.meanUs, "",
                m.p99Us / r.p99Us);
    if (myelinBad || rawBad) {
      std::printf("  ERROR: %llu wrong Myelin echoes, %llu wrong raw echoes\n",
                  static_cast<unsigned long long>(myelinBad), static_cast<unsigned long long>(rawBad));
      ++failures;
    }
  }

  ep.disconnect();
  std::printf("\n%s\n", failures == 0 ? "all replies verified" : "FAILED: see errors above");
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parseOptions(argc, argv);
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "load_client: %s\n", e.what());
    return 2;
  }
}
