// What the remote-future tests' client implements for the service to call
// back: a value the service's AsyncRef method completes from the reply's
// callback, on the lane its caller's next calls wait behind.
#pragma once

#include <myelin/endpoint.h>

#include <cstdint>

namespace fut {

class Tally : public myelin::EndpointClass {
 public:
  static myelin::Async<std::int64_t> twice(std::int64_t v);
};

}  // namespace fut
