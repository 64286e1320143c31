// Contents of the gRPC benchmark messages, shared by grpc_service and
// grpc_client: the same values as bench/myelin/bench_data.h on the Myelin
// side, plus the user profiles and document chunks both sides derive.
#pragma once

#include <cstdint>
#include <string>

#include "benchmark.pb.h"

namespace myelin::bench {

// Lists hold this many copies of one message.
inline constexpr int kListSize = 100;
// Bytes in one document chunk.
inline constexpr std::size_t kChunkBytes = 256;

inline SmallMessage makeSmall() {
  SmallMessage m;
  m.set_value(123);
  m.set_str("Hello World");
  return m;
}

inline MediumMessage makeMedium() {
  MediumMessage m;
  m.set_val1(123);
  m.set_val2(456);
  m.set_str1("Hello 1 123");
  m.set_str2("Hello 2 456");
  m.add_vec1(345);
  m.add_vec1(546);
  m.add_vec2("Hello 567");
  m.add_vec2("Hello 789");
  m.set_float_val(12.3f);
  m.set_double_val(45.6);
  return m;
}

inline LargeMessage makeLarge() {
  LargeMessage m;
  m.set_sint32_val(123);
  m.set_uint32_val(345);
  m.set_sint64_val(567);
  m.set_uint64_val(890);
  m.set_float_val(12.3f);
  m.set_double_val(45.6);
  m.set_string_val("Hello 1234");
  m.add_uint32_list(234);
  m.add_uint32_list(567);
  m.set_byte_buffer(std::string(32, 'A'));
  m.add_string_list("Hello 4567");
  m.add_string_list("Hello 8901");
  *m.mutable_small_msg() = makeSmall();
  *m.mutable_medium_msg() = makeMedium();
  return m;
}

inline SmallMsgList makeSmallList() {
  SmallMsgList list;
  const SmallMessage one = makeSmall();
  for (int i = 0; i < kListSize; ++i) *list.add_small_msgs() = one;
  return list;
}

inline MediumMsgList makeMediumList() {
  MediumMsgList list;
  const MediumMessage one = makeMedium();
  for (int i = 0; i < kListSize; ++i) *list.add_medium_msgs() = one;
  return list;
}

inline LargeMsgList makeLargeList() {
  LargeMsgList list;
  const LargeMessage one = makeLarge();
  for (int i = 0; i < kListSize; ++i) *list.add_large_msgs() = one;
  return list;
}

// The profile of user `id` (the same on the Myelin side): name "User <id>",
// email "user<id>@example.com", age 18 + id % 60, five interests taken in
// turn from a list of seven starting at id % 7, bio "Profile <id>: " followed
// by 180 times the letter 'a' + id % 26, created_at 1700000000 + id.
inline UserProfile makeUserProfile(std::uint64_t id) {
  static const char* const kInterests[] = {"music", "chess", "hiking", "cooking", "astronomy", "cycling", "poetry"};
  UserProfile p;
  const std::string ids = std::to_string(id);
  p.set_user_id(id);
  p.set_name("User " + ids);
  p.set_email("user" + ids + "@example.com");
  p.set_age(static_cast<std::uint32_t>(18 + id % 60));
  for (std::uint64_t k = 0; k < 5; ++k) p.add_interests(kInterests[(id + k) % 7]);
  p.set_bio("Profile " + ids + ": " + std::string(180, static_cast<char>('a' + id % 26)));
  p.set_created_at(1700000000 + static_cast<std::int64_t>(id));
  return p;
}

// Byte j of chunk `index` of document `docId` is (docId * 31 + index * 7 + j)
// mod 256, as on the Myelin side; so the data only depends on that sum mod 256.
inline std::uint32_t chunkOffset(std::uint32_t docId, std::uint32_t index) { return (docId * 31 + index * 7) & 0xff; }

inline std::string makeChunkData(std::uint32_t offset) {
  std::string data(kChunkBytes, '\0');
  for (std::size_t j = 0; j < kChunkBytes; ++j) data[j] = static_cast<char>((offset + j) & 0xff);
  return data;
}

// Sum of the bytes (as unsigned) modulo 2^32: what the service returns.
inline std::uint32_t chunkChecksum(const std::string& data) {
  std::uint32_t sum = 0;
  for (unsigned char c : data) sum += c;
  return sum;
}

}  // namespace myelin::bench
