// Remote threads for the integration tests (docs/objects.md §7): service
// calls that reveal which thread runs them, how many run at once, and in
// what order they ran.
#pragma once

#include <myelin/endpoint.h>

#include <cstdint>
#include <vector>

namespace thr {

class Worker : public myelin::EndpointClass {
 public:
  /// Increments a thread_local counter of the service thread running it
  /// and returns the new value.
  static std::int64_t bumpThreadLocal();
  /// A number that identifies the service thread running it.
  static std::uint64_t threadId();
  /// Returns once `n` calls with this `tag` are inside at the same time:
  /// true, or false after 5 s without meeting.
  static myelin::Async<bool> rendezvous(std::int64_t n, std::int64_t tag);
  /// Runs for `ms`, counting how many hold() calls run at once.
  static myelin::AsyncVoid hold(std::int64_t ms);
  static std::int64_t peakHolders();
  static void resetPeak();
  /// Appends `v` to one service-wide list.
  static myelin::AsyncVoid record(std::int64_t v);
  static std::vector<std::int64_t> recorded();
  static void clearRecorded();
  /// Calls the client back (Probe::ping) during this call; returns its answer.
  static std::int64_t callBack(std::int64_t v);
  static myelin::Async<std::int64_t> callBackLater(std::int64_t v);
  /// Records v, calls the client back (Probe::ping(-1), which takes a
  /// while), then records v + 1.
  static myelin::AsyncVoid recordAround(std::int64_t v);
  /// Does nothing (a call to count).
  static myelin::AsyncVoid tick();
  /// getLocalStats().callsExecuted of the caller's connection, this call
  /// included.
  static std::uint64_t callsExecuted();
};

}  // namespace thr
