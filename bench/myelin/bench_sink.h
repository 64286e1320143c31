// The class bench_client serves: the benchmark service streams messages into
// it during the client's open call.
#pragma once

#include <myelin/async.h>
#include <myelin/endpoint.h>

#include "bench_api.h"

namespace bench {

class BenchSink : public myelin::EndpointClass {
 public:
  static myelin::AsyncVoid onSmall(const SmallMessage& m);
  static myelin::AsyncVoid onMedium(const MediumMessage& m);
  static myelin::AsyncVoid onLarge(const LargeMessage& m);
};

}  // namespace bench
