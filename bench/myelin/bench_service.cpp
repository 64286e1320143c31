// Myelin's benchmark service: echoes, streams into the client, user profiles
// and document chunks. Prints "PORT <n>" and serves until stdin closes.
#include <myelin/myelin.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "bench_api.h"
#include "bench_data.h"
#include "bench_sink.h"
#include "../tls_env.h"

namespace bench {

// Echoes copy the request into the reply, as the gRPC service does.
myelin::Async<std::string> BenchService::echoString(const std::string& s) { return s; }
myelin::Async<SmallMessage> BenchService::echoSmall(const SmallMessage& m) { return m; }
myelin::Async<MediumMessage> BenchService::echoMedium(const MediumMessage& m) { return m; }
myelin::Async<LargeMessage> BenchService::echoLarge(const LargeMessage& m) { return m; }
myelin::Async<std::vector<SmallMessage>> BenchService::echoSmallList(const std::vector<SmallMessage>& l) { return l; }
myelin::Async<std::vector<MediumMessage>> BenchService::echoMediumList(const std::vector<MediumMessage>& l) {
  return l;
}
myelin::Async<std::vector<LargeMessage>> BenchService::echoLargeList(const std::vector<LargeMessage>& l) { return l; }

std::uint64_t BenchService::streamSmall(std::uint64_t count) {
  const SmallMessage m = makeSmall();
  for (std::uint64_t i = 0; i < count; ++i) BenchSink::onSmall(m);
  return count;
}
std::uint64_t BenchService::streamMedium(std::uint64_t count) {
  const MediumMessage m = makeMedium();
  for (std::uint64_t i = 0; i < count; ++i) BenchSink::onMedium(m);
  return count;
}
std::uint64_t BenchService::streamLarge(std::uint64_t count) {
  const LargeMessage m = makeLarge();
  for (std::uint64_t i = 0; i < count; ++i) BenchSink::onLarge(m);
  return count;
}

myelin::Async<UserProfile> BenchService::getUserProfile(const UserRequest& request) {
  return makeProfile(request.userId);
}

myelin::Async<ChunkResult> BenchService::processChunk(const Chunk& chunk) {
  return ChunkResult{chunk.docId, chunk.index, checksum(chunk.data)};
}

std::string BenchService::echoBytes(const std::string& s) { return s; }

myelin::AsyncVoid BenchService::swallow(const std::string&) { return {}; }

}  // namespace bench

int main(int argc, char** argv) {
  std::string addr = argc > 1 ? argv[1] : "127.0.0.1:0";
  myelin::ConnectionInfo ci;
  ci.setListenAddress(addr);
  auto server = bench::withBenchTls(ci, true).start();
  std::printf("PORT %u\n", server.port());
  std::fflush(stdout);
  char buf[64];
  while (::read(0, buf, sizeof buf) > 0) {
  }
  server.stop();
  return 0;
}
