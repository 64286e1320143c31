// The interface of Myelin's side of the benchmark suite: the messages of the
// benchmark plan (same fields and contents as bench/grpc/benchmark.proto) and
// the service and client classes the tests call.
#pragma once

#include <myelin/async.h>
#include <myelin/endpoint.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace bench {

struct SmallMessage {
  std::uint32_t val1 = 0;
  std::string str;
};

struct MediumMessage {
  std::int32_t val1 = 0;
  std::uint32_t val2 = 0;
  std::string str1;
  std::string str2;
  std::vector<std::uint32_t> vec1;
  std::vector<std::string> vec2;
  float floatVal = 0;
  double doubleVal = 0;
  std::optional<std::string> optStr;
};

struct LargeMessage {
  std::int32_t sint32Val = 0;
  std::uint32_t uint32Val = 0;
  std::int64_t sint64Val = 0;
  std::uint64_t uint64Val = 0;
  float floatVal = 0;
  double doubleVal = 0;
  bool boolVal = false;
  char charVal = 0;
  std::string stringVal;
  std::vector<std::uint32_t> uint32Vec;
  std::vector<std::uint8_t> byteBuffer;
  std::vector<std::string> stringVec;
  SmallMessage smallMsg;
  MediumMessage mediumMsg;
};

struct UserRequest {
  std::uint64_t userId = 0;
};

struct UserProfile {
  std::uint64_t userId = 0;
  std::string name;
  std::string email;
  std::uint32_t age = 0;
  std::vector<std::string> interests;
  std::string bio;
  std::int64_t createdAt = 0;
};

struct Chunk {
  std::uint32_t docId = 0;
  std::uint32_t index = 0;
  std::vector<std::uint8_t> data;
};

struct ChunkResult {
  std::uint32_t docId = 0;
  std::uint32_t index = 0;
  std::uint32_t checksum = 0;
};

/// Served by bench_service.
class BenchService : public myelin::EndpointClass {
 public:
  static myelin::Async<std::string> echoString(const std::string& s);
  static myelin::Async<SmallMessage> echoSmall(const SmallMessage& m);
  static myelin::Async<MediumMessage> echoMedium(const MediumMessage& m);
  static myelin::Async<LargeMessage> echoLarge(const LargeMessage& m);
  static myelin::Async<std::vector<SmallMessage>> echoSmallList(const std::vector<SmallMessage>& list);
  static myelin::Async<std::vector<MediumMessage>> echoMediumList(const std::vector<MediumMessage>& list);
  static myelin::Async<std::vector<LargeMessage>> echoLargeList(const std::vector<LargeMessage>& list);
  /// Calls BenchSink::onSmall (onMedium, onLarge) on the caller `count`
  /// times during the call, then returns count.
  static std::uint64_t streamSmall(std::uint64_t count);
  static std::uint64_t streamMedium(std::uint64_t count);
  static std::uint64_t streamLarge(std::uint64_t count);
  static myelin::Async<UserProfile> getUserProfile(const UserRequest& request);
  static myelin::Async<ChunkResult> processChunk(const Chunk& chunk);
  /// Sync echo for latency (Table C).
  static std::string echoBytes(const std::string& s);
  /// One-way message for the fixed-rate test's 31 of 32 unanswered sends.
  static myelin::AsyncVoid swallow(const std::string& s);
};

}  // namespace bench
