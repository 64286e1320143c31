// The city-guide example, the visitor's half: the client implements
// Visitor and hands the service a reference to itself; the service calls it
// back with every point of interest of a tour.
#pragma once

#include <myelin/endpoint.h>

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace city {

struct Poi {
  std::string name;
  std::string kind;  ///< "museum", "food", "view", ...
  double lat = 0;
  double lon = 0;
};

class Visitor : public myelin::EndpointClass {
 public:
  explicit Visitor(const std::string& name);

  /// One point of interest of the tour (fire-and-forget, in tour order).
  myelin::AsyncVoid pointOfInterest(const Poi& poi);
  /// The tour is over: `count` points were sent.
  myelin::AsyncVoid tourEnded(std::int64_t count);
  std::string name() const;

  /// Blocks until the tour ended (or `timeoutMs` passed); the points seen.
  std::vector<Poi> waitForTour(std::int64_t timeoutMs);

 private:
  std::string name_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Poi> seen_;
  std::int64_t expected_ = -1;
};

}  // namespace city
