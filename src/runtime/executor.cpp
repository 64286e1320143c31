// The service thread pool (see executor.h).
#include "runtime/executor.h"

#include "runtime/endpoint_impl.h"
#include "runtime/thread_name.h"

namespace myelin::detail {

Executor& Executor::instance() {
  static Executor* e = new Executor();  // lives until exit; threads are never joined
  return *e;
}

Executor::~Executor() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void Executor::ensureThreads(unsigned n) {
  std::lock_guard lock(mu_);
  while (threads_.size() < n) threads_.emplace_back([this] { run(); });
}

void Executor::post(std::shared_ptr<EndpointImpl> ep, Lane* lane) { push(Job{std::move(ep), lane, {}}); }

void Executor::post(std::function<void()> task) { push(Job{nullptr, nullptr, std::move(task)}); }

void Executor::push(Job job) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(job));
    if (threads_.empty()) threads_.emplace_back([this] { run(); });
  }
  cv_.notify_one();
}

void Executor::run() {
  nameThisThread(name_);
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mu_);
      ThreadState& ts = threadState();
      if (queue_.empty() && !ts.deferredFlush.empty()) {
        // Going idle: first send what the lanes this thread ran staged.
        lock.unlock();
        ts.flushDeferred();
        continue;
      }
      ts.restartRamp();  // between jobs: a handler's next calls ramp up anew
      cv_.wait(lock, [&] { return !queue_.empty() || stopping_; });
      if (queue_.empty()) return;  // stopping, and nothing left
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    if (job.task) {
      job.task();
    } else {
      job.ep->runLane(job.lane);
    }
  }
}

}  // namespace myelin::detail
