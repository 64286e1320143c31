// The greeter example's client: connects to the service at argv[1] (default
// 127.0.0.1:55100), makes one call of each kind and checks the answers.
// Exits 0 when every answer is right, 1 otherwise.
#include <myelin/myelin.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <vector>

#include "greeter.h"

namespace {

int gFailures = 0;

void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++gFailures;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string address = argc > 1 ? argv[1] : "127.0.0.1:55100";
  try {
    // connect() makes the endpoint current on this thread: the calls below go to it.
    myelin::Endpoint ep = myelin::ConnectionInfo().setConnectAddress(address).connect();
    std::printf("connected to %s\n", ep.remoteAddress().c_str());

    // A synchronous call.
    const std::string greeting = greeter::Greeter::hello("Myelin");
    check(greeting == "Hello, Myelin!", "hello(\"Myelin\") -> \"" + greeting + "\"");

    // An asynchronous value: a callback with then(), and a blocking value().
    std::vector<greeter::Point> square{{0, 0, std::nullopt}, {4, 0, "b"}, {4, 6, "c"}, {0, 6, std::nullopt}};
    myelin::Async<greeter::Point> where = greeter::Greeter::locate(square);
    std::atomic<bool> callbackRan{false};
    where.then([&callbackRan](const myelin::Async<greeter::Point>& done) { callbackRan = done.isSuccess(); });
    const greeter::Point& c = where.value(5000);
    check(c.x == 2 && c.y == 3 && c.label == "centroid",
          "locate(square) -> {" + std::to_string(c.x) + ", " + std::to_string(c.y) + ", " +
              c.label.value_or("<none>") + "}");

    // Fire-and-forget; waitForIdle() returns once the service has run it.
    greeter::Greeter::log("greetings from greeter_client");
    check(ep.waitForIdle(5000), "log(...) confirmed by waitForIdle()");
    check(callbackRan.load(), "then() callback ran with a value");

    ep.disconnect();
  } catch (const myelin::Error& e) {
    std::printf("FAIL %s\n", e.what());
    return 1;
  }
  if (gFailures != 0) {
    std::printf("%d check(s) failed\n", gFailures);
    return 1;
  }
  std::printf("all checks passed\n");
  return 0;
}
