// The export table's release accounting (docs/objects.md §4): an object
// stays while the peer holds references or messages naming it are still to
// be taken in, whatever order RELEASE and those messages are processed in.
#include <gtest/gtest.h>

#include "runtime/objects.h"

#include <new>

#include "failing_allocations.h"

namespace myelin::detail {
namespace {

struct Probe : EndpointClass {
  static inline int destroyed = 0;
  ~Probe() { ++destroyed; }
};

/// A runtime-owned local object, as a remote constructor makes it.
ObjectCore* ownedProbe() {
  auto* p = new Probe;
  auto* core = new ObjectCore(false);
  core->obj = p;
  core->destroy = [](EndpointClass* o) { delete static_cast<Probe*>(o); };
  ObjectAccess::bind(*p, core);
  return core;
}

/// Exports a new runtime-owned object for one reference sent, as a remote
/// constructor does: the entry holds the only reference.
std::uint64_t exportOwned(ExportTable& t) {
  ObjectCore* core = ownedProbe();
  std::uint64_t id = t.addRef(core);
  releaseCore(core);
  return id;
}

void releaseIf(ObjectCore* c) {
  if (c) releaseCore(c);
}

TEST(ExportTable, AReleaseProcessedBeforeTheCallsItCountsKeepsTheObjectUntilTheyRan) {
  Probe::destroyed = 0;
  ExportTable t;
  std::uint64_t id = exportOwned(t);
  ASSERT_NE(id, 0u);
  ObjectCore* drop = nullptr;
  // The peer made three calls, then released; the release is processed first.
  ASSERT_EQ(t.release(id, 1, 3, drop), ExportTable::ReleaseResult::kOk);
  EXPECT_EQ(drop, nullptr) << "three calls naming the object are still to come";
  for (int i = 0; i < 3; ++i) {
    ObjectCore* dropped = nullptr;
    ObjectCore* call = t.takeForCall(id, dropped);
    ASSERT_NE(call, nullptr) << "call " << i;
    EXPECT_EQ(dropped != nullptr, i == 2) << "the entry goes with the last counted call";
    releaseIf(dropped);
    EXPECT_EQ(Probe::destroyed, 0) << "the running call still holds the object";
    releaseCore(call);
  }
  EXPECT_EQ(Probe::destroyed, 1);
  EXPECT_EQ(t.size(), 0u);
  ObjectCore* none = nullptr;
  EXPECT_EQ(t.takeForCall(id, none), nullptr) << "the id is forgotten";
}

TEST(ExportTable, ACallProcessedBeforeTheReleaseIsCountedToo) {
  Probe::destroyed = 0;
  ExportTable t;
  std::uint64_t id = exportOwned(t);
  ObjectCore* dropped = nullptr;
  ObjectCore* call = t.takeForCall(id, dropped);
  ASSERT_NE(call, nullptr);
  EXPECT_EQ(dropped, nullptr);
  releaseCore(call);
  ObjectCore* drop = nullptr;
  ASSERT_EQ(t.release(id, 1, 1, drop), ExportTable::ReleaseResult::kOk);
  ASSERT_NE(drop, nullptr) << "nothing in flight and no reference left";
  releaseCore(drop);
  EXPECT_EQ(Probe::destroyed, 1);
}

TEST(ExportTable, ReleasesOfUnknownIdsOrOfMoreReferencesThanSentAreRejected) {
  ExportTable t;
  std::uint64_t id = exportOwned(t);
  ObjectCore* drop = nullptr;
  EXPECT_EQ(t.release(id + 5, 1, 0, drop), ExportTable::ReleaseResult::kUnknown);
  EXPECT_EQ(t.release(0, 1, 0, drop), ExportTable::ReleaseResult::kUnknown);
  EXPECT_EQ(t.release(id, 2, 0, drop), ExportTable::ReleaseResult::kTooMany);
  EXPECT_EQ(t.release(id, 0, 0, drop), ExportTable::ReleaseResult::kTooMany);
  EXPECT_EQ(drop, nullptr);
  EXPECT_EQ(t.size(), 1u) << "a rejected release changes nothing";
}

TEST(ExportTable, AReferenceTakenBackIsUncountedUnlessThePeerAlreadyReleasedIt) {
  Probe::destroyed = 0;
  ExportTable t;
  ObjectCore* core = ownedProbe();  // ours; the entry takes one of its own
  std::uint64_t gen = 0;
  std::uint64_t id = t.addRef(core, ~std::size_t{0}, &gen);  // one reference delivered
  ASSERT_NE(id, 0u);
  std::uint64_t gen2 = 0;
  ASSERT_EQ(t.addRef(core, ~std::size_t{0}, &gen2), id) << "a second reference, being encoded";
  EXPECT_EQ(gen2, gen) << "the same entry";
  bool over = true;
  EXPECT_EQ(t.unsend(id, gen, over), nullptr) << "the delivered reference keeps the entry";
  EXPECT_FALSE(over);
  ObjectCore* drop = nullptr;
  EXPECT_EQ(t.release(id, 2, 1, drop), ExportTable::ReleaseResult::kTooMany)
      << "only one reference is counted now";

  // A peer that releases both while the second is still being encoded (it
  // received one), with a call naming the object still to come: the
  // reference taken back cannot be uncounted.
  ASSERT_EQ(t.addRef(core), id);
  ASSERT_EQ(t.release(id, 2, 1, drop), ExportTable::ReleaseResult::kOk);
  EXPECT_EQ(drop, nullptr) << "a call naming it is still to come";
  EXPECT_EQ(t.unsend(id, gen, over), nullptr);
  EXPECT_TRUE(over) << "the peer released a reference that never reached it";
  EXPECT_EQ(t.release(id, 1, 0, drop), ExportTable::ReleaseResult::kTooMany)
      << "no more releases pass: sent never falls below released";
  EXPECT_EQ(t.size(), 1u);
  ObjectCore* dropped = nullptr;
  ObjectCore* call = t.takeForCall(id, dropped);
  ASSERT_NE(call, nullptr);
  ASSERT_NE(dropped, nullptr) << "the last counted call takes the entry";
  releaseCore(dropped);
  releaseCore(call);
  EXPECT_EQ(t.size(), 0u);

  // The same with nothing still to come: the release takes the entry at
  // once, and the object is exported again (the same id, a new entry)
  // before the dropped message is taken back.
  ASSERT_EQ(t.addRef(core, ~std::size_t{0}, &gen), id);
  ASSERT_EQ(t.addRef(core), id);
  ASSERT_EQ(t.release(id, 2, 0, drop), ExportTable::ReleaseResult::kOk);
  ASSERT_NE(drop, nullptr) << "every reference counted is released";
  releaseCore(drop);
  ASSERT_EQ(t.addRef(core, ~std::size_t{0}, &gen2), id) << "the id is free again";
  EXPECT_NE(gen2, gen);
  EXPECT_EQ(t.unsend(id, gen, over), nullptr);
  EXPECT_TRUE(over) << "the entry the reference was counted on is gone: the peer released it";
  EXPECT_EQ(t.size(), 1u) << "the new entry is not touched";
  ASSERT_EQ(t.release(id, 1, 0, drop), ExportTable::ReleaseResult::kOk) << "its reference still counts";
  ASSERT_NE(drop, nullptr);
  releaseCore(drop);
  EXPECT_EQ(Probe::destroyed, 0) << "ours still holds the object";
  releaseCore(core);
  EXPECT_EQ(Probe::destroyed, 1);

  // A closed table's entries are gone for that, not for the peer.
  ObjectCore* other = ownedProbe();
  id = t.addRef(other, ~std::size_t{0}, &gen);
  t.clear();  // its entries released as what it returns ends
  EXPECT_EQ(t.unsend(id, gen, over), nullptr);
  EXPECT_FALSE(over);
  releaseCore(other);
  EXPECT_EQ(Probe::destroyed, 2);
}

TEST(ExportTable, IdsAreReusedOnlyAfterTheirObjectWasForgotten) {
  ExportTable t;
  std::uint64_t a = exportOwned(t);
  std::uint64_t b = exportOwned(t);
  EXPECT_NE(a, b);
  ObjectCore* drop = nullptr;
  ASSERT_EQ(t.release(a, 1, 0, drop), ExportTable::ReleaseResult::kOk);
  releaseIf(drop);
  std::uint64_t c = exportOwned(t);
  EXPECT_EQ(c, a) << "a's id is free again";
  EXPECT_NE(c, b);
}

TEST(ExportTable, NewEntriesStopAtTheLimitButKnownObjectsStillCount) {
  Probe::destroyed = 0;
  ExportTable t;
  ObjectCore* a = ownedProbe();
  ObjectCore* b = ownedProbe();
  std::uint64_t ida = t.addRef(a, 1);
  EXPECT_NE(ida, 0u);
  EXPECT_EQ(t.addRef(b, 1), ExportTable::kFull) << "a second object passes maxAllocObjects = 1";
  EXPECT_EQ(t.addRef(a, 1), ida) << "another reference to an exported object needs no entry";
  EXPECT_EQ(t.size(), 1u);
  releaseCore(b);
  EXPECT_EQ(Probe::destroyed, 1) << "the refused object was not kept";
  releaseCore(a);
  t.clear();  // the entries' references go with what it returns
  EXPECT_EQ(Probe::destroyed, 2);
}

TEST(ExportTable, ClearDropsEveryEntryAndRefusesNewOnes) {
  Probe::destroyed = 0;
  ExportTable t;
  exportOwned(t);
  exportOwned(t);
  {
    ExportTable::Taken dropped = t.clear();
    EXPECT_EQ(dropped.size(), 2u);
    EXPECT_EQ(t.size(), 0u);
    EXPECT_EQ(Probe::destroyed, 0) << "what clear() returns still holds the objects";
    int handed = 0;
    dropped.forEachCore([&](ObjectCore* c) {
      ++handed;
      releaseCore(c);
    });
    EXPECT_EQ(handed, 2);
    EXPECT_EQ(Probe::destroyed, 2);
    EXPECT_TRUE(dropped.empty());
  }
  EXPECT_EQ(Probe::destroyed, 2) << "nothing released twice";
  ObjectCore* late = ownedProbe();
  EXPECT_EQ(t.addRef(late), 0u) << "the connection is closed";
  releaseCore(late);
  EXPECT_EQ(Probe::destroyed, 3);
}

TEST(ExportTable, ReferencesToOneObjectShareItsEntryAndEachCounts) {
  Probe::destroyed = 0;
  ExportTable t;
  ObjectCore* core = ownedProbe();  // this test's own reference
  std::uint64_t id = t.addRef(core);
  ASSERT_NE(id, 0u);
  EXPECT_EQ(t.addRef(core), id) << "the second reference names the same entry";
  EXPECT_EQ(t.size(), 1u);
  releaseCore(core);
  EXPECT_EQ(Probe::destroyed, 0) << "the entry holds the object";
  ObjectCore* drop = nullptr;
  ASSERT_EQ(t.release(id, 1, 0, drop), ExportTable::ReleaseResult::kOk);
  EXPECT_EQ(drop, nullptr) << "one of the two references sent is still held by the peer";
  ASSERT_EQ(t.release(id, 1, 0, drop), ExportTable::ReleaseResult::kOk);
  ASSERT_NE(drop, nullptr);
  releaseCore(drop);
  EXPECT_EQ(Probe::destroyed, 1);
  EXPECT_EQ(t.size(), 0u);
  ObjectCore* again = ownedProbe();
  std::uint64_t next = t.addRef(again);
  EXPECT_NE(next, 0u) << "a new object gets an entry of its own";
  releaseCore(again);
  t.clear();  // its entries released as what it returns ends
  EXPECT_EQ(Probe::destroyed, 2);
}

TEST(ExportTable, AnAddRefThatRunsOutOfMemoryLeavesTheTableAsItWas) {
  // Out of memory at each of addRef's allocations in turn, for a table with
  // entries to grow and then for one with a free entry to reuse.
  Probe::destroyed = 0;
  int made = 0;
  ExportTable t;
  auto exportOnce = [&] {
    std::uint64_t id = 0;
    for (int failAt = 0;; ++failAt) {
      ObjectCore* core = ownedProbe();  // this test's own reference
      ++made;
      failing_allocations::failAfter(failAt);
      bool ranOut = false;
      try {
        id = t.addRef(core);
      } catch (const std::bad_alloc&) {
        ranOut = true;
      }
      failing_allocations::stop();
      releaseCore(core);
      if (!ranOut) break;
      EXPECT_EQ(Probe::destroyed, made) << "a failed addRef kept a reference to the object (allocation " << failAt
                                        << ")";
      EXPECT_EQ(t.size(), 0u) << "a failed addRef left an entry (allocation " << failAt << ")";
    }
    EXPECT_EQ(t.size(), 1u);
    return id;
  };
  std::uint64_t first = exportOnce();
  ASSERT_NE(first, 0u);
  ObjectCore* drop = nullptr;
  failing_allocations::failAfter(0);
  auto released = t.release(first, 1, 0, drop);  // the entry goes without allocating: free_ has room
  failing_allocations::stop();
  ASSERT_EQ(released, ExportTable::ReleaseResult::kOk);
  ASSERT_NE(drop, nullptr);
  releaseCore(drop);
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(exportOnce(), first) << "the free entry is reused";
  t.clear();  // its entries released as what it returns ends
  EXPECT_EQ(Probe::destroyed, made);
}

}  // namespace
}  // namespace myelin::detail
