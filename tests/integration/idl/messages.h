// Message types shared by the integration tests' service and clients: the
// three benchmark structs plus an enum, with the benchmark's contents.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace myelin_test {

enum class Mood : std::uint8_t { kCalm = 0, kHappy = 7 };

struct SmallStruct {
  std::uint32_t val1 = 0;
  std::string str;
};

struct MediumStruct {
  std::int32_t val1 = 0;
  std::uint32_t val2 = 0;
  std::string str1;
  std::string str2;
  std::vector<std::uint32_t> vec1;
  std::vector<std::string> vec2;
  float floatVal = 0;
  double doubleVal = 0;
  std::optional<std::string> optStr;
};

struct LargeStruct {
  std::int32_t sint32Val = 0;
  std::uint32_t uint32Val = 0;
  std::int64_t sint64Val = 0;
  std::uint64_t uint64Val = 0;
  float floatVal = 0;
  double doubleVal = 0;
  bool boolVal = false;
  char charVal = 0;
  std::string stringVal;
  std::vector<std::uint32_t> uint32Vec;
  std::vector<std::uint8_t> byteBuffer;
  std::vector<std::string> stringVec;
  SmallStruct smallStruct;
  MediumStruct mediumStruct;
  Mood mood = Mood::kCalm;
};

/// A type that holds vectors of itself: a tree, or a chain of only children.
struct TreeNode {
  std::int32_t value = 0;
  std::vector<TreeNode> children;
};

/// A chain of `depth` nodes, each the only child of the one above: `depth`
/// levels of nesting.
inline TreeNode makeChain(std::uint32_t depth) {
  TreeNode root;
  TreeNode* at = &root;
  for (std::uint32_t i = 1; i < depth; ++i) {
    at->value = static_cast<std::int32_t>(i);
    at->children.resize(1);
    at = &at->children[0];
  }
  return root;
}

/// How many levels `t` nests (itself included), following first children.
inline std::uint32_t chainDepth(const TreeNode& t) {
  std::uint32_t n = 1;
  for (const TreeNode* at = &t; !at->children.empty(); at = &at->children[0]) ++n;
  return n;
}

inline SmallStruct makeSmall() { return {123, "Hello World"}; }

inline MediumStruct makeMedium() {
  MediumStruct m;
  m.val1 = 123;
  m.val2 = 456;
  m.str1 = "Hello 1 123";
  m.str2 = "Hello 2 456";
  m.vec1 = {345, 546};
  m.vec2 = {"Hello 567", "Hello 789"};
  m.floatVal = 12.3f;
  m.doubleVal = 45.6;
  return m;
}

inline LargeStruct makeLarge() {
  LargeStruct l;
  l.sint32Val = 123;
  l.uint32Val = 345;
  l.sint64Val = 567;
  l.uint64Val = 890;
  l.floatVal = 12.3f;
  l.doubleVal = 45.6;
  l.stringVal = "Hello 1234";
  l.uint32Vec = {234, 567};
  l.byteBuffer.assign(32, 'A');
  l.stringVec = {"Hello 4567", "Hello 8901"};
  l.smallStruct = makeSmall();
  l.mediumStruct = makeMedium();
  return l;
}

}  // namespace myelin_test
