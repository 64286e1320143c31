// A minimal interface that reaches the three benchmark structs, so that
// myelin-gen emits their StructTraits for the codec micro-benchmark.
#pragma once

#include <myelin/endpoint.h>

#include "bench_api.h"

namespace bench {

class CodecProbe : public myelin::EndpointClass {
 public:
  static void take(const SmallMessage& s, const MediumMessage& m, const LargeMessage& l);
};

}  // namespace bench
