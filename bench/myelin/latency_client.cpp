// Table C's latency client: sync ping-pong (one call in flight per pair, N
// pairs) and fixed-rate sends measured from their scheduled time (free of
// coordinated omission), against Myelin's bench_service or the raw TCP echo
// service. Prints one JSON line. See docs/benchmark-suite.md.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <myelin/myelin.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench_api.h"
#include "../tls_env.h"

namespace {

/// A Myelin connection, with TLS when the suite asked for it.
myelin::Endpoint connectMyelin(const std::string& address) {
  myelin::ConnectionInfo ci;
  ci.setConnectAddress(address);
  return bench::withBenchTls(ci, false).connect();
}

using Clock = std::chrono::steady_clock;

struct Options {
  std::string impl = "myelin";  // myelin | raw
  std::string mode = "pingpong";  // pingpong | fixedrate
  std::string connect;
  std::size_t payload = 64;
  int pairs = 1;
  std::uint64_t calls = 20000;
  std::uint64_t warmupCalls = 1000;
  double rate = 50000;
  double duration = 2;
  double warmup = 0.5;
  int replyEvery = 1;
};

std::int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

// ---------------------------------------------------------------------------
// Raw TCP: [u32 length][u8 flags][payload]; the service echoes when flags & 1.

class RawConn {
 public:
  explicit RawConn(const std::string& hostPort) {
    auto colon = hostPort.rfind(':');
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(std::stoi(hostPort.substr(colon + 1))));
    std::string host = hostPort.substr(0, colon);
    if (host == "localhost") host = "127.0.0.1";
    ::inet_pton(AF_INET, host.c_str(), &a.sin_addr);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) throw std::runtime_error("raw connect failed");
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~RawConn() { ::close(fd_); }
  void send(const std::string& msg, bool echo) {
    std::uint32_t len = static_cast<std::uint32_t>(msg.size() + 1);
    out_.resize(5 + msg.size());
    std::memcpy(out_.data(), &len, 4);
    out_[4] = echo ? 1 : 0;
    std::memcpy(out_.data() + 5, msg.data(), msg.size());
    writeAll(out_.data(), out_.size());
  }
  std::string receive() {
    std::uint32_t len;
    readAll(&len, 4);
    std::string b(len, '\0');
    readAll(b.data(), len);
    return b.substr(1);
  }
  void finishSending() { ::shutdown(fd_, SHUT_WR); }

 private:
  void writeAll(const char* p, std::size_t n) {
    while (n) {
      ssize_t r = ::send(fd_, p, n, MSG_NOSIGNAL);
      if (r <= 0) throw std::runtime_error("raw send failed");
      p += r;
      n -= static_cast<std::size_t>(r);
    }
  }
  void readAll(void* p, std::size_t n) {
    auto* b = static_cast<char*>(p);
    while (n) {
      ssize_t r = ::recv(fd_, b, n, 0);
      if (r <= 0) throw std::runtime_error("raw connection closed");
      b += r;
      n -= static_cast<std::size_t>(r);
    }
  }
  int fd_ = -1;
  std::vector<char> out_;
};

// ---------------------------------------------------------------------------

struct Outcome {
  myelin::LatencyHistogram latency;
  std::uint64_t calls = 0;
  double seconds = 0;
  double rate = 0;  // measured calls per second, summed over pairs
  bool verified = true;
  std::string error;
};

/// N pairs, each its own connection and thread, one call in flight.
Outcome pingPong(const Options& o) {
  Outcome out;
  std::mutex mu;
  std::atomic<bool> bad{false};
  std::string firstError;
  auto start = Clock::now();
  std::vector<std::thread> pairs;
  for (int p = 0; p < o.pairs; ++p) {
    pairs.emplace_back([&, p] {
      myelin::LatencyHistogram h;
      double pairRate = 0;
      try {
        std::string msg(o.payload, 'x');
        std::unique_ptr<RawConn> raw;
        myelin::Endpoint ep;
        if (o.impl == "raw") {
          raw = std::make_unique<RawConn>(o.connect);
        } else {
          ep = connectMyelin(o.connect);
        }
        Clock::time_point measuredFrom = Clock::now();
        for (std::uint64_t i = 0; i < o.warmupCalls + o.calls; ++i) {
          if (i == o.warmupCalls) measuredFrom = Clock::now();
          if (!msg.empty()) msg[0] = static_cast<char>('a' + (i + static_cast<std::uint64_t>(p)) % 26);
          auto t0 = Clock::now();
          std::string back;
          if (raw) {
            raw->send(msg, true);
            back = raw->receive();
          } else {
            back = bench::BenchService::echoBytes(msg);
          }
          auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
          if (back != msg) throw std::runtime_error("echo does not match");
          if (i >= o.warmupCalls) h.record(static_cast<std::uint64_t>(ns));
        }
        pairRate = static_cast<double>(o.calls) / std::chrono::duration<double>(Clock::now() - measuredFrom).count();
        if (ep) ep.disconnect();
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        if (!bad.exchange(true)) firstError = e.what();
      }
      std::lock_guard lock(mu);
      out.latency.merge(h);
      out.rate += pairRate;
    });
  }
  for (auto& t : pairs) t.join();
  out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  out.calls = out.latency.count();
  out.verified = !bad;
  out.error = firstError;
  return out;
}

/// Sends at `rate` per second on a schedule; every `replyEvery`-th send is
/// answered, and its latency counts from when it was due, not from when it
/// went out, so a stall shows in the figures instead of hiding them.
Outcome fixedRate(const Options& o) {
  Outcome out;
  const double intervalNs = 1e9 / o.rate;
  const std::int64_t warmupNs = static_cast<std::int64_t>(o.warmup * 1e9);
  const std::int64_t totalNs = warmupNs + static_cast<std::int64_t>(o.duration * 1e9);
  std::string msg(std::max<std::size_t>(o.payload, 8), 'x');
  std::atomic<std::uint64_t> answered{0}, expected{0};
  std::atomic<bool> bad{false};
  std::uint64_t sent = 0;
  std::int64_t start = nowNs();

  auto due = [&](std::uint64_t i) { return start + static_cast<std::int64_t>(static_cast<double>(i) * intervalNs); };
  auto waitUntilDue = [&](std::int64_t t) {
    for (;;) {
      std::int64_t left = t - nowNs();
      if (left <= 0) return;
      if (left > 200000) {
        std::this_thread::sleep_for(std::chrono::nanoseconds(left - 100000));
      } else {
        std::this_thread::yield();
      }
    }
  };

  if (o.impl == "raw") {
    RawConn conn(o.connect);
    std::thread receiver([&] {
      try {
        for (;;) {
          std::string back = conn.receive();
          std::int64_t scheduled;
          std::memcpy(&scheduled, back.data(), 8);
          std::int64_t lat = nowNs() - scheduled;
          if (scheduled - start >= warmupNs) out.latency.record(static_cast<std::uint64_t>(lat));
          answered.fetch_add(1);
        }
      } catch (const std::exception&) {
        // end of stream
      }
    });
    std::uint64_t i = 0;
    for (;; ++i) {
      std::int64_t t = due(i);
      if (t - start >= totalNs) break;
      waitUntilDue(t);
      std::memcpy(msg.data(), &t, 8);
      bool echo = (i % static_cast<std::uint64_t>(o.replyEvery)) == static_cast<std::uint64_t>(o.replyEvery - 1);
      if (echo) expected.fetch_add(1);
      conn.send(msg, echo);
      ++sent;
    }
    conn.finishSending();
    receiver.join();
    out.verified = answered.load() == expected.load();
    if (!out.verified) out.error = "raw: replies missing";
  } else {
    auto ep = connectMyelin(o.connect);
    std::uint64_t i = 0;
    for (;; ++i) {
      std::int64_t t = due(i);
      if (t - start >= totalNs) break;
      waitUntilDue(t);
      std::memcpy(msg.data(), &t, 8);
      bool echo = (i % static_cast<std::uint64_t>(o.replyEvery)) == static_cast<std::uint64_t>(o.replyEvery - 1);
      if (echo) {
        expected.fetch_add(1);
        auto a = bench::BenchService::echoString(msg);
        // Callbacks of this thread's calls run one at a time: the histogram
        // needs no lock.
        a.then([&, t, expect = msg](const myelin::Async<std::string>& done) {
          if (!done.isSuccess() || done.value() != expect) bad = true;
          if (t - start >= warmupNs) out.latency.record(static_cast<std::uint64_t>(nowNs() - t));
          answered.fetch_add(1);
        });
      } else {
        bench::BenchService::swallow(msg);
      }
      ++sent;
    }
    if (!ep.waitForIdle(60000)) bad = true;
    out.verified = !bad && answered.load() == expected.load();
    if (!out.verified) out.error = "myelin: replies missing or wrong";
    ep.disconnect();
  }
  out.seconds = static_cast<double>(nowNs() - start) / 1e9;
  out.calls = sent;
  out.rate = static_cast<double>(sent) / out.seconds;
  return out;
}

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: latency_client --impl myelin|raw --connect HOST:PORT [--mode pingpong|fixedrate]\n"
               "       [--payload B] [--pairs N] [--calls K] [--warmup-calls K]\n"
               "       [--rate R] [--duration S] [--warmup S] [--reply-every K]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) usage();
    std::string v = argv[++i];
    if (a == "--impl") {
      o.impl = v;
    } else if (a == "--mode") {
      o.mode = v;
    } else if (a == "--connect") {
      o.connect = v;
    } else if (a == "--payload") {
      o.payload = std::strtoull(v.c_str(), nullptr, 10);
    } else if (a == "--pairs") {
      o.pairs = std::atoi(v.c_str());
    } else if (a == "--calls") {
      o.calls = std::strtoull(v.c_str(), nullptr, 10);
    } else if (a == "--warmup-calls") {
      o.warmupCalls = std::strtoull(v.c_str(), nullptr, 10);
    } else if (a == "--rate") {
      o.rate = std::atof(v.c_str());
    } else if (a == "--duration") {
      o.duration = std::atof(v.c_str());
    } else if (a == "--warmup") {
      o.warmup = std::atof(v.c_str());
    } else if (a == "--reply-every") {
      o.replyEvery = std::atoi(v.c_str());
    } else {
      usage();
    }
  }
  if (o.connect.empty() || (o.impl != "myelin" && o.impl != "raw") || o.pairs < 1 || o.replyEvery < 1 ||
      o.rate <= 0) {
    usage();
  }
  Outcome r;
  try {
    r = o.mode == "fixedrate" ? fixedRate(o) : pingPong(o);
  } catch (const std::exception& e) {
    r.verified = false;
    r.error = e.what();
  }
  auto us = [&](double p) { return static_cast<double>(r.latency.percentile(p)) / 1e3; };
  std::printf(
      "{\"impl\": \"%s\", \"mode\": \"%s\", \"payload\": %zu, \"pairs\": %d, \"rate\": %.0f, "
      "\"reply_every\": %d, \"calls\": %" PRIu64 ", \"seconds\": %.3f, \"achieved_rate\": %.1f, \"samples\": %" PRIu64
      ", \"verified\": %s, \"error\": \"%s\", \"latency_us\": {\"mean\": %.2f, \"p50\": %.2f, \"p90\": %.2f, "
      "\"p99\": %.2f, \"p999\": %.2f, \"p9999\": %.2f, \"max\": %.2f}}\n",
      o.impl.c_str(), o.mode.c_str(), o.payload, o.pairs, o.rate, o.replyEvery, r.calls, r.seconds, r.rate,
      r.latency.count(), r.verified ? "true" : "false", r.error.c_str(), r.latency.mean() / 1e3, us(50), us(90),
      us(99), us(99.9), us(99.99), static_cast<double>(r.latency.max()) / 1e3);
  return r.verified ? 0 : 3;
}
