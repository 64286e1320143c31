// gRPC side of the benchmark suite's clients (docs/benchmark-suite.md): runs one
// Table A test, or the UnaryLatency ping-pong of Table C, against grpc_service
// for a duration after a warm-up, checks every reply and prints one JSON line.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

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

using Clock = std::chrono::steady_clock;

// Latency is timed on one call in 16 (the same in Myelin's client): two
// clock reads per call cost more than a Myelin round trip's own work here.
constexpr bool latencySample(std::uint64_t n) { return n % 16 == 0; }
using Stub = BenchService::Stub;

constexpr int kExitUsage = 2;
constexpr int kExitMismatch = 3;
constexpr int kExitFailed = 4;

// UserProfileServiceCB always runs this many client threads.
constexpr int kProfileThreads = 20;
// Distinct users the profile test cycles through (expected replies precomputed).
constexpr std::uint64_t kProfileUsers = 1024;
// Messages asked for per stream request when --stream-count is not given.
constexpr std::uint32_t kDefaultStreamCount = 10000;
// How long in-flight calls may take to finish after the measured duration.
constexpr auto kDrainTimeout = std::chrono::seconds(30);

// ---------------------------------------------------------------------------
// Options

struct Options {
  std::string connect;
  std::string test;
  int threads = 1;
  bool threadsGiven = false;
  double duration = 2.0;
  double warmup = 0.5;
  int window = 128;
  int channels = 0;  // 0: one per thread, at most 8
  std::uint32_t streamCount = 0;  // 0: kDefaultStreamCount per request until the time is up
  std::uint32_t chunks = 10000;
  std::size_t payload = 64;
};

void printUsage(const char* program) {
  std::fprintf(stderr,
               "usage: %s --connect HOST:PORT --test NAME [--threads N] [--duration S] [--warmup S]\n"
               "          [--window W] [--channels C] [--stream-count K] [--chunks K] [--payload B]\n"
               "tests: RoundTripStringAsyncCB RoundTrip{Small,Medium,Large}Msg[List]AsyncCB\n"
               "       Stream{Small,Medium,Large}MsgFromServer UserProfileServiceCB DocumentProcessingCB\n"
               "       UnaryLatency\n",
               program);
}

long long parseInteger(const std::string& name, const std::string& text, long long low, long long high) {
  std::size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || value < low || value > high) {
    throw std::invalid_argument(name + " wants an integer in [" + std::to_string(low) + ", " +
                                std::to_string(high) + "], got '" + text + "'");
  }
  return value;
}

double parseSeconds(const std::string& name, const std::string& text) {
  std::size_t used = 0;
  double value = -1;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || !(value >= 0) || value > 86400) {
    throw std::invalid_argument(name + " wants seconds, got '" + text + "'");
  }
  return value;
}

Options parseOptions(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string name = argv[i];
    std::string value;
    if (name == "--help" || name == "-h") throw std::invalid_argument("");
    if (const auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    } else {
      if (i + 1 >= argc) throw std::invalid_argument(name + " wants a value");
      value = argv[++i];
    }
    if (name == "--connect") {
      options.connect = value;
    } else if (name == "--test") {
      options.test = value;
    } else if (name == "--threads") {
      options.threads = static_cast<int>(parseInteger(name, value, 1, 10000));
      options.threadsGiven = true;
    } else if (name == "--duration") {
      options.duration = parseSeconds(name, value);
    } else if (name == "--warmup") {
      options.warmup = parseSeconds(name, value);
    } else if (name == "--window") {
      options.window = static_cast<int>(parseInteger(name, value, 1, 1 << 20));
    } else if (name == "--channels") {
      options.channels = static_cast<int>(parseInteger(name, value, 1, 10000));
    } else if (name == "--stream-count") {
      options.streamCount = static_cast<std::uint32_t>(parseInteger(name, value, 1, UINT32_MAX));
    } else if (name == "--chunks") {
      options.chunks = static_cast<std::uint32_t>(parseInteger(name, value, 1, UINT32_MAX));
    } else if (name == "--payload") {
      options.payload = static_cast<std::size_t>(parseInteger(name, value, 0, 64 << 20));
    } else {
      throw std::invalid_argument("unknown option " + name);
    }
  }
  if (options.connect.empty()) throw std::invalid_argument("--connect HOST:PORT is required");
  if (options.test.empty()) throw std::invalid_argument("--test NAME is required");
  return options;
}

// ---------------------------------------------------------------------------
// Latency histogram: log-linear buckets with 64 steps per power of two (under
// 1.6% error), atomic so completions on any gRPC thread can record.

class LatencyHistogram {
 public:
  static constexpr int kSubBits = 6;
  static constexpr std::uint64_t kSub = 1u << kSubBits;
  static constexpr int kMaxExponent = 44;  // 2^44 ns, about 4.9 hours
  static constexpr std::size_t kBuckets = kSub + (kMaxExponent - kSubBits + 1) * kSub;

  void record(std::uint64_t ns) {
    buckets_[index(ns)].fetch_add(1, std::memory_order_relaxed);
    count_.fetch_add(1, std::memory_order_relaxed);
    sum_.fetch_add(ns, std::memory_order_relaxed);
    std::uint64_t seen = max_.load(std::memory_order_relaxed);
    while (ns > seen && !max_.compare_exchange_weak(seen, ns, std::memory_order_relaxed)) {
    }
  }

  static std::size_t index(std::uint64_t ns) {
    if (ns < kSub) return static_cast<std::size_t>(ns);
    const int exponent = std::bit_width(ns) - 1;
    if (exponent > kMaxExponent) return kBuckets - 1;
    const int shift = exponent - kSubBits;
    return static_cast<std::size_t>(kSub + static_cast<std::uint64_t>(shift) * kSub + ((ns >> shift) - kSub));
  }

  // Middle of bucket i, in ns.
  static double middle(std::size_t i) {
    if (i < kSub) return static_cast<double>(i);
    const std::uint64_t shift = (i - kSub) / kSub;
    const std::uint64_t step = (i - kSub) % kSub;
    const std::uint64_t low = (kSub + step) << shift;
    return static_cast<double>(low) + static_cast<double>((std::uint64_t{1} << shift) - 1) / 2.0;
  }

  std::atomic<std::uint64_t>& bucket(std::size_t i) { return buckets_[i]; }
  const std::atomic<std::uint64_t>& bucket(std::size_t i) const { return buckets_[i]; }
  std::uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  std::uint64_t sum() const { return sum_.load(std::memory_order_relaxed); }
  std::uint64_t max() const { return max_.load(std::memory_order_relaxed); }

 private:
  std::array<std::atomic<std::uint64_t>, kBuckets> buckets_{};
  std::atomic<std::uint64_t> count_{0};
  std::atomic<std::uint64_t> sum_{0};
  std::atomic<std::uint64_t> max_{0};
};

// Percentiles of several histograms merged, in microseconds.
struct LatencySummary {
  std::uint64_t samples = 0;
  double p50 = 0, p90 = 0, p99 = 0, p999 = 0, max = 0, mean = 0;
};

LatencySummary summarize(const std::vector<const LatencyHistogram*>& histograms) {
  std::vector<std::uint64_t> counts(LatencyHistogram::kBuckets, 0);
  LatencySummary summary;
  std::uint64_t sum = 0;
  std::uint64_t max = 0;
  for (const LatencyHistogram* h : histograms) {
    for (std::size_t i = 0; i < counts.size(); ++i) counts[i] += h->bucket(i).load(std::memory_order_relaxed);
    summary.samples += h->count();
    sum += h->sum();
    max = std::max(max, h->max());
  }
  if (summary.samples == 0) return summary;
  const auto percentile = [&](double q) {
    const double exact = std::ceil(q * static_cast<double>(summary.samples));
    const std::uint64_t rank = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(exact));
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < counts.size(); ++i) {
      seen += counts[i];
      if (seen >= rank) return std::min(LatencyHistogram::middle(i), static_cast<double>(max)) / 1000.0;
    }
    return static_cast<double>(max) / 1000.0;
  };
  summary.p50 = percentile(0.50);
  summary.p90 = percentile(0.90);
  summary.p99 = percentile(0.99);
  summary.p999 = percentile(0.999);
  summary.max = static_cast<double>(max) / 1000.0;
  summary.mean = static_cast<double>(sum) / static_cast<double>(summary.samples) / 1000.0;
  return summary;
}

// ---------------------------------------------------------------------------
// Run state shared by all workers.

enum class Phase : int { kWarmup, kMeasure, kStop };

class Run {
 public:
  Phase phase() const { return phase_.load(std::memory_order_relaxed); }
  bool measuring() const { return phase() == Phase::kMeasure; }
  bool stopping() const { return phase() == Phase::kStop; }
  // Phases only move forward: a failure's kStop is never undone.
  void setPhase(Phase phase) {
    Phase seen = phase_.load(std::memory_order_relaxed);
    while (seen < phase && !phase_.compare_exchange_weak(seen, phase, std::memory_order_relaxed)) {
    }
  }

  // A reply differed from what was expected: stop the run, report it.
  void mismatch(const std::string& what) { fail(what, true); }
  // A call failed (status not OK, connection lost): stop the run, report it.
  void failure(const std::string& what) { fail(what, false); }

  bool hasMismatch() const { return mismatch_.load(); }
  bool hasFailure() const { return failure_.load(); }
  std::string error() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return error_;
  }

  // Sleeps until `deadline` or until a failure stops the run.
  void sleepUntil(Clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait_until(lock, deadline, [&] { return mismatch_.load() || failure_.load(); });
  }

 private:
  void fail(const std::string& what, bool mismatch) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (error_.empty()) error_ = what;
      (mismatch ? mismatch_ : failure_).store(true);
    }
    setPhase(Phase::kStop);
    wake_.notify_all();
  }

  std::atomic<Phase> phase_{Phase::kWarmup};
  std::atomic<bool> mismatch_{false};
  std::atomic<bool> failure_{false};
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::string error_;
};

std::string statusText(const grpc::Status& status) {
  return "status " + std::to_string(static_cast<int>(status.error_code())) + ": " + status.error_message();
}

// True if `message` serializes to exactly `expected` (the request's bytes for
// an echo): protobuf writes the same fields in the same order every time.
bool serializesTo(const google::protobuf::MessageLite& message, const std::string& expected) {
  const std::size_t size = message.ByteSizeLong();
  if (size != expected.size()) return false;
  thread_local std::string buffer;
  buffer.resize(size);
  message.SerializeWithCachedSizesToArray(reinterpret_cast<std::uint8_t*>(buffer.data()));
  return std::memcmp(buffer.data(), expected.data(), size) == 0;
}

// ---------------------------------------------------------------------------
// Workers: one per client thread of the test. A worker counts its verified
// replies and their latencies and knows when its last call has ended.

class Worker {
 public:
  explicit Worker(Run& run) : run_(run) {}
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  virtual ~Worker() = default;

  // Issues the first calls; replies keep it going until the run stops.
  virtual void start() = 0;

  // Called once the run has stopped: cancels calls still waiting for a reply
  // so the end does not wait for a long queue (a cancelled call is not counted).
  virtual void cancelInFlight() {}

  // Waits until no call of this worker is in flight; false on timeout.
  bool waitIdle(Clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mutex_);
    return idle_.wait_until(lock, deadline, [&] { return active_ == 0; });
  }

  std::uint64_t completed() const { return completed_.load(std::memory_order_relaxed); }
  std::uint64_t checksum() const { return checksum_.load(std::memory_order_relaxed); }
  const LatencyHistogram& latency() const { return latency_; }

 protected:
  // One verified reply; `value` goes into the checksum.
  void countReply(std::uint64_t value) {
    completed_.fetch_add(1, std::memory_order_relaxed);
    checksum_.fetch_add(value, std::memory_order_relaxed);
  }
  void countReply(std::uint64_t value, Clock::time_point sent, Clock::time_point received) {
    countReply(value);
    if (run_.measuring()) {
      latency_.record(static_cast<std::uint64_t>(std::chrono::nanoseconds(received - sent).count()));
    }
  }

  // A chain of calls (a window slot, a stream) begins or ends for good.
  void beginChain() {
    std::lock_guard<std::mutex> lock(mutex_);
    ++active_;
  }
  // The worker may be destroyed as soon as this returns with the last chain.
  void endChain() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--active_ == 0) idle_.notify_all();
  }

  Run& run_;

 private:
  alignas(64) std::atomic<std::uint64_t> completed_{0};
  std::atomic<std::uint64_t> checksum_{0};
  LatencyHistogram latency_;
  std::mutex mutex_;
  std::condition_variable idle_;
  int active_ = 0;
};

// Async unary calls, up to `window` in flight; each completion callback
// verifies the reply and issues the next call in its slot.
template <typename Request, typename Reply>
class UnaryWorker : public Worker {
 public:
  using Callback = std::function<void(grpc::Status)>;
  using Issue = void (*)(Stub*, grpc::ClientContext*, const Request*, Reply*, Callback);

  UnaryWorker(Run& run, Stub* stub, Issue issue, int window) : Worker(run), stub_(stub), issue_(issue) {
    // ClientContext cannot move, so the slots live in a fixed array.
    slotCount_ = static_cast<std::size_t>(window);
    slots_ = std::make_unique<Slot[]>(slotCount_);
    for (std::size_t i = 0; i < slotCount_; ++i) slots_[i].owner = this;
  }

  void start() override {
    for (std::size_t i = 0; i < slotCount_; ++i) {
      beginChain();
      if (!issue(slots_[i])) endChain();
    }
  }

  void cancelInFlight() override {
    for (std::size_t i = 0; i < slotCount_; ++i) {
      std::lock_guard<std::mutex> lock(slots_[i].mutex);
      if (slots_[i].context) slots_[i].context->TryCancel();
    }
  }

 protected:
  struct Slot {
    UnaryWorker* owner = nullptr;
    std::mutex mutex;  // guards `context` against cancelInFlight
    std::optional<grpc::ClientContext> context;
    Request request;  // used when requests differ per call
    Reply reply;
    Clock::time_point sent;
    bool timed = false;  // this call is one of the latency samples
    std::uint64_t calls = 0;
    std::uint64_t tag = 0;
  };

  // The request of the next call in `slot` (lives until the call ends).
  virtual const Request* prepare(Slot& slot) = 0;
  // Checks slot.reply; returns false on a mismatch, else sets `value` for the checksum.
  virtual bool verify(const Slot& slot, std::uint64_t& value) = 0;

 private:
  // Starts the next call in `slot`; false once the run has stopped.
  bool issue(Slot& slot) {
    const Request* request = prepare(slot);
    {
      std::lock_guard<std::mutex> lock(slot.mutex);
      if (run_.stopping()) return false;
      slot.context.emplace();
    }
    slot.timed = latencySample(slot.calls++);
    if (slot.timed) slot.sent = Clock::now();
    Slot* target = &slot;
    issue_(stub_, &*slot.context, request, &slot.reply, [target](grpc::Status status) {
      target->owner->onReply(*target, status);
    });
    return true;
  }

  void onReply(Slot& slot, const grpc::Status& status) {
    const Clock::time_point received = slot.timed ? Clock::now() : Clock::time_point{};
    if (!status.ok()) {
      if (!run_.stopping() || status.error_code() != grpc::StatusCode::CANCELLED) run_.failure(statusText(status));
    } else if (std::uint64_t value = 0; !verify(slot, value)) {
      run_.mismatch("reply differs from the request");
    } else {
      if (slot.timed) {
        countReply(value, slot.sent, received);
      } else {
        countReply(value);
      }
      if (issue(slot)) return;
    }
    endChain();
  }

  Stub* stub_;
  Issue issue_;
  std::size_t slotCount_ = 0;
  std::unique_ptr<Slot[]> slots_;
};

// Echo of one fixed request; the reply must serialize to the request's bytes.
template <typename Message>
class EchoWorker final : public UnaryWorker<Message, Message> {
  using Base = UnaryWorker<Message, Message>;

 public:
  EchoWorker(Run& run, Stub* stub, typename Base::Issue issue, int window, const Message& request,
             const std::string& expected)
      : Base(run, stub, issue, window), request_(request), expected_(expected) {}

 protected:
  const Message* prepare(typename Base::Slot&) override { return &request_; }
  bool verify(const typename Base::Slot& slot, std::uint64_t& value) override {
    value = expected_.size();
    return serializesTo(slot.reply, expected_);
  }

 private:
  const Message& request_;  // shared by all workers: gRPC only reads it
  const std::string& expected_;
};

// GetUserProfile for users 1..kProfileUsers in turn; each reply must equal the
// profile makeUserProfile derives from the id.
class ProfileWorker final : public UnaryWorker<UserRequest, UserProfile> {
 public:
  ProfileWorker(Run& run, Stub* stub, int window, int workerIndex, const std::vector<std::string>& expected)
      : UnaryWorker(run, stub, &issueProfile, window),
        expected_(expected),
        next_(static_cast<std::uint64_t>(workerIndex) * 7919u) {}

 protected:
  const UserRequest* prepare(Slot& slot) override {
    slot.tag = next_.fetch_add(1, std::memory_order_relaxed) % kProfileUsers;
    slot.request.set_user_id(slot.tag + 1);
    return &slot.request;
  }
  bool verify(const Slot& slot, std::uint64_t& value) override {
    value = slot.reply.user_id();
    return serializesTo(slot.reply, expected_[slot.tag]);
  }

 private:
  static void issueProfile(Stub* stub, grpc::ClientContext* context, const UserRequest* request, UserProfile* reply,
                           Callback done) {
    stub->async()->GetUserProfile(context, request, reply, std::move(done));
  }

  const std::vector<std::string>& expected_;
  std::atomic<std::uint64_t> next_;
};

// Server streaming: one stream at a time asks for `count` messages and reads
// them with a ClientReadReactor; a new stream follows until the run stops,
// when the open stream is cancelled. Each message must equal `expected`.
template <typename Message>
class StreamWorker final : public Worker {
 public:
  using Issue = void (*)(Stub*, grpc::ClientContext*, const StreamRequest*, grpc::ClientReadReactor<Message>*);

  StreamWorker(Run& run, Stub* stub, Issue issue, std::uint32_t count, const std::string& expected)
      : Worker(run), stub_(stub), issue_(issue), count_(count), expected_(expected) {}

  void start() override {
    beginChain();
    new Reader(this);
  }

 private:
  class Reader final : public grpc::ClientReadReactor<Message> {
   public:
    explicit Reader(StreamWorker* owner) : owner_(owner) {
      request_.set_count(owner->count_);
      owner->issue_(owner->stub_, &context_, &request_, this);
      this->StartRead(&message_);
      this->StartCall();
    }

    void OnReadDone(bool ok) override {
      if (!ok) return;  // the stream ended: OnDone follows
      if (!serializesTo(message_, owner_->expected_)) {
        mismatch_ = true;
        context_.TryCancel();
        return;
      }
      ++received_;
      owner_->countReply(owner_->expected_.size());
      if (owner_->run_.stopping()) {
        cancelled_ = true;
        context_.TryCancel();
        return;
      }
      this->StartRead(&message_);
    }

    void OnDone(const grpc::Status& status) override {
      StreamWorker* owner = owner_;
      const bool mismatch = mismatch_;
      const bool complete = status.ok() && received_ == request_.count();
      const bool cancelledByUs = cancelled_ && status.error_code() == grpc::StatusCode::CANCELLED;
      std::string problem;
      if (!mismatch && !complete && !cancelledByUs) {
        problem = status.ok() ? "stream ended after " + std::to_string(received_) + " of " +
                                    std::to_string(request_.count()) + " messages"
                              : statusText(status);
      }
      delete this;
      owner->readerDone(mismatch, problem);
    }

   private:
    StreamWorker* owner_;
    grpc::ClientContext context_;
    StreamRequest request_;
    Message message_;
    std::uint32_t received_ = 0;
    bool cancelled_ = false;
    bool mismatch_ = false;
  };

  void readerDone(bool mismatch, const std::string& problem) {
    if (mismatch) {
      run_.mismatch("streamed message differs from the expected one");
    } else if (!problem.empty()) {
      run_.failure(problem);
    } else if (!run_.stopping()) {
      new Reader(this);
      return;
    }
    endChain();
  }

  Stub* stub_;
  Issue issue_;
  std::uint32_t count_;
  const std::string& expected_;
};

// The 256 possible chunk contents, by chunkOffset(docId, index), with the
// checksum the service must return for each.
struct ChunkTable {
  ChunkTable() {
    for (std::uint32_t i = 0; i < 256; ++i) {
      data[i] = myelin::bench::makeChunkData(i);
      checksum[i] = myelin::bench::chunkChecksum(data[i]);
    }
  }
  std::array<std::string, 256> data;
  std::array<std::uint32_t, 256> checksum{};
};

// One document in flight at a time: a ProcessDocument stream writes `chunks`
// chunks, at most `window` ahead of the results, and checks each result (in
// order, with the right checksum). When it ends the next document starts.
class DocumentWorker final : public Worker {
 public:
  DocumentWorker(Run& run, Stub* stub, int workerIndex, int workers, std::uint32_t chunks, int window,
                 const ChunkTable& table)
      : Worker(run),
        stub_(stub),
        chunks_(chunks),
        window_(static_cast<std::uint32_t>(window)),
        table_(table),
        nextDocId_(static_cast<std::uint32_t>(workerIndex)),
        docIdStep_(static_cast<std::uint32_t>(workers)) {}

  void start() override {
    beginChain();
    startDocument();
  }

 private:
  class Document final : public grpc::ClientBidiReactor<Chunk, ChunkResult> {
   public:
    Document(DocumentWorker* owner, std::uint32_t docId)
        : owner_(owner), docId_(docId), sentAt_(owner->window_) {
      owner->stub_->async()->ProcessDocument(&context_, this);
      StartRead(&result_);
      Action action;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        action = takeActionLocked();
      }
      act(action);
      StartCall();
    }

    void OnWriteDone(bool ok) override {
      Action action = Action::kNone;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        writing_ = false;
        if (ok) {
          action = takeActionLocked();
        } else {
          writesEnded_ = true;  // the stream broke: OnDone reports it
        }
      }
      act(action);
    }

    void OnReadDone(bool ok) override {
      if (!ok) return;  // the service finished: OnDone follows
      const bool timed = latencySample(readsDone_++);  // reads come one at a time, in order
      const Clock::time_point received = timed ? Clock::now() : Clock::time_point{};
      Clock::time_point sent;
      Action action = Action::kNone;
      bool mismatch = false;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        const std::uint32_t index = received_;
        if (index >= sent_ || result_.doc_id() != docId_ || result_.index() != index ||
            result_.checksum() != owner_->table_.checksum[myelin::bench::chunkOffset(docId_, index)]) {
          mismatch = mismatch_ = true;
        } else {
          sent = sentAt_[index % owner_->window_];
          ++received_;
          action = takeActionLocked();
        }
      }
      if (mismatch) {
        context_.TryCancel();
        return;
      }
      if (timed) {
        owner_->countReply(result_.checksum(), sent, received);
      } else {
        owner_->countReply(result_.checksum());
      }
      StartRead(&result_);
      act(action);
    }

    void OnDone(const grpc::Status& status) override {
      DocumentWorker* owner = owner_;
      const bool mismatch = mismatch_;
      std::string problem;
      if (!mismatch) {
        if (!status.ok()) {
          problem = statusText(status);
        } else if (received_ != sent_ || (sent_ != owner->chunks_ && !owner->run_.stopping())) {
          problem = "document " + std::to_string(docId_) + " ended with " + std::to_string(received_) +
                    " results for " + std::to_string(sent_) + " chunks";
        }
      }
      delete this;
      owner->documentDone(mismatch, problem);
    }

   private:
    enum class Action { kNone, kWrite, kWritesDone };

    // What to start next on the write side, given the state (under mutex_).
    Action takeActionLocked() {
      if (writing_ || writesEnded_) return Action::kNone;
      if (sent_ == owner_->chunks_ || owner_->run_.stopping()) {
        writesEnded_ = true;
        return Action::kWritesDone;
      }
      if (sent_ - received_ >= owner_->window_) return Action::kNone;
      const std::uint32_t index = sent_++;
      chunk_.set_doc_id(docId_);
      chunk_.set_index(index);
      chunk_.set_data(owner_->table_.data[myelin::bench::chunkOffset(docId_, index)]);
      if (latencySample(index)) sentAt_[index % owner_->window_] = Clock::now();
      writing_ = true;
      return Action::kWrite;
    }

    void act(Action action) {
      if (action == Action::kWrite) {
        StartWrite(&chunk_);
      } else if (action == Action::kWritesDone) {
        StartWritesDone();
      }
    }

    DocumentWorker* owner_;
    std::uint32_t docId_;
    grpc::ClientContext context_;
    Chunk chunk_;
    ChunkResult result_;
    std::mutex mutex_;
    std::vector<Clock::time_point> sentAt_;  // by chunk index % window (latency samples only)
    std::uint32_t sent_ = 0;
    std::uint32_t received_ = 0;
    std::uint32_t readsDone_ = 0;  // OnReadDone only
    bool writing_ = false;
    bool writesEnded_ = false;
    bool mismatch_ = false;
  };

  void startDocument() {
    const std::uint32_t docId = nextDocId_;
    nextDocId_ += docIdStep_;
    new Document(this, docId);
  }

  void documentDone(bool mismatch, const std::string& problem) {
    if (mismatch) {
      run_.mismatch("chunk result differs from the expected one");
    } else if (!problem.empty()) {
      run_.failure(problem);
    } else if (!run_.stopping()) {
      startDocument();
      return;
    }
    endChain();
  }

  Stub* stub_;
  std::uint32_t chunks_;
  std::uint32_t window_;
  const ChunkTable& table_;
  std::uint32_t nextDocId_;  // touched by one document at a time
  std::uint32_t docIdStep_;
};

// Sync unary EchoString ping-pong on a thread of its own: one call in flight.
class PingPongWorker final : public Worker {
 public:
  PingPongWorker(Run& run, Stub* stub, const StringMessage& request, const std::string& expected)
      : Worker(run), stub_(stub), request_(request), expected_(expected) {}

  ~PingPongWorker() override {
    if (thread_.joinable()) thread_.join();
  }

  void start() override {
    beginChain();
    thread_ = std::thread([this] { loop(); });
  }

 private:
  void loop() {
    StringMessage reply;
    while (!run_.stopping()) {
      grpc::ClientContext context;
      const Clock::time_point sent = Clock::now();
      const grpc::Status status = stub_->EchoString(&context, request_, &reply);
      const Clock::time_point received = Clock::now();
      if (!status.ok()) {
        run_.failure(statusText(status));
        break;
      }
      if (!serializesTo(reply, expected_)) {
        run_.mismatch("reply differs from the request");
        break;
      }
      countReply(expected_.size(), sent, received);
    }
    endChain();
  }

  Stub* stub_;
  const StringMessage& request_;
  const std::string& expected_;
  std::thread thread_;
};

// ---------------------------------------------------------------------------
// Tests

template <typename Message>
using EchoIssue = typename UnaryWorker<Message, Message>::Issue;
template <typename Message>
using StreamIssue = typename StreamWorker<Message>::Issue;

// What one test needs: its messages, expected bytes and how to make a worker.
struct Test {
  std::string kind;  // "unary", "stream", "profile", "document", "pingpong"
  std::function<std::unique_ptr<Worker>(Run&, Stub*, int workerIndex, int workers)> makeWorker;
};

// The request objects live here for the whole run (workers keep references).
struct TestData {
  StringMessage string;
  SmallMessage small;
  MediumMessage medium;
  LargeMessage large;
  SmallMsgList smallList;
  MediumMsgList mediumList;
  LargeMsgList largeList;
  StringMessage payload;
  std::string stringBytes, smallBytes, mediumBytes, largeBytes, smallListBytes, mediumListBytes, largeListBytes,
      payloadBytes;
  std::vector<std::string> profileBytes;
  ChunkTable chunks;
};

template <typename Message>
Test echoTest(const Message& request, const std::string& expected, EchoIssue<Message> issue,
              int window) {
  return {"unary", [&request, &expected, issue, window](Run& run, Stub* stub, int, int) {
            return std::make_unique<EchoWorker<Message>>(run, stub, issue, window, request, expected);
          }};
}

template <typename Message>
Test streamTest(const std::string& expected, StreamIssue<Message> issue, std::uint32_t count) {
  return {"stream", [&expected, issue, count](Run& run, Stub* stub, int, int) {
            return std::make_unique<StreamWorker<Message>>(run, stub, issue, count, expected);
          }};
}

std::optional<Test> findTest(const std::string& name, const TestData& data, const Options& options) {
  const int window = options.window;
  const std::uint32_t streamCount = options.streamCount != 0 ? options.streamCount : kDefaultStreamCount;
  using Callback = std::function<void(grpc::Status)>;
  if (name == "RoundTripStringAsyncCB") {
    return echoTest<StringMessage>(
        data.string, data.stringBytes,
        [](Stub* s, grpc::ClientContext* c, const StringMessage* q, StringMessage* r, Callback f) {
          s->async()->EchoString(c, q, r, std::move(f));
        },
        window);
  }
  if (name == "RoundTripSmallMsgAsyncCB") {
    return echoTest<SmallMessage>(
        data.small, data.smallBytes,
        [](Stub* s, grpc::ClientContext* c, const SmallMessage* q, SmallMessage* r, Callback f) {
          s->async()->EchoSmall(c, q, r, std::move(f));
        },
        window);
  }
  if (name == "RoundTripMediumMsgAsyncCB") {
    return echoTest<MediumMessage>(
        data.medium, data.mediumBytes,
        [](Stub* s, grpc::ClientContext* c, const MediumMessage* q, MediumMessage* r, Callback f) {
          s->async()->EchoMedium(c, q, r, std::move(f));
        },
        window);
  }
  if (name == "RoundTripLargeMsgAsyncCB") {
    return echoTest<LargeMessage>(
        data.large, data.largeBytes,
        [](Stub* s, grpc::ClientContext* c, const LargeMessage* q, LargeMessage* r, Callback f) {
          s->async()->EchoLarge(c, q, r, std::move(f));
        },
        window);
  }
  if (name == "RoundTripSmallMsgListAsyncCB") {
    return echoTest<SmallMsgList>(
        data.smallList, data.smallListBytes,
        [](Stub* s, grpc::ClientContext* c, const SmallMsgList* q, SmallMsgList* r, Callback f) {
          s->async()->EchoSmallList(c, q, r, std::move(f));
        },
        window);
  }
  if (name == "RoundTripMediumMsgListAsyncCB") {
    return echoTest<MediumMsgList>(
        data.mediumList, data.mediumListBytes,
        [](Stub* s, grpc::ClientContext* c, const MediumMsgList* q, MediumMsgList* r, Callback f) {
          s->async()->EchoMediumList(c, q, r, std::move(f));
        },
        window);
  }
  if (name == "RoundTripLargeMsgListAsyncCB") {
    return echoTest<LargeMsgList>(
        data.largeList, data.largeListBytes,
        [](Stub* s, grpc::ClientContext* c, const LargeMsgList* q, LargeMsgList* r, Callback f) {
          s->async()->EchoLargeList(c, q, r, std::move(f));
        },
        window);
  }
  if (name == "StreamSmallMsgFromServer") {
    return streamTest<SmallMessage>(
        data.smallBytes,
        [](Stub* s, grpc::ClientContext* c, const StreamRequest* q, grpc::ClientReadReactor<SmallMessage>* r) {
          s->async()->StreamSmall(c, q, r);
        },
        streamCount);
  }
  if (name == "StreamMediumMsgFromServer") {
    return streamTest<MediumMessage>(
        data.mediumBytes,
        [](Stub* s, grpc::ClientContext* c, const StreamRequest* q, grpc::ClientReadReactor<MediumMessage>* r) {
          s->async()->StreamMedium(c, q, r);
        },
        streamCount);
  }
  if (name == "StreamLargeMsgFromServer") {
    return streamTest<LargeMessage>(
        data.largeBytes,
        [](Stub* s, grpc::ClientContext* c, const StreamRequest* q, grpc::ClientReadReactor<LargeMessage>* r) {
          s->async()->StreamLarge(c, q, r);
        },
        streamCount);
  }
  if (name == "UserProfileServiceCB") {
    return Test{"profile", [&data, window](Run& run, Stub* stub, int workerIndex, int) {
                  return std::make_unique<ProfileWorker>(run, stub, window, workerIndex, data.profileBytes);
                }};
  }
  if (name == "DocumentProcessingCB") {
    const std::uint32_t chunks = options.chunks;
    return Test{"document", [&data, window, chunks](Run& run, Stub* stub, int workerIndex, int workers) {
                  return std::make_unique<DocumentWorker>(run, stub, workerIndex, workers, chunks, window,
                                                          data.chunks);
                }};
  }
  if (name == "UnaryLatency") {
    return Test{"pingpong", [&data](Run& run, Stub* stub, int, int) {
                  return std::make_unique<PingPongWorker>(run, stub, data.payload, data.payloadBytes);
                }};
  }
  return std::nullopt;
}

void fillTestData(TestData& data, const Options& options) {
  data.string.set_str("Hello World");
  data.small = myelin::bench::makeSmall();
  data.medium = myelin::bench::makeMedium();
  data.large = myelin::bench::makeLarge();
  data.smallList = myelin::bench::makeSmallList();
  data.mediumList = myelin::bench::makeMediumList();
  data.largeList = myelin::bench::makeLargeList();
  data.payload.set_str(std::string(options.payload, 'x'));
  data.stringBytes = data.string.SerializeAsString();
  data.smallBytes = data.small.SerializeAsString();
  data.mediumBytes = data.medium.SerializeAsString();
  data.largeBytes = data.large.SerializeAsString();
  data.smallListBytes = data.smallList.SerializeAsString();
  data.mediumListBytes = data.mediumList.SerializeAsString();
  data.largeListBytes = data.largeList.SerializeAsString();
  data.payloadBytes = data.payload.SerializeAsString();
  if (options.test == "UserProfileServiceCB") {
    data.profileBytes.reserve(kProfileUsers);
    for (std::uint64_t id = 1; id <= kProfileUsers; ++id) {
      data.profileBytes.push_back(myelin::bench::makeUserProfile(id).SerializeAsString());
    }
  }
}

// ---------------------------------------------------------------------------
// Output

std::string jsonEscape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char code[8];
      std::snprintf(code, sizeof code, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      out += code;
    } else {
      out += c;
    }
  }
  return out;
}

struct Result {
  int threads = 0;
  double seconds = 0;
  std::uint64_t rpcs = 0;
  bool verified = false;
  std::uint64_t checksum = 0;
  LatencySummary latency;
  int window = 0;
  int channels = 0;
  std::string api;
  std::string error;
};

void printJson(const Options& options, const Result& result) {
  const double rps = result.seconds > 0 ? static_cast<double>(result.rpcs) / result.seconds : 0.0;
  std::string extra;
  char buffer[128];
  if (options.test.starts_with("Stream")) {
    std::snprintf(buffer, sizeof buffer, ", \"stream_count\": %u",
                  options.streamCount != 0 ? options.streamCount : kDefaultStreamCount);
    extra += buffer;
  } else if (options.test == "DocumentProcessingCB") {
    std::snprintf(buffer, sizeof buffer, ", \"chunks\": %u, \"chunk_bytes\": %zu", options.chunks,
                  myelin::bench::kChunkBytes);
    extra += buffer;
  } else if (options.test == "UnaryLatency") {
    std::snprintf(buffer, sizeof buffer, ", \"payload\": %zu", options.payload);
    extra += buffer;
  }
  const std::string error = result.error.empty() ? "" : ", \"error\": \"" + jsonEscape(result.error) + "\"";
  const LatencySummary& l = result.latency;
  std::printf(
      "{\"impl\": \"grpc\", \"test\": \"%s\", \"threads\": %d, \"seconds\": %.3f, \"rpcs\": %" PRIu64
      ", \"rps\": %.1f, \"verified\": %s, \"checksum\": \"%016" PRIx64
      "\", \"latency_us\": {\"p50\": %.1f, \"p90\": %.1f, \"p99\": %.1f, \"p999\": %.1f, \"max\": %.1f, "
      "\"mean\": %.1f, \"samples\": %" PRIu64
      "}, \"settings\": {\"window\": %d, \"channels\": %d, \"grpc_version\": \"%s\", \"api\": \"%s\", "
      "\"tls\": %s, \"compression\": \"none\", \"retries\": false%s}%s}\n",
      jsonEscape(options.test).c_str(), result.threads, result.seconds, result.rpcs, rps,
      result.verified ? "true" : "false", result.checksum, l.p50, l.p90, l.p99, l.p999, l.max, l.mean, l.samples,
      result.window, result.channels, jsonEscape(grpc::Version()).c_str(), result.api.c_str(),
      bench::TlsEnv::fromEnvironment().client() ? "true" : "false", extra.c_str(),
      error.c_str());
  std::fflush(stdout);
}

std::shared_ptr<grpc::Channel> makeChannel(const std::string& target, int index) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  args.SetCompressionAlgorithm(GRPC_COMPRESS_NONE);
  // Retries buffer every message for a possible resend; the benchmark never retries.
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  // Channels with equal arguments share one connection unless told otherwise:
  // a private subchannel pool and a distinct argument give each its own.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("myelin.bench.channel_index", index);
  const bench::TlsEnv tls = bench::TlsEnv::fromEnvironment();
  if (!tls.client()) return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  // TLS as Myelin's client: the suite's certificate, checked for its name.
  grpc::SslCredentialsOptions opts;
  opts.pem_root_certs = bench::TlsEnv::read(tls.ca);
  args.SetSslTargetNameOverride("localhost");
  return grpc::CreateCustomChannel(target, grpc::SslCredentials(opts), args);
}

std::uint64_t totalCompleted(const std::vector<std::unique_ptr<Worker>>& workers) {
  std::uint64_t total = 0;
  for (const auto& worker : workers) total += worker->completed();
  return total;
}

Clock::time_point after(Clock::time_point from, double seconds) {
  return from + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

int runTest(const Options& options) {
  TestData data;
  fillTestData(data, options);
  const std::optional<Test> test = findTest(options.test, data, options);
  if (!test) {
    std::fprintf(stderr, "grpc_client: unknown test '%s'\n", options.test.c_str());
    return kExitUsage;
  }

  Result result;
  result.threads = options.threads;
  if (test->kind == "profile") result.threads = kProfileThreads;
  if (test->kind == "document" && !options.threadsGiven) result.threads = 100;
  result.channels = options.channels != 0 ? options.channels : std::min(result.threads, 8);
  result.window = test->kind == "pingpong" || test->kind == "stream" ? 1 : options.window;
  result.api = test->kind == "pingpong" ? "sync" : "callback";

  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<Stub>> stubs;
  const auto connectDeadline = std::chrono::system_clock::now() + std::chrono::seconds(10);
  for (int i = 0; i < result.channels; ++i) {
    channels.push_back(makeChannel(options.connect, i));
    if (!channels.back()->WaitForConnected(connectDeadline)) {
      result.error = "cannot connect to " + options.connect;
      printJson(options, result);
      return kExitFailed;
    }
    stubs.push_back(BenchService::NewStub(channels.back()));
  }

  Run run;
  std::vector<std::unique_ptr<Worker>> workers;
  for (int i = 0; i < result.threads; ++i) {
    workers.push_back(test->makeWorker(run, stubs[static_cast<std::size_t>(i % result.channels)].get(), i,
                                       result.threads));
  }

  const Clock::time_point begin = Clock::now();
  if (options.warmup <= 0) run.setPhase(Phase::kMeasure);
  for (auto& worker : workers) worker->start();
  run.sleepUntil(after(begin, options.warmup));

  run.setPhase(Phase::kMeasure);
  const Clock::time_point measureBegin = Clock::now();
  const std::uint64_t countBegin = totalCompleted(workers);
  run.sleepUntil(after(measureBegin, options.duration));
  const std::uint64_t countEnd = totalCompleted(workers);
  const Clock::time_point measureEnd = Clock::now();
  run.setPhase(Phase::kStop);

  // Stop issuing and end the calls in flight (they are not counted).
  for (auto& worker : workers) worker->cancelInFlight();
  const Clock::time_point drainDeadline = Clock::now() + kDrainTimeout;
  for (auto& worker : workers) {
    if (!worker->waitIdle(drainDeadline)) {
      result.error = "calls still in flight " + std::to_string(kDrainTimeout.count()) + " s after the end";
      printJson(options, result);
      std::fflush(stdout);
      std::_Exit(kExitFailed);
    }
  }

  result.seconds = std::chrono::duration<double>(measureEnd - measureBegin).count();
  result.rpcs = countEnd - countBegin;
  std::vector<const LatencyHistogram*> histograms;
  for (const auto& worker : workers) {
    histograms.push_back(&worker->latency());
    result.checksum += worker->checksum();
  }
  result.latency = summarize(histograms);
  result.verified = !run.hasMismatch() && !run.hasFailure();
  result.error = run.error();
  printJson(options, result);

  workers.clear();
  stubs.clear();
  channels.clear();
  if (run.hasMismatch()) return kExitMismatch;
  if (run.hasFailure()) return kExitFailed;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  try {
    options = parseOptions(argc, argv);
  } catch (const std::invalid_argument& e) {
    if (e.what()[0] != '\0') std::fprintf(stderr, "grpc_client: %s\n", e.what());
    printUsage(argv[0]);
    return kExitUsage;
  }
  return runTest(options);
}
