// sym::Peer as both test programs implement it; each program defines
// sym::kSide, which side() reports.
#include <atomic>
#include <stdexcept>

#include "sym_gen.h"

namespace sym {

extern const char* const kSide;

namespace {
std::atomic<std::int64_t> liveCount{0};
}  // namespace

Peer::Peer() : Peer("anonymous") {}
Peer::Peer(const std::string& name) : name_(name) { ++liveCount; }
Peer::~Peer() { --liveCount; }

std::string Peer::name() const { return name_; }

std::int64_t Peer::hear(const std::string& from, const std::string& text) {
  std::lock_guard lock(mu_);
  lines_.push_back(from + ": " + text);
  return static_cast<std::int64_t>(lines_.size());
}

myelin::AsyncVoid Peer::nudge() {
  std::lock_guard lock(mu_);
  ++nudges_;
  return {};
}

myelin::Async<std::int64_t> Peer::heardLater() {
  std::lock_guard lock(mu_);
  return static_cast<std::int64_t>(lines_.size()) + nudges_;
}

std::vector<std::string> Peer::lines() const {
  std::lock_guard lock(mu_);
  return lines_;
}

std::string Peer::side() { return kSide; }

std::string Peer::askBack() { return remote::sym::Peer::side(); }

std::int64_t Peer::greetBack(const std::string& name, const std::string& text) {
  remote::sym::Peer there(name);  // constructed in the calling program
  if (there.name() != name || there.hear(kSide, text) != 1) throw std::logic_error("the new Peer is not as made");
  return remote::sym::Peer::alive();
}

std::int64_t Peer::alive() { return liveCount; }

}  // namespace sym
