// Interface of the allocation test: the hot call shapes (one-way, sync and
// Async round trips) and a way to read the service's allocation counter.
#pragma once

#include <myelin/async.h>
#include <myelin/endpoint.h>

#include <cstdint>

#include "messages.h"

namespace myelin_test {

class AllocProbe : public myelin::EndpointClass {
 public:
  static myelin::AsyncVoid oneWay(std::uint32_t v);
  static std::uint32_t syncEcho(std::uint32_t v);
  static myelin::Async<SmallStruct> asyncEcho(const SmallStruct& s);
  /// Sum of every value oneWay() received.
  static std::uint64_t oneWaySum();
  /// Heap allocations the service process has made so far.
  static std::uint64_t allocations();
};

}  // namespace myelin_test
