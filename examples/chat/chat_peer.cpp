// The chat example's program, run twice: `chat_peer --listen [address]`
// waits for a peer (prints "PORT <n>", serves until its standard input
// closes); `chat_peer --connect address` opens a room on that peer, says
// three things and waits for the three answers, which the listening peer
// sends by opening a room here. Exits 0 when every answer arrived.
#include <myelin/myelin.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <unistd.h>

#include "chat_gen.h"

namespace {
std::string gWho = "someone";
std::atomic<std::int64_t> gHeard{0};
}  // namespace

namespace chat {

Room::Room(const std::string& topic, bool answer) : topic_(topic) {
  std::printf("[%s] room '%s' opened by the peer\n", gWho.c_str(), topic.c_str());
  if (answer) {
    // This constructor runs during the peer's constructor call, with the
    // peer's connection current: the answer room opens over it, on the
    // thread the peer is waiting with.
    answerRoom_ = std::make_shared<remote::chat::Room>(topic + " (answers)", false);
  }
}

Room::~Room() { std::printf("[%s] room '%s' closed\n", gWho.c_str(), topic_.c_str()); }

myelin::AsyncVoid Room::say(const Message& m) {
  ++heard_;
  ++gHeard;
  std::printf("[%s] %s> %s\n", gWho.c_str(), m.from.c_str(), m.text.c_str());
  std::fflush(stdout);
  if (answerRoom_) {
    static_cast<remote::chat::Room*>(answerRoom_.get())->say({gWho, "re: " + m.text});
  }
  return {};
}

std::int64_t Room::heard() const { return heard_; }

std::string Room::who() { return gWho; }

}  // namespace chat

namespace {

int listen(const std::string& address) {
  gWho = "bob";
  myelin::Server server = myelin::ConnectionInfo().setListenAddress(address).start();
  std::printf("PORT %u\n", static_cast<unsigned>(server.port()));
  std::fflush(stdout);
  char buf[256];
  while (::read(0, buf, sizeof buf) > 0) {
  }
  server.stop();
  return 0;
}

int connect(const std::string& address) {
  gWho = "alice";
  myelin::Endpoint ep = myelin::ConnectionInfo().setConnectAddress(address).connect();
  std::printf("[alice] talking to %s\n", remote::chat::Room::who().c_str());
  {
    remote::chat::Room lunch("lunch", true);  // a room on bob's side that answers
    for (const char* text : {"hi bob", "lunch at noon?", "the usual place"}) lunch.say({"alice", text});
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (gHeard < 3 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::printf("[alice] bob's room heard %lld messages\n", static_cast<long long>(lunch.heard()));
  }
  ep.disconnect();
  if (gHeard != 3) {
    std::printf("FAIL %lld answers of 3\n", static_cast<long long>(gHeard.load()));
    return 1;
  }
  std::printf("all checks passed\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const std::string address = argc > 2 ? argv[2] : "127.0.0.1:55300";
  try {
    if (mode == "--listen") return listen(address);
    if (mode == "--connect") return connect(address);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chat_peer: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "usage: chat_peer --listen [address] | --connect address\n");
  return 2;
}
