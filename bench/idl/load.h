// Interface of the Myelin load benchmark: one-way calls for throughput,
// sync echoes for round-trip latency.
#pragma once

#include <myelin/async.h>
#include <myelin/endpoint.h>

#include <cstdint>
#include <string>
#include <vector>

namespace bench {

class Load : public myelin::EndpointClass {
 public:
  /// Fire-and-forget; the service counts it.
  static myelin::AsyncVoid one(std::uint32_t v);
  /// How many one() calls the service has run so far (all connections).
  static std::uint64_t count();
  static std::uint32_t echo(std::uint32_t v);
  static std::string echoBytes(const std::string& s);
  /// The service process's resident memory now and at its peak (VmRSS and
  /// VmHWM from /proc/self/status), in KiB.
  static std::vector<std::uint64_t> residentKb();
};

}  // namespace bench
