// The greeter example's service: implements greeter::Greeter, listens on
// argv[1] (default 127.0.0.1:55100), prints "PORT <n>" and serves until its
// standard input closes, or forever with --forever.
#include <myelin/myelin.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>

#include "greeter.h"

namespace greeter {

std::string Greeter::hello(const std::string& name) { return "Hello, " + name + "!"; }

myelin::Async<Point> Greeter::locate(std::vector<Point> pts) {
  if (pts.empty()) return Point{};
  std::int64_t sx = 0;
  std::int64_t sy = 0;
  for (const Point& p : pts) {
    sx += p.x;
    sy += p.y;
  }
  const auto n = static_cast<std::int64_t>(pts.size());
  return Point{static_cast<std::int32_t>(sx / n), static_cast<std::int32_t>(sy / n), "centroid"};
}

myelin::AsyncVoid Greeter::log(const std::string& line) {
  std::fprintf(stderr, "greeter_service log: %s\n", line.c_str());
  return {};
}

}  // namespace greeter

int main(int argc, char** argv) {
  std::string address = "127.0.0.1:55100";
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
    std::fprintf(stderr, "greeter_service: %s\n", e.what());
    return 1;
  }
  return 0;
}
