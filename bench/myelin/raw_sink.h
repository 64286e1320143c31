// The class raw_client serves for the raw Myelin benchmarks: the service
// calls it during a client's call (callClient) or in answer to a
// fire-and-forget call (RawService::sendReply*).
#pragma once

#include <myelin/async.h>
#include <myelin/endpoint.h>

#include <cstdint>

#include "bench_api.h"

namespace bench {

class RawSink : public myelin::EndpointClass {
 public:
  static myelin::AsyncVoid onValue(std::uint32_t v);
  static myelin::AsyncVoid onZero();
  /// `sentNs` is the client's steady-clock time when it sent the message.
  static myelin::AsyncVoid onSmall(const SmallMessage& m, std::uint64_t sentNs);
  static myelin::AsyncVoid onMedium(const MediumMessage& m, std::uint64_t sentNs);
  static myelin::AsyncVoid onLarge(const LargeMessage& m, std::uint64_t sentNs);
};

}  // namespace bench
