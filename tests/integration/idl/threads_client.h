// Remote threads, the client's half: a call the service makes back into
// the client while it runs a call of a RemoteThread or RemoteThreadPool.
#pragma once

#include <myelin/endpoint.h>

#include <cstdint>

namespace thr {

class Probe : public myelin::EndpointClass {
 public:
  /// Returns v + 1 (after 30 ms for a negative v).
  static std::int64_t ping(std::int64_t v);
};

}  // namespace thr
