// The runtime's one clock reading: steady-clock nanoseconds since its epoch,
// the unit of deadlines, batching gaps and timers.
#pragma once

#include <chrono>
#include <cstdint>

namespace myelin::detail {

inline std::int64_t steadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace myelin::detail
