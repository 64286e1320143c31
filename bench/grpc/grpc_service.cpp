// gRPC side of the benchmark suite's services (docs/benchmark-suite.md): the
// BenchService of benchmark.proto on gRPC's callback API. Prints `PORT <n>`
// on stdout, then serves until its standard input closes.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>

#include "bench_data.h"
#include "../tls_env.h"
#include "benchmark.grpc.pb.h"

namespace {

using myelin::bench::BenchService;
using myelin::bench::Chunk;
using myelin::bench::ChunkResult;
using myelin::bench::LargeMessage;
using myelin::bench::LargeMsgList;
using myelin::bench::MediumMessage;
using myelin::bench::MediumMsgList;
using myelin::bench::SmallMessage;
using myelin::bench::SmallMsgList;
using myelin::bench::StreamRequest;
using myelin::bench::StringMessage;
using myelin::bench::UserProfile;
using myelin::bench::UserRequest;

// Results a document stream may hold unsent before it stops reading chunks.
constexpr std::size_t kMaxPendingResults = 256;

grpc::ServerUnaryReactor* finishOk(grpc::CallbackServerContext* context) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

// Writes one message `count` times, one write in flight (the most the API
// allows), the last together with the status.
template <typename Message>
class RepeatWriter final : public grpc::ServerWriteReactor<Message> {
 public:
  RepeatWriter(const Message& message, std::uint32_t count) : message_(message), left_(count) { writeNext(); }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      this->Finish(grpc::Status(grpc::StatusCode::CANCELLED, "stream cancelled by the client"));
      return;
    }
    writeNext();
  }

  void OnDone() override { delete this; }

 private:
  void writeNext() {
    if (left_ == 0) {
      this->Finish(grpc::Status::OK);
    } else if (--left_ == 0) {
      this->StartWriteAndFinish(&message_, grpc::WriteOptions(), grpc::Status::OK);
    } else {
      this->StartWrite(&message_);
    }
  }

  const Message& message_;
  std::uint32_t left_;
};

// One document: reads chunks and writes a ChunkResult per chunk, reading and
// writing at the same time. Reactions may run concurrently on different
// threads, so the state is under mutex_; operations start outside it.
class DocumentProcessor final : public grpc::ServerBidiReactor<Chunk, ChunkResult> {
 public:
  DocumentProcessor() { StartRead(&chunk_); }

  void OnReadDone(bool ok) override {
    bool startRead = false;
    bool startWrite = false;
    bool finish = false;
    bool failed = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!ok) {
        readsDone_ = true;
        finish = takeFinishLocked();
        failed = failed_;
      } else if (failed_) {
        startRead = true;  // drain the reads so the stream can end
      } else {
        ChunkResult& result = pending_.emplace_back();
        result.set_doc_id(chunk_.doc_id());
        result.set_index(chunk_.index());
        result.set_checksum(myelin::bench::chunkChecksum(chunk_.data()));
        startWrite = takeWriteLocked();
        if (pending_.size() < kMaxPendingResults) {
          startRead = true;
        } else {
          readPaused_ = true;
        }
      }
    }
    act(startRead, startWrite, finish, failed);
  }

  void OnWriteDone(bool ok) override {
    bool startRead = false;
    bool startWrite = false;
    bool finish = false;
    bool failed = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      writing_ = false;
      if (!ok) {
        // The client is gone: drop what is left and end once reads end.
        pending_.clear();
        failed_ = true;
      }
      startWrite = takeWriteLocked();
      if (readPaused_ && pending_.size() < kMaxPendingResults) {
        readPaused_ = false;
        startRead = true;
      }
      finish = takeFinishLocked();
      failed = failed_;
    }
    act(startRead, startWrite, finish, failed);
  }

  void OnDone() override { delete this; }

 private:
  // Moves the next result into current_ when no write is in flight.
  bool takeWriteLocked() {
    if (writing_ || pending_.empty() || failed_) return false;
    current_ = std::move(pending_.front());
    pending_.pop_front();
    writing_ = true;
    return true;
  }

  bool takeFinishLocked() {
    if (finished_ || !readsDone_ || writing_ || !pending_.empty()) return false;
    finished_ = true;
    return true;
  }

  void act(bool startRead, bool startWrite, bool finish, bool failed) {
    if (startWrite) StartWrite(&current_);
    if (startRead) StartRead(&chunk_);
    if (finish) Finish(failed ? grpc::Status(grpc::StatusCode::CANCELLED, "write failed") : grpc::Status::OK);
  }

  std::mutex mutex_;
  Chunk chunk_;
  ChunkResult current_;
  std::deque<ChunkResult> pending_;
  bool writing_ = false;
  bool readPaused_ = false;
  bool readsDone_ = false;
  bool failed_ = false;
  bool finished_ = false;
};

class BenchServiceImpl final : public BenchService::CallbackService {
 public:
  grpc::ServerUnaryReactor* EchoString(grpc::CallbackServerContext* context, const StringMessage* request,
                                       StringMessage* reply) override {
    reply->CopyFrom(*request);
    return finishOk(context);
  }

  grpc::ServerUnaryReactor* EchoSmall(grpc::CallbackServerContext* context, const SmallMessage* request,
                                      SmallMessage* reply) override {
    reply->CopyFrom(*request);
    return finishOk(context);
  }

  grpc::ServerUnaryReactor* EchoMedium(grpc::CallbackServerContext* context, const MediumMessage* request,
                                       MediumMessage* reply) override {
    reply->CopyFrom(*request);
    return finishOk(context);
  }

  grpc::ServerUnaryReactor* EchoLarge(grpc::CallbackServerContext* context, const LargeMessage* request,
                                      LargeMessage* reply) override {
    reply->CopyFrom(*request);
    return finishOk(context);
  }

  grpc::ServerUnaryReactor* EchoSmallList(grpc::CallbackServerContext* context, const SmallMsgList* request,
                                          SmallMsgList* reply) override {
    reply->CopyFrom(*request);
    return finishOk(context);
  }

  grpc::ServerUnaryReactor* EchoMediumList(grpc::CallbackServerContext* context, const MediumMsgList* request,
                                           MediumMsgList* reply) override {
    reply->CopyFrom(*request);
    return finishOk(context);
  }

  grpc::ServerUnaryReactor* EchoLargeList(grpc::CallbackServerContext* context, const LargeMsgList* request,
                                          LargeMsgList* reply) override {
    reply->CopyFrom(*request);
    return finishOk(context);
  }

  grpc::ServerWriteReactor<SmallMessage>* StreamSmall(grpc::CallbackServerContext* /*context*/,
                                                      const StreamRequest* request) override {
    return new RepeatWriter<SmallMessage>(small_, request->count());
  }

  grpc::ServerWriteReactor<MediumMessage>* StreamMedium(grpc::CallbackServerContext* /*context*/,
                                                        const StreamRequest* request) override {
    return new RepeatWriter<MediumMessage>(medium_, request->count());
  }

  grpc::ServerWriteReactor<LargeMessage>* StreamLarge(grpc::CallbackServerContext* /*context*/,
                                                      const StreamRequest* request) override {
    return new RepeatWriter<LargeMessage>(large_, request->count());
  }

  grpc::ServerUnaryReactor* GetUserProfile(grpc::CallbackServerContext* context, const UserRequest* request,
                                           UserProfile* reply) override {
    *reply = myelin::bench::makeUserProfile(request->user_id());
    return finishOk(context);
  }

  grpc::ServerBidiReactor<Chunk, ChunkResult>* ProcessDocument(grpc::CallbackServerContext* /*context*/) override {
    return new DocumentProcessor();
  }

 private:
  // Streamed messages are written from these (read-only, so shared by all calls).
  const SmallMessage small_ = myelin::bench::makeSmall();
  const MediumMessage medium_ = myelin::bench::makeMedium();
  const LargeMessage large_ = myelin::bench::makeLarge();
};

void waitForStdinClosed() {
  char buffer[256];
  for (;;) {
    const ssize_t n = ::read(STDIN_FILENO, buffer, sizeof buffer);
    if (n > 0) continue;
    if (n < 0 && errno == EINTR) continue;
    return;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2 || (argc == 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0))) {
    std::fprintf(stderr, "usage: %s [HOST:PORT]   (default 127.0.0.1:0, any free port)\n", argv[0]);
    return 2;
  }
  const std::string address = argc == 2 ? argv[1] : "127.0.0.1:0";

  BenchServiceImpl service;
  grpc::ServerBuilder builder;
  int port = 0;
  // TLS when the suite asks for it (bench/tls_env.h), as Myelin's service.
  const bench::TlsEnv tls = bench::TlsEnv::fromEnvironment();
  std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
  if (tls.service()) {
    grpc::SslServerCredentialsOptions opts;
    opts.pem_key_cert_pairs.push_back({bench::TlsEnv::read(tls.key), bench::TlsEnv::read(tls.cert)});
    creds = grpc::SslServerCredentials(opts);
  }
  builder.AddListeningPort(address, creds, &port);
  builder.RegisterService(&service);
  // Fair settings (docs/benchmark-suite.md): no limit on streams per
  // connection, messages far larger than 100 LargeMessages, no compression.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, INT_MAX);
  builder.SetMaxReceiveMessageSize(INT_MAX);
  builder.SetMaxSendMessageSize(INT_MAX);
  builder.SetDefaultCompressionAlgorithm(GRPC_COMPRESS_NONE);

  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::fprintf(stderr, "grpc_service: cannot listen on %s\n", address.c_str());
    return 1;
  }
  std::printf("PORT %d\n", port);
  std::fflush(stdout);

  waitForStdinClosed();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server->Wait();
  return 0;
}
