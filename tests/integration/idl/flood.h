// Flow control for the integration tests (docs/async-and-errors.md §5): a
// slow consumer of fire-and-forget and Async calls, and its memory.
#pragma once

#include <myelin/endpoint.h>

#include <cstdint>
#include <vector>

namespace flood {

struct Blob {
  std::int64_t id = 0;
  std::vector<std::uint8_t> data;
};

class Sink : public myelin::EndpointClass {
 public:
  /// Takes a blob, working about `workUs` on it.
  static myelin::AsyncVoid take(const Blob& b, std::int64_t workUs);
  static myelin::Async<std::int64_t> takeAsync(const Blob& b, std::int64_t workUs);
  /// Completes `ms` later from a thread of the service's; counts how many
  /// such results are pending at once (peakPending).
  static myelin::Async<std::int64_t> later(std::int64_t v, std::int64_t ms);
  static std::int64_t peakPending();
  /// Blobs taken so far.
  static std::int64_t taken();
  /// The service's resident memory, KiB (VmRSS).
  static std::int64_t residentKb();
};

}  // namespace flood
