// The raw TCP ceiling for Table B's one-way tiny calls: how many 8-byte records per second plain
// blocking TCP moves in 64 KiB writes to a receiver in its own process that checks every record.
// No Myelin code; docs/benchmark-suite.md ("Raw TCP ceiling") describes how the suite uses it.
//
//   raw_ceiling [--duration S] [--warmup S] [--record B] [--write B]   forks its own receiver on 127.0.0.1
//   raw_ceiling --serve HOST:PORT          receiver only: prints "PORT <n>", serves until stdin closes
//   raw_ceiling --connect HOST:PORT [...]  sender only, against a --serve receiver (two-host runs)
//
// Protocol on one connection: a 32-byte header (magic, record size, warm-up and
// duration), then the stream, in which every 8-byte word holds its own index
// (so a record of B bytes is B/8 consecutive indices). The receiver measures:
// its window starts `warmup` seconds after the first byte and lasts
// `duration`; at its end it sends one byte back, the sender stops, shuts down
// its side, and the receiver, having checked every word up to the end of the
// stream, answers "RESULT <window words> <total words> <seconds> <ok>\n".
// TCP_NODELAY stays off (the default): a continuous stream of 64 KiB writes
// always has a full segment to send, so Nagle holds nothing back.
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "raw_io.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::uint32_t kMagic = 0x4352594du;  // "MYRC"
constexpr std::size_t kReadBytes = 64 * 1024;  // the receiver's buffer
// How long the sender keeps going past warm-up + duration without the
// receiver's stop byte before it gives up (a stuck or vanished receiver).
constexpr double kStopGraceS = 20;

struct Options {
  std::string connect;  // sender only, to a --serve receiver
  std::string serve;    // receiver only
  double duration = 2;
  double warmup = 0.3;
  std::uint32_t record = 8;
  std::uint32_t write = 65536;
};

// The header the sender writes first; the receiver takes its window from it.
struct Header {
  std::uint32_t magic;
  std::uint32_t record;
  std::uint64_t warmupUs;
  std::uint64_t durationUs;
  std::uint64_t reserved;
};
static_assert(sizeof(Header) == 32);

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

using raw_io::readAll;
using raw_io::writeAll;

bool splitHostPort(const std::string& hp, std::string& host, std::string& port) {
  auto colon = hp.rfind(':');
  if (colon == std::string::npos) return false;
  host = hp.substr(0, colon);
  port = hp.substr(colon + 1);
  if (host.size() > 1 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return !port.empty();
}

int connectTo(const std::string& hp) {
  std::string host, port;
  if (!splitHostPort(hp, host, port)) return -1;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = res; a; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(res);
  return fd;
}

// Returns a listening socket and its port, or -1.
int listenOn(const std::string& hp, int& port) {
  std::string host, p;
  if (!splitHostPort(hp, host, p)) return -1;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.empty() ? nullptr : host.c_str(), p.c_str(), &hints, &res) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = res; a; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 16) == 0) break;
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(res);
  if (fd < 0) return -1;
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  port = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                  : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return fd;
}

// ---------------------------------------------------------------------------
// Receiver

// Reads one connection to its end, checking every word; answers with RESULT.
// Returns true if every word was where it should be.
bool receiveStream(int fd) {
  Header h{};
  if (!readAll(fd, &h, sizeof h) || h.magic != kMagic) {
    ::close(fd);
    return false;
  }
  const auto warmup = std::chrono::microseconds(h.warmupUs);
  const auto duration = std::chrono::microseconds(h.durationUs);
  std::vector<std::uint64_t> buf(kReadBytes / 8);
  auto* bytes = reinterpret_cast<char*>(buf.data());
  std::uint64_t next = 0;  // index of the next word expected
  std::uint64_t bad = 0;   // OR of (word ^ expected): zero while every word is right
  std::size_t carry = 0;   // bytes of a partial word at the start of buf
  enum { kWarm, kMeasuring, kDraining } state = kWarm;
  Clock::time_point first{}, start{}, end{};
  std::uint64_t startWords = 0, endWords = 0;
  for (;;) {
    ssize_t r = ::recv(fd, bytes + carry, kReadBytes - carry, 0);
    if (r <= 0) break;
    const auto now = Clock::now();
    const std::size_t have = carry + static_cast<std::size_t>(r);
    const std::size_t words = have / 8;
    // Branch-free so that it vectorises: checking costs a small part of a copy.
    std::uint64_t acc = 0;
    for (std::size_t i = 0; i < words; ++i) acc |= buf[i] ^ (next + i);
    bad |= acc;
    next += words;
    carry = have - words * 8;
    if (carry) std::memmove(bytes, bytes + words * 8, carry);
    if (state == kWarm) {
      if (first == Clock::time_point{}) first = now;
      if (now - first >= warmup) {
        state = kMeasuring;
        start = now;
        startWords = next;
      }
    } else if (state == kMeasuring && now - start >= duration) {
      state = kDraining;
      end = now;
      endWords = next;
      const char stop = 'S';
      if (!writeAll(fd, &stop, 1)) break;
    }
  }
  const bool ok = state == kDraining && bad == 0 && carry == 0;
  char line[160];
  int n = std::snprintf(line, sizeof line, "RESULT %" PRIu64 " %" PRIu64 " %.6f %d\n", endWords - startWords, next,
                        state == kDraining ? seconds(end - start) : 0.0, ok ? 1 : 0);
  writeAll(fd, line, static_cast<std::size_t>(n));
  ::close(fd);
  return ok;
}

int serve(const std::string& addr) {
  int port = 0;
  int lfd = listenOn(addr, port);
  if (lfd < 0) {
    std::perror("raw_ceiling: listen");
    return 1;
  }
  std::printf("PORT %d\n", port);
  std::fflush(stdout);
  std::thread([lfd] {
    for (;;) {
      int fd = ::accept(lfd, nullptr, nullptr);
      if (fd < 0) return;
      std::thread([fd] { receiveStream(fd); }).detach();
    }
  }).detach();
  char b[64];
  while (::read(0, b, sizeof b) > 0) {
  }
  ::shutdown(lfd, SHUT_RDWR);
  return 0;
}

// ---------------------------------------------------------------------------
// Sender

struct Outcome {
  std::uint64_t windowWords = 0;
  std::uint64_t totalWords = 0;
  std::uint64_t sentWords = 0;
  double seconds = 0;
  bool verified = false;
  std::string error;
};

void sendStream(int fd, const Options& o, Outcome& out) {
  Header h{kMagic, o.record, static_cast<std::uint64_t>(o.warmup * 1e6), static_cast<std::uint64_t>(o.duration * 1e6),
           0};
  if (!writeAll(fd, &h, sizeof h)) {
    out.error = "could not send the header";
    return;
  }
  std::vector<std::uint64_t> buf(o.write / 8);
  const std::size_t n = buf.size();
  std::uint64_t next = 0;
  std::string back;  // what the receiver sent: the stop byte, then RESULT
  char tmp[256];
  const auto giveUp = Clock::now() + std::chrono::duration<double>(o.warmup + o.duration + kStopGraceS);
  bool stopped = false;
  for (unsigned w = 0; !stopped; ++w) {
    for (std::size_t i = 0; i < n; ++i) buf[i] = next + i;
    if (!writeAll(fd, buf.data(), n * 8)) {
      out.error = "send failed";
      return;
    }
    next += n;
    // Look for the stop byte every 8 writes: a non-blocking recv costs well
    // under 1% of eight 64 KiB sends, and at most 512 KiB go after the stop.
    if ((w & 7) == 7) {
      ssize_t r = ::recv(fd, tmp, sizeof tmp, MSG_DONTWAIT);
      if (r > 0) {
        back.append(tmp, static_cast<std::size_t>(r));
        stopped = true;
      } else if (r == 0) {
        out.error = "the receiver closed the connection early";
        return;
      } else if (Clock::now() > giveUp) {
        out.error = "no stop from the receiver";
        return;
      }
    }
  }
  out.sentWords = next;
  ::shutdown(fd, SHUT_WR);
  for (;;) {
    ssize_t r = ::recv(fd, tmp, sizeof tmp, 0);
    if (r <= 0) break;
    back.append(tmp, static_cast<std::size_t>(r));
  }
  auto at = back.find("RESULT ");
  int ok = 0;
  if (at == std::string::npos ||
      std::sscanf(back.c_str() + at, "RESULT %" SCNu64 " %" SCNu64 " %lf %d", &out.windowWords, &out.totalWords,
                  &out.seconds, &ok) != 4) {
    out.error = "no result from the receiver";
    return;
  }
  if (!ok) {
    out.error = "the receiver found a record out of sequence";
  } else if (out.totalWords != out.sentWords) {
    out.error = "received " + std::to_string(out.totalWords) + " words of " + std::to_string(out.sentWords) + " sent";
  } else if (out.seconds <= 0 || out.windowWords == 0) {
    out.error = "empty measurement window";
  } else {
    out.verified = true;
  }
}

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: raw_ceiling [--connect HOST:PORT] [--duration S] [--warmup S] [--record B] [--write B]\n"
               "       raw_ceiling --serve HOST:PORT\n"
               "  B: --record a multiple of 8 (default 8), --write a multiple of --record (default 65536)\n");
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) usage();
    std::string v = argv[++i];
    if (a == "--connect") {
      o.connect = v;
    } else if (a == "--serve") {
      o.serve = v;
    } else if (a == "--duration") {
      o.duration = std::atof(v.c_str());
    } else if (a == "--warmup") {
      o.warmup = std::atof(v.c_str());
    } else if (a == "--record") {
      o.record = static_cast<std::uint32_t>(std::strtoul(v.c_str(), nullptr, 10));
    } else if (a == "--write") {
      o.write = static_cast<std::uint32_t>(std::strtoul(v.c_str(), nullptr, 10));
    } else {
      usage();
    }
  }
  if (o.duration <= 0 || o.warmup < 0 || o.record < 8 || o.record % 8 || o.write < o.record || o.write % o.record ||
      (!o.connect.empty() && !o.serve.empty())) {
    usage();
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  if (!o.serve.empty()) return serve(o.serve);

  Outcome out;
  pid_t child = -1;
  int fd = -1;
  if (!o.connect.empty()) {
    fd = connectTo(o.connect);
    if (fd < 0) out.error = "cannot connect to " + o.connect;
  } else {
    // The receiver is a separate process, as a Myelin service is: two threads
    // of one process would share an address space and a scheduler slot.
    int port = 0;
    int lfd = listenOn("127.0.0.1:0", port);
    if (lfd < 0) {
      out.error = "cannot listen on 127.0.0.1";
    } else {
      std::fflush(nullptr);
      child = ::fork();
      if (child == 0) {
        int cfd = ::accept(lfd, nullptr, nullptr);
        ::close(lfd);
        ::_exit(cfd >= 0 && receiveStream(cfd) ? 0 : 1);
      }
      fd = child > 0 ? connectTo("127.0.0.1:" + std::to_string(port)) : -1;
      ::close(lfd);
      if (child < 0) out.error = "fork failed";
      else if (fd < 0) out.error = "cannot connect to the receiver";
    }
  }
  if (fd >= 0) {
    sendStream(fd, o, out);
    ::close(fd);
  }
  if (child > 0) {
    if (fd < 0) ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    if (out.verified && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      out.verified = false;
      out.error = "the receiver process failed";
    }
  }
  const double records = static_cast<double>(out.windowWords) * 8 / o.record;
  const double rate = out.seconds > 0 ? records / out.seconds : 0;
  std::printf(
      "{\"impl\": \"raw_tcp\", \"test\": \"RawTcpCeiling\", \"receiver\": \"%s\", \"record_bytes\": %u, "
      "\"write_bytes\": %u, \"read_bytes\": %zu, \"nodelay\": false, \"records\": %.0f, \"seconds\": %.4f, "
      "\"records_per_s\": %.1f, \"bytes_per_s\": %.1f, \"total_records\": %.0f, \"verified\": %s, \"error\": \"%s\"}\n",
      o.connect.empty() ? "fork" : "remote", o.record, o.write, kReadBytes, records, out.seconds, rate,
      rate * o.record, static_cast<double>(out.totalWords) * 8 / o.record, out.verified ? "true" : "false",
      out.error.c_str());
  return out.verified ? 0 : 3;
}
