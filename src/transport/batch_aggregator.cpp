// Deferred flushing of staged calls during bursts (see batch_aggregator.h).
#include "transport/batch_aggregator.h"

#include "runtime/endpoint_impl.h"

namespace myelin::detail {

BatchAggregator& BatchAggregator::instance() {
  static BatchAggregator* a = new BatchAggregator();  // lives until exit
  return *a;
}

void BatchAggregator::arm(const std::shared_ptr<EndpointImpl>& ep, std::uint32_t delayUs) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back({ep, std::chrono::steady_clock::now() + std::chrono::microseconds(delayUs)});
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  cv_.notify_one();
}

void BatchAggregator::run() {
  for (;;) {
    Entry e;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return !queue_.empty(); });
      // Entries are queued with one delay per endpoint config, so the front
      // is (nearly) always the earliest.
      cv_.wait_until(lock, queue_.front().due, [] { return false; });
      e = std::move(queue_.front());
      queue_.pop_front();
    }
    if (auto ep = e.ep.lock()) {
      ep->disarm();
      ep->flush();
    }
  }
}

}  // namespace myelin::detail
