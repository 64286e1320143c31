// Values that can fail and control of calls for the integration tests
// (docs/async-and-errors.md): methods returning Status and Result, Status
// and Result as parameters and fields, slow calls for CallTimeout, and
// service methods written as coroutines.
#pragma once

#include <myelin/endpoint.h>

#include <cstdint>
#include <string>
#include <vector>

namespace res {

enum class StoreError : std::int32_t { kNotFound = 1, kFull = 2 };
enum class OtherError : std::int32_t { kBoom = 7 };

struct Item {
  std::string name;
  std::int64_t qty = 0;
  bool operator==(const Item&) const = default;
};

/// Statuses and results in a struct, echoed back.
struct Report {
  myelin::Status status;
  myelin::Result<Item, StoreError> item;
  std::vector<myelin::Result<std::int64_t, StoreError>> counts;
};

class Store : public myelin::EndpointClass {
 public:
  /// Stores an item; StoreError::kFull once 3 items are stored.
  static myelin::Status put(const Item& item);
  static myelin::Result<Item, StoreError> get(const std::string& name);
  static myelin::Async<myelin::Result<Item, StoreError>> getLater(const std::string& name);
  static void clear();
  /// Fails with an error of another enum type.
  static myelin::Status failOther();
  /// The handler throws.
  static myelin::Status throwing();
  static Report echo(const Report& r);
  static std::vector<myelin::Status> echoStatuses(const std::vector<myelin::Status>& s);

  /// Sleep `ms`, then return.
  static std::int64_t sleepValue(std::int64_t ms);
  static void sleepVoid(std::int64_t ms);
  static myelin::Status sleepStatus(std::int64_t ms);
  /// How many sleep* calls have finished.
  static std::int64_t sleepsDone();

  /// Completes after `ms` from a thread of the service's own, unless the
  /// caller cancels first (then it stops early, counted by canceledSeen).
  static myelin::Async<std::int64_t> slowAsync(std::int64_t ms);
  /// How many slowAsync calls have started.
  static std::int64_t slowStarted();
  /// Works up to `maxMs` on the lane, stopping early when canceled
  /// (counted by canceledSeen); returns the ms it worked.
  static std::int64_t workUntilCanceled(std::int64_t maxMs);
  /// How many workUntilCanceled calls have started.
  static std::int64_t workStarted();
  static std::int64_t canceledSeen();
  /// Blocks this caller's lane for `ms`.
  static myelin::AsyncVoid block(std::int64_t ms);
  /// a + b, counting how many ran (addsRun).
  static myelin::Async<std::int64_t> countedAdd(std::int64_t a, std::int64_t b);
  static std::int64_t addsRun();
  /// CallCtx::remainingMs() of this call.
  static std::int64_t deadlineLeftMs();
  /// Sleeps `ms`, then records CallCtx::isTimedOut() (lastTimedOut).
  static myelin::AsyncVoid noteTimedOutAfter(std::int64_t ms);
  static bool lastTimedOut();

  /// Reserves n units: fails with StoreError::kFull above 10, throws for
  /// n < 0 (AsyncStatus: only failures answer).
  static myelin::AsyncStatus reserve(std::int64_t n);
  static std::int64_t reservedTotal();
  /// Works up to `ms` in 5 ms steps, stopping once
  /// CallCtx::isAsyncFrameCanceled(); counts the runs that started and
  /// those that saw the cancel.
  static myelin::AsyncStatus slowReserve(std::int64_t ms);
  static std::int64_t slowReservesStarted();
  static std::int64_t frameCancelsSeen();
  /// Reports two warnings to the caller's AsyncFrame while it runs
  /// (CallCtx::sendAsyncFrameError), then succeeds; throws for n < 0.
  static myelin::AsyncStatus warnTwice(std::int64_t n);
  /// CallCtx::sendAsyncFrameError from a sync method: false.
  static bool frameErrorFromSync();

  /// a + b, completed later from a thread of the service's own.
  static myelin::Async<std::int64_t> addLater(std::int64_t a, std::int64_t b);
  /// A coroutine on the service: asks the client (Probe::twice) and
  /// returns its answer plus one.
  static myelin::Async<std::int64_t> askClient(std::int64_t v);
  /// A coroutine that fails after its first co_await.
  static myelin::Async<std::int64_t> failAfterAwait(std::int64_t v);
  /// Returns the Async of its own call to the client (Probe::twice) and
  /// keeps no copy: the reply that completes it answers this call.
  static myelin::Async<std::int64_t> forwardToClient(std::int64_t v);
};

}  // namespace res
