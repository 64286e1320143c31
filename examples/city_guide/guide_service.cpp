// The city-guide example's service: implements city::Session over a small
// built-in table of points of interest, listens on argv[1] (default
// 127.0.0.1:55200), prints "PORT <n>" and serves until its standard input
// closes, or forever with --forever.
#include <myelin/myelin.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <unistd.h>

#include "guide.h"

namespace city {
namespace {

struct Place {
  const char* city;
  Poi poi;
};

const Place kPlaces[] = {
    {"Lisbon", {"Museu Nacional do Azulejo", "museum", 38.7247, -9.1134}},
    {"Lisbon", {"Time Out Market", "food", 38.7071, -9.1458}},
    {"Lisbon", {"Miradouro da Senhora do Monte", "view", 38.7190, -9.1326}},
    {"Lisbon", {"Museu Calouste Gulbenkian", "museum", 38.7373, -9.1545}},
    {"Lisbon", {"Pasteis de Belem", "food", 38.6975, -9.2032}},
    {"Vienna", {"Kunsthistorisches Museum", "museum", 48.2038, 16.3616}},
    {"Vienna", {"Naschmarkt", "food", 48.1985, 16.3631}},
    {"Vienna", {"Kahlenberg", "view", 48.2766, 16.3346}},
};

}  // namespace

Session::Session(Visitor& visitor, const std::string& city) : city_(city), visitor_(visitor) {
  auto known = cities();
  if (std::find(known.begin(), known.end(), city) == known.end()) {
    throw std::invalid_argument("no guide for " + city);
  }
}

Session::~Session() {
  if (tour_.joinable()) tour_.join();
}

void Session::startTour(const std::vector<std::string>& interests) {
  if (tour_.joinable()) tour_.join();
  // The reference keeps the visitor's object alive on the client for as
  // long as the tour runs, and calls through it go to its connection.
  tour_ = std::thread([visitor = visitor_, city = city_, interests] {
    std::int64_t sent = 0;
    for (const Place& p : kPlaces) {
      if (p.city != city) continue;
      if (std::find(interests.begin(), interests.end(), p.poi.kind) == interests.end()) continue;
      visitor->pointOfInterest(p.poi);
      ++sent;
    }
    visitor->tourEnded(sent);
  });
}

std::string Session::visitorName() { return visitor_->name(); }

std::vector<std::string> Session::cities() { return {"Lisbon", "Vienna"}; }

}  // namespace city

int main(int argc, char** argv) {
  std::string address = "127.0.0.1:55200";
  bool forever = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--forever") {
      forever = true;
    } else {
      address = arg;
    }
  }
  try {
    myelin::Server server = myelin::ConnectionInfo().setListenAddress(address).start();
    std::printf("PORT %u\n", static_cast<unsigned>(server.port()));
    std::fflush(stdout);
    if (forever) {
      server.wait();
    } else {
      char buf[256];
      while (::read(0, buf, sizeof buf) > 0) {
      }
      server.stop();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "guide_service: %s\n", e.what());
    return 1;
  }
  return 0;
}
