// The service thread pool (see executor.h).
#include "runtime/executor.h"

#include "runtime/endpoint_impl.h"

namespace myelin::detail {

Executor& Executor::instance() {
  static Executor* e = new Executor();  // lives until exit; threads are never joined
  return *e;
}

void Executor::ensureThreads(unsigned n) {
  std::lock_guard lock(mu_);
  while (threads_.size() < n) threads_.emplace_back([this] { run(); });
}

void Executor::post(std::shared_ptr<EndpointImpl> ep, Lane* lane) {
  {
    std::lock_guard lock(mu_);
    queue_.emplace_back(std::move(ep), lane);
    if (threads_.empty()) threads_.emplace_back([this] { run(); });
  }
  cv_.notify_one();
}

void Executor::run() {
  for (;;) {
    std::pair<std::shared_ptr<EndpointImpl>, Lane*> job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return !queue_.empty(); });
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    job.first->runLane(job.second);
  }
}

}  // namespace myelin::detail
