// EndpointStats: what one endpoint sent and received, how well it batched,
// and the high-water marks of its buffers. Read with
// Endpoint::getLocalStats(); the benchmark's Table B is built from these.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace myelin {

struct EndpointStats {
  /// Seconds covered: since the endpoint connected or since the last reset.
  double seconds = 0;
  std::uint64_t messagesSent = 0;
  std::uint64_t messagesReceived = 0;
  /// Framed bytes, as on the socket (handshake excluded).
  std::uint64_t bytesSent = 0;
  std::uint64_t bytesReceived = 0;
  /// Socket write calls (each may carry many messages) and reads.
  std::uint64_t socketWrites = 0;
  std::uint64_t socketReads = 0;
  /// sendBatchHistogram[i] counts socket writes that carried between 2^i and
  /// 2^(i+1) - 1 messages (the last bucket: 2^16 or more).
  static constexpr std::size_t kBatchBuckets = 17;
  std::array<std::uint64_t, kBatchBuckets> sendBatchHistogram{};
  /// Most messages one socket write carried.
  std::uint64_t maxBatchMessages = 0;
  /// High-water marks: bytes staged in one lane before a write, bytes of
  /// received calls queued in one lane, and the receive buffer's capacity.
  std::size_t maxStagedBytes = 0;
  std::size_t maxQueuedBytes = 0;
  std::size_t maxReceiveBufferBytes = 0;
  /// Calls this side ran for the peer.
  std::uint64_t callsExecuted = 0;
  /// Values this side holds for the peer now: results of AsyncRef calls
  /// the peer still has handles to (docs/async-and-errors.md §2).
  std::uint64_t valuesHeld = 0;
  /// Storage the lanes' queues of received frames hold now. A burst's
  /// storage stays while its lane is in use and goes back once the lane has
  /// stayed dry for EndpointConfig::idleLaneTrimMs.
  std::size_t laneBufferBytes = 0;

  /// Average messages per socket write (0 without writes).
  double averageBatch() const {
    return socketWrites ? static_cast<double>(messagesSent) / static_cast<double>(socketWrites) : 0.0;
  }
  /// Lower bound of batch bucket i, for printing.
  static std::uint64_t batchBucketLow(std::size_t i) { return std::uint64_t{1} << i; }
};

}  // namespace myelin
