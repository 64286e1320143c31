// Service program of the Myelin load benchmark: implements bench::Load,
// listens on argv[1] (default 127.0.0.1:0), prints "PORT <n>" and serves
// until its standard input closes.
#include <myelin/myelin.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>

#include "load.h"
#include "resident_memory.h"

namespace bench {

namespace {
std::atomic<std::uint64_t> gOneCalls{0};
}  // namespace

myelin::AsyncVoid Load::one(std::uint32_t) {
  gOneCalls.fetch_add(1, std::memory_order_relaxed);
  return {};
}
std::uint64_t Load::count() { return gOneCalls.load(); }
std::uint32_t Load::echo(std::uint32_t v) { return v; }
std::string Load::echoBytes(const std::string& s) { return s; }
std::vector<std::uint64_t> Load::residentKb() {
  std::array<std::uint64_t, 2> kb = residentMemoryKb();
  return {kb[0], kb[1]};
}

}  // namespace bench

int main(int argc, char** argv) {
  const std::string address = argc > 1 ? argv[1] : "127.0.0.1:0";
  try {
    myelin::Server server = myelin::ConnectionInfo().setListenAddress(address).start();
    std::printf("PORT %u\n", static_cast<unsigned>(server.port()));
    std::fflush(stdout);
    char buf[256];
    while (::read(0, buf, sizeof buf) > 0) {
    }
    server.stop();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "load_service: %s\n", e.what());
    return 1;
  }
  return 0;
}
