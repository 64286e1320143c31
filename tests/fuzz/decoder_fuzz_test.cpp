// Deterministic mutation fuzzing of Myelin's decoders inside ctest: valid
// encodings are mutated and decoded; every input must either decode (and
// re-encode consistently) or be rejected with InvalidMessageError.
#include "fuzz/fuzz_targets.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace myelin_fuzz {
namespace {

constexpr int kIterations = 20000;
constexpr std::uint32_t kSeed = 0x6d79656c;  // fixed: every run tries the same inputs

class Mutator {
 public:
  explicit Mutator(std::uint32_t seed) : rng_(seed) {}

  std::size_t below(std::size_t n) { return n ? std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_) : 0; }
  std::uint8_t byte() {
    static constexpr std::uint8_t kInteresting[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0x03, 0x40};
    return below(3) == 0 ? kInteresting[below(sizeof kInteresting)] : static_cast<std::uint8_t>(below(256));
  }

  /// Applies one to three random mutations.
  void mutate(Bytes& b) {
    std::size_t rounds = 1 + below(3);
    for (std::size_t i = 0; i < rounds; ++i) mutateOnce(b);
  }

 private:
  void mutateOnce(Bytes& b) {
    switch (below(7)) {
      case 0:  // flip a bit
        if (!b.empty()) b[below(b.size())] ^= static_cast<std::uint8_t>(1u << below(8));
        break;
      case 1:  // overwrite a byte
        if (!b.empty()) b[below(b.size())] = byte();
        break;
      case 2:  // truncate
        b.resize(below(b.size() + 1));
        break;
      case 3: {  // insert random bytes
        std::size_t at = below(b.size() + 1);
        std::size_t n = 1 + below(8);
        Bytes ins(n);
        for (auto& x : ins) x = byte();
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), ins.begin(), ins.end());
        break;
      }
      case 4: {  // duplicate a range somewhere else
        if (b.empty()) break;
        std::size_t from = below(b.size());
        std::size_t len = 1 + below(std::min<std::size_t>(b.size() - from, 32));
        Bytes range(b.begin() + static_cast<std::ptrdiff_t>(from),
                    b.begin() + static_cast<std::ptrdiff_t>(from + len));
        std::size_t at = below(b.size() + 1);
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), range.begin(), range.end());
        break;
      }
      case 5: {  // delete a range
        if (b.empty()) break;
        std::size_t from = below(b.size());
        std::size_t len = 1 + below(std::min<std::size_t>(b.size() - from, 16));
        b.erase(b.begin() + static_cast<std::ptrdiff_t>(from), b.begin() + static_cast<std::ptrdiff_t>(from + len));
        break;
      }
      default:  // append a byte
        b.push_back(byte());
        break;
    }
  }

  std::mt19937 rng_;
};

std::string hex(const Bytes& b) {
  std::string s;
  char buf[4];
  for (std::uint8_t x : b) {
    std::snprintf(buf, sizeof buf, "%02x ", x);
    s += buf;
  }
  return s;
}

enum class Outcome { kDecoded, kRejected, kBug };

/// Decodes one input; reports anything but "decoded" or InvalidMessageError.
Outcome feed(Target t, const Bytes& input, const Context& cx) {
  // A private copy, so that reading past the end is an address-sanitizer error.
  Bytes copy = input;
  const std::uint8_t* p = copy.empty() ? nullptr : copy.data();
  try {
    decodeAs(t, p, copy.size(), cx);
    return Outcome::kDecoded;
  } catch (const myelin::InvalidMessageError&) {
    return Outcome::kRejected;
  } catch (const std::exception& e) {
    ADD_FAILURE() << targetName(t) << ": " << e.what() << "\ninput: " << hex(input);
  } catch (...) {
    ADD_FAILURE() << targetName(t) << ": a non-standard exception\ninput: " << hex(input);
  }
  return Outcome::kBug;
}

TEST(DecoderFuzz, SeedsDecode) {
  Context cx;
  for (int t = 0; t < static_cast<int>(Target::kCount); ++t) {
    auto target = static_cast<Target>(t);
    auto s = seeds(target, cx);
    ASSERT_FALSE(s.empty()) << targetName(target);
    for (const Bytes& b : s) EXPECT_EQ(feed(target, b, cx), Outcome::kDecoded) << targetName(target) << ": " << hex(b);
  }
}

TEST(DecoderFuzz, MutatedInputsDecodeOrAreRejected) {
  Context cx;
  constexpr int kTargets = static_cast<int>(Target::kCount);
  std::vector<std::vector<Bytes>> corpus(kTargets);
  for (int t = 0; t < kTargets; ++t) corpus[t] = seeds(static_cast<Target>(t), cx);

  Mutator m(kSeed);
  int decoded[kTargets] = {};
  int rejected[kTargets] = {};
  int bugs = 0;
  for (int i = 0; i < kIterations && bugs < 5; ++i) {
    int t = static_cast<int>(m.below(kTargets));
    const auto& pool = corpus[t];
    Bytes input = pool[m.below(pool.size())];
    m.mutate(input);
    switch (feed(static_cast<Target>(t), input, cx)) {
      case Outcome::kDecoded:
        ++decoded[t];
        // Inputs that still decode become seeds, so mutations stack up
        // (bounded, to keep the run short).
        if (corpus[t].size() < 64 && input.size() < 4096) corpus[t].push_back(input);
        break;
      case Outcome::kRejected:
        ++rejected[t];
        break;
      case Outcome::kBug:
        ++bugs;
        break;
    }
  }
  EXPECT_EQ(bugs, 0);
  for (int t = 0; t < kTargets; ++t) {
    EXPECT_GT(decoded[t], 0) << targetName(static_cast<Target>(t)) << ": no mutation decoded";
    EXPECT_GT(rejected[t], 0) << targetName(static_cast<Target>(t)) << ": no mutation was rejected";
  }
}

TEST(DecoderFuzz, RandomBytesDecodeOrAreRejected) {
  Context cx;
  Mutator m(kSeed + 1);
  int bugs = 0;
  for (int i = 0; i < 2000 && bugs < 5; ++i) {
    Bytes input(m.below(64));
    for (auto& x : input) x = m.byte();
    for (int t = 0; t < static_cast<int>(Target::kCount); ++t) {
      if (feed(static_cast<Target>(t), input, cx) == Outcome::kBug) ++bugs;
    }
  }
  EXPECT_EQ(bugs, 0);
}

TEST(DecoderFuzz, DeepNestingIsRejectedNotOverflowed) {
  Context cx;
  // Node{kids: [Node{kids: [...]}]} nested far beyond the limit: each level
  // is "tag 00, kids count 01".
  Bytes deep;
  for (int i = 0; i < 100000; ++i) {
    deep.push_back(0x00);
    deep.push_back(0x01);
  }
  EXPECT_EQ(feed(Target::kNode, deep, cx), Outcome::kRejected);
}

}  // namespace
}  // namespace myelin_fuzz
