// Flow control over a real service process (docs/async-and-errors.md §5):
// threads that flood a slow consumer with calls are slowed down to its
// pace, the memory of both processes stays bounded, and no call is lost.
#include <gtest/gtest.h>
#include <myelin/myelin.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "flood.h"
#include "service_fixture.h"

namespace myelin_test {
namespace {

using flood::Sink;
using Flood = ServiceTest;

// Growth allowed during a flood: two threads each keep up to a call window
// (8 MiB by default) queued, plus what the calls cost to hold; without flow
// control the service grew by over 700 MiB in the same 3 s (Debug build). Under sanitizers resident
// size says little (ASan keeps 256 MiB of freed memory in quarantine, TSan
// adds shadow per access): there the test checks that no call is lost and
// reports the figures, and the Debug build checks the bound.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr std::int64_t kBoundKb = std::int64_t{1} << 40;
#else
constexpr std::int64_t kBoundKb = 128 * 1024;
#endif

std::int64_t ownResidentKb() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

/// Floods Sink from `threads` threads for `seconds`, with fire-and-forget
/// calls or Async calls; returns the calls made.
std::int64_t floodFor(const myelin::Endpoint& ep, int threads, double seconds, bool async) {
  std::atomic<std::int64_t> made{0};
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::vector<std::thread> producers;
  for (int t = 0; t < threads; ++t) {
    producers.emplace_back([&, t] {
      myelin::EndpointCtx ctx(ep);
      flood::Blob b{t, std::vector<std::uint8_t>(200, static_cast<std::uint8_t>(t))};
      std::vector<myelin::Async<std::int64_t>> last;
      while (std::chrono::steady_clock::now() < until) {
        for (int i = 0; i < 100; ++i) {
          if (async) {
            last.push_back(Sink::takeAsync(b, 20));
            if (last.size() > 64) last.erase(last.begin());
          } else {
            Sink::take(b, 20);
          }
          ++b.id;
        }
        made.fetch_add(100);
      }
    });
  }
  for (auto& p : producers) p.join();
  return made.load();
}

void floodAndCheck(const myelin::Endpoint& ep, bool async) {
  std::int64_t serviceBefore = Sink::residentKb();
  std::int64_t clientBefore = ownResidentKb();
  std::int64_t takenBefore = Sink::taken();
  auto t0 = std::chrono::steady_clock::now();
  std::int64_t made = floodFor(ep, 2, 3.0, async);
  std::int64_t serviceDuring = Sink::residentKb();
  std::int64_t clientDuring = ownResidentKb();
  myelin::EndpointCtx ctx(ep);
  ASSERT_TRUE(const_cast<myelin::Endpoint&>(ep).waitForIdle(60'000));
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::int64_t taken = Sink::taken() - takenBefore;
  std::printf("[ flood    ] %s: %lld calls in %.1f s (%.0f/s); resident KiB service %lld -> %lld, client %lld -> %lld\n",
              async ? "Async" : "AsyncVoid", static_cast<long long>(made), secs, static_cast<double>(made) / secs,
              static_cast<long long>(serviceBefore), static_cast<long long>(serviceDuring),
              static_cast<long long>(clientBefore), static_cast<long long>(clientDuring));
  EXPECT_EQ(taken, made) << "every call ran: none was lost";
  // Unbounded, the producers would have queued hundreds of megabytes on the
  // service in 3 s (each makes calls far faster than the service takes
  // them); the window keeps about 1 MiB per producer there.
  EXPECT_LT(serviceDuring - serviceBefore, kBoundKb) << "the service's memory grew with the flood";
  EXPECT_LT(clientDuring - clientBefore, kBoundKb) << "the client's memory grew with the flood";
  EXPECT_EQ(ep.getState(), myelin::EndpointState::kConnected);
}

TEST_F(Flood, FireAndForgetProducersWaitForASlowConsumer) { floodAndCheck(ep_, false); }

TEST_F(Flood, AsyncValueThrottleBoundsTheCallsAThreadHasUnanswered) {
  myelin::EndpointConfig cfg;
  cfg.asyncValueThrottle = 8;
  myelin::Endpoint ep = myelin::ConnectionInfo().setConnectAddress(service_->address()).setConfig(cfg).connect();
  std::vector<myelin::Async<std::int64_t>> calls;
  for (std::int64_t i = 0; i < 40; ++i) calls.push_back(Sink::later(i, 20));
  for (std::int64_t i = 0; i < 40; ++i) EXPECT_EQ(calls[static_cast<std::size_t>(i)].value(10'000), i);
  EXPECT_LE(Sink::peakPending(), 8) << "never more than the throttle waited for a reply at once";
  EXPECT_GE(Sink::peakPending(), 2) << "the calls did overlap";
  ep.disconnect();
  myelin::EndpointCtx back(ep_);
}

TEST_F(Flood, AsyncProducersWaitForASlowConsumer) { floodAndCheck(ep_, true); }

}  // namespace
}  // namespace myelin_test
