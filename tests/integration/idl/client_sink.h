// Interface the integration-test clients implement and the service calls
// back (server-to-client streaming, nested calls).
#pragma once

#include <myelin/async.h>
#include <myelin/endpoint.h>

#include <cstdint>
#include <string>

namespace myelin_test {

class ClientSink : public myelin::EndpointClass {
 public:
  static myelin::AsyncVoid onItem(std::uint32_t i);
  static std::int32_t twice(std::int32_t x);
  /// Asks the service (a nested sync call from inside a call the service
  /// made back to us) for x + x.
  static std::int32_t twiceViaService(std::int32_t x);
  /// A progress report the service sends in the middle of a long call.
  static myelin::AsyncVoid progress(std::uint32_t step);
  /// Item i of a stream of byte chunks.
  static myelin::AsyncVoid onChunk(std::uint32_t i, const std::string& bytes);
};

}  // namespace myelin_test
