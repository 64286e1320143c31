// HeldValues, the table of values a connection keeps for its peer
// (docs/async-and-errors.md §2): a value goes once its DROP came and every
// message naming it that the DROP counted was taken in, in whatever order
// they arrive; misuse is reported, never guessed at.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "runtime/values.h"

namespace myelin::detail {
namespace {

using R = HeldValues::Result;

/// A state that counts whether it was destroyed.
struct Probe final : AsyncStateBase {
  explicit Probe(bool* gone) : gone_(gone) {}
  ~Probe() override { *gone_ = true; }
  bool* gone_;
};

TEST(HeldValues, AValueGoesWhenItsDropAndEveryMentionCame) {
  HeldValues t;
  bool gone = false;
  auto* s = new Probe(&gone);
  ASSERT_EQ(t.hold(5, s, typeid(int), 10), R::kOk);
  s->release();  // the table's reference is the last one
  R why;
  AsyncStateBase* a = t.take(5, &typeid(int), why);
  ASSERT_EQ(a, s);
  a->release();
  EXPECT_EQ(t.drop(5, 2), R::kOk) << "one mention is still on its way";
  EXPECT_EQ(t.size(), 1u);
  EXPECT_FALSE(gone);
  a = t.take(5, nullptr, why);  // the second mention (a FETCH) arrives after the DROP
  ASSERT_EQ(a, s);
  EXPECT_EQ(t.size(), 0u);
  EXPECT_FALSE(gone) << "the taker still holds it";
  a->release();
  EXPECT_TRUE(gone);
}

TEST(HeldValues, ADropAfterEveryMentionFreesAtOnce) {
  HeldValues t;
  bool gone = false;
  auto* s = new Probe(&gone);
  ASSERT_EQ(t.hold(7, s, typeid(int), 10), R::kOk);
  s->release();
  EXPECT_EQ(t.drop(7, 0), R::kOk);
  EXPECT_TRUE(gone);
  EXPECT_EQ(t.size(), 0u);
}

TEST(HeldValues, MisuseIsReported) {
  HeldValues t;
  bool gone = false;
  auto* s = new Probe(&gone);
  ASSERT_EQ(t.hold(9, s, typeid(int), 2), R::kOk);
  EXPECT_EQ(t.hold(9, s, typeid(int), 2), R::kDuplicate);
  ASSERT_EQ(t.hold(11, s, typeid(int), 2), R::kOk);
  EXPECT_EQ(t.hold(13, s, typeid(int), 2), R::kFull);
  R why;
  EXPECT_EQ(t.take(9, &typeid(std::string), why), nullptr);
  EXPECT_EQ(why, R::kWrongType);
  EXPECT_EQ(t.take(15, &typeid(int), why), nullptr);
  EXPECT_EQ(why, R::kUnknown);
  EXPECT_EQ(t.drop(15, 0), R::kUnknown);
  AsyncStateBase* a = t.take(9, &typeid(int), why);
  ASSERT_NE(a, nullptr);
  a->release();
  a = t.take(9, &typeid(int), why);
  ASSERT_NE(a, nullptr);
  a->release();
  EXPECT_EQ(t.drop(9, 1), R::kTooFew) << "it was seen named twice";
  EXPECT_EQ(t.drop(9, 3), R::kOk);
  EXPECT_EQ(t.drop(9, 3), R::kDroppedTwice);
  {
    HeldValues::Taken taken = t.close();
    EXPECT_EQ(taken.size(), 2u) << "9 (one mention still due) and 11";
    EXPECT_EQ(t.size(), 0u);
    HeldValues::Taken moved = std::move(taken);
    EXPECT_TRUE(taken.empty());
    EXPECT_EQ(moved.size(), 2u);
    // `moved` releases both references as it ends, `taken` nothing.
  }
  EXPECT_EQ(t.hold(17, s, typeid(int), 2), R::kClosed) << "a closed table keeps nothing";
  EXPECT_FALSE(gone) << "this test's own reference is left";
  s->release();
  EXPECT_TRUE(gone);
}

}  // namespace
}  // namespace myelin::detail
