// The service of the allocation test: trivial handlers, so that every
// allocation it counts is the runtime's own.
#include <atomic>

#include "alloc_probe.h"
#include "count_allocations.h"

namespace myelin_test {

namespace {
std::atomic<std::uint64_t> gSum{0};
}  // namespace

myelin::AsyncVoid AllocProbe::oneWay(std::uint32_t v) {
  gSum.fetch_add(v, std::memory_order_relaxed);
  return {};
}
std::uint32_t AllocProbe::syncEcho(std::uint32_t v) { return v; }
myelin::Async<SmallStruct> AllocProbe::asyncEcho(const SmallStruct& s) { return s; }
std::uint64_t AllocProbe::oneWaySum() { return gSum.load(std::memory_order_relaxed); }
std::uint64_t AllocProbe::allocations() { return alloc_count::allocations(); }

}  // namespace myelin_test
