// The service side of the remote-thread tests: thr::Worker's calls report
// their thread, meet each other, and count how many run at once.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "threads.h"
#include "threads_client.h"

namespace thr {
namespace {
thread_local std::int64_t tlsCount = 0;
std::mutex mu;
std::condition_variable cv;
std::map<std::int64_t, std::int64_t> inside;  // rendezvous tag -> calls inside
std::int64_t holders = 0;
std::int64_t peak = 0;
std::vector<std::int64_t> list;
}  // namespace

std::int64_t Worker::bumpThreadLocal() { return ++tlsCount; }

std::uint64_t Worker::threadId() { return std::hash<std::thread::id>{}(std::this_thread::get_id()); }

myelin::Async<bool> Worker::rendezvous(std::int64_t n, std::int64_t tag) {
  std::unique_lock lock(mu);
  ++inside[tag];
  cv.notify_all();
  bool met = cv.wait_for(lock, std::chrono::seconds(5), [&] { return inside[tag] >= n; });
  return met;
}

myelin::AsyncVoid Worker::hold(std::int64_t ms) {
  {
    std::lock_guard lock(mu);
    peak = std::max(peak, ++holders);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  std::lock_guard lock(mu);
  --holders;
  return {};
}

std::int64_t Worker::peakHolders() {
  std::lock_guard lock(mu);
  return peak;
}

void Worker::resetPeak() {
  std::lock_guard lock(mu);
  peak = holders;
}

myelin::AsyncVoid Worker::tick() { return {}; }

std::uint64_t Worker::callsExecuted() { return myelin::EndpointCtx::current().getLocalStats(false).callsExecuted; }

myelin::AsyncVoid Worker::record(std::int64_t v) {
  std::lock_guard lock(mu);
  list.push_back(v);
  return {};
}

std::vector<std::int64_t> Worker::recorded() {
  std::lock_guard lock(mu);
  return list;
}

void Worker::clearRecorded() {
  std::lock_guard lock(mu);
  list.clear();
}

std::int64_t Worker::callBack(std::int64_t v) { return Probe::ping(v); }
myelin::Async<std::int64_t> Worker::callBackLater(std::int64_t v) { return Probe::ping(v); }

myelin::AsyncVoid Worker::recordAround(std::int64_t v) {
  record(v);
  Probe::ping(-1);
  record(v + 1);
  return {};
}

}  // namespace thr
