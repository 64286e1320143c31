// Executor dispatch (Table C): post one million tasks to Myelin's service
// pool and run them on 1, 2, 4 and 8 threads, beside standalone Asio's
// io_context doing the same in the same run. Prints one JSON line per row.
#include <asio.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "runtime/executor.h"

namespace {

using Clock = std::chrono::steady_clock;

double myelinRate(unsigned threads, std::uint64_t tasks) {
  myelin::detail::Executor ex;
  ex.ensureThreads(threads);
  std::atomic<std::uint64_t> done{0};
  auto start = Clock::now();
  for (std::uint64_t i = 0; i < tasks; ++i) ex.post([&done] { done.fetch_add(1, std::memory_order_relaxed); });
  while (done.load(std::memory_order_acquire) < tasks) std::this_thread::yield();
  return static_cast<double>(tasks) / std::chrono::duration<double>(Clock::now() - start).count();
}

double asioRate(unsigned threads, std::uint64_t tasks) {
  asio::io_context io(static_cast<int>(threads));
  auto guard = asio::make_work_guard(io);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) pool.emplace_back([&io] { io.run(); });
  std::atomic<std::uint64_t> done{0};
  auto start = Clock::now();
  for (std::uint64_t i = 0; i < tasks; ++i) {
    asio::post(io, [&done] { done.fetch_add(1, std::memory_order_relaxed); });
  }
  while (done.load(std::memory_order_acquire) < tasks) std::this_thread::yield();
  double rate = static_cast<double>(tasks) / std::chrono::duration<double>(Clock::now() - start).count();
  guard.reset();
  io.stop();
  for (auto& t : pool) t.join();
  return rate;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t tasks = 1000000;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--tasks") == 0) tasks = std::strtoull(argv[i + 1], nullptr, 10);
  }
  for (unsigned threads : {1u, 2u, 4u, 8u}) {
    double m = myelinRate(threads, tasks);
    double a = asioRate(threads, tasks);
    std::printf("{\"threads\": %u, \"tasks\": %llu, \"myelin_per_s\": %.0f, \"asio_per_s\": %.0f}\n", threads,
                static_cast<unsigned long long>(tasks), m, a);
    std::fflush(stdout);
  }
  return 0;
}
