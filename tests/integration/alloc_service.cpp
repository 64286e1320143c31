// The service of the allocation test: trivial handlers, so that every
// allocation it counts is the runtime's own.
#include <atomic>
#include <mutex>
#include <optional>
#include <vector>

#include "alloc_probe.h"
#include "count_allocations.h"

namespace myelin_test {

namespace {
std::atomic<std::uint64_t> gSum{0};
std::atomic<std::uint32_t> gListThreads{0};
std::atomic<std::uint32_t> gEchoThreads{0};
thread_local bool tlRanList = false;
thread_local bool tlRanEcho = false;
}  // namespace

myelin::AsyncVoid AllocProbe::oneWay(std::uint32_t v) {
  gSum.fetch_add(v, std::memory_order_relaxed);
  return {};
}
std::uint32_t AllocProbe::syncEcho(std::uint32_t v) { return v; }
myelin::Async<SmallStruct> AllocProbe::asyncEcho(const SmallStruct& s) { return s; }
std::uint64_t AllocProbe::countStrings(const std::vector<MediumStruct>& list) {
  if (!tlRanList) {
    tlRanList = true;
    gListThreads.fetch_add(1, std::memory_order_relaxed);
  }
  std::uint64_t n = 0;
  for (const MediumStruct& m : list) n += 2 + m.vec2.size() + (m.optStr ? 1 : 0);
  return n;
}
myelin::Async<std::vector<MediumStruct>> AllocProbe::mediumList(std::uint32_t n, std::uint32_t mark) {
  std::vector<MediumStruct> list(n, makeMedium());
  for (std::uint32_t i = 0; i < n; ++i) list[i].val1 = static_cast<std::int32_t>(i);
  if (n) {
    list[mark % n].optStr = "mark";
    list[mark % n].vec2.push_back(std::string(40, 'm'));
  }
  return list;
}
myelin::Async<std::vector<MediumStruct>> AllocProbe::echoList(const std::vector<MediumStruct>& list) {
  if (!tlRanEcho) {
    tlRanEcho = true;
    gEchoThreads.fetch_add(1, std::memory_order_relaxed);
  }
  return list;
}
namespace {
std::mutex gHeldMu;
std::optional<myelin::Async<std::vector<MediumStruct>>> gHeld;  // gHeldMu
std::vector<std::int32_t> gHeldIds;                            // gHeldMu: what gHeld returned, by val1
bool gHeldIntact = true;                                       // gHeldMu
}  // namespace

myelin::Async<std::vector<MediumStruct>> AllocProbe::echoListHeld(const std::vector<MediumStruct>& list) {
  myelin::Async<std::vector<MediumStruct>> result(list);
  std::lock_guard lock(gHeldMu);
  if (gHeld) {
    const std::vector<MediumStruct>& v = gHeld->value();
    bool same = v.size() == gHeldIds.size();
    for (std::size_t i = 0; same && i < v.size(); ++i) same = v[i].val1 == gHeldIds[i] && !v[i].str1.empty();
    gHeldIntact = gHeldIntact && same;
  }
  gHeld = result;
  gHeldIds.clear();
  for (const MediumStruct& m : list) gHeldIds.push_back(m.val1);
  return result;
}
bool AllocProbe::heldResultsIntact() {
  std::lock_guard lock(gHeldMu);
  return gHeldIntact;
}
std::uint32_t AllocProbe::echoListThreads() { return gEchoThreads.load(std::memory_order_relaxed); }
std::uint32_t AllocProbe::countStringsThreads() { return gListThreads.load(std::memory_order_relaxed); }
std::uint64_t AllocProbe::oneWaySum() { return gSum.load(std::memory_order_relaxed); }
std::uint64_t AllocProbe::allocations() { return alloc_count::allocations(); }

}  // namespace myelin_test
