// Executor: the process-wide pool of service threads. It runs lanes (one
// lane at a time per thread, so a lane's calls stay in order) and nothing
// else; see docs/threading.md.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace myelin::detail {

class EndpointImpl;
struct Lane;

class Executor {
 public:
  static Executor& instance();
  /// Grows the pool to at least `n` threads.
  void ensureThreads(unsigned n);
  /// Queues `lane` of `ep` to be run by a pool thread.
  void post(std::shared_ptr<EndpointImpl> ep, Lane* lane);

 private:
  Executor() = default;
  void run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::shared_ptr<EndpointImpl>, Lane*>> queue_;
  std::vector<std::thread> threads_;
};

}  // namespace myelin::detail
