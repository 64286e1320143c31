// Myelin's benchmark client: runs one test of the suite against
// bench_service and prints one JSON line (docs/benchmark-suite.md).
// Usage: bench_client --connect HOST:PORT --test NAME [--threads N]
//        [--duration S] [--warmup S] [--window W] [--stream-count K] [--chunks K]
#include <myelin/myelin.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench_api.h"
#include "bench_data.h"
#include "bench_sink.h"
#include "stop_signal.h"
#include "../tls_env.h"

namespace bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string connect;
  std::string test;
  int threads = 1;
  double duration = 2.0;
  double warmup = 0.5;
  // Calls in flight per thread. gRPC runs at 128, where it does best (512 and
  // 1024 measured no faster); Myelin's round trips still gained up to 2.5x
  // from 128 to 512 at one thread, because it sends a window as one batch.
  int window = 512;
  std::uint64_t streamCount = 10000;
  std::uint32_t chunks = 10000;
};

/// Shared state of one test run: the measuring window and the verdict.
struct Run {
  std::atomic<bool> measuring{false};
  StopSignal stopping;
  std::atomic<bool> failed{false};
  std::atomic<std::uint64_t> completed{0};
  std::string firstError;
  std::mutex errorMu;

  void fail(const std::string& why) {
    std::lock_guard lock(errorMu);
    if (!failed.exchange(true)) firstError = why;
  }
};

struct Result {
  std::uint64_t rpcs = 0;
  double seconds = 0;
  myelin::LatencyHistogram latency;
};

// ---------------------------------------------------------------------------
// Windowed async calls: each worker keeps up to `window` calls in flight and
// issues the next call from the callback of each reply.

template <class R>
class Worker {
 public:
  using MakeCall = std::function<myelin::Async<R>(int worker, std::uint64_t seq)>;
  using Verify = std::function<bool(int worker, std::uint64_t seq, const R& reply)>;

  Worker(Run& run, int id, MakeCall make, Verify verify)
      : run_(run), id_(id), make_(std::move(make)), verify_(std::move(verify)) {}

  void start(int window) {
    // The first calls' numbers are taken before any is made: a reply may
    // come, and its callback make the next call, while this loop goes on.
    next_.store(static_cast<std::uint64_t>(window), std::memory_order_relaxed);
    for (int i = 0; i < window; ++i) issue(static_cast<std::uint64_t>(i), true);
  }
  bool idle() const { return inFlight_.load() == 0; }
  myelin::LatencyHistogram& latency() { return latency_; }
  /// Replies verified while measuring; read once the worker is idle.
  std::uint64_t completed() const { return completed_.load(std::memory_order_relaxed); }

 private:
  /// The next call's number, taken by a callback. Callbacks of one
  /// thread's calls run one at a time on the lane's runner, not always the
  /// same thread, so the fields they share are atomics, read and written
  /// without a locked instruction (a locked add per reply was measurable
  /// in this client). One overlap is possible: while start() issues the
  /// first window, a reply that came before its `then` runs its callback
  /// inline on the worker's thread while the runner may run another. That
  /// happens only during the warm-up, which records no counts or
  /// latencies, and a number taken twice only repeats a request that is
  /// checked against its own number.
  std::uint64_t takeNext() {
    const std::uint64_t seq = next_.load(std::memory_order_relaxed);
    next_.store(seq + 1, std::memory_order_relaxed);
    return seq;
  }

  /// Makes call `seq`; false if none was made (the run stops or the call
  /// failed). `count`: it adds to the calls in flight (a chain begins).
  bool issue(std::uint64_t seq, bool count) {
    if (run_.stopping.raised() || run_.failed.load(std::memory_order_relaxed)) return false;
    if (count) inFlight_.fetch_add(1);
    // Latency is timed on one call in 16, as in the gRPC client: two clock
    // reads per call were 15 % of this client's time in a round trip.
    const bool timed = seq % 16 == 0;
    const Clock::time_point sent = timed ? Clock::now() : Clock::time_point{};
    // No default-constructed Async to assign over: that makes a pending
    // state of its own, allocated and freed per call for nothing (callgrind,
    // RoundTripSmallMsgAsyncCB client: 2,364 -> 2,172 instructions a call).
    std::optional<myelin::Async<R>> made;
    try {
      made.emplace(make_(id_, seq));
    } catch (const std::exception& e) {
      run_.fail(e.what());
      if (count) inFlight_.fetch_sub(1);
      return false;
    }
    // Callbacks of one thread's calls run one at a time, in reply order, so
    // the worker's own fields need no lock, and the count of replies is the
    // worker's own: a shared atomic counter was a locked add per reply.
    // The callback takes the Async as its argument rather than a copy in
    // its captures: two locked instructions a call less (docs/benchmarks.md).
    made->then([this, seq, sent, timed](const myelin::Async<R>& a) {
      if (!a.isSuccess()) {
        run_.fail("call failed: " + a.errorMessage());
      } else if (!verify_(id_, seq, a.value())) {
        run_.fail("reply does not match the request");
      } else if (run_.measuring.load(std::memory_order_relaxed)) {
        completed_.store(completed_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        if (timed) {
          latency_.record(static_cast<std::uint64_t>(
              std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - sent).count()));
        }
      }
      // The next call takes this one's place in the window: the count in
      // flight changes only when the chain ends.
      if (!issue(takeNext(), false)) inFlight_.fetch_sub(1);
    });
    return true;
  }

  Run& run_;
  int id_;
  MakeCall make_;
  Verify verify_;
  std::atomic<std::uint64_t> next_{0};
  std::atomic<int> inFlight_{0};
  std::atomic<std::uint64_t> completed_{0};
  myelin::LatencyHistogram latency_;
};

/// Runs the warm-up and measured phases with `threads` threads, each doing
/// `body(threadIndex)` until `run.stopping` is raised, then `drained(threadIndex)`.
Result measure(const Options& o, myelin::Endpoint& ep, Run& run, int threads,
               const std::function<void(int)>& body, const std::function<void(int)>& drain) {
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      myelin::EndpointCtx ctx(ep);
      body(t);
      drain(t);
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(o.warmup));
  run.measuring = true;
  auto start = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(o.duration));
  run.measuring = false;
  auto end = Clock::now();
  run.stopping.raise();
  for (auto& t : pool) t.join();
  Result r;
  r.rpcs = run.completed.load();
  r.seconds = std::chrono::duration<double>(end - start).count();
  return r;
}

template <class R>
Result windowed(const Options& o, myelin::Endpoint& ep, int threads, typename Worker<R>::MakeCall make,
                typename Worker<R>::Verify verify) {
  Run run;
  std::vector<std::unique_ptr<Worker<R>>> workers;
  for (int t = 0; t < threads; ++t) workers.push_back(std::make_unique<Worker<R>>(run, t, make, verify));
  Result r = measure(
      o, ep, run, threads,
      [&](int t) {
        workers[static_cast<std::size_t>(t)]->start(o.window);
        run.stopping.wait();
      },
      [&](int t) {
        auto deadline = Clock::now() + std::chrono::seconds(60);
        while (!workers[static_cast<std::size_t>(t)]->idle() && Clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        if (!workers[static_cast<std::size_t>(t)]->idle()) run.fail("calls still in flight 60 s after the end");
      });
  for (auto& w : workers) {
    r.latency.merge(w->latency());
    r.rpcs += w->completed();
  }
  if (run.failed) throw std::runtime_error(run.firstError);
  return r;
}

template <class T>
Result echoTest(const Options& o, myelin::Endpoint& ep, const T& msg, myelin::Async<T> (*call)(const T&)) {
  return windowed<T>(
      o, ep, o.threads, [&msg, call](int, std::uint64_t) { return call(msg); },
      [&msg](int, std::uint64_t, const T& reply) { return reply == msg; });
}

// ---------------------------------------------------------------------------
// Streaming from the service: it calls BenchSink::on* on this thread while
// the thread's sync stream call is open.

thread_local std::uint64_t tlReceived = 0;
thread_local std::uint64_t tlMeasured = 0;  // added to the run's count when the thread ends
thread_local bool tlBad = false;
Run* gStreamRun = nullptr;

template <class T>
void received(const T& m, const T& expected) {
  if (!(m == expected)) tlBad = true;
  ++tlReceived;
  if (gStreamRun->measuring.load(std::memory_order_relaxed)) ++tlMeasured;
}

const SmallMessage kSmall = makeSmall();
const MediumMessage kMedium = makeMedium();
const LargeMessage kLarge = makeLarge();

Result streamTest(const Options& o, myelin::Endpoint& ep, std::uint64_t (*call)(std::uint64_t)) {
  Run run;
  gStreamRun = &run;
  Result r = measure(
      o, ep, run, o.threads,
      [&](int) {
        while (!run.stopping.raised() && !run.failed.load()) {
          std::uint64_t before = tlReceived;
          try {
            std::uint64_t n = call(o.streamCount);
            if (n != o.streamCount || tlReceived - before != o.streamCount) run.fail("stream lost messages");
          } catch (const std::exception& e) {
            run.fail(e.what());
          }
          if (tlBad) run.fail("streamed message does not match");
        }
        run.completed.fetch_add(tlMeasured);
      },
      [](int) {});
  if (run.failed) throw std::runtime_error(run.firstError);
  return r;
}

// ---------------------------------------------------------------------------

Result runTest(const Options& o, myelin::Endpoint& ep) {
  const std::string& t = o.test;
  if (t == "RoundTripStringAsyncCB") {
    return echoTest<std::string>(o, ep, std::string("Hello World"), &BenchService::echoString);
  }
  if (t == "RoundTripSmallMsgAsyncCB") return echoTest<SmallMessage>(o, ep, kSmall, &BenchService::echoSmall);
  if (t == "RoundTripMediumMsgAsyncCB") return echoTest<MediumMessage>(o, ep, kMedium, &BenchService::echoMedium);
  if (t == "RoundTripLargeMsgAsyncCB") return echoTest<LargeMessage>(o, ep, kLarge, &BenchService::echoLarge);
  if (t == "RoundTripSmallMsgListAsyncCB") {
    return echoTest<std::vector<SmallMessage>>(o, ep, std::vector<SmallMessage>(100, kSmall),
                                               &BenchService::echoSmallList);
  }
  if (t == "RoundTripMediumMsgListAsyncCB") {
    return echoTest<std::vector<MediumMessage>>(o, ep, std::vector<MediumMessage>(100, kMedium),
                                                &BenchService::echoMediumList);
  }
  if (t == "RoundTripLargeMsgListAsyncCB") {
    return echoTest<std::vector<LargeMessage>>(o, ep, std::vector<LargeMessage>(100, kLarge),
                                               &BenchService::echoLargeList);
  }
  if (t == "StreamSmallMsgFromServer") return streamTest(o, ep, &BenchService::streamSmall);
  if (t == "StreamMediumMsgFromServer") return streamTest(o, ep, &BenchService::streamMedium);
  if (t == "StreamLargeMsgFromServer") return streamTest(o, ep, &BenchService::streamLarge);
  if (t == "UserProfileServiceCB") {
    Options o20 = o;
    o20.threads = 20;
    // Users 1..kProfileUsers in turn, each reply checked against the profile
    // made for its user before the run, as the gRPC client checks its replies.
    constexpr std::uint64_t kProfileUsers = 1024;
    static const std::vector<UserProfile> expected = [] {
      std::vector<UserProfile> v;
      for (std::uint64_t id = 1; id <= kProfileUsers; ++id) v.push_back(makeProfile(id));
      return v;
    }();
    auto user = [](int w, std::uint64_t seq) { return (seq * 20 + static_cast<std::uint64_t>(w)) % kProfileUsers; };
    return windowed<UserProfile>(
        o20, ep, 20, [user](int w, std::uint64_t seq) { return BenchService::getUserProfile(UserRequest{user(w, seq) + 1}); },
        [user](int w, std::uint64_t seq, const UserProfile& p) { return p == expected[user(w, seq)]; });
  }
  if (t == "DocumentProcessingCB") {
    // Each thread is one document stream: chunk after chunk, then the next
    // document, with up to `window` chunks in flight.
    std::uint32_t chunks = o.chunks;
    auto docOf = [chunks](int w, std::uint64_t seq) {
      return static_cast<std::uint32_t>(w) * 1000000u + static_cast<std::uint32_t>(seq / chunks);
    };
    return windowed<ChunkResult>(
        o, ep, o.threads,
        [chunks, docOf](int w, std::uint64_t seq) {
          std::uint32_t doc = docOf(w, seq);
          auto index = static_cast<std::uint32_t>(seq % chunks);
          return BenchService::processChunk(Chunk{doc, index, makeChunkData(doc, index)});
        },
        [chunks, docOf](int w, std::uint64_t seq, const ChunkResult& r) {
          std::uint32_t doc = docOf(w, seq);
          auto index = static_cast<std::uint32_t>(seq % chunks);
          return r.docId == doc && r.index == index && r.checksum == checksum(makeChunkData(doc, index));
        });
  }
  throw std::runtime_error("unknown test '" + t + "'");
}

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: bench_client --connect HOST:PORT --test NAME [--threads N] [--duration S] [--warmup S]\n"
               "                    [--window W] [--stream-count K] [--chunks K]\n");
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage();
      return argv[++i];
    };
    if (a == "--connect") {
      o.connect = value();
    } else if (a == "--test") {
      o.test = value();
    } else if (a == "--threads") {
      o.threads = std::atoi(value().c_str());
    } else if (a == "--duration") {
      o.duration = std::atof(value().c_str());
    } else if (a == "--warmup") {
      o.warmup = std::atof(value().c_str());
    } else if (a == "--window") {
      o.window = std::atoi(value().c_str());
    } else if (a == "--stream-count") {
      o.streamCount = std::strtoull(value().c_str(), nullptr, 10);
    } else if (a == "--chunks") {
      o.chunks = static_cast<std::uint32_t>(std::strtoul(value().c_str(), nullptr, 10));
    } else {
      usage();
    }
  }
  if (o.connect.empty() || o.test.empty() || o.threads < 1 || o.window < 1 || o.duration <= 0) usage();
  return o;
}

}  // namespace

myelin::AsyncVoid BenchSink::onSmall(const SmallMessage& m) {
  received(m, kSmall);
  return {};
}
myelin::AsyncVoid BenchSink::onMedium(const MediumMessage& m) {
  received(m, kMedium);
  return {};
}
myelin::AsyncVoid BenchSink::onLarge(const LargeMessage& m) {
  received(m, kLarge);
  return {};
}

}  // namespace bench

int main(int argc, char** argv) {
  bench::Options o = bench::parse(argc, argv);
  bool ok = true;
  std::string error;
  bench::Result r;
  int threads = o.test == "UserProfileServiceCB" ? 20 : o.threads;
  try {
    myelin::ConnectionInfo ci;
    ci.setConnectAddress(o.connect);
    auto ep = bench::withBenchTls(ci, false).connect();
    r = bench::runTest(o, ep);
    ep.disconnect();
  } catch (const std::exception& e) {
    ok = false;
    error = e.what();
  }
  double rps = r.seconds > 0 ? static_cast<double>(r.rpcs) / r.seconds : 0;
  std::string err;
  for (char c : error) {
    if (c == '"' || c == '\\') err += '\\';
    err += (c == '\n' ? ' ' : c);
  }
  std::printf(
      "{\"impl\": \"myelin\", \"test\": \"%s\", \"threads\": %d, \"seconds\": %.4f, \"rpcs\": %" PRIu64
      ", \"rps\": %.1f, \"verified\": %s, \"error\": \"%s\", \"latency_us\": {\"mean\": %.2f, \"p50\": %.2f, "
      "\"p99\": %.2f, \"max\": %.2f}, \"settings\": {\"window\": %d, \"tls\": %s}}\n",
      o.test.c_str(), threads, r.seconds, r.rpcs, rps, ok ? "true" : "false", err.c_str(), r.latency.mean() / 1e3,
      static_cast<double>(r.latency.percentile(50)) / 1e3, static_cast<double>(r.latency.percentile(99)) / 1e3,
      static_cast<double>(r.latency.max()) / 1e3, o.window,
      bench::TlsEnv::fromEnvironment().client() ? "true" : "false");
  return ok ? 0 : 3;
}
