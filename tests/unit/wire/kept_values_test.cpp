// Kept values (kept_values.h): which types are kept, the pools' bounds, and
// the property that makes keeping safe: decoding into any value of a kept
// type leaves exactly what decoding into a fresh one leaves; and the result
// a service method returns by copy, kept per thread (result_slot.h).
#include "myelin/detail/kept_values.h"

#include "myelin/detail/generated_support.h"

#include "codec_test_util.h"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace kept_test {
struct Item {
  std::uint32_t id = 0;
  std::string name;
  std::vector<std::uint32_t> numbers;
  std::optional<std::string> note;
  bool operator==(const Item&) const = default;
};
struct Bag {
  std::vector<Item> items;
  std::map<std::string, std::int32_t> counts;
  std::set<std::uint32_t> ids;
  std::optional<Item> best;
  std::vector<std::uint8_t> bytes;
  std::vector<std::string> words;
  bool operator==(const Bag&) const = default;
};
/// A struct whose newer side added `c`, with a default of its own.
struct Versioned {
  std::uint32_t a = 0;
  std::string b;
  std::uint32_t c = 7;
};
struct Numbers {
  std::int32_t x = 0;
  double y = 0;
};
struct Shared {
  std::shared_ptr<Item> item;
};
struct Node {
  std::uint32_t v = 0;
  std::vector<Node> children;
};
}  // namespace kept_test

using namespace kept_test;
template <>
struct myelin::detail::StructTraits<Item> {
  static constexpr std::string_view kName = "kept_test::Item";
  static constexpr auto kFields = std::make_tuple(field("id", &Item::id), field("name", &Item::name),
                                                  field("numbers", &Item::numbers), field("note", &Item::note));
};
template <>
struct myelin::detail::StructTraits<Bag> {
  static constexpr std::string_view kName = "kept_test::Bag";
  static constexpr auto kFields =
      std::make_tuple(field("items", &Bag::items), field("counts", &Bag::counts), field("ids", &Bag::ids),
                      field("best", &Bag::best), field("bytes", &Bag::bytes), field("words", &Bag::words));
};
template <>
struct myelin::detail::StructTraits<Versioned> {
  static constexpr std::string_view kName = "kept_test::Versioned";
  static constexpr auto kFields =
      std::make_tuple(field("a", &Versioned::a), field("b", &Versioned::b), field("c", &Versioned::c));
};
template <>
struct myelin::detail::StructTraits<Numbers> {
  static constexpr std::string_view kName = "kept_test::Numbers";
  static constexpr auto kFields = std::make_tuple(field("x", &Numbers::x), field("y", &Numbers::y));
};
template <>
struct myelin::detail::StructTraits<Shared> {
  static constexpr std::string_view kName = "kept_test::Shared";
  static constexpr auto kFields = std::make_tuple(field("item", &Shared::item));
};
template <>
struct myelin::detail::StructTraits<Node> {
  static constexpr std::string_view kName = "kept_test::Node";
  static constexpr auto kFields = std::make_tuple(field("v", &Node::v), field("children", &Node::children));
};

namespace myelin::detail {
namespace {
using test::decodeInto;
using test::enc;

/// Identity plans for Item (0), Bag (1) and Shared (2); Versioned (3) as
/// an older peer sends it, without `c`.
struct Plans {
  std::uint16_t item[4] = {0, 1, 2, 3};
  std::uint16_t bag[6] = {0, 1, 2, 3, 4, 5};
  std::uint16_t shared[1] = {0};
  std::uint16_t versioned[3] = {0, 1, 2};
  FieldPlan send[4];
  FieldPlan recv[4];
  CodecCtx ctx;
  Plans() {
    StructIndex<Item>::value = 0;
    StructIndex<Bag>::value = 1;
    StructIndex<Shared>::value = 2;
    StructIndex<Versioned>::value = 3;
    send[0] = recv[0] = {item, 4};
    send[1] = recv[1] = {bag, 6};
    send[2] = recv[2] = {shared, 1};
    send[3] = recv[3] = {versioned, 2};
    ctx = {send, recv};
  }
};

/// Takes every value a test left in T's pool, so tests do not see each other's.
template <class T>
void drain() {
  T v;
  while (KeptValues<T>::instance().take(v)) {
  }
}

std::vector<Bag> sampleBags() {
  Bag full;
  full.items = {{1, "one", {1, 2, 3}, "n"}, {2, std::string(40, 't'), {}, std::nullopt}, {}};
  full.counts = {{"a", 1}, {"bb", -2}};
  full.ids = {5, 6};
  full.best = Item{9, "best", {9}, "b"};
  full.bytes = {1, 2, 3};
  full.words = {"w", std::string(30, 'w')};
  Bag other;
  other.items = {{7, "seven", {7}, std::nullopt}};
  other.counts = {{"z", 26}};
  other.best = Item{};
  other.words = {"", "x", "y", "z"};
  Bag longer;
  for (std::uint32_t i = 0; i < 20; ++i) longer.items.push_back({i, std::string(i, 'l'), {i, i}, i % 3 ? "" : "k"});
  longer.bytes = std::vector<std::uint8_t>(100, 8);
  return {full, other, longer, Bag{}};
}

TEST(KeptValues, TypesThatOwnHeapStorageAndDecodeOverAnyValueAreKept) {
  EXPECT_TRUE(kKeepable<std::string>);
  EXPECT_TRUE(kKeepable<std::vector<std::uint32_t>>);
  EXPECT_TRUE(kKeepable<std::vector<std::string>>);
  EXPECT_TRUE((kKeepable<std::map<std::string, std::int32_t>>));
  EXPECT_TRUE(kKeepable<std::set<std::uint32_t>>);
  EXPECT_TRUE(kKeepable<Item>);
  EXPECT_TRUE(kKeepable<Bag>);
  EXPECT_TRUE(kKeepable<std::vector<Bag>>);
  EXPECT_TRUE(kKeepable<std::optional<Item>>);
  // Nothing on the heap to reuse.
  EXPECT_FALSE(kKeepable<std::uint32_t>);
  EXPECT_FALSE(kKeepable<std::optional<double>>);
  EXPECT_FALSE((kKeepable<std::array<std::int32_t, 4>>));
  EXPECT_FALSE(kKeepable<Numbers>);
  // Shared or user-defined storage is never kept; nor is a recursive struct.
  EXPECT_FALSE(kKeepable<std::shared_ptr<Item>>);
  EXPECT_FALSE(kKeepable<std::vector<std::shared_ptr<Item>>>);
  EXPECT_FALSE(kKeepable<Shared>);
  EXPECT_FALSE(kKeepable<Node>);
}

TEST(KeptValues, OnlyArgumentsTakenByConstReferenceStayInTheThreadsSlot) {
  using Args = std::tuple<std::vector<Item>, std::uint32_t, std::shared_ptr<Item>>;
  using Slot = ArgSlot<Args, std::tuple<const std::vector<Item>&, std::uint32_t, std::shared_ptr<Item>>>;
  EXPECT_TRUE(Slot::kUsable);
  EXPECT_TRUE(Slot::kKeeps<0>);
  EXPECT_FALSE(Slot::kKeeps<1> || Slot::kResets<1>) << "a number is simply overwritten";
  EXPECT_TRUE(Slot::kResets<2>);
  // Moved into the method: nothing would be left to keep.
  EXPECT_FALSE((ArgSlot<Args, std::tuple<std::vector<Item>, std::uint32_t, std::shared_ptr<Item>>>::kUsable));
  EXPECT_FALSE((ArgSlot<std::tuple<Numbers>, std::tuple<const Numbers&>>::kUsable));

  const std::size_t totalBefore = keptBytesTotal().load();
  Args* a = Slot::claim();
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(Slot::claim(), nullptr) << "a call of the same method further up this thread holds it";
  std::get<0>(*a).assign(3, Item{1, std::string(30, 'g'), {1}, std::nullopt});
  std::get<1>(*a) = 7;
  std::get<2>(*a) = std::make_shared<Item>();
  const Item* storage = std::get<0>(*a).data();
  std::weak_ptr<Item> shared = std::get<2>(*a);
  Slot::release(*a);
  EXPECT_TRUE(shared.expired()) << "a shared pointer does not outlive its call";
  EXPECT_GT(Slot::heldBytes(), 0u);
  EXPECT_EQ(keptBytesTotal().load(), totalBefore + Slot::heldBytes());

  Args* again = Slot::claim();
  ASSERT_EQ(again, a);
  EXPECT_EQ(std::get<0>(*again).data(), storage) << "the next call decodes into the last one's storage";
  std::thread([&] {
    Args* other = Slot::claim();
    ASSERT_NE(other, nullptr);
    EXPECT_NE(other, a) << "each thread has its own";
    EXPECT_TRUE(std::get<0>(*other).empty());
    std::get<0>(*other).assign(2, Item{2, std::string(40, 'o'), {}, std::nullopt});
    Slot::release(*other);
  }).join();
  EXPECT_EQ(keptBytesTotal().load(), totalBefore + Slot::heldBytes()) << "the ended thread's slot was freed";

  // Above the bound for one call's arguments: freed, as fresh arguments are.
  std::get<0>(*again).assign(kKeptValueBytes / sizeof(Item) + 1, Item{});
  Slot::release(*again);
  EXPECT_EQ(Slot::heldBytes(), 0u);
  EXPECT_EQ(std::get<0>(*a).capacity(), 0u);
  EXPECT_EQ(keptBytesTotal().load(), totalBefore);
}

TEST(KeptValues, APoolNobodyTakesFromKeepsNothing) {
  // A service that returns values of a type it never decodes from the pool
  // (its arguments use their slots) would fill the pool for nothing.
  using T = std::vector<std::array<std::string, 2>>;  // a type no other test decodes
  T v(4, {std::string(64, 'u'), "u"});
  KeptValues<T>::keep(v);
  EXPECT_EQ(KeptValues<T>::instance().size(), 0u);
  EXPECT_EQ(v.size(), 4u) << "left to its owner";
  drain<T>();  // a decode of this type looked here
  KeptValues<T>::keep(v);
  EXPECT_EQ(KeptValues<T>::instance().size(), 1u);
  drain<T>();
}

TEST(KeptValues, DecodingIntoAnyValueLeavesWhatAFreshDecodeLeaves) {
  Plans p;
  std::vector<Bag> bags = sampleBags();
  for (const Bag& message : bags) {
    ByteBuffer wire = enc(message, p.ctx);
    Bag fresh;
    decodeInto(wire, fresh, p.ctx);
    ASSERT_EQ(fresh, message);
    for (const Bag& before : bags) {
      Bag target = before;
      decodeInto(wire, target, p.ctx);
      EXPECT_EQ(target, message);
    }
  }
}

TEST(KeptValues, AbsentOptionalsAndSharedPointersAreResetInTheTarget) {
  Plans p;
  Shared target{std::make_shared<Item>(Item{1, "old", {}, "n"})};
  decodeInto(enc(Shared{}, p.ctx), target, p.ctx);
  EXPECT_EQ(target.item, nullptr);
  std::optional<Item> opt = Item{2, "old", {2}, "n"};
  decodeInto(enc(std::optional<Item>{}, p.ctx), opt, p.ctx);
  EXPECT_FALSE(opt.has_value());
}

TEST(KeptValues, FieldsThePeerLacksTakeTheirDeclaredDefaults) {
  Plans p;
  // The older peer sends a and b only; a kept value still holds its c.
  ByteBuffer wire = enc(Versioned{3, "three", 99}, p.ctx);
  Versioned target{5, "five", 55};
  decodeInto(wire, target, p.ctx);
  EXPECT_EQ(target.a, 3u);
  EXPECT_EQ(target.b, "three");
  EXPECT_EQ(target.c, 7u) << "the default member initializer, as in a fresh decode";
}

TEST(KeptValues, ATakenValueIsTheStorageThatWasGiven) {
  drain<std::vector<Item>>();
  auto& pool = KeptValues<std::vector<Item>>::instance();
  std::vector<Item> v(10, Item{1, std::string(50, 'n'), {1, 2}, std::nullopt});
  const Item* items = v.data();
  const char* name = v[3].name.data();
  std::size_t before = keptBytesTotal().load();
  pool.keep(v);
  EXPECT_EQ(pool.size(), 1u);
  EXPECT_TRUE(v.empty()) << "moved into the pool";
  EXPECT_GT(keptBytesTotal().load(), before);
  std::vector<Item> taken;
  ASSERT_TRUE(pool.take(taken));
  EXPECT_EQ(taken.data(), items);
  EXPECT_EQ(taken[3].name.data(), name);
  EXPECT_EQ(keptBytesTotal().load(), before);
  EXPECT_FALSE(pool.take(taken)) << "the pool is empty again";
  EXPECT_EQ(taken.size(), 10u) << "a failed take leaves the target alone";
}

TEST(KeptValues, ValuesWithoutHeapStorageOrAboveTheLimitAreNotKept) {
  drain<std::string>();
  drain<std::vector<std::uint8_t>>();
  std::string small = "short";  // in the string's own buffer
  KeptValues<std::string>::keep(small);
  EXPECT_EQ(KeptValues<std::string>::instance().size(), 0u);
  EXPECT_EQ(small, "short") << "a value not kept stays with its owner";
  std::vector<std::uint8_t> big(kKeptValueBytes + 1, 1);
  KeptValues<std::vector<std::uint8_t>>::keep(big);
  EXPECT_EQ(KeptValues<std::vector<std::uint8_t>>::instance().size(), 0u);
  EXPECT_EQ(big.size(), kKeptValueBytes + 1);
}

TEST(KeptValues, ATypeKeepsAtMostItsShare) {
  drain<std::vector<std::uint32_t>>();
  auto& pool = KeptValues<std::vector<std::uint32_t>>::instance();
  std::size_t before = keptBytesTotal().load();
  for (std::size_t i = 0; i < kKeptPerType + 10; ++i) {
    std::vector<std::uint32_t> v(100, 1);
    pool.keep(v);
  }
  EXPECT_EQ(pool.size(), kKeptPerType);
  EXPECT_EQ(keptBytesTotal().load() - before, kKeptPerType * (100 * 4 + kBlockOverhead));
  drain<std::vector<std::uint32_t>>();
  EXPECT_EQ(keptBytesTotal().load(), before);
}

TEST(KeptValues, AllPoolsTogetherStayWithinTheTotal) {
  drain<std::vector<std::uint16_t>>();
  auto& pool = KeptValues<std::vector<std::uint16_t>>::instance();
  const std::size_t each = 100 * 1024;  // bytes of one value's array
  std::size_t kept = 0;
  for (std::size_t i = 0; i < kKeptBytesTotal / each + 10; ++i) {
    std::vector<std::uint16_t> v(each / 2, 2);
    pool.keep(v);
    EXPECT_LE(keptBytesTotal().load(), kKeptBytesTotal);
    if (v.empty()) ++kept;
  }
  EXPECT_GT(kept, 0u);
  EXPECT_LT(kept, kKeptBytesTotal / each + 10) << "the total refused the rest";
  EXPECT_EQ(pool.size(), kept);
  drain<std::vector<std::uint16_t>>();
}

// ---------------------------------------------------------------------------
// Results returned by copy (result_slot.h). keepResult is what the dispatch
// thunk does once a method's ready result has been sent. Each test runs on a
// thread of its own: the slot is per thread.

template <class F>
void onFreshThread(F&& f) {
  std::thread t(std::forward<F>(f));
  t.join();
}

Item longItem(std::uint32_t id, char c) { return {id, std::string(40, c), {id, id + 1, id + 2}, std::nullopt}; }

TEST(ResultSlot, ACopiedResultCopiesOverTheStorageOfTheLastOne) {
  onFreshThread([] {
    using L = std::vector<Item>;
    ResultSlot<L>::enable();  // as the thunk does once it sent a result of L
    // Above kRecycledValueBytes: kept in the slot, not with its state.
    const L first(100, longItem(1, 'a'));
    L second(100, longItem(2, 'b'));
    second[3].note = std::string(50, 'n');
    const Item* array = nullptr;
    const char* name = nullptr;
    {
      Async<L> a(first);  // nothing kept yet: a plain copy
      ASSERT_EQ(a.value(), first);
      array = a.value().data();
      name = a.value()[5].name.data();
      keepResult<L>(*a.state());
    }
    EXPECT_GT(ResultSlot<L>::heldBytes(), 0u);
    {
      Async<L> b(std::as_const(second));
      EXPECT_EQ(b.value(), second) << "the copy is the new value, not a mix with the kept one";
      EXPECT_EQ(b.value().data(), array) << "the list's array was reused";
      EXPECT_EQ(b.value()[5].name.data(), name) << "and so were its strings";
      keepResult<L>(*b.state());
    }
    // A shorter copy, then a longer one: copy-assignment shrinks and grows.
    const L shorter(60, longItem(3, 'c'));
    {
      Async<L> c(shorter);
      EXPECT_EQ(c.value(), shorter);
      keepResult<L>(*c.state());
    }
    {
      Async<L> d(first);
      EXPECT_EQ(d.value(), first);
    }
  });
}

TEST(ResultSlot, AResultIsKeptOnlyWhenItsTypeIsCopiedOnTheThreadAndNothingElseHoldsIt) {
  onFreshThread([] {
    using V = std::vector<std::string>;
    using Never = std::vector<std::vector<std::uint8_t>>;  // a type no thunk enabled
    {
      const Never n{{1, 2, 3}};
      Async<Never> copied(n);
      EXPECT_EQ(copied.value(), n);
    }
    EXPECT_EQ(ResultSlot<Never>::open(), nullptr) << "a copy of a type no thunk keeps makes no slot";
    ResultSlot<V>::enable();
    ResultSlot<std::string>::enable();
    const std::size_t totalBefore = keptBytesTotal().load();
    {
      Async<V> built(V{std::string(5000, 'x')});  // a fresh value (moved in): nobody copies V here
      keepResult<V>(*built.state());
    }
    EXPECT_EQ(ResultSlot<V>::heldBytes(), 0u) << "a service that builds its results keeps none";
    EXPECT_EQ(ResultSlot<V>::open(), nullptr) << "no copy of V looked for a kept value on this thread";
    EXPECT_EQ(keptBytesTotal().load(), totalBefore);

    const V words{std::string(5000, 'y'), std::string(60, 'z')};
    Async<V> copied(words);
    {
      Async<V> shared = copied;  // the method kept a handle: its value is not ours to take
      keepResult<V>(*copied.state());
      EXPECT_EQ(ResultSlot<V>::heldBytes(), 0u);
      EXPECT_EQ(shared.value(), words);
    }
    keepResult<V>(*copied.state());
    EXPECT_GT(ResultSlot<V>::heldBytes(), 0u) << "once the copy is the only handle";
    EXPECT_EQ(keptBytesTotal().load(), totalBefore + ResultSlot<V>::heldBytes());

    Async<V> again(words);  // takes the kept value: the slot is open again
    ASSERT_NE(ResultSlot<V>::open(), nullptr);
    Async<V> failed;  // a result that ended in an error holds no value
    failed.setError("no");
    keepResult<V>(*failed.state());
    EXPECT_NE(ResultSlot<V>::open(), nullptr) << "nothing was kept from an error";

    const std::string shortString = "short";  // within the string's own buffer: nothing to reuse
    {
      Async<std::string> s(shortString);
      keepResult<std::string>(*s.state());
    }
    EXPECT_NE(ResultSlot<std::string>::open(), nullptr) << "a value without heap storage is not kept";
    EXPECT_EQ(ResultSlot<std::string>::heldBytes(), 0u);
  });
}

TEST(ResultSlot, AValueAboveTheLimitIsFreedAndAnEndedThreadGivesItsBytesBack) {
  using B = std::vector<std::uint8_t>;
  const std::size_t totalBefore = keptBytesTotal().load();
  onFreshThread([&] {
    ResultSlot<B>::enable();
    const B small(5000, 1);  // above kRecycledValueBytes: the slot keeps it
    {
      Async<B> a(small);
      keepResult<B>(*a.state());
    }
    const std::size_t held = ResultSlot<B>::heldBytes();
    EXPECT_EQ(held, 5000 + kBlockOverhead);
    EXPECT_EQ(keptBytesTotal().load(), totalBefore + held);
    const B big(kKeptValueBytes + 1, 2);
    {
      Async<B> b(big);  // copies over the kept 5000 bytes: grows them
      EXPECT_EQ(b.value(), big);
      keepResult<B>(*b.state());
    }
    EXPECT_EQ(ResultSlot<B>::heldBytes(), 0u) << "over kKeptValueBytes: freed with its state";
    EXPECT_EQ(keptBytesTotal().load(), totalBefore);
    {
      Async<B> c(small);
      EXPECT_EQ(c.value(), small);
      keepResult<B>(*c.state());
    }
    EXPECT_EQ(keptBytesTotal().load(), totalBefore + held);
  });
  EXPECT_EQ(keptBytesTotal().load(), totalBefore) << "the ended thread's slot was freed";
}

TEST(RecycledResultStates, ASmallResultIsKeptWithItsStateAndTheNextOneIsCopiedOrMovedOverIt) {
  onFreshThread([] {
    using L = std::vector<Item>;
    const L first(3, longItem(1, 'a'));
    L second(2, longItem(2, 'b'));
    second[1].note = std::string(50, 'n');
    const void* st = nullptr;
    const Item* array = nullptr;
    {
      Async<L> a(first);  // nothing recycled yet: a new state
      st = a.state();
      array = a.value().data();
      keepResult<L>(*a.state());  // sent at once: its state is recycled when it ends
    }
    {
      Async<L> b(std::as_const(second));
      EXPECT_EQ(b.state(), st) << "the last result's state";
      EXPECT_EQ(b.value(), second) << "the copy is the new value, not a mix with the kept one";
      EXPECT_EQ(b.value().data(), array) << "the list's array was reused";
      EXPECT_TRUE(b.isReady());
      keepResult<L>(*b.state());
    }
    {
      Async<L> c(L{longItem(4, 'd')});  // moved over the kept value
      EXPECT_EQ(c.state(), st);
      EXPECT_EQ(c.value(), L{longItem(4, 'd')});
      Async<L> shared = c;  // another handle: released later, still recycled then
      keepResult<L>(*c.state());
    }
    {
      Async<L> pending;  // completed later: made new, not from the list
      EXPECT_NE(pending.state(), st);
      EXPECT_FALSE(pending.isReady());
      Async<L> d(first);
      EXPECT_EQ(d.state(), st);
      EXPECT_EQ(d.value(), first);
    }  // a recycled state goes back to the list when it ends, as it came
    Async<L> e(first);
    EXPECT_EQ(e.state(), st);
    EXPECT_EQ(e.value(), first);
  });
}

// A call's reply state as the runtime leads it (sendCall, the reader):
// made, its value decoded from the reply, completed; the handle ends.
template <class T>
const void* replyRoundTrip(const T& sent, const CodecCtx& ctx, const T** valueAt = nullptr) {
  Async<T> a(makeReplyState<T>(), FreshState{});
  const ByteBuffer bytes = test::enc(sent, ctx);
  WireReader r(bytes.data(), bytes.size());
  r.setBudget(std::size_t{1} << 30);
  a.state()->decodeValue(r, ctx);
  r.finish();
  EXPECT_TRUE(a.state()->completeWithValue());
  EXPECT_EQ(a.value(), sent);
  if (valueAt) *valueAt = &a.value();
  return a.state();
}

TEST(RecycledReplyStates, TheNextCallOfATypeOnTheThreadDecodesOverTheLastOnesValue) {
  Plans p;
  using T = std::vector<Item>;
  drain<T>();
  const std::size_t totalBefore = keptBytesTotal().load();
  onFreshThread([&] {
    const T first = {{1, std::string(40, 'a'), {1, 2, 3}, "note"}, {2, "b", {}, std::nullopt}};
    const T* firstValue = nullptr;
    const void* st = replyRoundTrip(first, p.ctx, &firstValue);
    EXPECT_GT(keptBytesTotal().load(), totalBefore) << "the kept value's bytes are counted";
    // Shorter, without the note, the long string gone: nothing of the last
    // value may show.
    const T second = {{3, "c", {4}, std::nullopt}};
    const T* secondValue = nullptr;
    EXPECT_EQ(replyRoundTrip(second, p.ctx, &secondValue), st) << "the same state, recycled";
    EXPECT_EQ(secondValue, firstValue);
    EXPECT_EQ(replyRoundTrip(T{}, p.ctx), st);
    EXPECT_EQ(replyRoundTrip(first, p.ctx), st);

    // Two in flight at once: the second is a state of its own.
    Async<T> held(makeReplyState<T>(), FreshState{});
    EXPECT_EQ(held.state(), st);
    EXPECT_NE(replyRoundTrip(second, p.ctx), st);
  });
  drain<T>();  // their values went to the type's pool
  EXPECT_EQ(keptBytesTotal().load(), totalBefore) << "the ended thread's states were freed";
}

TEST(RecycledReplyStates, AStateThatEndedInAnErrorOrPendingIsNotKept) {
  Plans p;
  using T = std::vector<Item>;
  onFreshThread([&] {
    const void* st = replyRoundTrip(T{{1, std::string(40, 'a'), {}, std::nullopt}}, p.ctx);
    {
      Async<T> a(makeReplyState<T>(), FreshState{});
      EXPECT_EQ(a.state(), st);
      EXPECT_TRUE(a.state()->completeWithError(AsyncError::kConnectionClosed, "gone"));
    }
    {
      Async<T> b(makeReplyState<T>(), FreshState{});
      EXPECT_FALSE(b.isReady()) << "a new state: the error did not stay";
      EXPECT_EQ(b.state()->errorMessage(), "");
    }  // ends pending (a send that threw): deleted, not kept
    Async<T> c(makeReplyState<T>(), FreshState{});
    EXPECT_FALSE(c.isReady());
    EXPECT_EQ(c.error(), AsyncError::kNone);
  });
}

TEST(RecycledReplyStates, KeptBytesAreBoundedAndGivenBackWhenTheThreadEnds) {
  Plans p;
  using T = std::vector<std::string>;
  drain<T>();
  const std::size_t totalBefore = keptBytesTotal().load();
  onFreshThread([&] {
    replyRoundTrip(T{std::string(100, 'x')}, p.ctx);
    const std::size_t one = keptBytesTotal().load() - totalBefore;
    EXPECT_GT(one, 100u);
    // Above kKeptValueBytes: deleted when it ends, nothing more counted.
    replyRoundTrip(T(kKeptValueBytes / 32 + 1, std::string(40, 'y')), p.ctx);
    EXPECT_EQ(keptBytesTotal().load(), totalBefore) << "the big value was not kept, nor its count";
    const std::size_t small = sizeof(std::string) + kBlockOverhead;
    replyRoundTrip(T{"z"}, p.ctx);
    EXPECT_EQ(keptBytesTotal().load() - totalBefore, small);
    // Above kRecycledValueBytes: the state is deleted, its value goes to
    // the type's pool (counted there) for a later decode to take.
    const T mid(kRecycledValueBytes / 32 + 1, "");
    replyRoundTrip(mid, p.ctx);
    EXPECT_EQ(KeptValues<T>::instance().size(), 1u);
    T taken;
    EXPECT_TRUE(KeptValues<T>::instance().take(taken));
    EXPECT_GE(taken.capacity(), mid.size()) << "the storage of the reply";
    EXPECT_EQ(keptBytesTotal().load(), totalBefore);
  });
  drain<T>();  // their values went to the type's pool
  EXPECT_EQ(keptBytesTotal().load(), totalBefore) << "the ended thread's states were freed";
}

TEST(RecycledResultStates, ASmallCopyOverTheSlotsValueLeavesNothingCountedThere) {
  // A map's copy frees the nodes it does not need (a vector or string
  // keeps its capacity).
  using V = std::map<std::uint32_t, std::string>;
  const std::size_t totalBefore = keptBytesTotal().load();
  onFreshThread([&] {
    ResultSlot<V>::enable();
    V big;  // above kRecycledValueBytes: the slot keeps it
    for (std::uint32_t i = 0; i < 100; ++i) big[i] = std::string(40, 'b');
    {
      Async<V> a(big);
      keepResult<V>(*a.state());
    }
    EXPECT_GT(ResultSlot<V>::heldBytes(), kRecycledValueBytes);
    const V small{{1, std::string(100, 's')}};
    {
      Async<V> b(small);  // copied over the slot's value, which shrinks below the bound
      EXPECT_EQ(b.value(), small);
      keepResult<V>(*b.state());
    }
    EXPECT_EQ(ResultSlot<V>::heldBytes(), 0u) << "the value is its recycled state's now";
  });
  drain<V>();
  EXPECT_EQ(keptBytesTotal().load(), totalBefore);
}

TEST(RecycledReplyStates, AThreadThatOnlyReleasesStatesKeepsNone) {
  Plans p;
  using T = std::vector<Item>;
  drain<T>();
  onFreshThread([&] {
    replyRoundTrip(T{longItem(1, 'a')}, p.ctx);  // this thread makes calls: it keeps their states
    Async<T> a(makeReplyState<T>(), FreshState{});
    const ByteBuffer bytes = test::enc(T{longItem(2, 'b')}, p.ctx);
    WireReader r(bytes.data(), bytes.size());
    r.setBudget(std::size_t{1} << 30);
    a.state()->decodeValue(r, p.ctx);
    EXPECT_TRUE(a.state()->completeWithValue());
    // Released last on a thread that makes no Async of T (as the timer
    // thread drops its references): deleted there, its value to the pool.
    std::thread([moved = std::move(a)]() mutable { Async<T> last = std::move(moved); }).join();
    EXPECT_EQ(KeptValues<T>::instance().size(), 1u);
  });
  drain<T>();
}

}  // namespace
}  // namespace myelin::detail

namespace {
struct PerThreadProbe {
  int value = 7;
};
using ProbeSlot = myelin::detail::PerThread<PerThreadProbe>;
// What a thread-local destructor that ran after the thread's object was
// gone found (set by the helper thread below).
std::atomic<bool> lateLookDone{false};
std::atomic<bool> lateGetWasNull{false};
std::atomic<bool> lateIfMadeWasNull{false};
struct LateLook {
  bool armed = false;
  ~LateLook() {
    if (!armed) return;
    lateGetWasNull = ProbeSlot::get() == nullptr;
    lateIfMadeWasNull = ProbeSlot::ifMade() == nullptr;
    lateLookDone = true;
  }
};
}  // namespace

TEST(KeptValues, APerThreadObjectIsMadeOnceAndNotReachedAfterItsThreadDestroyedIt) {
  PerThreadProbe* mainObject = ProbeSlot::get();
  ASSERT_NE(mainObject, nullptr);
  EXPECT_EQ(ProbeSlot::get(), mainObject) << "the same object on each get()";
  EXPECT_EQ(ProbeSlot::ifMade(), mainObject);
  mainObject->value = 1;

  lateLookDone = false;
  lateGetWasNull = false;
  lateIfMadeWasNull = false;
  bool madeBeforeGet = true;
  bool sameAsMain = true;
  int freshValue = 0;
  std::thread([&] {
    // Made before the object, so destroyed after it: its destructor looks.
    static thread_local LateLook late;
    late.armed = true;
    madeBeforeGet = ProbeSlot::ifMade() != nullptr;
    PerThreadProbe* threadObject = ProbeSlot::get();
    sameAsMain = threadObject == mainObject;
    freshValue = threadObject ? threadObject->value : 0;
  }).join();
  EXPECT_FALSE(madeBeforeGet) << "ifMade() makes nothing";
  EXPECT_FALSE(sameAsMain) << "one object per thread";
  EXPECT_EQ(freshValue, 7);
  ASSERT_TRUE(lateLookDone.load());
  EXPECT_TRUE(lateGetWasNull.load()) << "get() after the thread's object was destroyed";
  EXPECT_TRUE(lateIfMadeWasNull.load());
  EXPECT_EQ(ProbeSlot::get(), mainObject);
  EXPECT_EQ(mainObject->value, 1);
}
