// The chat example: two symmetric peers. Both programs implement
// chat::Room, and each opens rooms on the other through the proxy
// remote::chat::Room that myelin-gen emits.
#pragma once

#include <myelin/endpoint.h>

#include <cstdint>
#include <memory>
#include <string>

namespace chat {

struct Message {
  std::string from;
  std::string text;
};

class Room : public myelin::CommonEndpointClass {
 public:
  /// A room in this program. With `answer`, the room opens a room of its
  /// own on the program that opened it and answers every message there.
  Room(const std::string& topic, bool answer);
  ~Room();

  /// One message (fire-and-forget; a room sees its messages in order).
  myelin::AsyncVoid say(const Message& m);
  std::int64_t heard() const;

  /// Who this program is.
  static std::string who();

 private:
  std::string topic_;
  std::int64_t heard_ = 0;
  // The room this one answers in, on the program that opened this one: a
  // remote::chat::Room, which the header myelin-gen reads cannot name.
  std::shared_ptr<void> answerRoom_;
};

}  // namespace chat
