// Interface the integration-test service implements and its clients call.
#pragma once

#include <myelin/async.h>
#include <myelin/endpoint.h>

#include <cstdint>
#include <string>
#include <vector>

#include "messages.h"

namespace myelin_test {

class Calc : public myelin::EndpointClass {
 public:
  static std::int32_t add(std::int32_t a, std::int32_t b = 1);
  static std::string echo(const std::string& s);
  static SmallStruct echoSmall(const SmallStruct& s);
  static LargeStruct echoLarge(const LargeStruct& s);
  static void nop();
  /// Throws std::runtime_error(why) on the service.
  static void fail(const std::string& why);
  /// Throws myelin::InvalidMessageError(why) on the service, as a call the
  /// handler made that got an invalid reply would.
  static void failAsInvalid(const std::string& why);
  static myelin::AsyncVoid note(std::uint32_t v);
  /// v.value(): a value this service holds for the caller, or one sent inline.
  static std::int64_t readValue(myelin::AsyncRef<std::int64_t> v);
  static std::uint64_t noteSum();
  /// Throws on the service: faults the caller's endpoint.
  static myelin::AsyncVoid failVoid();
  /// Completed from another service thread about a millisecond later.
  static myelin::Async<std::int64_t> squareLater(std::int32_t x);
  /// Ready at once.
  static myelin::Async<std::string> asyncEcho(std::string s);
  /// Calls ClientSink::onItem(0 … count-1) on the caller, then returns count.
  static std::uint32_t streamToClient(std::uint32_t count);
  /// Returns ClientSink::twice(x) + 1 (a nested call back to the caller).
  static std::int32_t askClient(std::int32_t x);
  /// Returns ClientSink::twiceViaService(x) + 1: the client's handler calls
  /// back into the service while the client's own call is still open.
  static std::int32_t askClientNested(std::int32_t x);
  static void sleepMs(std::uint32_t ms);
  /// Calls ClientSink::progress(1), works (sleeps) for workMs, calls
  /// ClientSink::progress(2), works for 2 * workMs, and returns workMs: each
  /// report must reach the caller while the handler works.
  static std::uint32_t progressThenWork(std::uint32_t workMs);
  /// Like streamToClient, but returns a ready Async: the items must have run
  /// when a caller waiting on the Async wakes.
  static myelin::Async<std::uint32_t> streamThenAsync(std::uint32_t count);
  /// Calls ClientSink::onChunk(0 … count-1) with `size` bytes each on the
  /// caller and returns how many socket writes its endpoint made meanwhile,
  /// before the method returned.
  static std::uint64_t streamChunksCountingWrites(std::uint32_t count, std::uint32_t size);
  /// The same stream; returns the most messages one of its batches carried
  /// before the method returned (its endpoint's statistics are reset first).
  static std::uint64_t streamChunksLargestBatch(std::uint32_t count, std::uint32_t size);
  /// Calls ClientSink::onChunk(i, chunkOfVaryingSize(i)) for i in 0 … count-1
  /// on the caller; returns the bytes sent.
  static std::uint64_t streamChunksOfVaryingSize(std::uint32_t count);
  /// Returns a pending Async and keeps no copy of it.
  static myelin::Async<std::int32_t> abandon();
  /// Returns a pending Async kept on the service until
  /// answerParkedCountingWrites() answers it with `size` bytes.
  static myelin::Async<std::string> park(std::uint32_t size);
  static std::uint32_t parkedCount();
  /// Answers every parked call (their replies are staged on their callers'
  /// lanes by this handler's thread) and returns how many socket writes its
  /// endpoint made meanwhile, before the method returned.
  static std::uint64_t answerParkedCountingWrites();
  /// Sleeps in the handler, then returns ms.
  static myelin::Async<std::uint32_t> sleepAsync(std::uint32_t ms);
  /// getError() of every connection of this service that closed with a fault.
  static std::vector<std::string> faults();
  /// Records (stream, seq); recordViolations() counts seqs out of order.
  static myelin::AsyncVoid record(std::uint32_t stream, std::uint32_t seq);
  static std::uint32_t recordViolations();
  /// 2 * x; throws for x % 7 == 3; for x % 11 == 5 asks the caller first
  /// (ClientSink::twice, a nested call) and returns its answer + 1.
  static myelin::Async<std::int32_t> doubleOrAsk(std::int32_t x);

  /// chainDepth(t); chainOf and chainLater return makeChain(depth), the
  /// second from another service thread about a millisecond later.
  static std::uint32_t depthOf(const TreeNode& t);
  static TreeNode chainOf(std::uint32_t depth);
  static myelin::Async<TreeNode> chainLater(std::uint32_t depth);
  /// The same depth taken by the other call modes: noteDepth adds
  /// chainDepth(t) to depthsNoted(), checkDepth answers success,
  /// depthAsync answers chainDepth(t) at once.
  static myelin::AsyncVoid noteDepth(const TreeNode& t);
  static myelin::AsyncStatus checkDepth(const TreeNode& t);
  static myelin::Async<std::uint32_t> depthAsync(const TreeNode& t);
  static std::uint64_t depthsNoted();

  /// Sizes against maxMessageSize: noteBytes and checkBytes add s.size()
  /// to bytesNoted() (checkBytes answers success); bytesOfSize returns n
  /// bytes.
  static myelin::AsyncVoid noteBytes(const std::string& s);
  static myelin::AsyncStatus checkBytes(const std::string& s);
  static std::uint64_t bytesNoted();
  static std::string bytesOfSize(std::uint32_t n);
  /// Fails with Status(Mood::kHappy, n bytes).
  static myelin::AsyncStatus failWithBytes(std::uint32_t n);

  /// Sizes against maxDecodeBytes: an empty string is one byte on the wire
  /// and a std::string's worth of memory decoded. countStrings returns
  /// v.size(); emptyStrings and emptyStringsLater return n empty strings.
  static std::uint64_t countStrings(const std::vector<std::string>& v);
  static std::vector<std::string> emptyStrings(std::uint32_t n);
  static myelin::Async<std::vector<std::string>> emptyStringsLater(std::uint32_t n);

  // Framed-size probes: each does nothing.
  static myelin::AsyncVoid zero();
  static myelin::AsyncVoid one(std::uint32_t v);
  static myelin::AsyncVoid small(SmallStruct s);
  static myelin::AsyncVoid medium(MediumStruct s);
  static myelin::AsyncVoid large(LargeStruct s);
};

}  // namespace myelin_test
