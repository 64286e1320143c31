// eventually(): polls a condition for a while, for tests of what follows a
// call asynchronously (releases, destructions, faults seen by a callback on
// another thread).
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace myelin_test {

/// Polls `done` for up to 10 s: for what follows a call asynchronously
/// (releases, destructions, call-backs after the call returned).
inline bool eventually(const std::function<bool()>& done) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

}  // namespace myelin_test
