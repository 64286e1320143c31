// Object references, the client's half of the interface: a listener the
// client implements and hands to the service, which calls it back during
// and after its own calls (docs/objects.md §5).
#pragma once

#include <myelin/class_ref.h>
#include <myelin/endpoint.h>

#include <atomic>
#include <cstdint>
#include <string>

namespace refs {

struct Poi {
  std::string name;
  std::int64_t rank = 0;
};

class Listener : public myelin::EndpointClass {
 public:
  Listener();
  ~Listener();

  /// Fire-and-forget: one point of interest.
  myelin::AsyncVoid onPoi(const Poi& p);
  /// Adds `v` to the total and returns the new total.
  std::int64_t onValue(std::int64_t v);
  std::int64_t total() const;
  std::int64_t pois() const;

 private:
  std::atomic<std::int64_t> total_{0};
  std::atomic<std::int64_t> pois_{0};
};

}  // namespace refs
