// The city-guide example, the service's half: a visitor "logs in" by
// constructing a Session on the service with a reference to itself; the
// session streams the points of interest of a tour back to the visitor.
#pragma once

#include <myelin/class_ref.h>
#include <myelin/endpoint.h>

#include <string>
#include <thread>
#include <vector>

#include "visitor.h"

namespace city {

class Session : public myelin::EndpointClass {
 public:
  /// Logs `visitor` in to `city`; throws if the guide does not know it.
  Session(Visitor& visitor, const std::string& city);
  ~Session();

  /// Starts a tour of the points whose kind is in `interests` and returns
  /// at once; the points reach the visitor from a thread of the service.
  void startTour(const std::vector<std::string>& interests);
  /// Who is logged in, as the visitor tells it (a call back to the client).
  std::string visitorName();

  static std::vector<std::string> cities();

 private:
  std::string city_;
  myelin::ClassRef<Visitor> visitor_;
  std::thread tour_;
};

}  // namespace city
