// Stateful remote objects for the integration tests (docs/objects.md): a
// counter built on the service with constructor arguments, instance methods
// of every return mode, a class built by its first call, and service-wide
// counts of constructions and destructions.
#pragma once

#include <myelin/endpoint.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace objs {

/// Service-wide counts of Counter objects.
struct Lifetimes {
  std::int64_t constructed = 0;
  std::int64_t destroyed = 0;
  std::int64_t lastValue = 0;  ///< value of the last Counter destroyed
};

class Counter : public myelin::EndpointClass {
 public:
  explicit Counter(std::int64_t start);
  /// Throws on the service if `start` is negative, and InvalidMessageError
  /// if `name` is "invalid".
  Counter(const std::string& name, std::int64_t start);
  ~Counter();

  std::int64_t add(std::int64_t d);
  std::int64_t get() const;
  std::string name() const;
  myelin::Async<std::int64_t> addLater(std::int64_t d);
  /// Fire-and-forget +1.
  myelin::AsyncVoid bump();
  /// Throws std::runtime_error(why) on the service.
  void fail(const std::string& why);

  static Lifetimes lifetimes();
  static std::int64_t version();

 private:
  std::string name_;
  // Calls from different client threads run concurrently (one lane each).
  std::atomic<std::int64_t> value_{0};
};

/// Declares no constructor: the peer's instance is made by the first call.
class Notebook : public myelin::EndpointClass {
 public:
  void write(const std::string& line);
  /// write() as a fire-and-forget call.
  myelin::AsyncVoid jot(const std::string& line);
  std::vector<std::string> lines() const;

 private:
  std::vector<std::string> lines_;
};

}  // namespace objs
