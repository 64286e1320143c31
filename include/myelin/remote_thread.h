// RemoteThread and RemoteThreadPool: scopes that decide how the peer runs
// the calls this thread makes while they live (docs/objects.md §7).
#pragma once

#include <cstdint>
#include <memory>

namespace myelin {

namespace detail {
struct LaneScope;
}

/// Every call this thread makes in the scope, to any endpoint, runs on one
/// thread of the peer that serves only these calls, in the order they were
/// made: thread-local state on the peer carries from one call to the next.
/// The peer's thread goes once the scope ends and the calls made in it ran.
///
/// @par Thread Safety
/// Create and destroy it on one thread; scopes nest, the innermost wins.
class RemoteThread {
 public:
  RemoteThread();
  ~RemoteThread();
  RemoteThread(const RemoteThread&) = delete;
  RemoteThread& operator=(const RemoteThread&) = delete;

 private:
  std::unique_ptr<detail::LaneScope> scope_;
};

/// The calls this thread makes in the scope may run on up to `threads`
/// threads of the peer at once, in no order among themselves: a wave of
/// Async or fire-and-forget calls is worked on in parallel. Sync calls still
/// block this thread, one at a time.
///
/// @par Thread Safety
/// Create, use and destroy it on one thread; scopes nest, the innermost
/// wins. The destructor does not wait: call wait() to join.
class RemoteThreadPool {
 public:
  /// `threads` from 1 to 256, else InvalidConfigurationError.
  explicit RemoteThreadPool(int threads);
  ~RemoteThreadPool();
  RemoteThreadPool(const RemoteThreadPool&) = delete;
  RemoteThreadPool& operator=(const RemoteThreadPool&) = delete;

  /// Waits until every call made through the pool so far (detached queues
  /// included) has run on the peer; timeoutMs < 0 waits forever. False on
  /// timeout or if a connection closed first.
  bool wait(std::int64_t timeoutMs = -1);
  /// Waits for the calls of the active queue only.
  bool waitForActiveQueueIdle(std::int64_t timeoutMs = -1);
  /// Leaves the calls made so far to finish on their own: the pool's later
  /// calls form a new queue, which waitForActiveQueueIdle() waits for.
  void detachActiveQueue();

 private:
  std::unique_ptr<detail::LaneScope> scope_;
};

}  // namespace myelin
