// The service thread pool (see executor.h).
#include "runtime/executor.h"

#include "runtime/endpoint_impl.h"
#include "runtime/thread_name.h"
#include "runtime/uncaught.h"

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
    // The thread first: a post that throws has queued nothing (a parallel
    // lane counts its frame as running only once the post returned).
    if (threads_.empty()) threads_.emplace_back([this] { run(); });
    queue_.push_back(std::move(job));
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
        // Going idle: first send what the lanes this thread ran staged. An
        // endpoint whose flush throws (out of memory) leaves the list all
        // the same; its frames leave with its next flush.
        lock.unlock();
        runReporting("a pool thread's flush", [&] { ts.flushDeferred(); });
        continue;
      }
      ts.restartRamp();  // between jobs: a handler's next calls ramp up anew
      cv_.wait(lock, [&] { return !queue_.empty() || stopping_; });
      if (queue_.empty()) return;  // stopping, and nothing left
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    // A lane's turn and a parallel lane's frame deal with what they throw
    // themselves (the connection faults: EndpointImpl::faultRun). What
    // still leaves a job (a task out of memory) is reported, and the thread
    // goes on: thrown out of here, it would end the process.
    runReporting("a task of Myelin's pool", [&] {
      if (job.task) {
        job.task();
      } else {
        job.ep->runLane(job.lane);
      }
    });
  }
}

}  // namespace myelin::detail
