// Interface of the allocation test: the hot call shapes (one-way, sync and
// Async round trips) and a way to read the service's allocation counter.
#pragma once

#include <myelin/async.h>
#include <myelin/endpoint.h>

#include <cstdint>
#include <vector>

#include "messages.h"

namespace myelin_test {

class AllocProbe : public myelin::EndpointClass {
 public:
  static myelin::AsyncVoid oneWay(std::uint32_t v);
  static std::uint32_t syncEcho(std::uint32_t v);
  static myelin::Async<SmallStruct> asyncEcho(const SmallStruct& s);
  /// How many strings the list's structs hold (str1, str2, vec2, optStr).
  static std::uint64_t countStrings(const std::vector<MediumStruct>& list);
  /// How many threads of the service have run countStrings so far.
  static std::uint32_t countStringsThreads();
  /// `n` copies of makeMedium(), each with val1 set to its index; the one at
  /// `mark` % n has optStr "mark" and a fourth, long string in vec2.
  static myelin::Async<std::vector<MediumStruct>> mediumList(std::uint32_t n, std::uint32_t mark);
  /// The list itself, copied into the reply (`return list;`).
  static myelin::Async<std::vector<MediumStruct>> echoList(const std::vector<MediumStruct>& list);
  /// How many threads of the service have run echoList so far.
  static std::uint32_t echoListThreads();
  /// The list, as echoList; the service also keeps the Async it returns
  /// until the next call, and checks then that it still holds the list.
  static myelin::Async<std::vector<MediumStruct>> echoListHeld(const std::vector<MediumStruct>& list);
  /// False once echoListHeld found an Async it kept no longer holding what
  /// it returned.
  static bool heldResultsIntact();
  /// Sum of every value oneWay() received.
  static std::uint64_t oneWaySum();
  /// Heap allocations the service process has made so far.
  static std::uint64_t allocations();
};

}  // namespace myelin_test
