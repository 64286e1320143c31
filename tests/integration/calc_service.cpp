// The integration-test service's implementation of Calc.
#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include "calc.h"
#include "client_sink.h"
#include "varying_chunks.h"

namespace service_support {
extern std::mutex faultsMu;
extern std::vector<std::string> faults;
}  // namespace service_support

namespace myelin_test {

namespace {
std::atomic<std::uint64_t> gNoteSum{0};
std::mutex gRecordMu;
std::unordered_map<std::uint32_t, std::uint32_t> gNext;
std::uint32_t gViolations = 0;
}  // namespace

std::int32_t Calc::add(std::int32_t a, std::int32_t b) { return a + b; }
std::string Calc::echo(const std::string& s) { return s; }
SmallStruct Calc::echoSmall(const SmallStruct& s) { return s; }
LargeStruct Calc::echoLarge(const LargeStruct& s) { return s; }
void Calc::nop() {}
void Calc::fail(const std::string& why) { throw std::runtime_error(why); }
void Calc::failAsInvalid(const std::string& why) { throw myelin::InvalidMessageError(why); }

myelin::AsyncVoid Calc::note(std::uint32_t v) {
  gNoteSum += v;
  return {};
}
std::uint64_t Calc::noteSum() { return gNoteSum.load(); }
myelin::AsyncVoid Calc::failVoid() { throw std::runtime_error("failVoid always fails"); }

myelin::Async<std::int64_t> Calc::squareLater(std::int32_t x) {
  myelin::Async<std::int64_t> result;
  std::thread([result, x]() mutable {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    result.setValue(static_cast<std::int64_t>(x) * x);
  }).detach();
  return result;
}

myelin::Async<std::string> Calc::asyncEcho(std::string s) { return s; }

std::uint32_t Calc::depthOf(const TreeNode& t) { return chainDepth(t); }
namespace {
std::atomic<std::uint64_t> gDepthsNoted{0};
}  // namespace
myelin::AsyncVoid Calc::noteDepth(const TreeNode& t) {
  gDepthsNoted += chainDepth(t);
  return {};
}
myelin::AsyncStatus Calc::checkDepth(const TreeNode& t) {
  gDepthsNoted += chainDepth(t);
  return {};
}
myelin::Async<std::uint32_t> Calc::depthAsync(const TreeNode& t) { return chainDepth(t); }
std::uint64_t Calc::depthsNoted() { return gDepthsNoted.load(); }
namespace {
std::atomic<std::uint64_t> gBytesNoted{0};
}  // namespace
myelin::AsyncVoid Calc::noteBytes(const std::string& s) {
  gBytesNoted += s.size();
  return {};
}
myelin::AsyncStatus Calc::checkBytes(const std::string& s) {
  gBytesNoted += s.size();
  return {};
}
std::uint64_t Calc::bytesNoted() { return gBytesNoted.load(); }
std::string Calc::bytesOfSize(std::uint32_t n) { return std::string(n, 'b'); }
myelin::AsyncStatus Calc::failWithBytes(std::uint32_t n) { return myelin::Status(Mood::kHappy, std::string(n, 's')); }
std::uint64_t Calc::countStrings(const std::vector<std::string>& v) { return v.size(); }
std::vector<std::string> Calc::emptyStrings(std::uint32_t n) { return std::vector<std::string>(n); }
myelin::Async<std::vector<std::string>> Calc::emptyStringsLater(std::uint32_t n) {
  return std::vector<std::string>(n);
}
TreeNode Calc::chainOf(std::uint32_t depth) { return makeChain(depth); }
myelin::Async<TreeNode> Calc::chainLater(std::uint32_t depth) {
  myelin::Async<TreeNode> result;
  std::thread([result, depth]() mutable {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    result.setValue(makeChain(depth));
  }).detach();
  return result;
}

std::uint32_t Calc::streamToClient(std::uint32_t count) {
  for (std::uint32_t i = 0; i < count; ++i) ClientSink::onItem(i);
  return count;
}

std::int32_t Calc::askClient(std::int32_t x) { return ClientSink::twice(x) + 1; }
std::int32_t Calc::askClientNested(std::int32_t x) { return ClientSink::twiceViaService(x) + 1; }
myelin::Async<std::int32_t> Calc::doubleOrAsk(std::int32_t x) {
  if (x % 7 == 3) throw std::runtime_error("no double for " + std::to_string(x));
  if (x % 11 == 5) return ClientSink::twice(x) + 1;
  return 2 * x;
}

void Calc::sleepMs(std::uint32_t ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }
std::uint32_t Calc::progressThenWork(std::uint32_t workMs) {
  ClientSink::progress(1);
  std::this_thread::sleep_for(std::chrono::milliseconds(workMs));
  ClientSink::progress(2);
  std::this_thread::sleep_for(std::chrono::milliseconds(2 * workMs));
  return workMs;
}
namespace {
// Calls ClientSink::onChunk(0 … count-1) with `size` bytes each on the caller.
void streamChunks(std::uint32_t count, std::uint32_t size) {
  const std::string chunk(size, 'c');
  for (std::uint32_t i = 0; i < count; ++i) ClientSink::onChunk(i, chunk);
}
}  // namespace
std::uint64_t Calc::streamChunksCountingWrites(std::uint32_t count, std::uint32_t size) {
  myelin::Endpoint ep = myelin::EndpointCtx::current();
  const std::uint64_t before = ep.getLocalStats().socketWrites;
  streamChunks(count, size);
  return ep.getLocalStats().socketWrites - before;
}
std::uint64_t Calc::streamChunksOfVaryingSize(std::uint32_t count) {
  std::uint64_t bytes = 0;
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::string chunk = chunkOfVaryingSize(i);
    bytes += chunk.size();
    ClientSink::onChunk(i, chunk);
  }
  return bytes;
}
std::uint64_t Calc::streamChunksLargestBatch(std::uint32_t count, std::uint32_t size) {
  myelin::Endpoint ep = myelin::EndpointCtx::current();
  ep.getLocalStats(true);
  streamChunks(count, size);
  return ep.getLocalStats().maxBatchMessages;
}
myelin::Async<std::uint32_t> Calc::streamThenAsync(std::uint32_t count) {
  for (std::uint32_t i = 0; i < count; ++i) ClientSink::onItem(i);
  return count;
}

myelin::Async<std::int32_t> Calc::abandon() { return {}; }

namespace {
std::mutex gParkedMu;
std::vector<std::pair<myelin::Async<std::string>, std::uint32_t>> gParked;
}  // namespace
myelin::Async<std::string> Calc::park(std::uint32_t size) {
  myelin::Async<std::string> result;
  std::lock_guard lock(gParkedMu);
  gParked.emplace_back(result, size);
  return result;
}
std::uint32_t Calc::parkedCount() {
  std::lock_guard lock(gParkedMu);
  return static_cast<std::uint32_t>(gParked.size());
}
std::uint64_t Calc::answerParkedCountingWrites() {
  decltype(gParked) parked;
  {
    std::lock_guard lock(gParkedMu);
    parked.swap(gParked);
  }
  myelin::Endpoint ep = myelin::EndpointCtx::current();
  const std::uint64_t before = ep.getLocalStats().socketWrites;
  for (auto& [result, size] : parked) result.setValue(std::string(size, 'p'));
  return ep.getLocalStats().socketWrites - before;
}

myelin::Async<std::uint32_t> Calc::sleepAsync(std::uint32_t ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return ms;
}

std::int64_t Calc::readValue(myelin::AsyncRef<std::int64_t> v) { return v.value(); }

std::vector<std::string> Calc::faults() {
  std::lock_guard lock(service_support::faultsMu);
  return service_support::faults;
}

myelin::AsyncVoid Calc::record(std::uint32_t stream, std::uint32_t seq) {
  std::lock_guard lock(gRecordMu);
  auto& next = gNext[stream];
  if (seq != next) ++gViolations;
  next = seq + 1;
  return {};
}
std::uint32_t Calc::recordViolations() {
  std::lock_guard lock(gRecordMu);
  return gViolations;
}

myelin::AsyncVoid Calc::zero() { return {}; }
myelin::AsyncVoid Calc::one(std::uint32_t) { return {}; }
myelin::AsyncVoid Calc::small(SmallStruct) { return {}; }
myelin::AsyncVoid Calc::medium(MediumStruct) { return {}; }
myelin::AsyncVoid Calc::large(LargeStruct) { return {}; }

}  // namespace myelin_test
