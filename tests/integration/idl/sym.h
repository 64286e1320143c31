// Symmetric peers for the integration tests (docs/objects.md §6): one class
// that both programs implement, and that each calls on the other through the
// generated proxy remote::sym::Peer.
#pragma once

#include <myelin/endpoint.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace sym {

/// A chat member: each side has its own and talks to the other's.
class Peer : public myelin::CommonEndpointClass {
 public:
  Peer();
  explicit Peer(const std::string& name);
  ~Peer();

  std::string name() const;
  /// Records a line; returns how many lines this peer has heard.
  std::int64_t hear(const std::string& from, const std::string& text);
  myelin::AsyncVoid nudge();
  myelin::Async<std::int64_t> heardLater();
  std::vector<std::string> lines() const;

  /// Which program this is: "service" or "client".
  static std::string side();
  /// Calls side() of the program that called this one, during this call.
  static std::string askBack();
  /// Makes a Peer named `name` in the program that called this one and has
  /// it hear `text`; returns how many Peers that program has while it lives.
  static std::int64_t greetBack(const std::string& name, const std::string& text);
  /// Peer objects alive in this program.
  static std::int64_t alive();

 private:
  std::string name_;
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
  std::int64_t nudges_ = 0;
};

}  // namespace sym
