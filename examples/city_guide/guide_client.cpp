// The city-guide example's client: connects to the service at argv[1]
// (default 127.0.0.1:55200), logs in by constructing a remote Session with
// a reference to its own Visitor, and prints the tour the service streams
// back. Exits 0 when the tour arrived complete, 1 otherwise.
#include <myelin/myelin.h>

#include <cstdio>
#include <string>

#include "guide.h"

namespace city {

Visitor::Visitor(const std::string& name) : name_(name) {}

myelin::AsyncVoid Visitor::pointOfInterest(const Poi& poi) {
  std::lock_guard lock(mu_);
  seen_.push_back(poi);
  cv_.notify_all();
  return {};
}

myelin::AsyncVoid Visitor::tourEnded(std::int64_t count) {
  std::lock_guard lock(mu_);
  expected_ = count;
  cv_.notify_all();
  return {};
}

std::string Visitor::name() const { return name_; }

std::vector<Poi> Visitor::waitForTour(std::int64_t timeoutMs) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(timeoutMs),
               [&] { return expected_ >= 0 && static_cast<std::int64_t>(seen_.size()) >= expected_; });
  return seen_;
}

}  // namespace city

int main(int argc, char** argv) {
  const std::string address = argc > 1 ? argv[1] : "127.0.0.1:55200";
  try {
    myelin::Endpoint ep = myelin::ConnectionInfo().setConnectAddress(address).connect();
    std::printf("connected to %s; the guide knows:", ep.remoteAddress().c_str());
    for (const std::string& c : city::Session::cities()) std::printf(" %s", c.c_str());
    std::printf("\n");

    // Log in: the Session is constructed on the service and keeps a
    // reference to this Visitor, which stays here.
    city::Visitor me("Ada");
    city::Session session(me, "Lisbon");
    std::printf("logged in as %s\n", session.visitorName().c_str());

    // The call returns at once; the points arrive as calls on `me`.
    session.startTour({"museum", "food"});
    std::vector<city::Poi> tour = me.waitForTour(10000);
    for (const city::Poi& p : tour) std::printf("  %-8s %-30s %.4f, %.4f\n", p.kind.c_str(), p.name.c_str(), p.lat, p.lon);
    if (tour.size() != 4) {
      std::printf("FAIL expected 4 points, got %zu\n", tour.size());
      return 1;
    }

    try {
      city::Session nowhere(me, "Atlantis");
      std::printf("FAIL a session for an unknown city was opened\n");
      return 1;
    } catch (const myelin::RemoteCallError& e) {
      std::printf("refused as expected: %s\n", e.what());
    }
    ep.disconnect();
  } catch (const myelin::Error& e) {
    std::printf("FAIL %s\n", e.what());
    return 1;
  }
  std::printf("all checks passed\n");
  return 0;
}
