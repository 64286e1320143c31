// Contents of the benchmark messages (BENCHMARKS.md and the published
// reports), equality for verifying replies, and the deterministic user
// profile and chunk checksum both benchmark services compute.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench_api.h"

namespace bench {

inline SmallMessage makeSmall() { return {123, "Hello World"}; }

inline MediumMessage makeMedium() {
  MediumMessage m;
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

inline LargeMessage makeLarge() {
  LargeMessage l;
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
  l.smallMsg = makeSmall();
  l.mediumMsg = makeMedium();
  return l;
}

inline bool operator==(const SmallMessage& a, const SmallMessage& b) { return a.val1 == b.val1 && a.str == b.str; }
inline bool operator==(const MediumMessage& a, const MediumMessage& b) {
  return a.val1 == b.val1 && a.val2 == b.val2 && a.str1 == b.str1 && a.str2 == b.str2 && a.vec1 == b.vec1 &&
         a.vec2 == b.vec2 && a.floatVal == b.floatVal && a.doubleVal == b.doubleVal && a.optStr == b.optStr;
}
inline bool operator==(const LargeMessage& a, const LargeMessage& b) {
  return a.sint32Val == b.sint32Val && a.uint32Val == b.uint32Val && a.sint64Val == b.sint64Val &&
         a.uint64Val == b.uint64Val && a.floatVal == b.floatVal && a.doubleVal == b.doubleVal &&
         a.boolVal == b.boolVal && a.charVal == b.charVal && a.stringVal == b.stringVal && a.uint32Vec == b.uint32Vec &&
         a.byteBuffer == b.byteBuffer && a.stringVec == b.stringVec && a.smallMsg == b.smallMsg &&
         a.mediumMsg == b.mediumMsg;
}
inline bool operator==(const UserProfile& a, const UserProfile& b) {
  return a.userId == b.userId && a.name == b.name && a.email == b.email && a.age == b.age &&
         a.interests == b.interests && a.bio == b.bio && a.createdAt == b.createdAt;
}

/// The profile both services return for a user id.
inline UserProfile makeProfile(std::uint64_t id) {
  UserProfile p;
  p.userId = id;
  p.name = "User " + std::to_string(id);
  p.email = "user" + std::to_string(id) + "@example.com";
  p.age = static_cast<std::uint32_t>(18 + id % 60);
  static const char* kInterests[] = {"music", "chess", "hiking", "cooking", "astronomy", "cycling", "poetry"};
  for (std::uint64_t i = 0; i < 5; ++i) p.interests.emplace_back(kInterests[(id + i) % 7]);
  p.bio = "Profile " + std::to_string(id) + ": " + std::string(180, static_cast<char>('a' + id % 26));
  p.createdAt = 1700000000 + static_cast<std::int64_t>(id);
  return p;
}

/// Chunk payload: 256 bytes derived from (doc, index).
inline std::vector<std::uint8_t> makeChunkData(std::uint32_t doc, std::uint32_t index) {
  std::vector<std::uint8_t> d(256);
  for (std::size_t i = 0; i < d.size(); ++i) d[i] = static_cast<std::uint8_t>((doc * 31 + index * 7 + i) & 0xff);
  return d;
}

inline std::uint32_t checksum(const std::vector<std::uint8_t>& data) {
  std::uint32_t sum = 0;
  for (auto b : data) sum += b;
  return sum;
}

}  // namespace bench
