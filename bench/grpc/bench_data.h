// Contents of the gRPC benchmark messages, shared by grpc_service and
// grpc_client: the same values as bench/idl/bench_messages.h on the Myelin
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
// Length of UserProfile::bio.
inline constexpr std::size_t kBioBytes = 200;

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

// The profile of user `id`: name "User <id>", email "user<id>@example.com",
// age 18 + id % 60, interests "interest <(id + k) % 50>" for k = 0..4, bio
// "Bio of user <id>: " padded to 200 bytes with 'a' + i % 26 (i = position),
// created_at 1600000000 + id.
inline UserProfile makeUserProfile(std::uint64_t id) {
  UserProfile p;
  const std::string ids = std::to_string(id);
  p.set_user_id(id);
  p.set_name("User " + ids);
  p.set_email("user" + ids + "@example.com");
  p.set_age(static_cast<std::uint32_t>(18 + id % 60));
  for (std::uint64_t k = 0; k < 5; ++k) p.add_interests("interest " + std::to_string((id + k) % 50));
  std::string bio = "Bio of user " + ids + ": ";
  while (bio.size() < kBioBytes) bio.push_back(static_cast<char>('a' + bio.size() % 26));
  bio.resize(kBioBytes);
  p.set_bio(std::move(bio));
  p.set_created_at(static_cast<std::int64_t>(1600000000 + id));
  return p;
}

// Byte j of chunk `index` of any document is (index + j) mod 256.
inline std::string makeChunkData(std::uint32_t index) {
  std::string data(kChunkBytes, '\0');
  for (std::size_t j = 0; j < kChunkBytes; ++j) data[j] = static_cast<char>((index + j) & 0xff);
  return data;
}

// Sum of the bytes (as unsigned) modulo 2^32: what the service returns.
inline std::uint32_t chunkChecksum(const std::string& data) {
  std::uint32_t sum = 0;
  for (unsigned char c : data) sum += c;
  return sum;
}

}  // namespace myelin::bench
