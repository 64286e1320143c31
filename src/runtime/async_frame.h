// FrameState: what an AsyncFrame knows about the calls made in its scope
// (the Async values still pending, the lanes that carried fire-and-forget
// calls) and where their failures go (docs/async-and-errors.md §3).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "myelin/result.h"

namespace myelin::detail {

class AsyncStateBase;
class EndpointImpl;
struct Lane;

struct FrameState : std::enable_shared_from_this<FrameState> {
  /// The frame that enclosed this one when it was made: failures this frame
  /// has no handler for go there.
  std::shared_ptr<FrameState> outer;

  /// An Async call made in the frame: held until it completes; its
  /// completion (in the lane's order) settles it here.
  void addAsync(AsyncStateBase* state);
  /// Takes back addAsync for a call that could not be sent (out of
  /// memory): the frame does not wait for it.
  void forgetAsync(AsyncStateBase* state) noexcept;
  /// Removes `state` from `pending`; false if it is not there.
  bool takePending(AsyncStateBase* state) noexcept;
  /// A fire-and-forget call (AsyncVoid, AsyncStatus) left on `lane`: the
  /// frame's wait ends with a barrier there.
  void noteLane(EndpointImpl* ep, Lane* lane);
  /// A failure of one of the frame's calls: counted, and given to the
  /// handler of this frame or of the nearest enclosing one that has one.
  void report(const Status& status);
  /// An AsyncStatus error for this frame is queued on its lane (reader);
  /// errorDelivered() when it ran.
  void errorPosted();
  void errorDelivered(const Status& status);

  bool wait(std::int64_t timeoutMs);
  void cancel();

  mutable std::mutex mu;
  std::vector<AsyncStateBase*> pending;  // one reference each
  struct LaneUse {
    std::weak_ptr<EndpointImpl> ep;
    EndpointImpl* raw;
    Lane* lane;
  };
  std::vector<LaneUse> lanes;
  std::size_t errorsInFlight = 0;
  std::function<void(const Status&)> onError;
  std::size_t errors = 0;
  Status first;
  std::atomic<bool> canceled{false};

 private:
  void settled(AsyncStateBase* state);
};

}  // namespace myelin::detail
