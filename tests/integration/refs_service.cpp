// The service side of the object-reference tests: refs::Guide keeps
// references to its clients' listeners and calls them back, during its
// calls and later from a thread of its own.
#include <atomic>
#include <chrono>
#include <optional>
#include <stdexcept>

#include <myelin/remote_thread.h>

#include "refs.h"

namespace refs {
namespace {
std::atomic<std::int64_t> made{0};
std::atomic<std::int64_t> destroyed{0};
std::atomic<std::int64_t> held{0};
}  // namespace

Guide::Guide(Listener& client, const std::string& city) : city_(city), client_(client) {
  ++made;
  ++held;
}

Guide::Guide(const std::string& city) : city_(city) {
  // Refers to itself while it is being constructed, as an object that
  // registers itself somewhere would: the runtime must take over this very
  // core when it exports the new object.
  myelin::ClassRef<Guide> me(*this);
  ++made;
}

Guide::Guide(const std::string& city, std::int64_t delayMs) : city_(city) {
  std::this_thread::sleep_for(std::chrono::milliseconds(delayMs));
  ++made;
}

Guide::~Guide() {
  if (streamer_.joinable()) streamer_.join();
  dropHeld();
  if (client_) --held;
  ++destroyed;
}

std::string Guide::city() const { return city_; }

void Guide::streamLater(std::int64_t count) { streamLaterIn(count, 0); }

void Guide::streamLaterIn(std::int64_t count, std::int64_t how) {
  if (!client_) throw std::logic_error("nobody logged in to this guide");
  if (how < 0 || how > 2) throw std::invalid_argument("how is 0, 1 or 2");
  if (streamer_.joinable()) streamer_.join();
  // Calls through a reference go to the connection the object came from,
  // whatever thread makes them.
  streamer_ = std::thread([client = client_, city = city_, count, how] {
    try {
      std::optional<myelin::RemoteThread> one;
      std::optional<myelin::RemoteThreadPool> two;
      if (how == 1) one.emplace();
      if (how == 2) two.emplace(2);
      for (std::int64_t i = 0; i < count; ++i) client->onPoi(Poi{city + " #" + std::to_string(i), i});
    } catch (const std::exception&) {
      // The client's connection ended meanwhile: the stream stops. (Thrown
      // out of this thread, it would end the service for every test.)
    }
  });
}

std::int64_t Guide::callBack(Listener& l, std::int64_t v) { return l.onValue(v); }

void Guide::hold(myelin::ClassRef<Listener> l) {
  std::lock_guard lock(mu_);
  held_.push_back(std::move(l));
  ++held;
}

void Guide::subscribe(const Subscription& s) { hold(s.listener); }

std::int64_t Guide::callHeld(std::int64_t v) {
  std::vector<myelin::ClassRef<Listener>> now;
  {
    std::lock_guard lock(mu_);
    now = held_;
  }
  std::int64_t sum = 0;
  for (auto& l : now) sum += l->onValue(v);
  return sum;
}

void Guide::dropHeld() {
  std::vector<myelin::ClassRef<Listener>> gone;
  {
    std::lock_guard lock(mu_);
    gone.swap(held_);
  }
  held -= static_cast<std::int64_t>(gone.size());
}

myelin::ClassRef<Guide> Guide::self() { return *this; }
bool Guide::isSelf(Guide& g) { return &g == this; }
bool Guide::isSelfRef(const myelin::ClassRef<Guide>& g) { return g.get() == this; }
bool Guide::isSelfPadded(Guide& g, const std::string&) { return &g == this; }
bool Guide::isSelfAfter(const std::vector<std::string>&, Guide& g) { return &g == this; }
Tagged Guide::selfTagged(std::uint32_t size) { return {*this, std::string(size, 't')}; }
Subscription Guide::takeHeldTagged(std::uint32_t size) {
  std::lock_guard lock(mu_);
  if (held_.empty()) throw std::runtime_error("no listener held");
  Subscription s{std::move(held_.back()), std::string(size, 't')};
  held_.pop_back();
  --held;
  return s;
}
myelin::Async<Tagged> Guide::selfTaggedLater(std::uint32_t size) {
  myelin::Async<Tagged> result;
  Tagged t = selfTagged(size);
  std::thread([result, t]() mutable {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    result.setValue(t);
  }).detach();
  return result;
}
myelin::ClassRef<Listener> Guide::echo(myelin::ClassRef<Listener> l) { return l; }
myelin::ClassRef<Listener> Guide::echoAfter(std::int64_t delayMs, myelin::ClassRef<Listener> l) {
  std::this_thread::sleep_for(std::chrono::milliseconds(delayMs));
  return l;
}
myelin::Async<myelin::ClassRef<Listener>> Guide::echoLater(myelin::ClassRef<Listener> l) { return l; }

std::string Guide::readNote(Note& n) { return n.text(); }
myelin::ClassRef<Tour> Guide::tour() { return myelin::makeRef<Tour>(*this); }
TourPlan Guide::plan(const std::string& city) { return {tour(), open(city)}; }
myelin::Async<TourPlan> Guide::planLater(const std::string& city) { return plan(city); }

void Note::set(const std::string& text) { text_ = text; }
std::string Note::text() const { return text_; }

Tour::Tour(Guide& guide) : guide_(guide) {}
std::string Tour::city() const { return guide_->city(); }

myelin::ClassRef<Guide> Guide::open(const std::string& city) { return myelin::makeRef<Guide>(city); }
myelin::ClassRef<Guide> Guide::openAfter(std::int64_t delayMs, const std::string& city) {
  std::this_thread::sleep_for(std::chrono::milliseconds(delayMs));
  return open(city);
}

Counts Guide::counts() { return {made.load(), destroyed.load(), held.load()}; }

}  // namespace refs
