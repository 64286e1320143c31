// raw_client: runs one test of Table B (raw Myelin) against bench_service,
// verifies that every call arrived, prints the details block on stderr and
// one JSON line on stdout. Usage:
//   raw_client --connect HOST:PORT --test NAME [--duration S] [--warmup S] [--scale F]
#include <myelin/myelin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench_data.h"
#include "raw_api.h"
#include "thread_counts.h"
#include "raw_sink.h"
#include "stop_signal.h"
#include "../tls_env.h"

namespace bench {
namespace {

using Clock = std::chrono::steady_clock;

/// Fire-and-forget floods keep at most two bursts per thread in flight,
/// within this many encoded bytes and calls over all threads. The call
/// bound keeps the drain at the end of a run near 50 ms.
constexpr std::size_t kFloodBudgetBytes = 64u * 1024 * 1024;
constexpr std::size_t kFloodBudgetCalls = 400000;
/// The send-reply tests measure latency, which is the time a call spends
/// queued behind the others in flight (Little's law): they keep a
/// quarter of the budget in flight.
constexpr std::size_t kSendReplyBudgetDivisor = 4;
constexpr std::size_t kMaxBurstCalls = 65536;
constexpr std::size_t kMinBurstCalls = 2;
/// Calls the service makes to the client per callClient request.
constexpr std::uint64_t kCallsPerRequest = 50000;
/// Async<T> calls each thread keeps in flight in the round-trip tests.
constexpr int kRoundTripWindow = 128;
/// How long to wait for the last calls of a test before declaring them lost.
constexpr std::int64_t kDrainTimeoutMs = 60000;

std::uint64_t nowNs() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count());
}

struct Options {
  std::string connect;
  std::string test;
  double duration = 2.0;
  double warmup = 0.5;
  double scale = 1.0;
};

enum class Kind { kToService, kToClient, kSendReply, kRoundTrip };

/// One Table B test: its shape before scaling and what it calls.
struct TestDef {
  const char* name;
  Kind kind;
  int endpoints;
  int threadsPerEndpoint;
  /// Approximate encoded size of one call, for the flood's burst size.
  std::size_t callBytes;
  const char* description;  // placeholders: {E} endpoints, {T threads} per endpoint, {N threads} in all
};

const TestDef kTests[] = {
    {"OneParamToSrvAsyncVoid", Kind::kToService, 1, 1, 10,
     "A single client uses {N threads} to invoke async calls with 1 parameter to the service."},
    {"OneParamToClnAsyncVoid", Kind::kToClient, 1, 1, 10,
     "A single client uses {N threads}, each requesting the service to invoke async calls with 1 parameter "
     "to the client."},
    {"MultiOneParamToSrvAsyncVoid", Kind::kToService, 50, 2, 10,
     "A single client uses {E} endpoints with each using {T threads} to invoke async calls with one parameter "
     "to the service."},
    {"SendAsyncReplyAsyncVoid", Kind::kSendReply, 1, 4, 10,
     "A single client uses {N threads} to invoke async calls with 1 parameter to the service, which then "
     "invokes another async call with the same parameter back to the client."},
    {"SmallStructToSrvAsyncVoid", Kind::kToService, 1, 1, 22,
     "A single client uses {N threads} to invoke async calls with 1 small struct parameter to the service."},
    {"MediumStructToSrvAsyncVoid", Kind::kToService, 1, 1, 85,
     "A single client uses {N threads} to invoke async calls with a struct containing 9 fields to the "
     "service."},
    {"MultiEndpointToSrvAsyncVoid", Kind::kToService, 50, 1, 5,
     "A single client uses {E} endpoints with each using {T threads} to invoke async calls with zero "
     "parameters to the service."},
    {"MultiEndpointToClnAsyncVoid", Kind::kToClient, 100, 1, 5,
     "A single client uses {E} endpoints to the service, using {T threads} per endpoint to ask the service "
     "to invoke async calls with zero parameters to the client."},
    {"SmallStructSendReplyAsyncVoid", Kind::kSendReply, 1, 10, 32,
     "A single client uses {N threads} to invoke async calls with a small 2 field struct to the service. The "
     "service then invokes another async call for each struct back to the client. Latency: from the send to "
     "the arrival of the call back."},
    {"MediumStructSendReplyAsyncVoid", Kind::kSendReply, 1, 10, 95,
     "A single client uses {N threads} to invoke async calls with a medium sized struct containing 9 fields "
     "to the service. The service then invokes another async call for each struct back to the client. "
     "Latency: from the send to the arrival of the call back."},
    {"LargeStructSendReplyAsyncVoid", Kind::kSendReply, 1, 10, 215,
     "A single client uses {N threads} to invoke async calls with a large 14 field struct (with nested "
     "structs) to the service. The service then invokes another async call for each struct back to the "
     "client. Latency: from the send to the arrival of the call back."},
    {"SmallStructVectorParamAsyncVoid", Kind::kToService, 10, 10, 16000,
     "A single client uses {E} endpoints with each using {T threads} to invoke async calls with a vector "
     "parameter containing 1,000 small 2 field structs."},
    {"MediumStructVectorParamAsyncVoid", Kind::kToService, 10, 10, 76000,
     "A single client uses {E} endpoints with each using {T threads} to invoke async calls with a vector "
     "parameter containing 1,000 structs, each with 9 fields."},
    {"LargeStructVectorParamAsyncVoid", Kind::kToService, 10, 10, 196000,
     "A single client uses {E} endpoints with each using {T threads} to invoke async calls with a vector "
     "parameter containing 1,000 large 14 field structs (with nested structs)."},
    {"SmallStructRTAsyncVal", Kind::kRoundTrip, 10, 10, 22,
     "A single client uses {E} endpoints with each using {T threads} to invoke Async<T> calls to round-trip "
     "a small 2 field struct, 128 in flight per thread. For each round-tripped struct, the client invokes a "
     "callback that checks it and issues the next call."},
    {"MediumStructRTAsyncVal", Kind::kRoundTrip, 10, 10, 85,
     "A single client uses {E} endpoints with each using {T threads} to invoke Async<T> calls to round-trip "
     "a struct containing 9 fields, 128 in flight per thread. For each round-tripped struct, the client "
     "invokes a callback that checks it and issues the next call."},
    {"LargeStructRTAsyncVal", Kind::kRoundTrip, 10, 10, 205,
     "A single client uses {E} endpoints with each using {T threads} to invoke Async<T> calls to round-trip "
     "a large 14 field struct (with nested structs), 128 in flight per thread. For each round-tripped struct, "
     "the client invokes a callback that checks it and issues the next call."},
};

const SmallMessage kSmall = makeSmall();
const MediumMessage kMedium = makeMedium();
const LargeMessage kLarge = makeLarge();

// ---------------------------------------------------------------------------
// Counters of what the client's sink received, kept per thread (the sink
// runs at millions of calls per second on several threads).


CountRegistry gSink;
/// The measuring timer while a send-reply test measures (sink latency).
std::atomic<myelin::PerfTimer*> gTimer{nullptr};


template <class T>
void sinkMessage(const T& m, const T& expected, std::uint64_t sentNs) {
  ThreadCounts& c = gSink.mine();
  bump(c.received);
  if (!(m == expected)) bump(c.mismatched);
  if (myelin::PerfTimer* t = gTimer.load(std::memory_order_acquire)) t->recordLatency(nowNs() - sentNs);
}

// ---------------------------------------------------------------------------

/// Verdict of a run, shared by its threads.
struct Verdict {
  std::mutex mu;
  std::string error;
  std::atomic<bool> failed{false};
  void fail(const std::string& why) {
    std::lock_guard lock(mu);
    if (!failed.exchange(true)) error = why;
  }
};

/// The connections of a test and its threads.
struct Setup {
  const TestDef* def;
  Options o;
  std::vector<myelin::Endpoint> eps;
  int threadsPerEndpoint = 1;
  int threads() const { return static_cast<int>(eps.size()) * threadsPerEndpoint; }
  myelin::Endpoint& endpointOf(int thread) { return eps[static_cast<std::size_t>(thread / threadsPerEndpoint)]; }
};

struct Outcome {
  std::optional<myelin::PerfReport> report;
  Verdict verdict;
};

/// Runs `body(thread)` on every thread of the setup, each with its endpoint
/// current, and joins them.
void onThreads(Setup& s, const std::function<void(int)>& body) {
  std::vector<std::thread> pool;
  for (int t = 0; t < s.threads(); ++t) {
    pool.emplace_back([&s, &body, t] {
      myelin::EndpointCtx ctx(s.endpointOf(t));
      body(t);
    });
  }
  for (auto& th : pool) th.join();
}

void waitIdle(Setup& s, Verdict& v) {
  for (auto& ep : s.eps) {
    if (!ep.waitForIdle(kDrainTimeoutMs)) {
      v.fail("endpoint not idle after " + std::to_string(kDrainTimeoutMs / 1000) + " s (" +
             myelin::toString(ep.getState()) + ": " + ep.getError() + ")");
      return;
    }
  }
}

RawCounts serviceCounts(Setup& s) {
  myelin::EndpointCtx ctx(s.eps[0]);
  return RawService::counts();
}

/// Resets (reset) or reads and sums the service side's statistics of every
/// connection.
myelin::EndpointStats remoteStats(Setup& s, bool reset) {
  myelin::EndpointStats sum;
  for (auto& ep : s.eps) {
    myelin::EndpointCtx ctx(ep);
    RemoteStats r = RawService::stats(reset);
    myelin::EndpointStats e;
    e.seconds = r.seconds;
    e.messagesSent = r.messagesSent;
    e.messagesReceived = r.messagesReceived;
    e.bytesSent = r.bytesSent;
    e.bytesReceived = r.bytesReceived;
    e.socketWrites = r.socketWrites;
    e.socketReads = r.socketReads;
    for (std::size_t i = 0; i < e.sendBatchHistogram.size(); ++i) e.sendBatchHistogram[i] = r.sendBatchHistogram[i];
    e.maxBatchMessages = r.maxBatchMessages;
    e.maxStagedBytes = r.maxStagedBytes;
    e.maxQueuedBytes = r.maxQueuedBytes;
    e.maxReceiveBufferBytes = r.maxReceiveBufferBytes;
    e.callsExecuted = r.callsExecuted;
    myelin::mergeStats(sum, e);
  }
  return sum;
}

std::string describe(const Setup& s) {
  std::string d = s.def->description;
  auto put = [&d](const std::string& key, const std::string& v) {
    for (std::size_t p; (p = d.find(key)) != std::string::npos;) d.replace(p, key.size(), v);
  };
  auto threads = [](int n) { return std::to_string(n) + (n == 1 ? " thread" : " threads"); };
  put("{E}", std::to_string(s.eps.size()));
  put("{T threads}", threads(s.threadsPerEndpoint));
  put("{N threads}", threads(s.threads()));
  char tail[96];
  std::snprintf(tail, sizeof tail, " Runs for %.1f s after a %.1f s warm-up.", s.o.duration, s.o.warmup);
  return d + tail;
}

/// Waits until the sink has received `expected` calls in all.
void waitForSink(std::uint64_t expected, Verdict& v) {
  auto deadline = Clock::now() + std::chrono::milliseconds(kDrainTimeoutMs);
  while (gSink.sum().received < expected) {
    if (Clock::now() > deadline) {
      v.fail("the client received " + std::to_string(gSink.sum().received) + " of " + std::to_string(expected) +
             " calls back");
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// ---------------------------------------------------------------------------
// Floods of fire-and-forget calls: each thread issues bursts, each followed
// by a fence; it waits for the previous burst's fence before the next, so
// at most two bursts per thread are in flight.

struct FloodTotals {
  std::uint64_t calls = 0;
  std::uint64_t valueSum = 0;
};

/// issue(seq) makes one call and returns the value it sent (summed).
template <class Issue>
FloodTotals floodPhase(Setup& s, double seconds, Verdict& v, Issue issue) {
  std::size_t bursts = 2 * static_cast<std::size_t>(s.threads());
  if (s.def->kind == Kind::kSendReply) bursts *= kSendReplyBudgetDivisor;
  std::size_t burst = std::min(kFloodBudgetBytes / bursts / s.def->callBytes, kFloodBudgetCalls / bursts);
  burst = std::clamp(burst, kMinBurstCalls, kMaxBurstCalls);
  std::atomic<bool> stop{false};
  std::vector<FloodTotals> totals(static_cast<std::size_t>(s.threads()));
  std::thread timer([&] {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    stop = true;
  });
  onThreads(s, [&](int t) {
    FloodTotals mine;
    std::optional<myelin::Async<std::uint64_t>> previous;
    auto settle = [&](const myelin::Async<std::uint64_t>& f, std::uint64_t expected) {
      if (!f.wait(kDrainTimeoutMs) || !f.isSuccess() || f.value() != expected) {
        v.fail("fence failed: " + (f.isReady() ? f.errorMessage() : std::string("timed out")));
        return false;
      }
      return true;
    };
    std::uint64_t previousToken = 0;
    try {
      while (!stop.load(std::memory_order_relaxed) && !v.failed.load(std::memory_order_relaxed)) {
        for (std::size_t i = 0; i < burst; ++i) mine.valueSum += issue(mine.calls++);
        auto f = RawService::fence(mine.calls);
        if (previous && !settle(*previous, previousToken)) break;
        previous = f;
        previousToken = mine.calls;
      }
      if (previous) settle(*previous, previousToken);
    } catch (const std::exception& e) {
      v.fail(e.what());
    }
    totals[static_cast<std::size_t>(t)] = mine;
  });
  timer.join();
  FloodTotals sum;
  for (auto& x : totals) {
    sum.calls += x.calls;
    sum.valueSum += x.valueSum;
  }
  return sum;
}

/// A flood test: warm-up, then the measured phase; the region ends when
/// every call (and, for send-reply tests, every call back) has arrived.
template <class Issue>
void floodTest(Setup& s, Outcome& out, bool repliesToClient, Issue issue) {
  Verdict& v = out.verdict;
  RawCounts start = gSink.sum();
  FloodTotals warm = floodPhase(s, s.o.warmup, v, issue);
  waitIdle(s, v);
  if (repliesToClient) waitForSink(start.received + warm.calls, v);
  if (v.failed) return;
  RawCounts before = serviceCounts(s);
  RawCounts sink0 = gSink.sum();
  remoteStats(s, true);
  myelin::PerfTimer timer(s.def->name, describe(s), s.eps);
  if (repliesToClient) gTimer.store(&timer, std::memory_order_release);
  FloodTotals sent = floodPhase(s, s.o.duration, v, issue);
  waitIdle(s, v);
  if (repliesToClient) waitForSink(sink0.received + sent.calls, v);
  gTimer.store(nullptr, std::memory_order_release);
  timer.addRpcs(sent.calls);
  out.report = timer.stop();
  out.report->remote = remoteStats(s, false);
  out.report->hasRemote = true;
  RawCounts after = serviceCounts(s);
  if (v.failed) return;
  if (after.received - before.received != sent.calls) {
    v.fail("the service received " + std::to_string(after.received - before.received) + " of " +
           std::to_string(sent.calls) + " calls");
  } else if (after.mismatched != before.mismatched) {
    v.fail(std::to_string(after.mismatched - before.mismatched) + " messages differed from what was sent");
  } else if (after.valueSum - before.valueSum != sent.valueSum) {
    v.fail("the sum of the values the service received differs from the sum sent");
  }
  if (repliesToClient && !v.failed) {
    RawCounts sink1 = gSink.sum();
    if (sink1.received - sink0.received != sent.calls) {
      v.fail("the client received " + std::to_string(sink1.received - sink0.received) + " of " +
             std::to_string(sent.calls) + " calls back");
    } else if (sink1.mismatched != sink0.mismatched) {
      v.fail("calls back carried messages that differ from what was sent");
    } else if (sink1.valueSum - sink0.valueSum != sent.valueSum) {
      v.fail("the sum of the values called back differs from the sum sent");
    }
  }
}

// ---------------------------------------------------------------------------
// The service calls the client: each thread asks for kCallsPerRequest calls
// at a time with a sync call, during which the calls arrive.

std::uint64_t toClientPhase(Setup& s, double seconds, Verdict& v, bool zeroParams, std::uint64_t perRequest) {
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> requested{0};
  std::thread timer([&] {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    stop = true;
  });
  onThreads(s, [&](int) {
    try {
      while (!stop.load(std::memory_order_relaxed) && !v.failed.load(std::memory_order_relaxed)) {
        std::uint64_t n = zeroParams ? RawService::callClientZero(perRequest) : RawService::callClient(perRequest);
        if (n != perRequest) {
          v.fail("the service made " + std::to_string(n) + " calls, not " + std::to_string(perRequest));
        }
        requested += perRequest;
      }
    } catch (const std::exception& e) {
      v.fail(e.what());
    }
  });
  timer.join();
  return requested.load();
}

void toClientTest(Setup& s, Outcome& out, bool zeroParams) {
  Verdict& v = out.verdict;
  // Shorter requests when a run is short, so that every thread gets a few.
  std::uint64_t perRequest = s.o.duration < 1.0 ? kCallsPerRequest / 5 : kCallsPerRequest;
  RawCounts start = gSink.sum();
  std::uint64_t warm = toClientPhase(s, s.o.warmup, v, zeroParams, perRequest);
  waitIdle(s, v);
  waitForSink(start.received + warm, v);
  if (v.failed) return;
  RawCounts sink0 = gSink.sum();
  remoteStats(s, true);
  myelin::PerfTimer timer(s.def->name, describe(s), s.eps);
  std::uint64_t requested = toClientPhase(s, s.o.duration, v, zeroParams, perRequest);
  waitIdle(s, v);
  waitForSink(sink0.received + requested, v);
  timer.addRpcs(requested);
  out.report = timer.stop();
  out.report->remote = remoteStats(s, false);
  out.report->hasRemote = true;
  if (v.failed) return;
  RawCounts sink1 = gSink.sum();
  std::uint64_t requests = requested / perRequest;
  std::uint64_t expectedSum = zeroParams ? 0 : requests * (perRequest * (perRequest - 1) / 2);
  if (sink1.received - sink0.received != requested) {
    v.fail("the client received " + std::to_string(sink1.received - sink0.received) + " of " +
           std::to_string(requested) + " calls");
  } else if (sink1.valueSum - sink0.valueSum != expectedSum) {
    v.fail("the sum of the values the client received differs from the sum sent");
  }
}

// ---------------------------------------------------------------------------
// Async<T> round trips: each thread keeps a window of calls in flight and
// issues the next call from each reply's callback, which checks the reply.

template <class T>
class RoundTripWorker {
 public:
  using Call = myelin::Async<T> (*)(const T&);
  /// `timer` is set while the test measures.
  RoundTripWorker(const T& msg, Call call, Verdict& v, StopSignal& stopping,
                  std::atomic<myelin::PerfTimer*>& timer)
      : msg_(msg), call_(call), v_(v), stopping_(stopping), timer_(timer) {}

  void start(int window) {
    for (int i = 0; i < window; ++i) issue();
  }
  bool idle() const { return inFlight_.load() == 0; }
  const myelin::LatencyHistogram& latency() const { return latency_; }

 private:
  void issue() {
    if (stopping_.raised() || v_.failed.load(std::memory_order_relaxed)) return;
    inFlight_.fetch_add(1);
    auto sent = nowNs();
    std::optional<myelin::Async<T>> a;
    try {
      a.emplace(call_(msg_));
    } catch (const std::exception& e) {
      v_.fail(e.what());
      inFlight_.fetch_sub(1);
      return;
    }
    // One thread's callbacks run one at a time, so the histogram needs no lock.
    a->then([this, sent](const myelin::Async<T>& r) {
      if (!r.isSuccess()) {
        v_.fail("call failed: " + r.errorMessage());
      } else if (!(r.value() == msg_)) {
        v_.fail("reply does not match the request");
      } else if (myelin::PerfTimer* t = timer_.load(std::memory_order_acquire)) {
        latency_.record(nowNs() - sent);
        t->addRpcs(1);
      }
      issue();
      inFlight_.fetch_sub(1);
    });
  }

  const T& msg_;
  Call call_;
  Verdict& v_;
  StopSignal& stopping_;
  std::atomic<myelin::PerfTimer*>& timer_;
  std::atomic<int> inFlight_{0};
  myelin::LatencyHistogram latency_;
};

template <class T>
void roundTripTest(Setup& s, Outcome& out, const T& msg, myelin::Async<T> (*call)(const T&)) {
  Verdict& v = out.verdict;
  StopSignal stopping;
  std::atomic<myelin::PerfTimer*> timer{nullptr};
  std::vector<std::unique_ptr<RoundTripWorker<T>>> workers;
  for (int t = 0; t < s.threads(); ++t) {
    workers.push_back(std::make_unique<RoundTripWorker<T>>(msg, call, v, stopping, timer));
  }
  std::thread driver([&] {
    onThreads(s, [&](int t) {
      auto& w = *workers[static_cast<std::size_t>(t)];
      w.start(kRoundTripWindow);
      stopping.wait();
      auto deadline = Clock::now() + std::chrono::milliseconds(kDrainTimeoutMs);
      while (!w.idle() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (!w.idle()) v.fail("calls still in flight long after the end");
    });
  });
  std::this_thread::sleep_for(std::chrono::duration<double>(s.o.warmup));
  remoteStats(s, true);
  auto measured = std::make_unique<myelin::PerfTimer>(s.def->name, describe(s), s.eps);
  timer.store(measured.get(), std::memory_order_release);
  std::this_thread::sleep_for(std::chrono::duration<double>(s.o.duration));
  timer.store(nullptr, std::memory_order_release);
  out.report = measured->stop();
  out.report->remote = remoteStats(s, false);
  out.report->hasRemote = true;
  stopping.raise();
  driver.join();
  // Callbacks may still be finishing their bookkeeping on other threads.
  waitIdle(s, v);
  for (auto& w : workers) out.report->latency.merge(w->latency());
}

// ---------------------------------------------------------------------------

void runTest(Setup& s, Outcome& out) {
  const std::string name = s.def->name;
  static const std::vector<SmallMessage> kSmallList(kRawVectorLength, kSmall);
  static const std::vector<MediumMessage> kMediumList(kRawVectorLength, kMedium);
  static const std::vector<LargeMessage> kLargeList(kRawVectorLength, kLarge);
  if (name == "OneParamToSrvAsyncVoid" || name == "MultiOneParamToSrvAsyncVoid") {
    floodTest(s, out, false, [](std::uint64_t seq) {
      auto v = static_cast<std::uint32_t>(seq);
      RawService::oneParam(v);
      return std::uint64_t{v};
    });
  } else if (name == "OneParamToClnAsyncVoid") {
    toClientTest(s, out, false);
  } else if (name == "MultiEndpointToClnAsyncVoid") {
    toClientTest(s, out, true);
  } else if (name == "SendAsyncReplyAsyncVoid") {
    floodTest(s, out, true, [](std::uint64_t seq) {
      auto v = static_cast<std::uint32_t>(seq);
      RawService::sendReplyValue(v);
      return std::uint64_t{v};
    });
  } else if (name == "SmallStructToSrvAsyncVoid") {
    floodTest(s, out, false, [&](std::uint64_t) {
      RawService::smallStruct(kSmall);
      return std::uint64_t{0};
    });
  } else if (name == "MediumStructToSrvAsyncVoid") {
    floodTest(s, out, false, [&](std::uint64_t) {
      RawService::mediumStruct(kMedium);
      return std::uint64_t{0};
    });
  } else if (name == "MultiEndpointToSrvAsyncVoid") {
    floodTest(s, out, false, [&](std::uint64_t) {
      RawService::zeroParams();
      return std::uint64_t{0};
    });
  } else if (name == "SmallStructSendReplyAsyncVoid") {
    floodTest(s, out, true, [&](std::uint64_t) {
      RawService::sendReplySmall(kSmall, nowNs());
      return std::uint64_t{0};
    });
  } else if (name == "MediumStructSendReplyAsyncVoid") {
    floodTest(s, out, true, [&](std::uint64_t) {
      RawService::sendReplyMedium(kMedium, nowNs());
      return std::uint64_t{0};
    });
  } else if (name == "LargeStructSendReplyAsyncVoid") {
    floodTest(s, out, true, [&](std::uint64_t) {
      RawService::sendReplyLarge(kLarge, nowNs());
      return std::uint64_t{0};
    });
  } else if (name == "SmallStructVectorParamAsyncVoid") {
    floodTest(s, out, false, [&](std::uint64_t) {
      RawService::smallStructVector(kSmallList);
      return std::uint64_t{0};
    });
  } else if (name == "MediumStructVectorParamAsyncVoid") {
    floodTest(s, out, false, [&](std::uint64_t) {
      RawService::mediumStructVector(kMediumList);
      return std::uint64_t{0};
    });
  } else if (name == "LargeStructVectorParamAsyncVoid") {
    floodTest(s, out, false, [&](std::uint64_t) {
      RawService::largeStructVector(kLargeList);
      return std::uint64_t{0};
    });
  } else if (name == "SmallStructRTAsyncVal") {
    roundTripTest<SmallMessage>(s, out, kSmall, &RawService::echoSmall);
  } else if (name == "MediumStructRTAsyncVal") {
    roundTripTest<MediumMessage>(s, out, kMedium, &RawService::echoMedium);
  } else if (name == "LargeStructRTAsyncVal") {
    roundTripTest<LargeMessage>(s, out, kLarge, &RawService::echoLarge);
  } else {
    throw std::runtime_error("test '" + name + "' has no runner");
  }
}

// ---------------------------------------------------------------------------
// Output

std::string jsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

std::string statsJson(const myelin::EndpointStats& st) {
  std::string h = "[";
  for (std::size_t i = 0; i < st.sendBatchHistogram.size(); ++i) {
    h += (i ? ", " : "") + std::to_string(st.sendBatchHistogram[i]);
  }
  h += "]";
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "{\"seconds\": %.4f, \"messages_sent\": %" PRIu64 ", \"messages_received\": %" PRIu64
                ", \"bytes_sent\": %" PRIu64 ", \"bytes_received\": %" PRIu64 ", \"socket_writes\": %" PRIu64
                ", \"socket_reads\": %" PRIu64 ", \"avg_batch\": %.2f, \"max_batch_messages\": %" PRIu64
                ", \"max_staged_bytes\": %zu, \"max_queued_bytes\": %zu, \"max_receive_buffer_bytes\": %zu"
                ", \"calls_executed\": %" PRIu64 ", \"batch_histogram\": %s}",
                st.seconds, st.messagesSent, st.messagesReceived, st.bytesSent, st.bytesReceived, st.socketWrites,
                st.socketReads, st.averageBatch(), st.maxBatchMessages, st.maxStagedBytes, st.maxQueuedBytes,
                st.maxReceiveBufferBytes, st.callsExecuted, h.c_str());
  return buf;
}

void printJson(const Options& o, const Setup* s, const myelin::PerfReport* r, bool verified, const std::string& error) {
  std::string latency = "null";
  if (r && r->latency.count() > 0) {
    const auto& l = r->latency;
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "{\"count\": %" PRIu64 ", \"min\": %.2f, \"mean\": %.2f, \"p50\": %.2f, \"p90\": %.2f, "
                  "\"p99\": %.2f, \"max\": %.2f}",
                  l.count(), static_cast<double>(l.min()) / 1e3, l.mean() / 1e3,
                  static_cast<double>(l.percentile(50)) / 1e3, static_cast<double>(l.percentile(90)) / 1e3,
                  static_cast<double>(l.percentile(99)) / 1e3, static_cast<double>(l.max()) / 1e3);
    latency = buf;
  }
  std::printf(
      "{\"impl\": \"myelin\", \"test\": \"%s\", \"endpoints\": %d, \"threads\": %d, \"rpcs\": %" PRIu64
      ", \"seconds\": %.4f, \"rps\": %.1f, \"latency_us\": %s, \"send_bytes_per_s\": %.1f, \"recv_bytes_per_s\": "
      "%.1f, \"avg_batch\": %.2f, \"local\": %s, \"remote\": %s, \"verified\": %s, \"error\": \"%s\"}\n",
      jsonEscape(o.test).c_str(), s ? static_cast<int>(s->eps.size()) : 0, s ? s->threads() : 0, r ? r->rpcs : 0,
      r ? r->seconds : 0.0, r ? r->rps : 0.0, latency.c_str(), r ? r->sendBytesPerSecond() : 0.0,
      r ? r->recvBytesPerSecond() : 0.0, r ? r->busiestAverageBatch() : 0.0,
      r ? statsJson(r->local).c_str() : "null", r && r->hasRemote ? statsJson(r->remote).c_str() : "null",
      verified ? "true" : "false", jsonEscape(error).c_str());
  std::fflush(stdout);
}

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: raw_client --connect HOST:PORT --test NAME [--duration S] [--warmup S] [--scale F]\n"
               "tests:");
  for (const auto& t : kTests) std::fprintf(stderr, " %s", t.name);
  std::fprintf(stderr, "\n");
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
    } else if (a == "--duration") {
      o.duration = std::atof(value().c_str());
    } else if (a == "--warmup") {
      o.warmup = std::atof(value().c_str());
    } else if (a == "--scale") {
      o.scale = std::atof(value().c_str());
    } else {
      usage();
    }
  }
  if (o.connect.empty() || o.test.empty() || o.duration <= 0 || o.warmup < 0 || o.scale <= 0) usage();
  return o;
}

int scaled(int n, double scale) { return std::max(1, static_cast<int>(std::lround(n * scale))); }

}  // namespace

myelin::AsyncVoid RawSink::onValue(std::uint32_t v) {
  ThreadCounts& c = gSink.mine();
  bump(c.received);
  bump(c.valueSum, v);
  return {};
}
myelin::AsyncVoid RawSink::onZero() {
  bump(gSink.mine().received);
  return {};
}
myelin::AsyncVoid RawSink::onSmall(const SmallMessage& m, std::uint64_t sentNs) {
  sinkMessage(m, kSmall, sentNs);
  return {};
}
myelin::AsyncVoid RawSink::onMedium(const MediumMessage& m, std::uint64_t sentNs) {
  sinkMessage(m, kMedium, sentNs);
  return {};
}
myelin::AsyncVoid RawSink::onLarge(const LargeMessage& m, std::uint64_t sentNs) {
  sinkMessage(m, kLarge, sentNs);
  return {};
}

}  // namespace bench

int main(int argc, char** argv) {
  using namespace bench;
  Options o = parse(argc, argv);
  const TestDef* def = nullptr;
  for (const auto& t : kTests) {
    if (o.test == t.name) def = &t;
  }
  if (!def) {
    std::fprintf(stderr, "raw_client: unknown test '%s'\n", o.test.c_str());
    usage();
  }
  Setup s{def, o, {}, scaled(def->threadsPerEndpoint, o.scale)};
  Outcome out;
  try {
    int endpoints = scaled(def->endpoints, o.scale);
    for (int i = 0; i < endpoints; ++i) {
      myelin::ConnectionInfo ci;
      ci.setConnectAddress(o.connect);
      s.eps.push_back(bench::withBenchTls(ci, false).connect());
    }
    runTest(s, out);
  } catch (const std::exception& e) {
    out.verdict.fail(e.what());
  }
  if (out.report) out.report->printDetails(stderr);
  bool verified = out.report.has_value() && !out.verdict.failed;
  if (!out.report && !out.verdict.failed) out.verdict.fail("no result");
  if (out.verdict.failed) std::fprintf(stderr, "raw_client: %s: %s\n", o.test.c_str(), out.verdict.error.c_str());
  printJson(o, &s, out.report ? &*out.report : nullptr, verified, out.verdict.error);
  for (auto& ep : s.eps) ep.disconnect();
  return verified ? 0 : 3;
}
