// RawService (bench/myelin/raw_api.h), served by bench_service: counts and
// checks what the raw benchmarks send, calls the client back, and reports
// the service side's statistics of a connection.
#include <myelin/myelin.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "bench_data.h"
#include "raw_api.h"
#include "thread_counts.h"
#include "raw_sink.h"

namespace bench {
namespace {

/// One thread's counters: written only by that thread (no read-modify-write
/// on a shared line at tens of millions of calls per second), read by
/// counts() from any thread.

CountRegistry gCounts;


void count(bool matches) {
  ThreadCounts& c = gCounts.mine();
  bump(c.received);
  if (!matches) bump(c.mismatched);
}

void countValue(std::uint32_t v) {
  ThreadCounts& c = gCounts.mine();
  bump(c.received);
  bump(c.valueSum, v);
}

const SmallMessage kSmall = makeSmall();
const MediumMessage kMedium = makeMedium();
const LargeMessage kLarge = makeLarge();

template <class T>
bool allEqual(const std::vector<T>& list, const T& expected) {
  if (list.size() != kRawVectorLength) return false;
  for (const T& m : list) {
    if (!(m == expected)) return false;
  }
  return true;
}

}  // namespace

myelin::AsyncVoid RawService::oneParam(std::uint32_t v) {
  countValue(v);
  return {};
}
myelin::AsyncVoid RawService::zeroParams() {
  count(true);
  return {};
}
myelin::AsyncVoid RawService::smallStruct(const SmallMessage& m) {
  count(m == kSmall);
  return {};
}
myelin::AsyncVoid RawService::mediumStruct(const MediumMessage& m) {
  count(m == kMedium);
  return {};
}
myelin::AsyncVoid RawService::largeStruct(const LargeMessage& m) {
  count(m == kLarge);
  return {};
}
myelin::AsyncVoid RawService::smallStructVector(const std::vector<SmallMessage>& list) {
  count(allEqual(list, kSmall));
  return {};
}
myelin::AsyncVoid RawService::mediumStructVector(const std::vector<MediumMessage>& list) {
  count(allEqual(list, kMedium));
  return {};
}
myelin::AsyncVoid RawService::largeStructVector(const std::vector<LargeMessage>& list) {
  count(allEqual(list, kLarge));
  return {};
}

myelin::AsyncVoid RawService::sendReplyValue(std::uint32_t v) {
  countValue(v);
  RawSink::onValue(v);
  return {};
}
myelin::AsyncVoid RawService::sendReplySmall(const SmallMessage& m, std::uint64_t sentNs) {
  count(m == kSmall);
  RawSink::onSmall(m, sentNs);
  return {};
}
myelin::AsyncVoid RawService::sendReplyMedium(const MediumMessage& m, std::uint64_t sentNs) {
  count(m == kMedium);
  RawSink::onMedium(m, sentNs);
  return {};
}
myelin::AsyncVoid RawService::sendReplyLarge(const LargeMessage& m, std::uint64_t sentNs) {
  count(m == kLarge);
  RawSink::onLarge(m, sentNs);
  return {};
}

myelin::Async<SmallMessage> RawService::echoSmall(const SmallMessage& m) { return m; }
myelin::Async<MediumMessage> RawService::echoMedium(const MediumMessage& m) { return m; }
myelin::Async<LargeMessage> RawService::echoLarge(const LargeMessage& m) { return m; }

std::uint64_t RawService::callClient(std::uint64_t count) {
  for (std::uint64_t i = 0; i < count; ++i) RawSink::onValue(static_cast<std::uint32_t>(i));
  return count;
}
std::uint64_t RawService::callClientZero(std::uint64_t count) {
  for (std::uint64_t i = 0; i < count; ++i) RawSink::onZero();
  return count;
}

myelin::Async<std::uint64_t> RawService::fence(std::uint64_t token) { return token; }

RawCounts RawService::counts() { return gCounts.sum(); }

RemoteStats RawService::stats(bool reset) {
  static_assert(std::tuple_size_v<decltype(RemoteStats::sendBatchHistogram)> == myelin::EndpointStats::kBatchBuckets);
  myelin::EndpointStats s = myelin::EndpointCtx::current().getLocalStats(reset);
  RemoteStats r;
  r.seconds = s.seconds;
  r.messagesSent = s.messagesSent;
  r.messagesReceived = s.messagesReceived;
  r.bytesSent = s.bytesSent;
  r.bytesReceived = s.bytesReceived;
  r.socketWrites = s.socketWrites;
  r.socketReads = s.socketReads;
  for (std::size_t i = 0; i < s.sendBatchHistogram.size(); ++i) r.sendBatchHistogram[i] = s.sendBatchHistogram[i];
  r.maxBatchMessages = s.maxBatchMessages;
  r.maxStagedBytes = s.maxStagedBytes;
  r.maxQueuedBytes = s.maxQueuedBytes;
  r.maxReceiveBufferBytes = s.maxReceiveBufferBytes;
  r.callsExecuted = s.callsExecuted;
  return r;
}

}  // namespace bench
