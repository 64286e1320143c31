// The service side of the results tests: res::Store keeps items in memory,
// answers with Status and Result, sleeps for the CallTimeout tests, and
// runs coroutines that await calls back to the client.
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "results.h"
#include "results_client.h"

namespace res {
namespace {
std::mutex mu;
std::map<std::string, Item> items;
std::atomic<std::int64_t> sleeps{0};
std::atomic<std::int64_t> canceled{0};
std::atomic<std::int64_t> adds{0};
std::atomic<std::int64_t> slow{0};
std::atomic<std::int64_t> workers{0};
std::atomic<std::int64_t> reserved{0};
std::atomic<bool> timedOut{false};

void sleepFor(std::int64_t ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  sleeps.fetch_add(1);
}
}  // namespace

myelin::Status Store::put(const Item& item) {
  std::lock_guard lock(mu);
  if (items.size() >= 3 && !items.count(item.name)) return {StoreError::kFull, "the store holds 3 items"};
  items[item.name] = item;
  return {};
}

myelin::Result<Item, StoreError> Store::get(const std::string& name) {
  std::lock_guard lock(mu);
  auto it = items.find(name);
  if (it == items.end()) return StoreError::kNotFound;
  return it->second;
}

myelin::Async<myelin::Result<Item, StoreError>> Store::getLater(const std::string& name) {
  myelin::Async<myelin::Result<Item, StoreError>> out;
  std::thread([out, name]() mutable { out.setValue(get(name)); }).detach();
  return out;
}

void Store::clear() {
  std::lock_guard lock(mu);
  items.clear();
}

myelin::Status Store::failOther() { return {OtherError::kBoom, "boom"}; }

myelin::Status Store::throwing() { throw std::runtime_error("the handler threw"); }

Report Store::echo(const Report& r) { return r; }

std::vector<myelin::Status> Store::echoStatuses(const std::vector<myelin::Status>& s) { return s; }

std::int64_t Store::sleepValue(std::int64_t ms) {
  sleepFor(ms);
  return ms;
}

void Store::sleepVoid(std::int64_t ms) { sleepFor(ms); }

myelin::Status Store::sleepStatus(std::int64_t ms) {
  sleepFor(ms);
  return {};
}

std::int64_t Store::sleepsDone() { return sleeps.load(); }

myelin::Async<std::int64_t> Store::slowAsync(std::int64_t ms) {
  slow.fetch_add(1);
  myelin::Async<std::int64_t> out;
  std::thread([out, ms, ctx = myelin::CallCtx::ref()]() mutable {
    for (std::int64_t i = 0; i < ms; ++i) {
      if (ctx.isCanceled()) {
        canceled.fetch_add(1);
        out.setValue(-1);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    out.setValue(ms);
  }).detach();
  return out;
}

std::int64_t Store::workStarted() { return workers.load(); }

std::int64_t Store::workUntilCanceled(std::int64_t maxMs) {
  workers.fetch_add(1);
  for (std::int64_t i = 0; i < maxMs; ++i) {
    if (myelin::CallCtx::isCanceled()) {
      canceled.fetch_add(1);
      return i;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return maxMs;
}

std::int64_t Store::slowStarted() { return slow.load(); }

std::int64_t Store::canceledSeen() { return canceled.load(); }

myelin::AsyncVoid Store::block(std::int64_t ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return {};
}

myelin::Async<std::int64_t> Store::countedAdd(std::int64_t a, std::int64_t b) {
  adds.fetch_add(1);
  return a + b;
}

std::int64_t Store::addsRun() { return adds.load(); }

std::int64_t Store::deadlineLeftMs() { return myelin::CallCtx::remainingMs(); }

myelin::AsyncVoid Store::noteTimedOutAfter(std::int64_t ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  timedOut.store(myelin::CallCtx::isTimedOut());
  return {};
}

bool Store::lastTimedOut() { return timedOut.load(); }

myelin::AsyncStatus Store::reserve(std::int64_t n) {
  if (n < 0) throw std::runtime_error("cannot reserve " + std::to_string(n));
  if (n > 10) return {StoreError::kFull, "cannot reserve " + std::to_string(n)};
  reserved.fetch_add(n);
  return {};
}

std::int64_t Store::reservedTotal() { return reserved.load(); }

namespace {
std::atomic<std::int64_t> slowStartedCount{0};
std::atomic<std::int64_t> frameCancels{0};
}  // namespace

myelin::AsyncStatus Store::slowReserve(std::int64_t ms) {
  slowStartedCount.fetch_add(1);
  for (std::int64_t t = 0; t < ms; t += 5) {
    if (myelin::CallCtx::isAsyncFrameCanceled()) {
      frameCancels.fetch_add(1);
      return {};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return {};
}

std::int64_t Store::slowReservesStarted() { return slowStartedCount.load(); }
std::int64_t Store::frameCancelsSeen() { return frameCancels.load(); }

myelin::AsyncStatus Store::warnTwice(std::int64_t n) {
  if (n < 0) throw std::runtime_error("no warnings for " + std::to_string(n));
  myelin::CallCtx::sendAsyncFrameError({OtherError::kBoom, "first warning " + std::to_string(n)});
  myelin::CallCtx::sendAsyncFrameError({OtherError::kBoom, "second warning " + std::to_string(n)});
  return {};
}

bool Store::frameErrorFromSync() { return myelin::CallCtx::sendAsyncFrameError({OtherError::kBoom, "no frame"}); }

myelin::Async<std::int64_t> Store::addLater(std::int64_t a, std::int64_t b) {
  myelin::Async<std::int64_t> out;
  std::thread([out, a, b]() mutable {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    out.setValue(a + b);
  }).detach();
  return out;
}

myelin::Async<std::int64_t> Store::askClient(std::int64_t v) {
  std::int64_t x = co_await Probe::twice(v);
  co_return x + 1;
}

myelin::Async<std::int64_t> Store::forwardToClient(std::int64_t v) { return Probe::twice(v); }

myelin::Async<std::int64_t> Store::failAfterAwait(std::int64_t v) {
  std::int64_t x = co_await Probe::twice(v);
  if (x > 0) throw std::runtime_error("failed after the await with " + std::to_string(x));
  co_return x;
}

}  // namespace res
