// Executor: the process-wide pool of service threads. It runs lanes (one
// lane at a time per thread, so a lane's calls stay in order) and plain
// tasks; see docs/threading.md. Instances other than instance() (used by the
// executor-dispatch benchmark) stop and join their threads when destroyed.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/ring_queue.h"

namespace myelin::detail {

class EndpointImpl;
struct Lane;

class Executor {
 public:
  /// `name`: its threads' name (static storage, at most 15 characters).
  explicit Executor(const char* name = "myelin-pool") : name_(name) {}
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  /// The pool the runtime uses; never destroyed.
  static Executor& instance();
  /// Grows the pool to at least `n` threads.
  void ensureThreads(unsigned n);
  /// Queues `lane` of `ep` to be run by a pool thread (a null lane: read
  /// the endpoint's socket for a busy reader, EndpointImpl::followRead).
  void post(std::shared_ptr<EndpointImpl> ep, Lane* lane);
  /// Queues a task.
  void post(std::function<void()> task);

 private:
  struct Job {
    std::shared_ptr<EndpointImpl> ep;
    Lane* lane = nullptr;
    std::function<void()> task;
  };
  void push(Job job);
  void run();

  std::mutex mu_;
  std::condition_variable cv_;
  RingQueue<Job> queue_;
  std::vector<std::thread> threads_;
  bool stopping_ = false;
  const char* name_;
};

}  // namespace myelin::detail
