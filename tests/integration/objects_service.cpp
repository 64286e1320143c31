// The service side of the remote-object tests: plain C++ implementations of
// objs::Counter and objs::Notebook, counting constructions and destructions.
#include <atomic>
#include <mutex>
#include <stdexcept>

#include "objects.h"

namespace objs {
namespace {
std::mutex mu;
Lifetimes counts;
}  // namespace

Counter::Counter(std::int64_t start) : value_(start) {
  std::lock_guard lock(mu);
  ++counts.constructed;
}

Counter::Counter(const std::string& name, std::int64_t start) : name_(name), value_(start) {
  if (start < 0) throw std::invalid_argument("a counter cannot start below zero");
  // As a call the constructor made that got an invalid reply would.
  if (name == "invalid") throw myelin::InvalidMessageError("a reply the constructor got was invalid");
  std::lock_guard lock(mu);
  ++counts.constructed;
}

Counter::~Counter() {
  std::lock_guard lock(mu);
  ++counts.destroyed;
  counts.lastValue = value_;
}

std::int64_t Counter::add(std::int64_t d) { return value_ += d; }
std::int64_t Counter::get() const { return value_; }
std::string Counter::name() const { return name_; }
myelin::Async<std::int64_t> Counter::addLater(std::int64_t d) { return value_ += d; }
myelin::AsyncVoid Counter::bump() {
  ++value_;
  return {};
}
void Counter::fail(const std::string& why) { throw std::runtime_error(why); }

Lifetimes Counter::lifetimes() {
  std::lock_guard lock(mu);
  return counts;
}
std::int64_t Counter::version() { return 7; }

void Notebook::write(const std::string& line) { lines_.push_back(line); }
myelin::AsyncVoid Notebook::jot(const std::string& line) {
  lines_.push_back(line);
  return {};
}
std::vector<std::string> Notebook::lines() const { return lines_; }

}  // namespace objs
