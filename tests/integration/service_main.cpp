// Entry point shared by the integration-test service programs: listens on
// 127.0.0.1 (port 0 unless given), prints "PORT <n>", and serves until its
// standard input closes (the test that started it is gone) or it is killed.
#include <myelin/myelin.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>
#include <unistd.h>
#include <vector>

namespace service_support {
std::mutex faultsMu;
std::vector<std::string> faults;
}  // namespace service_support

int main(int argc, char** argv) {
  std::string addr = argc > 1 ? argv[1] : "127.0.0.1:0";
  myelin::EndpointConfig cfg;
  cfg.maxMessageSize = 1 << 20;  // small, so the oversize test is cheap
  cfg.handshakeTimeoutMs = 2000;
  cfg.maxAllocQueuedBytes = 32u << 20;  // small, so the flooding-peer test is cheap
  cfg.maxDecodeBytes = 8u << 20;        // small, so a message can decode into more than it
  auto server = myelin::ConnectionInfo()
                    .setListenAddress(addr)
                    .setConfig(cfg)
                    .setOnDisconnect([](myelin::Endpoint ep) {
                      if (ep.getState() == myelin::EndpointState::kFaulted) {
                        std::lock_guard lock(service_support::faultsMu);
                        service_support::faults.push_back(ep.getError());
                      }
                    })
                    .start();
  std::printf("PORT %u\n", server.port());
  std::fflush(stdout);
  char buf[64];
  while (::read(0, buf, sizeof buf) > 0) {
  }
  server.stop();
  return 0;
}
