// The client side of the results tests: a method the service's coroutines
// await.
#pragma once

#include <myelin/endpoint.h>

#include <cstdint>

namespace res {

class Probe : public myelin::EndpointClass {
 public:
  /// 2 * v, completed later from a thread of the client's.
  static myelin::Async<std::int64_t> twice(std::int64_t v);
};

}  // namespace res
