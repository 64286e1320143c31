// The interface of the raw Myelin benchmarks (Table B of the benchmark
// suite): fire-and-forget floods to the service, calls back to the client,
// Async<T> round trips, and the counters and statistics that verify them.
#pragma once

#include <myelin/async.h>
#include <myelin/endpoint.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "bench_api.h"

namespace bench {

/// Structs in each vector of the *StructVectorParamAsyncVoid tests.
inline constexpr std::size_t kRawVectorLength = 1000;

/// What the service counted since it started, over all connections. The
/// client compares two readings taken around a test.
struct RawCounts {
  /// Fire-and-forget calls received (oneParam, zeroParams, the struct and
  /// vector methods, sendReply*).
  std::uint64_t received = 0;
  /// Calls whose message differed from the benchmark contents.
  std::uint64_t mismatched = 0;
  /// Sum of the values received by oneParam and sendReplyValue.
  std::uint64_t valueSum = 0;
};

/// The service side's EndpointStats of one connection, as it travels.
struct RemoteStats {
  double seconds = 0;
  std::uint64_t messagesSent = 0;
  std::uint64_t messagesReceived = 0;
  std::uint64_t bytesSent = 0;
  std::uint64_t bytesReceived = 0;
  std::uint64_t socketWrites = 0;
  std::uint64_t socketReads = 0;
  std::array<std::uint64_t, 17> sendBatchHistogram{};  // EndpointStats::kBatchBuckets
  std::uint64_t maxBatchMessages = 0;
  std::uint64_t maxStagedBytes = 0;
  std::uint64_t maxQueuedBytes = 0;
  std::uint64_t maxReceiveBufferBytes = 0;
  std::uint64_t callsExecuted = 0;
};

/// Served by bench_service.
class RawService : public myelin::EndpointClass {
 public:
  /// Fire-and-forget calls to the service; each counts one call received
  /// and checks the message against the benchmark contents.
  static myelin::AsyncVoid oneParam(std::uint32_t v);
  static myelin::AsyncVoid zeroParams();
  static myelin::AsyncVoid smallStruct(const SmallMessage& m);
  static myelin::AsyncVoid mediumStruct(const MediumMessage& m);
  static myelin::AsyncVoid largeStruct(const LargeMessage& m);
  static myelin::AsyncVoid smallStructVector(const std::vector<SmallMessage>& list);
  static myelin::AsyncVoid mediumStructVector(const std::vector<MediumMessage>& list);
  static myelin::AsyncVoid largeStructVector(const std::vector<LargeMessage>& list);

  /// Fire-and-forget calls answered by a fire-and-forget call back to the
  /// caller with the same value (RawSink::onValue, onSmall, ...).
  /// `sentNs` travels back unchanged, for the client's latency.
  static myelin::AsyncVoid sendReplyValue(std::uint32_t v);
  static myelin::AsyncVoid sendReplySmall(const SmallMessage& m, std::uint64_t sentNs);
  static myelin::AsyncVoid sendReplyMedium(const MediumMessage& m, std::uint64_t sentNs);
  static myelin::AsyncVoid sendReplyLarge(const LargeMessage& m, std::uint64_t sentNs);

  /// Async<T> echoes.
  static myelin::Async<SmallMessage> echoSmall(const SmallMessage& m);
  static myelin::Async<MediumMessage> echoMedium(const MediumMessage& m);
  static myelin::Async<LargeMessage> echoLarge(const LargeMessage& m);

  /// Calls RawSink::onValue(i) for i in [0, count) (callClientZero:
  /// RawSink::onZero(), count times) on the caller during the call;
  /// returns count.
  static std::uint64_t callClient(std::uint64_t count);
  static std::uint64_t callClientZero(std::uint64_t count);

  /// Returns `token` once every earlier call of the calling thread has run:
  /// the client's flow control for floods of fire-and-forget calls.
  static myelin::Async<std::uint64_t> fence(std::uint64_t token);

  /// The service's counters (see RawCounts).
  static RawCounts counts();
  /// The service side's statistics of the calling connection; `reset`
  /// starts a new interval.
  static RemoteStats stats(bool reset);
};

}  // namespace bench
