// The service side of the flow-control tests: flood::Sink takes blobs
// slowly, counts them, and reports its resident memory.
#include <atomic>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "flood.h"

namespace flood {
namespace {
std::atomic<std::int64_t> count{0};
std::atomic<std::int64_t> pending{0};
std::atomic<std::int64_t> peak{0};

void work(std::int64_t us) {
  auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  while (std::chrono::steady_clock::now() < end) std::this_thread::yield();
}
}  // namespace

myelin::AsyncVoid Sink::take(const Blob&, std::int64_t workUs) {
  work(workUs);
  count.fetch_add(1);
  return {};
}

myelin::Async<std::int64_t> Sink::takeAsync(const Blob& b, std::int64_t workUs) {
  work(workUs);
  count.fetch_add(1);
  return b.id;
}

myelin::Async<std::int64_t> Sink::later(std::int64_t v, std::int64_t ms) {
  std::int64_t now = pending.fetch_add(1) + 1;
  for (std::int64_t p = peak.load(); now > p && !peak.compare_exchange_weak(p, now);) {
  }
  myelin::Async<std::int64_t> out;
  std::thread([out, v, ms]() mutable {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    pending.fetch_sub(1);
    out.setValue(v);
  }).detach();
  return out;
}

std::int64_t Sink::peakPending() { return peak.load(); }

std::int64_t Sink::taken() { return count.load(); }

std::int64_t Sink::residentKb() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

}  // namespace flood
