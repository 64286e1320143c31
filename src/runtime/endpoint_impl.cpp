// EndpointImpl: handshake, the reader thread's demultiplexing, lanes and
// their execution, the send path (staging per lane, flush, batching), and
// faults. The threading rules are in docs/threading.md.
#include "runtime/endpoint_impl.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <initializer_list>
#include <span>
#include <thread>
#include <tuple>
#include <unordered_set>
#include <utility>
#include <cstring>

#include "runtime/async_frame.h"
#include "runtime/clock.h"
#include "runtime/deadline_timer.h"
#include "runtime/executor.h"
#include "runtime/thread_name.h"
#include "runtime/uncaught.h"
#include "schema/local_schema.h"
#include "transport/batch_aggregator.h"
#include "wire/frame.h"

namespace myelin::detail {

namespace {
/// Short enough for std::string's inline storage: made without memory.
constexpr const char* kOutOfMemoryReason = "out of memory";

/// A failed call's reason as `make` words it, or one that needs no memory
/// when even that cannot be made (out of memory): the call ends either way.
/// Were it to throw once a reply's entry is taken, the connection would
/// fault and a caller waiting on another thread would wait for good.
template <class Make>
std::string reasonOr(Make&& make) noexcept {
  try {
    return make();
  } catch (...) {
    return kOutOfMemoryReason;
  }
}

/// Runs `fn`; an exception that leaves it goes to `onThrow` as text (its
/// what(), or that it was no std::exception). For threads that have no
/// caller to throw to: the reader, and pool threads.
template <class F, class OnThrow>
void catchingAll(F&& fn, OnThrow&& onThrow) noexcept {
  try {
    fn();
  } catch (const std::exception& e) {
    onThrow(e.what());
  } catch (...) {
    onThrow("an exception that is not a std::exception");
  }
}

/// Kind bytes of queued entries that never travel: a completed Async whose
/// callbacks must run in order on its caller's lane, and a frame that was
/// already run out of order (a continuation taken ahead of its queue).
constexpr std::uint8_t kInternalCompletion = 0xff;
constexpr std::uint8_t kTombstone = 0xfe;

/// Queued entries are `seq:u32 (native order)` + the frame as received; seq
/// numbers reply-expecting calls in arrival order, which is send order.
constexpr std::size_t kSeqPrefix = 4;
/// A queued completion: the sequence prefix, a one-byte length, the kind
/// and the state's pointer (postCompletion).
constexpr std::size_t kCompletionEntry = kSeqPrefix + 2 + sizeof(AsyncStateBase*);

/// A lane that stays dry keeps at most this much of a burst's queue storage
/// (inbox and work each): above kIdleLaneBufferLimit, it shrinks to
/// kIdleLaneBufferKeep once the lane has been dry for idleLaneTrimMs.
/// Batches of small calls stay far below the limit.
constexpr std::size_t kIdleLaneBufferLimit = 1024 * 1024;
constexpr std::size_t kIdleLaneBufferKeep = 256 * 1024;

struct QueuedFrame {
  std::uint32_t seq;
  std::uint8_t* body;
  std::size_t bodyLen;
  std::size_t total;  // bytes of the whole entry
};

// A frame whose prefix takes more than one byte (a body of 128 bytes or
// more): out of line, so that the one-byte path inlines.
[[gnu::noinline]] QueuedFrame parseQueuedLong(ByteBuffer& b, std::size_t pos) {
  QueuedFrame q;
  std::uint8_t* frame = b.data() + pos + kSeqPrefix;
  std::memcpy(&q.seq, b.data() + pos, kSeqPrefix);
  auto span = peekFrame(frame, b.size() - pos - kSeqPrefix, ~std::size_t{0});
  q.body = frame + span->headerLen;
  q.bodyLen = span->bodyLen;
  q.total = kSeqPrefix + span->total();
  return q;
}

inline QueuedFrame parseQueued(ByteBuffer& b, std::size_t pos) {
  std::uint8_t* frame = b.data() + pos + kSeqPrefix;
  // Queued frames were checked as read: a one-byte prefix needs no bound
  // (peekFrame's checks of the room and the limit, callgrind).
  if (frame[0] - 1u >= 0x7fu) [[unlikely]] return parseQueuedLong(b, pos);
  QueuedFrame q;
  std::memcpy(&q.seq, b.data() + pos, kSeqPrefix);
  q.body = frame + 1;
  q.bodyLen = frame[0];
  q.total = kSeqPrefix + 1 + q.bodyLen;
  return q;
}

/// Takes the next frame of lane->work (already swapped out of the inbox),
/// skipping tombstones; false when `work` is used up. The lane's runner only.
bool nextInWork(Lane* lane, QueuedFrame& q) {
  while (lane->workPos < lane->work.size()) {
    q = parseQueued(lane->work, lane->workPos);
    lane->workPos += q.total;
    if (q.body[0] != kTombstone) return true;
  }
  return false;
}

std::int64_t nowNs() { return steadyNowNs(); }

template <class A, class V>
void raiseTo(A& atom, V v) {
  auto cur = atom.load(std::memory_order_relaxed);
  while (v > cur && !atom.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

void add(std::atomic<std::uint64_t>& a, std::uint64_t v) { a.fetch_add(v, std::memory_order_relaxed); }

std::uint8_t kindFor(FrameType t, const Lane* lane, bool nested) {
  // The slot is in the sender's namespace for our own lanes and in the
  // receiver's for the peer's lanes.
  return static_cast<std::uint8_t>(static_cast<std::uint8_t>(t) | (lane->localOrigin ? 0 : kReceiverLaneBit) |
                                   (nested ? kNestedBit : 0));
}

/// The frame a call of `mode` travels in, by mode: a table, not a chain of
/// tests (11 instructions a call went to 6; callgrind, a streamed call's
/// open()). At namespace scope: a table local to the function was copied to
/// the stack on every call, and perf put 8 % of the constructor's samples
/// on reading it back.
constexpr FrameType kCallFrameTypeByMode[8] = {FrameType::kCallSync,  FrameType::kCallVoid,  FrameType::kCallAsync,
                                               FrameType::kCallVoid,  FrameType::kCallAsync, FrameType::kCallAsync,
                                               FrameType::kCallAsync, FrameType::kCallAsync};
static_assert(static_cast<int>(CallMode::kSync) == 0 && static_cast<int>(CallMode::kAsyncVoid) == 1 &&
              static_cast<int>(CallMode::kAsync) == 2 && static_cast<int>(CallMode::kAsyncStatus) == 3 &&
              static_cast<int>(CallMode::kAsyncRef) == 4);
constexpr FrameType callFrameType(CallMode mode) {
  return kCallFrameTypeByMode[static_cast<std::uint8_t>(mode) & 7];
}

/// Writes a frame's head at `p` (12 bytes of room): placeholder length,
/// kind, slot. Returns its length.
std::size_t putFrameHead(std::uint8_t* p, Lane* lane, FrameType t, bool nested) {
  p[0] = 0;
  p[1] = kindFor(t, lane, nested);
  return 2 + putVarintInRoom(p + 2, lane->slot);
}

/// Opens a frame in lane->out (outMu held): placeholder length, kind, slot.
std::size_t openFrame(Lane* lane, FrameType t, bool nested = false) {
  std::size_t start = lane->out.size();
  lane->out.commit(putFrameHead(lane->out.reserveTail(12), lane, t, nested));
  return start;
}

/// openFrame() for a call: also the method's wire id, in the same room.
/// (One reservation instead of four: callgrind of StreamSmallMsgFromServer's
/// service, opening a call took 266 -> 222 instructions.)
inline __attribute__((always_inline)) std::size_t openCallFrame(Lane* lane, FrameType t, bool nested,
                                                                 std::uint64_t method) {
  std::size_t start = lane->out.size();
  std::uint8_t* p = lane->out.reserveTail(22);
  std::size_t n = putFrameHead(p, lane, t, nested);
  lane->out.commit(n + putVarintInRoom(p + n, method));
  return start;
}

}  // namespace

// ---------------------------------------------------------------------------
// Thread state

void ThreadState::flushDeferred() {
  restartRamp();
  while (!deferredFlush.empty()) {
    std::weak_ptr<EndpointImpl> weak = std::move(deferredFlush.back().ep);
    deferredFlush.pop_back();
    if (auto ep = weak.lock()) ep->flush();
  }
}

ThreadState::~ThreadState() {
  flushDeferred();
  for (auto& o : own) {
    if (auto ep = o.ep.lock()) ep->releaseLocalLane(o.lane);
  }
  tlsThreadState = nullptr;
}

ThreadState& initThreadState() {
  thread_local ThreadState ts;
  tlsThreadState = &ts;
  return ts;
}

namespace {
/// Runs `f`, which lets go of objects, with `ep` as this thread's current
/// endpoint, so that a destructor that runs in it calls that connection.
template <class F>
void releaseAs(EndpointImpl* ep, F&& f) {
  ThreadState& ts = threadState();
  EndpointImpl* prev = std::exchange(ts.current, ep);
  f();
  ts.current = prev;
}
}  // namespace

void EndpointImpl::LeftAtClose::release() noexcept {
  values.release();
  // With the endpoint current: a destructor's calls fail with
  // ConnectionClosedError rather than going to another connection.
  std::shared_ptr<EndpointImpl> current = ep.lock();
  releaseAs(current.get(), [&] { objects.forEachCore([](ObjectCore* c) { releaseCore(c); }); });
}

void releaseCoresAs(EndpointImpl* ep, std::span<ObjectCore* const> cores) {
  releaseAs(ep, [&] {
    for (ObjectCore* c : cores) {
      if (c) releaseCore(c);
    }
  });
}

EndpointImpl& currentEndpointOutside() {
  ThreadState& ts = threadState();
  if (ts.connected) return *ts.connected;
  throw NoEndpointOnStackError();
}

// ---------------------------------------------------------------------------
// Construction, handshake, shutdown

namespace {
// Every endpoint that exists, for pin(): code that holds only an endpoint's
// address (an Async state canceled or timing out on another thread) takes a
// reference through it, or learns that the endpoint is gone.
std::mutex liveMu;
std::unordered_set<EndpointImpl*>& liveEndpoints() {
  static auto* set = new std::unordered_set<EndpointImpl*>();  // outlives static destruction
  return *set;
}
}  // namespace

std::shared_ptr<EndpointImpl> EndpointImpl::pin(EndpointImpl* raw) {
  std::lock_guard lock(liveMu);
  if (!liveEndpoints().count(raw)) return nullptr;
  return raw->weak_from_this().lock();
}

EndpointImpl::EndpointImpl(std::unique_ptr<TcpSocket> sock, const EndpointConfig& cfg, bool isServer)
    : cfg_(cfg), sock_(std::move(sock)), isServer_(isServer) {
  peerAddress_ = sock_->peerAddress();
  counters_.sinceNs.store(nowNs(), std::memory_order_relaxed);
  std::lock_guard lock(liveMu);
  liveEndpoints().insert(this);
}

EndpointImpl::~EndpointImpl() {
  {
    std::lock_guard lock(liveMu);
    liveEndpoints().erase(this);
  }
  if (connected()) {
    // Send what is staged (calls made just before the last reference went,
    // frames a thread deferred until it goes idle), as far as the socket
    // takes it without waiting.
    std::lock_guard lock(writeMu_);
    gatherLocked();
    drainLocked();
  }
  close(EndpointState::kClosed, "endpoint destroyed");
  if (reader_.joinable()) {
    if (reader_.get_id() == std::this_thread::get_id()) {
      reader_.detach();
    } else {
      reader_.join();
    }
  }
  // Completed Async values still queued on a lane hold a reference; run their
  // callbacks so nothing leaks and nobody waits forever.
  auto drain = [](ByteBuffer& b, std::size_t pos) {
    while (pos < b.size()) {
      QueuedFrame q = parseQueued(b, pos);
      if (q.body[0] == kInternalCompletion) {
        AsyncStateBase* st;
        std::memcpy(&st, q.body + 1, sizeof st);
        st->runCallbacks();
        st->release();
      }
      pos += q.total;
    }
  };
  for (auto* lanes : {&localLanes_, &peerLanes_}) {
    for (auto& l : *lanes) {
      drain(l->work, l->workPos);
      drain(l->inbox, 0);
      // A pinned lane's thread may be this very thread: a pool thread joins
      // it once it has left this destructor.
      if (l->pinned) Executor::instance().post([p = std::move(l->pinned)] {});
    }
  }
  drain(batch_, 0);  // what a read could not queue (readFromSocket), after what it did
}

std::string EndpointImpl::error() const {
  std::lock_guard lock(stateMu_);
  return error_;
}

void EndpointImpl::sendHello(int timeoutMs) {
  ByteBuffer b;
  appendFrame(b, [this](WireWriter& w) {
    w.rawByte(static_cast<std::uint8_t>(FrameType::kHello));
    LocalSchema::instance().frozen().encode(w.buffer(), HelloLimits{cfg_.maxMessageSize});
  });
  iovec v{b.data(), b.size()};
  if (!sock_->sendAll(&v, 1, timeoutMs)) {
    throw ConnectionClosedError(errno == ETIMEDOUT ? "handshake: " + peerAddress_ + " did not take our HELLO within " +
                                                         std::to_string(timeoutMs) + " ms"
                                                   : "handshake: cannot send to " + peerAddress_);
  }
}

namespace {
/// What is left of `totalMs` since `start` (at least 1: the last step still
/// gets to look).
int msLeft(std::chrono::steady_clock::time_point start, std::uint32_t totalMs) {
  auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  return static_cast<int>(std::max<std::int64_t>(1, std::int64_t{totalMs} - spent.count()));
}
}  // namespace

void EndpointImpl::throwFrameTooLarge(std::size_t bodyBytes, const char* what) const {
  throw UnsendableValueError(std::string(what) + " would be a message of " + std::to_string(bodyBytes) +
                             " bytes; the peer accepts at most " + std::to_string(peerMaxMessageSize()) +
                             " (its maxMessageSize)");
}

void EndpointImpl::clipErrorText(std::string& text) const {
  constexpr std::string_view kCut = "... (cut)";
  const std::size_t most = std::min<std::uint64_t>(64 * 1024, peerMaxMessageSize() / 2);
  if (text.size() <= most) return;
  std::size_t keep = most > kCut.size() ? most - kCut.size() : 0;
  // Not inside a UTF-8 sequence: back to the byte that starts it.
  while (keep > 0 && (static_cast<unsigned char>(text[keep]) & 0xC0) == 0x80) --keep;
  text.resize(keep);
  text += kCut;
}

void EndpointImpl::receiveHello(int timeoutMs) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  for (;;) {
    if (!tls_ && rx_.size() >= 3 && rx_.data()[0] == 0x16 && rx_.data()[1] == 0x03 && rx_.data()[2] <= 0x04) {
      // A TLS record (a ClientHello or ServerHello), not a frame.
      throw InvalidMessageError("handshake: the peer speaks TLS and TLS is off on this side");
    }
    if (auto span = peekFrame(rx_.data(), rx_.size(), cfg_.maxMessageSize); span && rx_.size() >= span->total()) {
      const std::uint8_t* body = rx_.data() + span->headerLen;
      if (body[0] == static_cast<std::uint8_t>(FrameType::kGoodbye) && span->bodyLen > 1) {
        // Refused before the handshake (e.g. a TLS service met a plain client).
        WireReader r(body + 1, span->bodyLen - 1);
        throw ConnectionClosedError("refused by " + peerAddress_ + ": " + std::string(r.rawString()));
      }
      if (body[0] != static_cast<std::uint8_t>(FrameType::kHello)) {
        throw InvalidMessageError("handshake: the first message is not a HELLO (kind " + std::to_string(body[0]) +
                                  ")");
      }
      SchemaDescriptor peer = SchemaDescriptor::decode(body + 1, span->bodyLen - 1);
      // Frames the peer would refuse are refused here instead, each alone
      // (checkFrameFits). A peer that names no limit has the default's.
      // A larger limit than an EndpointConfig can hold is as good as none.
      const std::uint64_t limit = peer.limits.maxMessageSize.value_or(EndpointConfig{}.maxMessageSize);
      if (limit < EndpointConfig::kMinMessageSize) {
        throw InvalidMessageError("handshake: the peer announced a maxMessageSize of " + std::to_string(limit) +
                                  " bytes, below " + std::to_string(EndpointConfig::kMinMessageSize));
      }
      peerMaxMessageSize_.store(std::min<std::uint64_t>(limit, UINT32_MAX), std::memory_order_relaxed);
      LocalSchema& ls = LocalSchema::instance();
      const SchemaDescriptor& local = ls.frozen();
      neg_ = std::make_unique<Negotiated>(local, ls.implementedFlat(), ls.calledFlat(), std::move(peer));
      neg_->setEndpoint(this);
      rxPos_ = span->total();
      return;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || !sock_->waitReadable(static_cast<int>(left.count()))) {
      throw InvalidMessageError("handshake: no HELLO from " + peerAddress_ + " within " + std::to_string(timeoutMs) +
                                " ms");
    }
    long n = sock_->recvSome(rx_.reserveTail(16 * 1024), 16 * 1024);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) continue;  // a TLS socket: nothing decrypted yet
    if (n < 0) throw ConnectionClosedError("connection lost: " + sock_->errorText(errno));
    if (n == 0) throw ConnectionClosedError("handshake: " + peerAddress_ + " closed the connection");
    rx_.commit(static_cast<std::size_t>(n));
    // TLS records the read made (a key update) leave now.
    if (sock_->outputPending() && !sock_->sendAll(nullptr, 0, timeoutMs)) {
      throw ConnectionClosedError("handshake: cannot send to " + peerAddress_);
    }
  }
}

void EndpointImpl::startClient() {
  // The TLS handshake and the HELLO exchange share connectTimeoutMs.
  const auto start = std::chrono::steady_clock::now();
  if (tls_) {
    try {
      sock_->startTls(*tls_, tlsHost_, static_cast<int>(cfg_.connectTimeoutMs));
    } catch (const std::exception& e) {
      close(EndpointState::kFaulted, e.what());
      throw ConnectionClosedError(e.what());
    }
  }
  try {
    sendHello(msLeft(start, cfg_.connectTimeoutMs));
    receiveHello(msLeft(start, cfg_.connectTimeoutMs));
  } catch (const std::exception& e) {
    close(EndpointState::kFaulted, e.what());
    throw ConnectionClosedError(std::string("handshake with ") + peerAddress_ + " failed: " + e.what());
  }
  sock_->setNonBlocking();
  // Nobody else holds the endpoint yet: nothing can have closed it.
  state_.store(EndpointState::kConnected, std::memory_order_release);
  reader_ = std::thread([this] { readerMain(nullptr); });
}

void EndpointImpl::startServer(std::function<void(std::shared_ptr<EndpointImpl>)> onReady) {
  reader_ = std::thread([this, cb = std::move(onReady)]() mutable { readerMain(std::move(cb)); });
}

void EndpointImpl::faultLater(std::string what) {
  Executor::instance().post([weak = weak_from_this(), what = std::move(what)] {
    if (std::shared_ptr<EndpointImpl> ep = weak.lock()) {
      ep->close(EndpointState::kFaulted, "invalid message from " + ep->peerAddress_ + ": " + what);
    }
  });
}

void EndpointImpl::close(EndpointState st, const std::string& reason) noexcept {
  {
    std::lock_guard lock(stateMu_);
    EndpointState cur = state_.load();
    if (cur == EndpointState::kClosed || cur == EndpointState::kFaulted) return;
    // A close throws nothing of its own: it is how running out of memory
    // ends a connection (and the reader thread cannot be thrown at).
    try {
      error_ = reason;
    } catch (...) {
      error_ = kOutOfMemoryReason;  // inline in the string: allocates nothing
    }
    state_.store(st, std::memory_order_release);
  }
  sock_->shutdown();
  failPending(reason);
  {
    std::lock_guard lock(idleMu_);
    ++idleGeneration_;
    idleCv_.notify_all();
  }
  // Values held for the peer and objects only the peer referred to die
  // with the connection, on a pool thread (handles the service's code still
  // has keep their values). Taking them out allocates nothing; out of
  // memory queuing the task, they go when the endpoint ends.
  LeftAtClose& left = *leftAtClose_;
  left.values = held_.close();
  left.objects = exports_.clear();
  left.ep = weak_from_this();
  if (!left.values.empty() || !left.objects.empty()) {
    try {
      Executor::instance().post([left = leftAtClose_] { left->release(); });
    } catch (...) {
    }
  }
  if (onClosed_) {
    // The service's notice of it; out of memory queuing it, the connection
    // is closed all the same, unannounced.
    try {
      if (auto self = weak_from_this().lock()) onClosed_(std::move(self));
    } catch (...) {
    }
  }
}

bool EndpointImpl::markConnected() {
  std::lock_guard lock(stateMu_);
  if (state_.load() != EndpointState::kConnecting) return false;
  state_.store(EndpointState::kConnected, std::memory_order_release);
  return true;
}

void EndpointImpl::disconnect() {
  if (!connected()) return;
  flush();
  ByteBuffer b;
  appendFrame(b, [](WireWriter& w) {
    w.rawByte(static_cast<std::uint8_t>(FrameType::kGoodbye));
    w.rawString("disconnect() called");
  });
  {
    // Behind everything staged so far; sent blocking, as the last thing.
    std::lock_guard lock(writeMu_);
    gatherLocked();
    wqBytes_ += b.size();
    wq_.push_back(std::move(b));
    for (int i = 0; i < 200 && !drainLocked(); ++i) {
      pollfd p{sock_->fd(), POLLOUT, 0};
      ::poll(&p, 1, 10);
    }
  }
  close(EndpointState::kClosed, "disconnected by this side");
}

bool EndpointImpl::ranDryLocked(Lane* lane) {
  if (lane->work.capacity() <= kIdleLaneBufferLimit && lane->inbox.capacity() <= kIdleLaneBufferLimit) {
    lane->dryAtNs = 0;
    return false;
  }
  // A burst's storage goes back, or every lane a flood went through would
  // keep up to its receive window twice (inbox and work) for the life of
  // the connection; but not while the lane is in use: given back each time
  // it ran dry, the next burst faulted it in again (with 100 threads each
  // streaming from the service, 114,000 page faults a second).
  if (cfg_.idleLaneTrimMs == 0) {
    giveBackQueueStorage(lane);
    return false;
  }
  lane->dryAtNs = steadyNowNs();
  return !laneTrimArmed_.load(std::memory_order_relaxed);
}

void EndpointImpl::armLaneTrim(std::int64_t delayNs) {
  if (laneTrimArmed_.exchange(true, std::memory_order_acq_rel)) return;
  if (auto self = weak_from_this().lock()) {
    BatchAggregator::instance().armLaneTrim(self, std::chrono::nanoseconds(delayNs));
  }
}

void EndpointImpl::trimIdleLanes() {
  // Cleared before the look: a lane that runs dry from here on arms again.
  laneTrimArmed_.store(false, std::memory_order_release);
  const std::int64_t now = steadyNowNs();
  const std::int64_t delayNs = idleLaneTrimNs();
  std::int64_t soonest = 0;  // when the next lane is due (0: none waits)
  for (std::size_t i = 0; Lane* l = laneAt(i); ++i) {
    std::lock_guard lock(l->mu);
    if (l->dryAtNs == 0) continue;
    // In use again: its dry spell starts anew. Timed from now, not only when
    // it next runs dry: some ways of going idle do not pass ranDryLocked (a
    // turn that ends just as the queue does, a parallel lane). Without a
    // runner, nobody else touches `work` (runOneFrame takes it under this
    // mutex).
    if (l->runner || l->scheduled || l->inFlight || l->hasQueued()) {
      l->dryAtNs = now;
    }
    if (now - l->dryAtNs < delayNs) {
      const std::int64_t due = l->dryAtNs + delayNs;
      soonest = soonest == 0 ? due : std::min(soonest, due);
      continue;
    }
    giveBackQueueStorage(l);
  }
  if (soonest) armLaneTrim(soonest - now);
}

void EndpointImpl::giveBackQueueStorage(Lane* lane) {
  lane->work.clearAndTrim(kIdleLaneBufferLimit, kIdleLaneBufferKeep);
  lane->workPos = 0;
  lane->inbox.clearAndTrim(kIdleLaneBufferLimit, kIdleLaneBufferKeep);
  lane->dryAtNs = 0;
}

Lane* EndpointImpl::laneAt(std::size_t i) {
  std::lock_guard lock(lanesMu_);
  if (i < localLanes_.size()) return localLanes_[i].get();
  i -= localLanes_.size();
  return i < peerLanes_.size() ? peerLanes_[i].get() : nullptr;
}

void EndpointImpl::failPending(const std::string& reason) {
  // Nothing that decides whether a call ends allocates: out of memory, a
  // call left pending would be waited for for good. Lanes are visited by
  // index (laneAt), entries taken in runs of a fixed size, and reasons fall
  // back to one that needs no memory.
  auto end = [&](Lane* l, const PendingReply& p) noexcept {
    if (p.sync) {
      SyncReply* sr = p.sync;
      sr->waiter->notifyWith([&] {
        sr->ok = false;
        sr->error = AsyncError::kConnectionClosed;
        sr->message = reasonOr([&] { return reason; });
        sr->done.store(true, std::memory_order_release);
      });
      noteFinished(1);
      return;
    }
    if (cfg_.asyncValueThrottle && l->localOrigin) noteAsyncAnswered(l);
    try {
      p.async->completeWithError(AsyncError::kConnectionClosed, reasonOr([&] { return reason; }));
    } catch (...) {
      // Out of memory while its completion was queued: it has ended (its
      // waiters woke) but its callbacks do not run. The others still end.
    }
    p.async->release();
  };
  for (std::size_t i = 0; Lane* l = laneAt(i); ++i) {
    std::array<PendingReply, 32> run;
    std::size_t from = 0;
    for (;;) {
      std::size_t n = 0;
      {
        std::lock_guard lock(l->mu);
        l->pending.drainSome(run.size(), from, [&](PendingReply&& p) { run[n++] = p; });
        if (n == 0) {
          for (Waiter* w : l->waiters) w->notify();  // under l->mu: a waiter cannot leave meanwhile
        }
      }
      if (n == 0) break;
      for (std::size_t k = 0; k < n; ++k) {
        if (run[k].sync || run[k].async) end(l, run[k]);  // neither: abandoned by its caller
      }
    }
  }
}

void EndpointImpl::noteFinished(std::uint64_t n) {
  // Pairs with waitForIdle, which counts itself in idleWaiters_ and then
  // reads finished_ (both seq_cst): it sees this count, or this sees it.
  finished_.fetch_add(n, std::memory_order_seq_cst);
  if (idleWaiters_.load(std::memory_order_seq_cst) > 0) [[unlikely]] {
    std::lock_guard lock(idleMu_);
    ++idleGeneration_;
    idleCv_.notify_all();
  }
}

bool EndpointImpl::idleNow() {
  // Whatever finished had begun before (its begin happens before its end:
  // the lane's lock or the thread orders them), and the counts only grow:
  // with `finished_` read first, what began can only have grown by the
  // time it is read, so equal counts mean all of it had finished.
  const std::uint64_t done = finished_.load(std::memory_order_seq_cst);
  std::uint64_t begun = othersBegun_.load(std::memory_order_seq_cst);
  std::lock_guard lock(lanesMu_);
  for (auto* lanes : {&localLanes_, &peerLanes_}) {
    for (auto& l : *lanes) {
      std::lock_guard laneLock(l->mu);
      begun += l->callsEntered;
    }
  }
  return begun == done;
}

// ---------------------------------------------------------------------------
// Reader thread

namespace {
/// Set while a thread reads an endpoint's socket: lets schedule() hand the
/// reading thread the idle lanes it routed frames to, to run one after
/// another right after reading, instead of waking an executor
/// (docs/threading.md, inline execution).
struct ReadScope {
  EndpointImpl* ep;
  bool mayClaim;
  bool claimed = false;
};
/// Lane::runner of a lane queued among the reader's claims (claimed in its
/// read, or queued again after a turn) and not running now: its owner,
/// beginning a wait, may still take it (runQueued), and the timer may hand
/// it to the executor (releaseClaims).
const char kClaimedTag = 0;
const void* const kClaimed = &kClaimedTag;
thread_local ReadScope* tlsRead = nullptr;
}  // namespace

Waiter* Lane::waiter() const {
  if (waiters.empty()) return nullptr;
  // Two threads wait on the lane: its owner in a call, and the thread that
  // runs the lane, in a call a callback of the lane makes. Telling the most
  // recent of a frame when the other runs the lane left the frame to nobody
  // (the runner slept in its poll, the owner could not take the lane): a
  // callback's call waiting for a call-back of the peer hung.
  if (runner && runner != kClaimed) {
    const Waiter* mine = &static_cast<const ThreadState*>(runner)->waiter;
    for (Waiter* w : waiters) {
      if (w == mine) return w;
    }
  }
  return waiters.back();
}

void EndpointImpl::readerMain(std::function<void(std::shared_ptr<EndpointImpl>)> onReady) {
  nameThisThread("myelin-reader");
  try {
    if (isServer_) {
      // The TLS handshake and the HELLO exchange share handshakeTimeoutMs.
      const auto start = std::chrono::steady_clock::now();
      if (tls_) {
        try {
          sock_->startTls(*tls_, "", static_cast<int>(cfg_.handshakeTimeoutMs));
        } catch (const TlsPlainPeerError& e) {
          // Tell the plain client why, in its own language, then fault.
          ByteBuffer b;
          appendFrame(b, [](WireWriter& w) {
            w.rawByte(static_cast<std::uint8_t>(FrameType::kGoodbye));
            w.rawString("this service requires TLS");
          });
          iovec v{b.data(), b.size()};
          sock_->sendAll(&v, 1, msLeft(start, cfg_.handshakeTimeoutMs));
          throw;
        }
      }
      sendHello(msLeft(start, cfg_.handshakeTimeoutMs));
      receiveHello(msLeft(start, cfg_.handshakeTimeoutMs));
      sock_->setNonBlocking();
      // stop() may have closed it while the HELLOs crossed: it stays closed
      // (its close callback has run), and nobody hears of it as connected.
      if (!markConnected()) return;
      if (onReady) onReady(shared_from_this());
    }
  } catch (const InvalidMessageError& e) {
    close(EndpointState::kFaulted, std::string("invalid message from ") + peerAddress_ + ": " + e.what());
    return;
  } catch (const std::exception& e) {
    close(EndpointState::kFaulted, e.what());
    return;
  }
  ThreadState& ts = threadState();
  ts.isReader = true;
  {
    std::lock_guard lock(readerWaiterMu_);
    readerWaiter_ = &ts.waiter;
  }
  // Frames that arrived together with the peer's HELLO.
  if (!readAsReader(ts)) return;
  while (connected()) {
    // What a flush throws (out of memory) leaves the frames staged for the
    // next one; thrown out of this thread, it would end the process.
    runReporting("the reader's flush", [&] { ts.flushDeferred(); });
    // A caller reading for its reply could not queue what it read (tested
    // with a plain load first: no locked instruction per wake-up).
    if (batchOwed_.load(std::memory_order_relaxed) && batchOwed_.exchange(false, std::memory_order_acq_rel) &&
        !readAsReader(ts)) {
      return;
    }
    if (callerWatching_.load(std::memory_order_acquire)) {
      // A caller blocked in a sync call is watching the socket for its
      // reply: let it read, so the reply costs no wake-up of it. Check back
      // now and then: if the watcher has been out of its poll (running a
      // callback, which may itself block) for a whole period, read for it.
      // The period stays short: when the last watcher leaves, nobody wakes
      // this thread (a wake-up per sync call would cost more), so what
      // arrives then waits for the end of the period. (Doubling it to 16 ms
      // while the watcher kept up delayed Async replies after a run of sync
      // calls by 3.6 ms at the median.)
      readerSpin_.interrupt();
      bool wasOut = !watcherInPoll_.load(std::memory_order_acquire);
      ts.waiter.waitOrReadable(-1, kReaderParkMs);
      if (wantWrite_.load()) writePending();
      // TLS plaintext the watcher left in the session when it stopped
      // watching (it woke us): its poll did not see it.
      if (sock_->inputBuffered() && !readAsReader(ts)) return;
      if (wasOut && !watcherInPoll_.load(std::memory_order_acquire) && callerWatching_.load()) {
        pollfd p{sock_->fd(), POLLIN, 0};
        if (::poll(&p, 1, 0) > 0 && !readAsReader(ts)) return;
      }
      continue;
    }
    readerPolling_.store(true, std::memory_order_seq_cst);
    short events = 0;
    if (sock_->inputBuffered()) {
      events = POLLIN;  // TLS plaintext decrypted but not yet read: poll would not say
    } else if (!callerWatching_.load(std::memory_order_seq_cst)) {
      readerSpin_.waitStarts(steadyNowNs());
      events = ts.waiter.waitOrReady(sock_->fd(), static_cast<short>(POLLIN | (wantWrite_.load() ? POLLOUT : 0)), -1,
                                     readerSpin_.spinUs());
      readerSpin_.waitEnds(steadyNowNs());
    }
    readerPolling_.store(false, std::memory_order_relaxed);
    if (events & POLLOUT) writePending();
    if ((events & (POLLIN | POLLHUP | POLLERR)) && !readAsReader(ts)) return;
  }
  std::lock_guard lock(readerWaiterMu_);
  readerWaiter_ = nullptr;
}

bool EndpointImpl::readAsReader(ThreadState& ts) {
  // Hold the endpoint while reading and running calls: a callback run here
  // may drop the application's last reference to it.
  std::shared_ptr<EndpointImpl> keep = weak_from_this().lock();
  if (!keep) return false;
  readFromSocket(true);
  // Send what the calls run here staged before deciding whether the
  // application still holds the endpoint (the close below would drop it).
  runReporting("the reader's flush", [&] { ts.flushDeferred(); });
  if (keep.use_count() == 1) {
    // We hold the last reference: close, and let the pool destroy the
    // endpoint (its destructor joins this thread, which must not touch
    // `this` again).
    close(EndpointState::kClosed, "endpoint released by the application");
    {
      std::lock_guard lock(readerWaiterMu_);
      readerWaiter_ = nullptr;
    }
    Executor::instance().post([k = std::move(keep)]() mutable { k.reset(); });
    return false;
  }
  // Another thread may drop its reference between the check above and
  // here, leaving `keep` the last one: then the endpoint is destroyed right
  // here (its destructor detaches this thread), and the reader must stop
  // without touching it again.
  std::weak_ptr<EndpointImpl> alive = keep;
  keep.reset();
  return !alive.expired();
}

void EndpointImpl::readFromSocket(bool mayClaim, bool forCaller) {
  ReadScope scope{this, mayClaim};
  {
    std::lock_guard lock(readMu_);
    tlsRead = &scope;
    struct Leave {  // also when the flush below runs out of memory
      ~Leave() { tlsRead = nullptr; }
    } leave;
    readAvailableLocked();
    // Whatever the read ended with (a fault fails pending calls, whose
    // completions join the batch), queue the rest. A caller reading for its
    // reply is thrown what running out of memory there throws; the batch
    // stays, and the reader thread is woken to queue it. The reader thread
    // and a pool thread cannot be: thrown on, it would end the thread (and
    // the process), and the lanes this read claimed would not run. The
    // connection faults instead, as it does when a frame cannot be read;
    // what the batch still holds is queued if it can be, and if not, its
    // completions run when the endpoint is destroyed.
    try {
      flushBatch();
    } catch (const std::exception& e) {
      if (forCaller) {
        batchOwed_.store(true, std::memory_order_release);
        std::lock_guard wake(readerWaiterMu_);
        if (readerWaiter_) readerWaiter_->notify();
        throw;
      }
      faultWith("cannot queue the frames read", e.what());
      try {
        flushBatch();
      } catch (const std::exception&) {
      }
    }
  }
  // TLS: reading may have made records to send (a key update's answer).
  if (sock_->outputPending()) writePending();
  if (scope.claimed) runClaims();
}

void EndpointImpl::runClaims() {
  // The calls run on the thread that read them: no hand-off. While they
  // run, nobody reads this socket, so the aggregator watches the time: if
  // they take long, it sends an executor to read, and if one lane's turn
  // takes long, it hands the lanes not yet started to the executor
  // (releaseClaims).
  ThreadState& ts = threadState();
  try {
    ts.roomToRun();
    inlineStartNs_.store(nowNs(), std::memory_order_relaxed);
    BatchAggregator::instance().watchInline(*this);
  } catch (const std::exception& e) {
    // No room to run them here, or to watch them run (out of memory): the
    // connection faults, and the lanes go to the pool, which runs the
    // completions queued on them.
    inlineStartNs_.store(0, std::memory_order_relaxed);
    faultFrame(e.what());
    releaseClaims();
    return;
  }
  for (bool first = true;; first = false) {
    Lane* lane;
    {
      std::lock_guard lock(claimMu_);
      if (claimNext_ == claimEnd_) {
        claimNext_ = claimEnd_ = requeues_ = 0;
        break;
      }
      lane = claims_[claimNext_++];
    }
    {
      std::lock_guard lock(lane->mu);
      if (lane->runner != kClaimed) continue;  // its owner took it meanwhile
      lane->runner = &ts;
    }
    if (!first) claimLaneNs_.store(nowNs(), std::memory_order_relaxed);  // the first starts with the run
    ts.running.push_back({this, lane});
    const bool requeued = runTurn(lane, true);
    ts.running.pop_back();
    // Queued behind the other claims again: what its turn staged leaves
    // now, so the peer works on it meanwhile.
    if (requeued) runReporting("the reader's flush", [&] { ts.flushDeferred(); });
  }
  inlineStartNs_.store(0, std::memory_order_relaxed);
  claimLaneNs_.store(0, std::memory_order_relaxed);
}

void EndpointImpl::releaseClaims() noexcept {
  std::array<Lane*, kMaxClaims> rest;
  std::size_t n = 0;
  {
    std::lock_guard lock(claimMu_);
    while (claimNext_ < claimEnd_) rest[n++] = claims_[claimNext_++];
    requeues_ = kMaxRequeues;  // nor does the slow lane come back to the reader
  }
  for (std::size_t i = 0; i < n; ++i) {
    std::unique_lock lock(rest[i]->mu);
    if (rest[i]->runner != kClaimed) continue;  // its owner took it
    rest[i]->runner = nullptr;
    try {
      schedule(rest[i], lock);
    } catch (...) {
      // Out of memory queuing it: left unscheduled (postLane), as any lane
      // whose post fails; the others are still handed on.
    }
  }
}

bool EndpointImpl::runTurn(Lane* lane, bool inlineRun) noexcept {
  bool requeued = false;
  catchingAll([&] { requeued = runTurnFrames(lane, inlineRun); }, [&](const char* what) { faultRun(lane, what); });
  return requeued;
}

void EndpointImpl::faultWith(const char* failed, const char* what) noexcept {
  close(EndpointState::kFaulted, reasonOr([&] { return std::string(failed) + ": " + what; }));
}

void EndpointImpl::faultFrame(const char* what) noexcept { faultWith("a frame of the peer's could not be run", what); }

void EndpointImpl::faultRun(Lane* lane, const char* what) noexcept {
  faultFrame(what);
  std::unique_lock lock(lane->mu);
  if (lane->runner == &threadState()) lane->runner = nullptr;
  if (!lane->hasQueued()) return;
  try {
    schedule(lane, lock);
  } catch (...) {
    // Out of memory queuing it: left unscheduled (postLane). Nothing new
    // comes on a closed connection, so its completions then run when the
    // endpoint is destroyed, as a close's do when they cannot be queued.
  }
}

bool EndpointImpl::runTurnFrames(Lane* lane, bool inlineRun) {
  for (int budget = kLaneTurnFrames; budget > 0;) {
    // A lane of our own hands over to its owner as soon as the owner waits
    // (below): frames taken along stop there too (yieldsToOwner).
    const int ran = runOneFrame(lane, true, false, budget, lane->localOrigin);
    if (ran == 0) return false;  // empty: released
    budget -= ran;
    if (lane->modeChanged) break;  // a LANE frame: another kind of thread runs the rest (runner only writes it)
    if (ownerWaits(lane, lane->localOrigin)) {
      // The thread that owns this lane began waiting: it runs the rest
      // itself (a wait returns only after the frames before its reply ran).
      std::unique_lock lock(lane->mu);
      lane->runner = nullptr;
      if (Waiter* w = lane->waiter()) {
        w->notify();
      } else if (lane->hasQueued()) {
        schedule(lane, lock);  // the owner stopped waiting meanwhile
      }
      return false;
    }
  }
  // A turn is over and frames remain: give the lane back and queue it
  // behind the others, so one busy lane cannot starve the rest.
  std::unique_lock lock(lane->mu);
  lane->runner = nullptr;
  const bool modeChanged = std::exchange(lane->modeChanged, false);
  if (!lane->hasQueued()) return false;
  // The reader queues it behind its other claims itself instead of waking
  // an executor for it, unless its owner waits (schedule() wakes it).
  if (inlineRun && !modeChanged && !lane->waiter() && pushClaim(lane, true)) return true;
  schedule(lane, lock);
  return false;
}

bool EndpointImpl::pushClaim(Lane* lane, bool again) {
  std::lock_guard lock(claimMu_);
  if (claimEnd_ == kMaxClaims || (again && requeues_ == kMaxRequeues)) return false;
  requeues_ += again;
  lane->runner = kClaimed;
  claims_[claimEnd_++] = lane;
  return true;
}

void EndpointImpl::followRead() {
  // On a pool thread: what the read throws faults the connection, and the
  // reader may be followed again.
  catchingAll(
      [&] {
        while (connected() && inlineStartNs_.load(std::memory_order_relaxed) != 0) {
          if (sock_->inputBuffered()) {
            readFromSocket(false);
            continue;
          }
          pollfd p{sock_->fd(), static_cast<short>(POLLIN | (wantWrite_.load() ? POLLOUT : 0)), 0};
          if (::poll(&p, 1, 5) > 0) {
            if (p.revents & POLLOUT) writePending();
            if (p.revents & (POLLIN | POLLHUP | POLLERR)) readFromSocket(false);
          }
        }
      },
      [&](const char* what) { faultWith("cannot read for the busy reader", what); });
  followerActive_.store(false, std::memory_order_release);
}

void EndpointImpl::handleBuffered() {
  std::uint64_t frames = 0;
  for (;;) {  // every complete frame in the buffer
    // A run of calls with the head of the last one queued (a stream, a
    // burst of one method) with one-byte prefixes, the buffer's position and
    // the head held in locals: each frame's copy into the batch is a store
    // the compiler must assume reaches the members, which it read again per
    // frame. What ends the run (any other frame, a longer prefix, the end of
    // what was read) goes the general way below.
    if (lastCall_.head.mask != 0) {
      const CallHead call = lastCall_;
      const std::uint8_t* data = rx_.data();
      const std::size_t size = rx_.size();
      const std::size_t maxBody = cfg_.maxMessageSize;
      std::size_t pos = rxPos_;
      // The prefix, the body and the eight bytes the head is compared in.
      while (size - pos >= 9) {
        const std::size_t body = data[pos];
        if (body - 1u >= 0x7fu || body > maxBody || body < call.headLen || size - pos < 1 + body ||
            !call.head.matches(data + pos + 1)) {
          break;
        }
        enqueue(call.lane, takeSeq(call.lane, call.seqKind), data + pos, 1 + body);
        pos += 1 + body;
        ++frames;
      }
      rxPos_ = pos;
    }
    auto span = peekFrame(rx_.data() + rxPos_, rx_.size() - rxPos_, cfg_.maxMessageSize);
    if (!span || rx_.size() - rxPos_ < span->total()) break;
    const std::uint8_t* frame = rx_.data() + rxPos_;
    // A call with the head of the last one queued goes where it went. The
    // head is compared as one word where eight bytes are there to load (the
    // frame's own and those read behind it).
    if (lastCall_.head.mask != 0 && span->bodyLen >= lastCall_.headLen &&
        rx_.size() - rxPos_ - span->headerLen >= 8 && lastCall_.head.matches(frame + span->headerLen)) {
      enqueue(lastCall_.lane, takeSeq(lastCall_.lane, lastCall_.seqKind), frame, span->total());
    } else {
      handleFrame(frame, span->headerLen, span->bodyLen);
    }
    rxPos_ += span->total();
    ++frames;
  }
  // Counted once per read: an atomic add per frame was 11 % of a service's
  // time in the one-way benchmark.
  if (frames) add(counters_.messagesReceived, frames);
}

bool EndpointImpl::readAvailableLocked() {
  if (!connected()) return false;
  try {
    // A bounded number of reads per call, so that a flood cannot keep one
    // thread reading forever while the lanes it claimed wait.
    for (int round = 0; round < 8; ++round) {
      handleBuffered();
      flushBatch();  // lanes can start on these while this thread reads on
      std::size_t rest = rx_.size() - rxPos_;
      if (rxPos_ > 0) {
        std::memmove(rx_.data(), rx_.data() + rxPos_, rest);
        rx_.resize(rest);
        rxPos_ = 0;
      }
      std::size_t want = 64 * 1024;
      if (rest) {
        if (auto span = peekFrame(rx_.data(), rest, cfg_.maxMessageSize); span && span->total() > rest + want) {
          want = span->total() - rest;  // a large frame: read it whole
        }
      } else if (rx_.capacity() > 4 * 1024 * 1024) {
        rx_.shrinkTo(128 * 1024);  // after a large frame, give the memory back
      }
      std::uint8_t* tail = rx_.reserveTail(want);
      std::size_t space = rx_.capacity() - rx_.size();
      long n = sock_->recvSome(tail, space);
      if (n > 0) {
        rx_.commit(static_cast<std::size_t>(n));
        add(counters_.socketReads, 1);
        add(counters_.bytesReceived, static_cast<std::uint64_t>(n));
        raiseTo(counters_.maxRxBuffer, rx_.capacity());
        // A short read drained the socket: skip the read that would only
        // say EAGAIN (one syscall per message saved; poll is level-triggered
        // and brings a reader back for anything that arrives later).
        if (static_cast<std::size_t>(n) < space) break;
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      if (n == 0) {
        if (rest) {
          close(EndpointState::kFaulted, "truncated message: peer " + peerAddress_ +
                                             " closed the connection in the middle of a frame (" +
                                             std::to_string(rest) + " bytes of it received)");
        } else {
          close(EndpointState::kClosed, "peer " + peerAddress_ + " closed the connection");
        }
        return false;
      }
      int err = errno;
      // A TLS failure (a record that does not decrypt) is bad input: a fault.
      close(err == EPROTO ? EndpointState::kFaulted : EndpointState::kClosed,
            "connection to " + peerAddress_ + " lost: " + sock_->errorText(err));
      return false;
    }
    // Parse what the last read brought; the socket's readiness brings the
    // poller back for the rest.
    handleBuffered();
    return true;  // readFromSocket flushes the batch
  } catch (const InvalidMessageError& e) {
    close(EndpointState::kFaulted, std::string("invalid message from ") + peerAddress_ + ": " + e.what());
  } catch (const std::exception& e) {
    close(EndpointState::kFaulted, e.what());
  }
  // Faulted: calls read before the bad frame are dropped when their lane
  // runs; completions in the batch still run their callbacks (the caller
  // flushes it).
  return false;
}

// Inline: every frame received looks up its lane here. With enqueue's one
// reservation, reading a message took 197 -> 167 instructions (callgrind of
// StreamSmallMsgFromServer's client).
inline __attribute__((always_inline)) Lane* EndpointImpl::laneFor(bool receiverLane, std::uint32_t slot) {
  if (receiverLane) {
    if (slot < localLanesSeen_.size()) [[likely]] return localLanesSeen_[slot];
  } else if (slot < peerLanes_.size()) [[likely]] {
    return peerLanes_[slot].get();
  }
  return laneForNew(receiverLane, slot);
}

Lane* EndpointImpl::laneForNew(bool receiverLane, std::uint32_t slot) {
  if (receiverLane) {
    // One of our lanes: it must exist (a stale or forged slot is an error).
    std::lock_guard lock(lanesMu_);
    if (slot >= localLanes_.size()) WireReader::fail("message for lane " + std::to_string(slot) + " that does not exist");
    for (std::size_t i = localLanesSeen_.size(); i < localLanes_.size(); ++i) {
      localLanesSeen_.push_back(localLanes_[i].get());
    }
    return localLanesSeen_[slot];
  }
  if (slot >= kMaxPeerLanes) WireReader::fail("lane number " + std::to_string(slot) + " above the limit");
  std::lock_guard lock(lanesMu_);
  while (peerLanes_.size() <= slot) {
    peerLanes_.push_back(std::make_unique<Lane>(false, static_cast<std::uint32_t>(peerLanes_.size())));
  }
  return peerLanes_[slot].get();
}

void EndpointImpl::handleFrame(const std::uint8_t* frame, std::size_t headerLen, std::size_t bodyLen) {
  const std::uint8_t* body = frame + headerLen;
  std::uint8_t kind = body[0];
  bool receiverLane = (kind & kReceiverLaneBit) != 0;
  WireReader r(body + 1, bodyLen - 1);
  r.setBudget(cfg_.maxDecodeBytes);
  auto type = static_cast<FrameType>(kind & kTypeMask);
  bool isCall = type == FrameType::kCallVoid || type == FrameType::kCallSync || type == FrameType::kCallAsync;
  if ((kind & (kObjectBit | kDeadlineBit)) && !isCall &&
      !(type == FrameType::kCancel && (kind & kDeadlineBit) == 0)) [[unlikely]] {
    WireReader::fail((kind & kObjectBit) ? "object bit on a message that is not a call"
                                         : "deadline bit on a message that is not a call");
  }
  if (!isCall && type != FrameType::kBarrier && type != FrameType::kRelease && type != FrameType::kLane &&
      type != FrameType::kReply && type != FrameType::kReplyError && type != FrameType::kValue) {
    flushBatch();  // the frames that arrived before this one are queued first
  }
  switch (type) {
    case FrameType::kCallVoid:
    case FrameType::kCallSync:
    case FrameType::kCallAsync: {
      auto slot = static_cast<std::uint32_t>(r.rawVarint());
      std::uint64_t method = r.rawVarint();
      const std::uint8_t acceptance = neg_->callAcceptance(method);
      if (acceptance == Negotiated::kRefuse) {
        WireReader::fail("call of method id " + std::to_string(method) + ", which the peer may not call");
      }
      if (kind & kObjectBit) r.rawVarint();  // the object id must be there
      if (kind & kDeadlineBit) [[unlikely]] {
        // Microseconds left when sent become the local time by which the
        // call must run, in place: the queueing here counts against it.
        auto* at = const_cast<std::uint8_t*>(r.position());
        std::uint64_t leftUs = std::min<std::uint64_t>(r.rawU64(), std::uint64_t{1} << 40);
        std::uint64_t due = static_cast<std::uint64_t>(nowNs()) + leftUs * 1000;
        std::memcpy(at, &due, 8);
      }
      Lane* lane = laneFor(receiverLane, slot);
      // Reply-expecting calls are numbered for their reply, AsyncStatus
      // calls for their error (each in the order sent).
      const std::uint8_t seqKind = type != FrameType::kCallVoid               ? kSeqCall
                                   : acceptance == Negotiated::kAcceptStatus ? kSeqStatus
                                                                             : kSeqNone;
      enqueue(lane, takeSeq(lane, seqKind), frame, headerLen + bodyLen);
      // Remembered for the calls of the same head behind it: not one on an
      // object or with a deadline (its bytes after the head differ in what
      // they mean, and a deadline is rewritten here).
      const auto headLen = static_cast<std::size_t>(r.position() - body);
      if ((kind & (kObjectBit | kDeadlineBit)) == 0 && headLen <= 8) {
        lastCall_ = {HeadWord::of(body, headLen), lane, static_cast<std::uint8_t>(headLen), seqKind};
      } else {
        lastCall_.head.mask = 0;
      }
      return;
    }
    case FrameType::kBarrier: {
      auto slot = static_cast<std::uint32_t>(r.rawVarint());
      r.rawVarint();
      r.finish();
      enqueue(laneFor(receiverLane, slot), 0, frame, headerLen + bodyLen);
      return;
    }
    case FrameType::kStatusError: {
      auto slot = static_cast<std::uint32_t>(r.rawVarint());
      auto vseq = static_cast<std::uint32_t>(r.rawVarint());
      Status status;
      Codec<Status>::decode(r, status, neg_->ctx());
      r.finish();
      routeStatusError(laneFor(receiverLane, slot), vseq, std::move(status));
      return;
    }
    case FrameType::kCredit: {
      auto slot = static_cast<std::uint32_t>(r.rawVarint());
      std::uint64_t bytes = r.rawVarint();
      r.finish();
      if (!receiverLane) WireReader::fail("CREDIT for a lane of the sender's");
      Lane* lane = laneFor(true, slot);
      {
        std::lock_guard lock(lane->outMu);
        if (bytes > (std::uint64_t{1} << 40) || lane->creditLeft + static_cast<std::int64_t>(bytes) > (std::int64_t{1} << 40)) {
          WireReader::fail("CREDIT beyond any window");
        }
        lane->creditLeft += static_cast<std::int64_t>(bytes);
      }
      wakeLaneWaiter(lane);  // a thread waiting for credit
      return;
    }
    case FrameType::kCancel: {
      // At once, not in the lane's turn: the call may be queued or running.
      auto slot = static_cast<std::uint32_t>(r.rawVarint());
      auto seq = static_cast<std::uint32_t>(r.rawVarint());
      if (kind & kObjectBit) {
        // An AsyncFrame canceled AsyncStatus calls seq… (by vseq): they
        // came before this frame on the lane.
        std::uint64_t count = r.rawVarint();
        r.finish();
        Lane* lane = laneFor(receiverLane, slot);
        if (count == 0 || count > 0x80000000u ||
            static_cast<std::uint32_t>(lane->inStatusSeq - seq) < count) {
          WireReader::fail("CANCEL of AsyncStatus calls " + std::to_string(seq) + "+" + std::to_string(count) +
                           ", which never came");
        }
        noteFrameCanceled(lane, seq, static_cast<std::uint32_t>(count));
        return;
      }
      r.finish();
      Lane* lane = laneFor(receiverLane, slot);
      if (static_cast<std::uint32_t>(lane->inSeq - 1 - seq) >= 0x80000000u) {
        WireReader::fail("CANCEL of call " + std::to_string(seq) + ", which never came");
      }
      noteCanceled(lane, seq);
      return;
    }
    case FrameType::kLane: {
      // Takes effect in the lane's turn, after the frames before it.
      if (receiverLane) WireReader::fail("LANE for a lane of our own");
      auto slot = static_cast<std::uint32_t>(r.rawVarint());
      std::uint64_t mode = r.rawVarint();
      std::uint64_t threads = r.rawVarint();
      r.finish();
      if (mode > kLaneParallel) WireReader::fail("unknown lane mode " + std::to_string(mode));
      if (threads == 0 || threads > kMaxLaneParallel) {
        WireReader::fail("a lane of " + std::to_string(threads) + " threads");
      }
      enqueue(laneFor(false, slot), 0, frame, headerLen + bodyLen);
      return;
    }
    case FrameType::kValue: {
      // In the lane's turn: a FETCH comes after the calls sent before it on
      // the lane, the call that makes the value among them.
      auto slot = static_cast<std::uint32_t>(r.rawVarint());
      std::uint64_t op = r.rawVarint();
      r.rawVarint();  // the value's id
      if (op == kValueDrop) {
        r.rawVarint();  // mentions
      } else if (op != kValueFetch) {
        WireReader::fail("unknown VALUE operation " + std::to_string(op));
      }
      r.finish();
      Lane* lane = laneFor(receiverLane, slot);
      enqueue(lane, op == kValueFetch ? lane->inSeq++ : 0, frame, headerLen + bodyLen);
      return;
    }
    case FrameType::kRelease: {
      // Processed in the lane's turn, where a destructor may run (objects.md §4).
      auto slot = static_cast<std::uint32_t>(r.rawVarint());
      r.rawVarint();
      r.rawVarint();
      r.rawVarint();
      r.finish();
      enqueue(laneFor(receiverLane, slot), 0, frame, headerLen + bodyLen);
      return;
    }
    case FrameType::kReply:
    case FrameType::kReplyError: {
      auto slot = static_cast<std::uint32_t>(r.rawVarint());
      auto seq = static_cast<std::uint32_t>(r.rawVarint());
      Lane* lane = laneFor(receiverLane, slot);
      // An Async reply's completion joins the reader's batch for this lane
      // (postCompletion). Its room is made before the call's entry is taken:
      // out of memory here leaves the call pending, for the close that
      // follows to end, where later it would end the call without queuing
      // its callbacks.
      if (batchLane_ != lane) [[unlikely]] switchBatchLane(lane);
      batch_.reserveTail(kCompletionEntry);
      PendingReply p;
      {
        std::lock_guard lock(lane->mu);
        if (!lane->pending.take(seq, p)) {
          WireReader::fail("reply to call " + std::to_string(seq) + ", which is not pending");
        }
      }
      // An Async reply's completion joins the batch behind the frames that
      // came before it (postCompletion); a sync caller is woken directly and
      // runs what is queued before it returns, so that must be queued first.
      if (!p.sync && !p.async) {  // the caller stopped waiting (CallTimeout): dropped
        if (p.readLate && type == FrameType::kReply) dropLateReply(p.readLate, r);
        return;
      }
      if (p.async && cfg_.asyncValueThrottle && lane->localOrigin) noteAsyncAnswered(lane);
      if (p.sync) {
        try {
          flushBatch();
        } catch (...) {
          // Out of memory: the call's entry is taken, so only this ends it
          // (its caller may wait on another thread); the connection faults.
          finishSync(p.sync, false, AsyncError::kConnectionClosed, kOutOfMemoryReason);
          throw;
        }
      }
      completeReply(p, type == FrameType::kReplyError, r);
      return;
    }
    case FrameType::kVoidFailed: {
      r.rawVarint();
      r.rawVarint();
      r.rawVarint();
      std::string msg(r.rawString());
      r.finish();
      close(EndpointState::kFaulted, "a fire-and-forget call failed on the peer: " + msg);
      return;
    }
    case FrameType::kBarrierAck: {
      auto slot = static_cast<std::uint32_t>(r.rawVarint());
      std::uint64_t token = r.rawVarint();
      r.finish();
      Lane* lane = laneFor(receiverLane, slot);
      {
        std::lock_guard lock(lane->mu);
        if (token <= lane->barrierAcked || token > lane->barrierSent) WireReader::fail("unexpected barrier ack");
        lane->barrierAcked = token;
        if (Waiter* w = lane->waiter()) w->notify();  // a RemoteThreadPool's wait
      }
      dropStatusSegments(lane, token);
      noteFinished(1);
      return;
    }
    case FrameType::kGoodbye: {
      std::string why(r.rawString());
      close(EndpointState::kClosed, "peer " + peerAddress_ + " disconnected (" + why + ")");
      return;
    }
    case FrameType::kHello:
      WireReader::fail("second HELLO after the handshake");
  }
  WireReader::fail("unknown message kind " + std::to_string(kind));
}

void EndpointImpl::finishSync(SyncReply* sr, bool ok, AsyncError error, std::string message) {
  sr->waiter->notifyWith([&] {
    sr->ok = ok;
    sr->error = error;
    sr->message = std::move(message);
    sr->done.store(true, std::memory_order_release);
  });
  noteFinished(1);
}

void EndpointImpl::dropLateReply(LateReplyFn read, WireReader& r) {
  std::exception_ptr invalid;
  std::shared_ptr<void> value = read(r, neg_->ctx(), invalid);
  if (value) {
    // On a pool thread, with this connection current: this runs under the
    // reader's lock, and one of our objects that only this reply still
    // named is destroyed with it, whose destructor may call.
    Executor::instance().post([value = std::move(value), weak = weak_from_this()]() mutable {
      std::shared_ptr<EndpointImpl> ep = weak.lock();
      releaseAs(ep.get(), [&] { value.reset(); });
    });
  }
  if (invalid) std::rethrow_exception(invalid);  // the peer broke the format: the connection faults
  r.finish();
}

void EndpointImpl::completeReply(PendingReply& p, bool isError, WireReader& r) {
  // The entry has left the pending table: whatever happens while the reply
  // is read, the call ends here, with its value or an error.
  auto fail = [&](AsyncError kind, std::string why) {
    if (p.sync) {
      finishSync(p.sync, false, kind, std::move(why));
    } else {
      p.async->completeWithError(kind, std::move(why));
      p.async->release();
    }
  };
  try {
    if (isError) {
      std::uint64_t code = r.rawVarint();
      std::string msg(r.rawString());
      r.finish();
      fail(code == static_cast<std::uint8_t>(WireErrorCode::kCanceled)   ? AsyncError::kCanceled
           : code == static_cast<std::uint8_t>(WireErrorCode::kTimedOut) ? AsyncError::kTimedOut
                                                                          : AsyncError::kRemoteError,
           std::move(msg));
      return;
    }
    if (p.sync) {
      if (p.sync->decode) p.sync->decode(r, neg_->ctx(), p.sync->out);
    } else {
      p.async->decodeValue(r, neg_->ctx());
    }
    r.finish();
  } catch (const DecodeBudgetError&) {
    // Plain values too large to take: only this call fails (decodeCounted
    // made one that may carry references an invalid message).
    fail(AsyncError::kInvalidMessage, reasonOr([&] {
           return "the reply could not be taken: it decodes into more than " + std::to_string(cfg_.maxDecodeBytes) +
                  " bytes (this side's maxDecodeBytes)";
         }));
    return;
  } catch (const InvalidMessageError& e) {
    fail(AsyncError::kInvalidMessage, reasonOr([&] { return std::string("invalid reply: ") + e.what(); }));
    throw;  // the peer broke the format: the connection faults
  } catch (const std::exception& e) {
    // Our side could not take the value (for example a reference to a
    // class this program cannot stand in for, or out of memory): only this
    // call fails.
    fail(AsyncError::kInvalidMessage,
         reasonOr([&] { return std::string("the reply could not be taken: ") + e.what(); }));
    return;
  }
  if (p.sync) {
    finishSync(p.sync, true, AsyncError::kNone, {});
  } else {
    // The pending entry's reference becomes the queued completion's
    // (postCompletion takes it): an atomic add and subtract less per reply.
    // Given back also should queuing the completion throw (out of memory
    // after the room handleFrame made is gone).
    struct Donated {
      EndpointImpl& ep;
      ~Donated() {
        if (AsyncStateBase* s = std::exchange(ep.donatedRef_, nullptr)) s->release();  // not queued
      }
    } donated{*this};
    donatedRef_ = p.async;
    p.async->completeWithValue();
  }
}

// ---------------------------------------------------------------------------
// Lanes: queueing and running

// Inline, with the switch to another lane out of line, and frames of up to
// 128 bytes copied inline: every frame queued comes here. Callgrind of the
// clients, instructions a call, when frames of up to 64 bytes were copied
// inline and replies' completions were queued here too:
// StreamSmallMsgFromServer 520 -> 497, RoundTripSmallMsgAsyncCB at 1 x 512
// 1,464 -> 1,423 (docs/benchmarks.md).
inline __attribute__((always_inline)) void EndpointImpl::enqueue(Lane* lane, std::uint32_t seq,
                                                                 const std::uint8_t* frame, std::size_t len) {
  if (batchLane_ != lane) [[unlikely]] switchBatchLane(lane);
  std::uint8_t* dst = batch_.reserveTail(kSeqPrefix + len);  // one reservation for both
  std::memcpy(dst, &seq, kSeqPrefix);
  copyUpTo128(dst + kSeqPrefix, frame, len);
  batch_.commit(kSeqPrefix + len);
}

void EndpointImpl::switchBatchLane(Lane* lane) {
  // Frames for one lane that arrive back to back collect in batch_ and reach
  // its inbox with one lock (flushBatch); any other frame flushes them first,
  // so the order of everything a lane sees is the order of arrival.
  // (A flush may close the endpoint, whose failed calls queue completion
  // entries for other lanes: those are flushed too, not mixed into ours.)
  while (batchLane_ && batchLane_ != lane) flushBatch();
  batchLane_ = lane;
}

void EndpointImpl::flushBatch() {
  Lane* lane = batchLane_;
  if (!lane) return;
  if (batch_.empty()) {  // a reply made room for its completion (handleFrame) and needed none
    batchLane_ = nullptr;
    return;
  }
  const std::size_t bytes = batch_.size();
  std::unique_lock lock(lane->mu);
  if (lane->inbox.empty() && lane->inbox.capacity() <= kIdleLaneBufferLimit) {
    lane->inbox.swap(batch_);  // the inbox's spare storage becomes the next batch's
  } else {
    // Appended, also to an empty inbox that kept a burst's storage: swapped,
    // that storage would become the reader's batch, which no lane's timer
    // gives back.
    lane->inbox.append(batch_.data(), batch_.size());
  }
  // Only now: out of memory in the append leaves the batch to this lane
  // (let go first, its frames would join the next lane's batch).
  batchLane_ = nullptr;
  batch_.clearAndTrim(kIdleLaneBufferLimit, kIdleLaneBufferKeep);  // after a large frame
  raiseTo(counters_.maxQueued, lane->inbox.size());
  // One atomic add per batch, not per frame (maxAllocQueuedBytes); counted
  // before the hand-off, which may throw: the lane's run takes them off.
  const std::size_t queued = queuedBytes_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  schedule(lane, lock);
  if (lock.owns_lock()) lock.unlock();
  if (queued > cfg_.maxAllocQueuedBytes) [[unlikely]] {
    close(EndpointState::kFaulted, "the peer sent " + std::to_string(queued) +
                                       " bytes of messages that have not run yet, more than maxAllocQueuedBytes (" +
                                       std::to_string(cfg_.maxAllocQueuedBytes) + ")");
  }
}

void EndpointImpl::takeInbox(Lane* lane) {
  releaseWork(lane);
  lane->workCounted = lane->inbox.size();
  lane->work.swap(lane->inbox);
  lane->inbox.clear();
  lane->workPos = 0;
}

void EndpointImpl::schedule(Lane* lane, std::unique_lock<SpinMutex>& lock) {
  if (Waiter* w = lane->waiter()) {
    // Its owner is blocked in a wait and runs the frame itself: no hand-off
    // to the pool (docs/threading.md, continuations). Notified under the
    // lane's mutex, which the owner takes to stop waiting.
    w->notify();
    return;
  }
  if (lane->runner || lane->scheduled) return;  // the running thread will see it
  if (lane->mode == kLaneParallel) {
    pumpParallel(lane, lock);
    return;
  }
  if (lane->inFlight > 0) return;  // the last task of a parallel spell hands the lane on
  if (lane->mode == kLanePinned) {
    std::shared_ptr<Executor> pinned = lane->pinned;
    postLane(*pinned, lane, lock);
    // Joining its thread is the pool's job, never this thread's (a reader).
    if (pinned.use_count() == 1) Executor::instance().post([p = std::move(pinned)] {});
    return;
  }
  if (tlsRead && tlsRead->ep == this && tlsRead->mayClaim) {
    // The thread reading the socket runs this lane itself once it has
    // finished reading, after the lanes it claimed before: no executor
    // wake-up.
    if (pushClaim(lane, false)) {
      tlsRead->claimed = true;
      return;
    }
  }
  postLane(Executor::instance(), lane, lock);
}

void EndpointImpl::postLane(Executor& executor, Lane* lane, std::unique_lock<SpinMutex>& lock) {
  lane->scheduled = true;
  lock.unlock();
  auto self = weak_from_this().lock();
  if (!self) return;  // being destroyed
  try {
    executor.post(std::move(self), lane);
  } catch (...) {
    // Out of memory queuing it: left scheduled, the lane would never run
    // again; unscheduled, the next frame for it schedules it anew.
    lock.lock();
    lane->scheduled = false;
    throw;
  }
}

void EndpointImpl::pumpParallel(Lane* lane, std::unique_lock<SpinMutex>& /*held*/) {
  // Each frame runs as a pool task of its own, copied out of the queue: up
  // to `parallel` at once, plus continuations (the call-backs of a call
  // that waits must not queue behind it for a free place).
  while (lane->mode == kLaneParallel && !lane->fenceRunning) {
    if (lane->workPos == lane->work.size()) {
      if (lane->inbox.empty()) {
        releaseWork(lane);
        return;
      }
      takeInbox(lane);
    }
    QueuedFrame q = parseQueued(lane->work, lane->workPos);
    if (q.body[0] == kTombstone) {
      lane->workPos += q.total;
      continue;
    }
    const bool internal = q.body[0] == kInternalCompletion;
    const auto type = static_cast<FrameType>(q.body[0] & kTypeMask);
    const bool fence = !internal && (type == FrameType::kBarrier || type == FrameType::kLane);
    const bool nested = !internal && (q.body[0] & kNestedBit) != 0;
    // Continuations and reply callbacks start at once: a call that waits may
    // need them (its call-backs, or the callback that completes a value it
    // reads).
    if (fence ? lane->inFlight > 0 : lane->inFlight >= lane->parallel && !nested && !internal) return;
    auto self = weak_from_this().lock();
    if (!self) return;  // being destroyed
    std::vector<std::uint8_t> frame(q.body, q.body + q.bodyLen);
    std::uint32_t seq = q.seq;
    // Counted once it is queued (the task waits for this lane's lock to
    // count itself out): out of memory queuing it leaves the frame first in
    // the queue and no place taken, and the next frame or task to end on
    // this lane pumps it again.
    Executor::instance().post([self = std::move(self), lane, seq, frame = std::move(frame), fence] {
      self->runParallelFrame(lane, seq, frame, fence);
    });
    lane->workPos += q.total;
    ++lane->inFlight;
    lane->fenceRunning = fence;  // nothing else starts until it finished
  }
}

void EndpointImpl::runParallelFrame(Lane* lane, std::uint32_t seq, const std::vector<std::uint8_t>& frame,
                                    bool fence) {
  ThreadState& ts = threadState();
  // As a turn that throws (faultRun), but there is no runner to give back:
  // the count of frames running below still drops.
  catchingAll(
      [&] {
        ts.running.push_back({this, lane});
        struct Pop {
          ThreadState& ts;
          ~Pop() { ts.running.pop_back(); }
        } pop{ts};
        runFrame(lane, seq, frame.data(), frame.size(), false);
      },
      [&](const char* what) { faultFrame(what); });
  std::unique_lock lock(lane->mu);
  --lane->inFlight;
  if (fence) lane->fenceRunning = false;
  try {
    if (lane->mode == kLaneParallel) {
      pumpParallel(lane, lock);
    } else if (lane->inFlight == 0 && !lane->runner && !lane->scheduled && lane->hasQueued()) {
      schedule(lane, lock);
    }
  } catch (const std::exception& e) {
    // Out of memory queuing the frames behind it: once none of the lane's
    // frames runs, nothing would queue them again, and their callers would
    // wait. The connection faults instead (close() takes the lane's lock).
    if (lock.owns_lock()) lock.unlock();
    faultFrame(e.what());
  }
}

void EndpointImpl::postCompletion(Lane* lane, AsyncStateBase* state) {
  // The thread reading this endpoint's socket (routing the reply) holds the
  // endpoint; anyone else checks that it is not being destroyed.
  const bool reading = tlsRead && tlsRead->ep == this;
  std::shared_ptr<EndpointImpl> self;
  if (!reading && !(self = weak_from_this().lock())) {  // being destroyed: nothing can run later
    state->runCallbacksHeld();  // the completing handle (cancel) may be the last reference
    noteFinished(1);
    return;
  }
  // The queued entry holds a reference: the reply's pending entry hands its
  // own on, or one is taken. Only once the entry is in, before anyone can
  // run it: out of memory before leaves none behind.
  auto hold = [&] {
    if (reading && donatedRef_ == state) {
      donatedRef_ = nullptr;
    } else {
      state->addRef();
    }
  };
  // The entry is written in place where it is queued: staged on the stack
  // and copied as two 8-byte words, the copy's loads spanned the narrower
  // stores before them (no store forwarding), a stall that took 5 % of the
  // client's samples in RoundTripStringAsyncCB at 100 threads.
  auto put = [state](ByteBuffer& to) {
    std::uint8_t* entry = to.reserveTail(kCompletionEntry);
    std::memset(entry, 0, kSeqPrefix);
    entry[kSeqPrefix] = 1 + sizeof state;
    entry[kSeqPrefix + 1] = kInternalCompletion;
    std::memcpy(entry + kSeqPrefix + 2, &state, sizeof state);
    to.commit(kCompletionEntry);
  };
  if (reading) {
    // Joins the reader's batch for the lane, queued with the frames around
    // it under one lock (flushBatch).
    if (batchLane_ != lane) [[unlikely]] switchBatchLane(lane);
    put(batch_);
    hold();
    return;
  }
  std::unique_lock lock(lane->mu);
  put(lane->inbox);
  hold();
  queuedBytes_.fetch_add(kCompletionEntry, std::memory_order_relaxed);
  schedule(lane, lock);
}

void EndpointImpl::runLane(Lane* lane) {
  if (!lane) {
    followRead();
    return;
  }
  ThreadState& ts = threadState();
  {
    std::lock_guard lock(lane->mu);
    lane->scheduled = false;
    if (lane->runner) return;
    lane->runner = &ts;
  }
  try {
    ts.roomToRun();
  } catch (const std::exception& e) {
    faultRun(lane, e.what());  // taken and not run: the connection faults, the lane is given back
    return;
  }
  ts.running.push_back({this, lane});
  runTurn(lane);
  ts.running.pop_back();
}

bool EndpointImpl::runQueued(Lane* lane, bool nestedOnly) {
  ThreadState& ts = threadState();
  ts.roomToRun();
  const void* outer;
  {
    std::lock_guard lock(lane->mu);
    // A lane the reader claimed but has not started is anybody's until it
    // does; only continuations (nestedOnly) leave it to the reader.
    if (lane->runner == kClaimed ? nestedOnly : lane->runner && lane->runner != &ts) return false;
    if (!lane->hasQueued()) return false;
    outer = lane->runner == kClaimed ? nullptr : lane->runner;
    lane->runner = &ts;
  }
  bool pushed = ts.running.empty() || ts.running.back().lane != lane;
  if (pushed) ts.running.push_back({this, lane});
  bool ran = false;
  try {
    while (runOneFrame(lane, outer == nullptr, nestedOnly, kLaneTurnFrames) != 0) ran = true;
  } catch (...) {
    // A frame that threw (out of memory reporting a call's failure, say)
    // ends the run, and the lane is given back as an empty run gives it
    // back: the wait that ran it then hands what is left to the pool.
    if (pushed) ts.running.pop_back();
    if (outer == nullptr) {
      std::lock_guard lock(lane->mu);
      if (lane->runner == &ts) lane->runner = nullptr;
    }
    throw;
  }
  if (pushed) ts.running.pop_back();
  return ran;
}

int EndpointImpl::runOneFrame(Lane* lane, bool releaseWhenEmpty, bool nestedOnly, int maxFrames,
                              bool yieldsToOwner) {
  ThreadState& ts = threadState();
  std::uint32_t seq = 0;
  const std::uint8_t* body = nullptr;
  std::size_t bodyLen = 0;
  if (!nestedOnly) {
    QueuedFrame q;
    // This thread is the lane's runner, and only the runner changes `work`
    // and `workPos`: frames already swapped in are taken without the lock
    // (others read them only under it, and only while there is no runner).
    // One lock per batch instead of one per frame: the lock was 18 % of the
    // service's time in the one-way benchmark.
    while (!nextInWork(lane, q)) {
      bool trimLater;
      {
        std::lock_guard lock(lane->mu);
        if (!lane->inbox.empty()) {
          takeInbox(lane);
          continue;
        }
        releaseWork(lane);
        lane->work.clear();
        lane->workPos = 0;
        lane->inbox.clear();
        trimLater = ranDryLocked(lane);
        if (releaseWhenEmpty) lane->runner = nullptr;
      }
      if (trimLater) armLaneTrim(idleLaneTrimNs());
      return 0;
    }
    seq = q.seq;
    body = q.body;
    bodyLen = q.bodyLen;
  } else {
    std::lock_guard lock(lane->mu);
    // Waiting inside a call of this lane: only its continuations may run
    // now; ordinary calls behind it wait their turn.
    if (!lane->inbox.empty()) {
      // Appended: the frame that waits may still point into `work`. The
      // bytes stay counted (a peer flooding a lane whose method waits is
      // still bounded by maxAllocQueuedBytes).
      lane->workCounted += lane->inbox.size();
      lane->work.append(lane->inbox.data(), lane->inbox.size());
      lane->inbox.clear();
    }
    std::size_t pos = lane->workPos;
    for (;;) {
      if (pos == lane->work.size()) {
        if (releaseWhenEmpty) lane->runner = nullptr;
        return 0;
      }
      QueuedFrame q = parseQueued(lane->work, pos);
      const bool runNow = q.body[0] == kInternalCompletion ? ts.completionsRunNested
                          : q.body[0] != kTombstone && (q.body[0] & kNestedBit);
      if (runNow) {
        // Copy it out: the buffer may grow while the call runs.
        ts.scratch.clear();
        ts.scratch.append(q.body, q.bodyLen);
        q.body[0] = kTombstone;
        if (pos == lane->workPos) lane->workPos += q.total;
        seq = q.seq;
        body = ts.scratch.data();
        bodyLen = q.bodyLen;
        break;
      }
      pos += q.total;
    }
  }
  // `body` stays valid while this frame runs: the work buffer is swapped or
  // grown only by this lane's runner (this thread), and only from a nested
  // wait, by which time this frame's bytes have been decoded. Taken from
  // `work` in order, a call or a completion may take those of its kind
  // queued behind it along (executeCall, runCompletions); a continuation run
  // out of order runs alone.
  return runFrame(lane, seq, body, bodyLen, true, nestedOnly ? 1 : maxFrames, yieldsToOwner);
}

int EndpointImpl::runFrame(Lane* lane, std::uint32_t seq, const std::uint8_t* body, std::size_t bodyLen,
                           bool asRunner, int maxFrames, bool yieldsToOwner) {
  std::uint8_t kind = body[0];
  // A parallel lane's task passes maxFrames 1: it takes nothing along.
  if (kind == kInternalCompletion) return runCompletions(lane, body, maxFrames, yieldsToOwner);
  auto type = static_cast<FrameType>(kind & kTypeMask);
  if (type == FrameType::kCallVoid || type == FrameType::kCallSync || type == FrameType::kCallAsync) [[likely]] {
    return executeCall(lane, seq, body, bodyLen, maxFrames, !asRunner, yieldsToOwner);
  }
  if (type == FrameType::kRelease) {
    runRelease(body, bodyLen);
    return 1;
  }
  if (type == FrameType::kBarrier) {
    WireReader r(body + 1, bodyLen - 1);
    r.rawVarint();
    std::uint64_t token = r.rawVarint();
    stageFrame(lane, FrameType::kBarrierAck, true, [&](WireWriter& w) { w.rawVarint(token); });
    return 1;
  }
  if (type == FrameType::kLane) {
    applyLaneMode(lane, body, bodyLen, asRunner);
    return 1;
  }
  // handleFrame queues no other kind.
  runValueFrame(lane, seq, body, bodyLen);
  return 1;
}

int EndpointImpl::runCompletions(Lane* lane, const std::uint8_t* body, int maxFrames, bool yieldsToOwner) {
  ThreadState& ts = threadState();
  // A callback's calls go to the endpoint its reply came from. It runs as a
  // callback, not as part of a call — also when a method waiting for a
  // value runs it (completionsRunNested): no CallCtx, no continuation.
  EndpointImpl* prevCurrent = ts.current;
  ts.current = this;
  const CallInfo* prevCall = std::exchange(ts.call, nullptr);
  // The innermost run of this lane, by index: a nested wait may grow the
  // vector (moving its entries) but pops what it pushes.
  std::size_t execIndex = ts.running.size();
  int prevInCall = 0;
  if (!ts.running.empty() && ts.running.back().lane == lane) {
    execIndex = ts.running.size() - 1;
    prevInCall = std::exchange(ts.running[execIndex].inCall, 0);
  }
  // Completions queued right behind this one (the replies of a window of
  // Async calls, read together) run in this loop: the queue's bookkeeping,
  // the frame's dispatch and the setup above are done once for all of them
  // (RoundTripSmallMsgAsyncCB's client: docs/benchmarks.md). Only the
  // lane's runner takes them along (maxFrames > 1), from `work` in order;
  // a callback's nested wait may grow and move `work`, so the next entry is
  // found by position. An entry is the sequence prefix, a one-byte length
  // and the body: kind and state pointer (postCompletion).
  constexpr std::size_t kEntry = kCompletionEntry;
  int ran = 0;
  for (;;) {
    AsyncStateBase* st;
    std::memcpy(&st, body + 1, sizeof st);
    st->runCallbacks();
    st->release();
    if (++ran == maxFrames || lane->modeChanged || ownerWaits(lane, yieldsToOwner)) break;
    const std::size_t pos = lane->workPos;
    if (lane->work.size() - pos < kEntry) break;
    const std::uint8_t* next = lane->work.data() + pos + kSeqPrefix;
    if (next[0] != 1 + sizeof st || next[1] != kInternalCompletion) break;
    lane->workPos = pos + kEntry;
    body = next + 1;
  }
  if (execIndex < ts.running.size()) ts.running[execIndex].inCall = prevInCall;
  ts.call = prevCall;
  ts.current = prevCurrent;
  // Counted down once for the run: an atomic add per completion was 3 % of
  // the client's time (perf). waitForIdle returns after the run, not during
  // it (a callback cannot wait for idle anyway: its own call still counts).
  noteFinished(static_cast<std::uint64_t>(ran));
  return ran;
}

void EndpointImpl::applyLaneMode(Lane* lane, const std::uint8_t* body, std::size_t bodyLen, bool asRunner) {
  WireReader r(body + 1, bodyLen - 1);
  r.rawVarint();  // slot
  auto mode = static_cast<std::uint8_t>(r.rawVarint());
  auto threads = static_cast<std::uint32_t>(r.rawVarint());
  std::shared_ptr<Executor> fresh;
  if (mode == kLanePinned) {
    bool has;
    {
      std::lock_guard lock(lane->mu);
      has = lane->pinned != nullptr;
    }
    if (!has) {
      // A thread per pinned lane: bounded per connection, and a thread the
      // system refuses faults this connection only.
      if (pinnedLanes_.fetch_add(1) >= kMaxPinnedLanes) {
        pinnedLanes_.fetch_sub(1);
        close(EndpointState::kFaulted, "invalid message from " + peerAddress_ + ": more than " +
                                           std::to_string(kMaxPinnedLanes) + " RemoteThread lanes at once");
        return;
      }
      try {
        fresh = std::make_shared<Executor>("myelin-pinned");
        fresh->ensureThreads(1);
      } catch (const std::exception& e) {
        pinnedLanes_.fetch_sub(1);
        close(EndpointState::kFaulted, std::string("cannot start a thread for a RemoteThread: ") + e.what());
        return;
      }
    }
  } else if (mode == kLaneParallel) {
    try {
      Executor::instance().ensureThreads(threads + 1);  // at most kMaxLaneParallel + 1: bounded
    } catch (const std::exception& e) {
      close(EndpointState::kFaulted, std::string("cannot start threads for a RemoteThreadPool: ") + e.what());
      return;
    }
  }
  std::shared_ptr<Executor> retired;
  {
    std::lock_guard lock(lane->mu);
    if (fresh) lane->pinned = std::move(fresh);
    if (mode != kLanePinned && lane->pinned) {
      retired = std::move(lane->pinned);
      pinnedLanes_.fetch_sub(1);
    }
    lane->mode = mode;
    lane->parallel = mode == kLaneParallel ? threads : 1;
    // The runner ends its turn here and the new kind of thread takes over;
    // a parallel task has no turn (only the runner writes the flag).
    if (asRunner) lane->modeChanged = true;
  }
  // The pinned thread may be the one running this frame: it is joined,
  // once it has returned from the lane, by whoever drops the last reference
  // (a pool thread, or a thread that was just posting to it).
  if (retired) Executor::instance().post([r = std::move(retired)] {});
}

int EndpointImpl::executeCall(Lane* lane, std::uint32_t seq, const std::uint8_t* body, std::size_t len,
                              int maxFrames, bool concurrent, bool yieldsToOwner) {
  // The call's bytes count toward the peer's next CREDIT (the calls taken
  // along below count theirs as they are taken).
  if (!lane->localOrigin) noteCallRun(lane, len + varintSize(len), concurrent);
  WireReader r(body + 1, len - 1);
  r.setBudget(cfg_.maxDecodeBytes);
  const std::uint8_t kind = body[0];
  auto type = static_cast<FrameType>(kind & kTypeMask);
  r.rawVarint();  // slot
  std::uint64_t method = r.rawVarint();
  bool onObject = (kind & kObjectBit) != 0;
  std::uint64_t objectId = onObject ? r.rawVarint() : 0;
  // handleFrame made it the local time by which the call must run.
  std::int64_t deadlineNs = (kind & kDeadlineBit) ? static_cast<std::int64_t>(r.rawU64()) : 0;
  if (!connected()) return 1;  // closed: calls still queued are dropped

  // handleFrame took only accepted method ids.
  const Negotiated::Implemented& target = neg_->implemented(method);
  const ClassSchema& cls = *target.cls;
  const MethodInfo& mi = *target.method;
  // A frame of another kind than the method's mode travels in is the peer's
  // error: the call fails before it is dispatched and the connection faults.
  const bool kindMatches = callFrameType(mi.mode) == type;
  const CallMode mode = mi.mode;
  const bool replies = type != FrameType::kCallVoid;

  // The object a call names holds still while the call runs (objects.md §4)
  // and is released with this endpoint current (a destructor run then may
  // call). No RAII guard here: GCC put its destructor's check in the
  // function's cold clone, reached on every call (perf on the client of
  // StreamSmallMsgFromServer; docs/benchmarks.md has the rates). Nothing
  // between taking and releasing the references throws: dispatch's
  // exceptions are caught below, and the catch handlers make their reasons
  // with reasonOr.
  ObjectCore* heldCore = nullptr;
  ObjectCore* heldDrop = nullptr;
  EndpointClass* object = nullptr;
  bool objectGone = false;
  if ((onObject || mi.instance) &&
      !holdCallObject(onObject, objectId, target.clsIndex, cls, mi, heldCore, heldDrop, object, objectGone)) {
    if (heldCore || heldDrop) releaseCoresAs(this, {heldCore, heldDrop});
    return 1;
  }
  const bool holdsObject = heldCore || heldDrop;

  // Calls of the same method queued right behind this one in the lane's
  // `work` (a stream, or a caller's burst) run in this loop: what is the
  // same for all of them (the header, the method's entry, the object
  // checks, this function's frame) is done once. Each call still runs as
  // if alone: its own reader, sequence number, skip checks, flow-control
  // credit, failure report. Only the lane's runner takes calls along
  // (maxFrames > 1), only calls without object or deadline, and only while
  // the endpoint is connected and the lane's mode stands. The first `head`
  // bytes of a body (kind, slot, method) name the call.
  const std::size_t head = static_cast<std::size_t>(r.position() - body);
  std::uint8_t headBytes[24];
  const bool takesAlong = maxFrames > 1 && !concurrent && !onObject && !mi.instance && deadlineNs == 0 && kindMatches &&
                          head <= sizeof headBytes;
  if (takesAlong) std::memcpy(headBytes, body, head);
  // Heads of up to 8 bytes (all but the longest method ids) are compared as
  // one word under a mask where the next body has 8 bytes to load: 24
  // instructions a call less than byte by byte (callgrind, a streamed call).
  const HeadWord headWord = takesAlong && head <= 8 ? HeadWord::of(body, head) : HeadWord{};
  ThreadState& ts = threadState();
  CallInfo info{this, lane, seq, replies, deadlineNs, mode == CallMode::kAsyncStatus};
  // The innermost run of this lane, by index: a nested wait may grow the
  // vector (moving its entries) but pops what it pushes. Usually the last.
  std::size_t exec = ts.running.size();
  while (exec > 0 && ts.running[exec - 1].lane != lane) --exec;
  // What a method sees of its call, built once for the calls taken along;
  // each call sets what differs (its number, its skip). Built per call, its
  // zeroed fields were four 16-byte stores at odd stack offsets per call:
  // after an unrelated change moved the stack, most of the stream client's
  // time in this function sat on them (14 -> 31 % of its samples) and
  // StreamSmallMsgFromServer fell from 28.6 to 25.0 M messages/s
  // (docs/benchmarks.md).
  Dispatch d{this, lane, seq, mode, 0, 0, {}, {}};
  IncomingCall call;
  call.reader_ = &r;
  call.paramPlan_ = &neg_->implParamPlan(method);
  call.ctx_ = &neg_->ctx();
  call.mode_ = mode;
  call.impl_ = &d;
  call.object_ = object;
  call.objectCore_ = heldCore;
  call.objectGone_ = objectGone;
  call.cls_ = target.clsIndex;
  std::string failure;  // a failed call's reason; empty while calls succeed
  // The thread's marks of a running call (this endpoint current, the call's
  // info, the lane's run counted as in a call) are set once for the calls
  // taken along, not per call (14 instructions a streamed call, callgrind),
  // and given back when the loop ends, also by an exception, and before
  // whatever between calls may reach code of the user's (a held object's
  // release, a failure's report, a fault).
  struct CallMarks {
    ThreadState& ts;
    std::size_t exec;
    EndpointImpl* prevCurrent = nullptr;
    const CallInfo* prevCall = nullptr;
    bool set = false;
    void enter(EndpointImpl* ep, const CallInfo* info) {
      prevCurrent = std::exchange(ts.current, ep);
      prevCall = std::exchange(ts.call, info);
      if (exec > 0) ++ts.running[exec - 1].inCall;
      set = true;
    }
    void leave() {
      if (!set) return;
      set = false;
      if (exec > 0) --ts.running[exec - 1].inCall;
      ts.current = prevCurrent;
      ts.call = prevCall;
    }
    ~CallMarks() { leave(); }
  } marks{ts, exec};
  marks.enter(this, &info);
  int ran = 0;
  for (;;) {
    ++ran;
    // One writer (the lane's runner): a plain load and store, no atomic add;
    // a parallel lane's tasks run beside each other and add (a load and
    // store lost counts there: 1 to 46 of 20,000 calls on 4 threads).
    if (concurrent) [[unlikely]] {
      lane->callsRun.fetch_add(1, std::memory_order_relaxed);
    } else {
      lane->callsRun.store(lane->callsRun.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
    d.seq = seq;
    call.skip_ = 0;
    if (replies && (deadlineNs != 0 || lane->hasCanceled.load(std::memory_order_relaxed))) [[unlikely]] {
      call.skip_ = skipReason(lane, seq, mode, deadlineNs);
    }
    if (mode == CallMode::kAsyncStatus && lane->hasFrameCanceled.load(std::memory_order_relaxed)) [[unlikely]] {
      std::lock_guard lock(lane->mu);
      if (lane->frameCanceledLocked(seq)) call.skip_ = static_cast<std::uint8_t>(WireErrorCode::kCanceled);
      // Ranges far behind the lane's progress are done with (and would match
      // again once vseq wraps).
      std::erase_if(lane->frameCanceled, [&](const auto& r) {
        std::uint32_t past = seq - (r.first + r.second);
        return past < 0x80000000u && past > Lane::kCancelWindow;
      });
      if (lane->frameCanceled.empty()) lane->hasFrameCanceled.store(false, std::memory_order_relaxed);
    }

    info.seq = seq;
    bool invalid = false;
    auto code = WireErrorCode::kHandlerFailed;
    try {
      if (!kindMatches) [[unlikely]] {
        WireReader::fail("call mode does not match " + cls.name + "::" + mi.name);
      }
      mi.dispatch(call);
    } catch (const CallSkipped& e) {
      // The reasons below are made with reasonOr: a handler that throws
      // must not leave the object held or the reply half made (released
      // below), and reasonOr cannot throw.
      code = static_cast<WireErrorCode>(e.code);
      failure = reasonOr([&] {
        return std::string(code == WireErrorCode::kCanceled ? "canceled by the caller before it ran"
                                                            : "its deadline passed before it ran");
      });
    } catch (const DecodeBudgetError&) {
      // Plain values too large to take (decodeCounted made arguments that
      // may carry references an invalid message): this call fails, its
      // frame is done with, and the connection goes on. reportCallFailure
      // names the method.
      failure = reasonOr([&] {
        return "its arguments decode into more than " + std::to_string(cfg_.maxDecodeBytes) +
               " bytes (the receiving side's maxDecodeBytes)";
      });
    } catch (const InvalidMessageError& e) {
      invalid = true;
      failure = reasonOr([&] { return std::string("invalid call of ") + cls.name + "::" + mi.name + ": " + e.what(); });
    } catch (const std::exception& e) {
      failure = reasonOr([&] { return std::string(e.what()); });
    } catch (...) {
      failure = reasonOr([] { return std::string("unknown exception"); });
    }
    if (holdsObject) [[unlikely]] {  // never with calls taken along
      marks.leave();
      releaseCoresAs(this, {heldCore, heldDrop});
    }
    // Failed while the reply was being made and its thunk did not drop it
    // (beginReply or a non-sync thunk): the partial frame goes now. Tested
    // here, where the dispatch is at hand: a call of abortReply() per call
    // cost 12 instructions (callgrind, a streamed call's client).
    if (d.outLock.owns_lock()) [[unlikely]] {
      marks.leave();  // taking back the reply's references may release an object
      call.abortReply();
      marks.enter(this, &info);
    }
    if (invalid) {
      marks.leave();
      close(EndpointState::kFaulted, failure);
      return ran;
    }
    // An AsyncStatus call its frame canceled is not reported: the frame gave
    // up on it.
    if (!failure.empty()) [[unlikely]] {
      marks.leave();
      if (!(mode == CallMode::kAsyncStatus && code == WireErrorCode::kCanceled)) {
        reportCallFailure(lane, seq, method, mode, cls.name, mi.name, failure, code);
      }
      failure.clear();  // for the next call taken along
      marks.enter(this, &info);
    }

    // The next call, if it is one of the same method right behind this one.
    // The work buffer may have grown while the call ran (a nested wait takes
    // the inbox along): positions, not pointers, carry over.
    if (!takesAlong || ran == maxFrames || !connected() || lane->modeChanged || ownerWaits(lane, yieldsToOwner)) {
      return ran;
    }
    if (lane->workPos == lane->work.size()) return ran;
    QueuedFrame q = parseQueued(lane->work, lane->workPos);
    if (q.bodyLen < head) return ran;
    if (head <= 8 && q.bodyLen >= 8) {
      if (!headWord.matches(q.body)) return ran;
    } else {
      for (std::size_t k = 0; k < head; ++k) {  // three bytes, mostly: memcmp's call cost more
        if (q.body[k] != headBytes[k]) return ran;
      }
    }
    lane->workPos += q.total;
    if (!lane->localOrigin) noteCallRun(lane, q.bodyLen + varintSize(q.bodyLen), concurrent);
    seq = q.seq;
    r = WireReader(q.body + head, q.bodyLen - head);
    r.setBudget(cfg_.maxDecodeBytes);
  }
}

bool EndpointImpl::holdCallObject(bool onObject, std::uint64_t objectId, std::uint32_t clsIndex,
                                  const ClassSchema& cls, const MethodInfo& mi, ObjectCore*& core,
                                  ObjectCore*& drop, EndpointClass*& object, bool& objectGone) {
  if (onObject != mi.instance) {
    close(EndpointState::kFaulted, "invalid message from " + peerAddress_ + ": " + cls.name + "::" + mi.name +
                                       (mi.instance ? " is an instance method, called without an object"
                                                    : " is a static method, called on an object"));
    return false;
  }
  core = exports_.takeForCall(objectId, drop);
  if (!core) {
    close(EndpointState::kFaulted, "invalid message from " + peerAddress_ + ": call of " + cls.name + "::" +
                                       mi.name + " on object " + std::to_string(objectId) +
                                       ", which this side never exported or already released");
    return false;
  }
  if (core->cls != clsIndex) {
    close(EndpointState::kFaulted, "invalid message from " + peerAddress_ + ": call of " + cls.name + "::" +
                                       mi.name + " on object " + std::to_string(objectId) +
                                       ", which is of another class");
    return false;
  }
  std::lock_guard lock(core->mu);
  object = core->obj;
  objectGone = object == nullptr;
  return true;
}

void EndpointImpl::reportCallFailure(Lane* lane, std::uint32_t seq, std::uint64_t method, CallMode mode,
                                     const std::string& clsName, const std::string& methodName,
                                     const std::string& failure, WireErrorCode code) {
  // Constructors are named "#new(params)" on the wire; people read "the
  // constructor of C".
  std::string what =
      (methodName.starts_with("#new") ? "the constructor of " + clsName : clsName + "::" + methodName) +
      " failed: " + failure;
  clipErrorText(what);
  if (mode == CallMode::kAsyncStatus) {
    // Its caller's AsyncFrame hears of it, not the endpoint.
    sendStatusError(lane, seq, Status::framework(FrameworkError::kRemoteFailure, EndpointState::kConnected, what));
    return;
  }
  bool isVoid = mode == CallMode::kAsyncVoid;
  if (!isVoid) forgetCanceled(lane, seq);
  stageFrame(lane, isVoid ? FrameType::kVoidFailed : FrameType::kReplyError, true, [&](WireWriter& w) {
    w.rawVarint(isVoid ? method : seq);
    w.rawVarint(static_cast<std::uint8_t>(code));
    w.rawString(what);
  });
}

template <class Fill>
void EndpointImpl::stageFrame(Lane* lane, FrameType type, bool urgent, Fill&& fill, std::uint8_t kindBits) {
  std::size_t bytes;
  std::size_t frame;
  std::uint32_t msgs;
  {
    std::lock_guard lock(lane->outMu);
    const std::size_t before = lane->out.size();
    std::size_t start;
    try {
      start = openFrame(lane, type);
      lane->out.data()[start + 1] |= kindBits;
      WireWriter w(lane->out);
      fill(w);
      closeFrame(lane->out, start);
      markDirty(lane);  // first: out of memory there leaves no count behind
    } catch (...) {
      // Out of memory while it was written: no part of it stays to be sent.
      lane->out.resize(before);
      throw;
    }
    bytes = lane->out.size();
    frame = bytes - start;
    msgs = ++lane->outMsgs;
  }
  afterAppend(lane, urgent, bytes, msgs, frame);
}

void EndpointImpl::runRelease(const std::uint8_t* body, std::size_t len) {
  WireReader r(body + 1, len - 1);
  r.rawVarint();  // slot
  std::uint64_t id = r.rawVarint();
  std::uint64_t refs = r.rawVarint();
  std::uint64_t mentions = r.rawVarint();
  ObjectCore* drop = nullptr;
  auto result = exports_.release(id, refs, mentions, drop);
  if (drop) releaseCoresAs(this, {drop});  // the object's destructor may run here
  if (result == ExportTable::ReleaseResult::kOk || !connected()) return;
  close(EndpointState::kFaulted, "invalid message from " + peerAddress_ + ": release of " + std::to_string(refs) +
                                     " references to object " + std::to_string(id) +
                                     (result == ExportTable::ReleaseResult::kUnknown
                                          ? ", which this side never exported or already released"
                                          : ", more than this side sent"));
}

ObjectCore* EndpointImpl::importRef(std::uint64_t id, const ClassHooksData& cls) {
  std::unique_lock lock(importsMu_);
  ObjectCore*& slot = imports_[id];
  if (slot && slot->cls_hooks != &cls) {
    // A stand-in of one class must never be handed out as another.
    WireReader::fail("object " + std::to_string(id) + " of the peer named as a " + cls.name + ", but it is a " +
                     slot->cls_hooks->name);
  }
  if (slot) {
    // Live unless its last reference is going right now (then it is about
    // to send its RELEASE, and this reference starts a new core).
    std::int64_t n = slot->refs.load(std::memory_order_relaxed);
    while (n > 0 && !slot->refs.compare_exchange_weak(n, n + 1, std::memory_order_relaxed)) {
    }
    if (n > 0) {
      ++slot->received;
      return slot;
    }
  }
  if (!slot && imports_.size() > cfg_.maxAllocObjects) {
    imports_.erase(id);
    lock.unlock();
    // Faulted here, also when the reference is the reply to our own
    // constructor call (read on the calling thread): the peer then forgets
    // the object with the connection.
    std::string why = "the peer sent references to more than maxAllocObjects (" +
                      std::to_string(cfg_.maxAllocObjects) + ") of its objects";
    close(EndpointState::kFaulted, why);
    WireReader::fail(why);
  }
  auto* core = new ObjectCore(true);
  core->ep = shared_from_this();
  core->id = id;
  core->received = 1;
  core->cls_hooks = &cls;
  slot = core;
  return core;
}

std::uint64_t EndpointImpl::forgetImport(ObjectCore* core) {
  std::lock_guard lock(importsMu_);
  if (auto it = imports_.find(core->id); it != imports_.end() && it->second == core) imports_.erase(it);
  return core->received;
}

void EndpointImpl::stageVarints(FrameType type, std::initializer_list<std::uint64_t> fields) noexcept {
  if (!connected()) return;
  try {
    stageFrame(laneForCall(), type, false, [&](WireWriter& w) {
      for (std::uint64_t f : fields) w.rawVarint(f);
    });
  } catch (...) {
    // Out of memory or the socket failed: the connection reports it; the
    // peer drops what the frame would have released when the connection ends.
  }
}

void EndpointImpl::sendRelease(std::uint64_t id, std::uint64_t refs, std::uint64_t mentions) noexcept {
  stageVarints(FrameType::kRelease, {id, refs, mentions});
}

// ---------------------------------------------------------------------------
// Flow control (docs/async-and-errors.md §5)

void EndpointImpl::grantCredit(Lane* lane) {
  const std::int64_t window = cfg_.receiveWindowBytes;
  std::int64_t grant = lane->runSinceCredit.exchange(0, std::memory_order_relaxed);
  if (grant <= 0) return;  // another parallel task took it
  if (!lane->windowGranted) {
    lane->windowGranted = true;
    grant += window - kInitialCallWindow;
  }
  // At once, not when this thread goes idle: a busy consumer would hold
  // the credit back for milliseconds while its producer waits for it.
  stageFrame(lane, FrameType::kCredit, true, [&](WireWriter& w) { w.rawVarint(static_cast<std::uint64_t>(grant)); });
}

void EndpointImpl::wakeLaneWaiter(Lane* lane) {
  std::lock_guard lock(lane->mu);
  if (Waiter* w = lane->waiter()) w->notify();
}

void EndpointImpl::holdBack(Lane* lane, const std::function<bool()>& released) {
  ThreadState& ts = threadState();
  // A thread that runs frames (the reader, a pool thread, a callback) is
  // never held back: what releases it may depend on frames only it can
  // run, and two pools waiting on each other would deadlock.
  if (ts.isReader || !ts.running.empty()) return;
  flush();
  waitWhileRunning(lane, [&] { return released() || !connected(); }, -1);
}

void EndpointImpl::noteAsyncAnswered(Lane* lane) {
  // seq_cst on both sides (waitForThrottle stores its flag, then loads the
  // count): with a relaxed decrement each side could miss the other's write
  // and the throttled thread sleep on.
  lane->asyncOutstanding.fetch_sub(1, std::memory_order_seq_cst);
  if (lane->throttleWaiting.load(std::memory_order_seq_cst)) wakeLaneWaiter(lane);
}

void EndpointImpl::waitForThrottle(Lane* lane) {
  const std::uint32_t limit = cfg_.asyncValueThrottle;
  lane->throttleWaiting.store(true, std::memory_order_seq_cst);
  holdBack(lane, [&] { return lane->asyncOutstanding.load(std::memory_order_seq_cst) < limit; });
  lane->throttleWaiting.store(false, std::memory_order_relaxed);
}

void EndpointImpl::waitForCredit(Lane* lane) {
  holdBack(lane, [&] {
    std::lock_guard lock(lane->outMu);
    return lane->creditLeft >= 0;
  });
}

// ---------------------------------------------------------------------------
// AsyncStatus errors and AsyncFrames (docs/async-and-errors.md §3)

std::uint64_t EndpointImpl::stageBarrierLocked(Lane* lane) {
  std::uint64_t token;
  othersBegun_.fetch_add(1, std::memory_order_relaxed);  // before the lane's lock: its ack is read under it
  {
    std::lock_guard lock(lane->mu);
    token = ++lane->barrierSent;
  }
  std::size_t start = openFrame(lane, FrameType::kBarrier);
  lane->out.commit(putVarint(lane->out.reserveTail(10), token));
  closeFrame(lane->out, start);
  ++lane->outMsgs;
  markDirty(lane);
  if (!lane->statusFrames.empty()) lane->statusMarks.emplace_back(token, lane->outStatusSeq);
  return token;
}

void EndpointImpl::dropStatusSegments(Lane* lane, std::uint64_t token) {
  std::lock_guard lock(lane->outMu);
  bool covered = false;
  std::uint32_t upTo = 0;  // every AsyncStatus call below this one ran
  while (!lane->statusMarks.empty() && lane->statusMarks.front().first <= token) {
    upTo = lane->statusMarks.front().second;
    covered = true;
    lane->statusMarks.pop_front();
  }
  if (!covered) return;
  auto& segs = lane->statusFrames;
  // A segment ends where the next begins (the last one at outStatusSeq).
  while (!segs.empty()) {
    std::uint32_t end = segs.size() > 1 ? segs[1].first : lane->outStatusSeq;
    if (static_cast<std::int32_t>(upTo - end) < 0) break;
    segs.pop_front();
  }
}

void EndpointImpl::sendStatusError(Lane* lane, std::uint32_t vseq, const Status& status) {
  std::string message = status.message();
  clipErrorText(message);
  const Status& sent = message.size() == status.message().size() ? status : Codec<Status>::withMessage(status, message);
  stageFrame(lane, FrameType::kStatusError, true, [&](WireWriter& w) {
    w.rawVarint(vseq);
    Codec<Status>::encode(w, sent, neg_->ctx());
    w.finish();
  });
}

namespace {
void noDispatch(AsyncStateBase*, void*) {}
}  // namespace

void EndpointImpl::routeStatusError(Lane* lane, std::uint32_t vseq, Status status) {
  std::shared_ptr<FrameState> frame;
  {
    std::lock_guard lock(lane->outMu);
    if (static_cast<std::int32_t>(lane->outStatusSeq - vseq) <= 0) {
      WireReader::fail("STATUS_ERROR for AsyncStatus call " + std::to_string(vseq) + ", which was never made");
    }
    for (auto it = lane->statusFrames.rbegin(); it != lane->statusFrames.rend(); ++it) {
      if (static_cast<std::int32_t>(vseq - it->first) >= 0) {
        frame = it->frame;
        break;
      }
    }
  }
  if (!frame) {
    // Never silent: with no frame to take it, it is the endpoint's fault
    // (as for a failed AsyncVoid call).
    close(EndpointState::kFaulted,
          "an AsyncStatus call failed with no AsyncFrame to take the error: " + status.getFormattedMessage());
    return;
  }
  // Delivered in the lane's turn, in order with the calling thread's
  // callbacks: a completed state whose one callback reports it.
  frame->errorPosted();
  auto* holder = new AsyncState<Status>();
  holder->value.emplace(std::move(status));
  holder->addCallback(InlineCallback([frame, holder] { frame->errorDelivered(*holder->value); }));
  holder->setCallbackDispatcher(&noDispatch, nullptr);
  holder->completeWithValue();
  othersBegun_.fetch_add(1, std::memory_order_relaxed);
  postCompletion(lane, holder);
  holder->release();
}

void IncomingCall::sendStatusError(const Status& status) {
  auto& d = *static_cast<EndpointImpl::Dispatch*>(impl_);
  d.ep->sendStatusError(d.lane, d.seq, status);
}

// ---------------------------------------------------------------------------
// Cancellation and deadlines (docs/async-and-errors.md §3)

void EndpointImpl::sendCancel(Lane* lane, std::uint32_t seq, AsyncStateBase* state) noexcept {
  if (!connected()) return;
  if (state) {
    // The lane's slot may serve another thread by now: only while the call
    // is still pending here is `seq` this call.
    std::lock_guard lock(lane->mu);
    PendingReply* p = lane->pending.find(seq);
    if (!p || p->async != state) return;  // its reply is being delivered
  }
  try {
    stageFrame(lane, FrameType::kCancel, true, [&](WireWriter& w) { w.rawVarint(seq); });
  } catch (...) {
    // Out of memory or the socket failed: cancellation is advice, and the
    // connection reports a failed socket itself.
  }
}

void EndpointImpl::noteCanceled(Lane* lane, std::uint32_t seq) {
  std::lock_guard lock(lane->mu);
  if (lane->canceledLocked(seq)) return;
  if (lane->canceled.size() >= Lane::kMaxCanceled) {
    // A CANCEL that crossed its call's reply leaves an entry nobody removes;
    // the oldest entry is the one most surely stale.
    lane->canceled.erase(lane->canceled.begin());
  }
  lane->canceled.push_back(seq);
  lane->hasCanceled.store(true, std::memory_order_relaxed);
}

void EndpointImpl::noteFrameCanceled(Lane* lane, std::uint32_t first, std::uint32_t count) {
  std::lock_guard lock(lane->mu);
  if (lane->frameCanceled.size() >= Lane::kMaxFrameCanceled) lane->frameCanceled.erase(lane->frameCanceled.begin());
  lane->frameCanceled.emplace_back(first, count);
  lane->hasFrameCanceled.store(true, std::memory_order_relaxed);
}

void EndpointImpl::sendFrameCancel(Lane* lane, const FrameState* frame) noexcept {
  if (!connected()) return;
  try {
    std::vector<std::pair<std::uint32_t, std::uint32_t>> ranges;
    {
      std::lock_guard lock(lane->outMu);
      const auto& segs = lane->statusFrames;
      for (std::size_t i = 0; i < segs.size(); ++i) {
        if (segs[i].frame.get() != frame) continue;
        std::uint32_t end = i + 1 < segs.size() ? segs[i + 1].first : lane->outStatusSeq;
        if (end != segs[i].first) ranges.emplace_back(segs[i].first, end - segs[i].first);
      }
    }
    for (const auto& range : ranges) {
      stageFrame(lane, FrameType::kCancel, true, [&](WireWriter& w) {
        w.rawVarint(range.first);
        w.rawVarint(range.second);
      }, kObjectBit);
    }
  } catch (...) {
    // Out of memory or the socket failed: the calls run; the connection
    // reports a failed socket itself.
  }
}

void EndpointImpl::forgetCanceledSlow(Lane* lane, std::uint32_t seq) {
  std::lock_guard lock(lane->mu);
  auto it = std::find(lane->canceled.begin(), lane->canceled.end(), seq);
  if (it != lane->canceled.end()) lane->canceled.erase(it);
  if (lane->canceled.empty()) lane->hasCanceled.store(false, std::memory_order_relaxed);
}

std::uint8_t EndpointImpl::skipReason(Lane* lane, std::uint32_t seq, CallMode mode, std::int64_t deadlineNs) {
  if (mode != CallMode::kSync && mode != CallMode::kAsync && mode != CallMode::kAsyncRef) return 0;  // no reply to say so: it runs, and CallCtx tells
  if (lane->hasCanceled.load(std::memory_order_relaxed)) {
    std::lock_guard lock(lane->mu);
    if (lane->canceledLocked(seq)) return static_cast<std::uint8_t>(WireErrorCode::kCanceled);
    // Marks far behind the call now due crossed their call's reply (the
    // CANCEL came after the answer): nobody removes those otherwise, and
    // the lane would pay for them on every call, or a mark would outlive a
    // wrap of the numbers.
    std::erase_if(lane->canceled, [seq](std::uint32_t s) {
      auto behind = static_cast<std::uint32_t>(seq - s);
      return behind > Lane::kCancelWindow && behind < 0x80000000u;
    });
    if (lane->canceled.empty()) lane->hasCanceled.store(false, std::memory_order_relaxed);
  }
  if (deadlineNs != 0 && nowNs() >= deadlineNs) return static_cast<std::uint8_t>(WireErrorCode::kTimedOut);
  return 0;
}

bool cancelState(AsyncStateBase& state) {
  // A complete state's endpoint may be gone, its address reused.
  if (state.isReady() || state.endsOnlyByAnswer()) return false;
  EndpointImpl* raw = state.endpoint();
  if (!raw || !state.isCall()) {
    return state.completeWithError(AsyncError::kCanceled, "canceled by the caller");
  }
  // Completing runs the state's dispatcher, which posts to the endpoint:
  // keep it alive meanwhile. An endpoint that is gone failed every call
  // pending on it already.
  std::shared_ptr<EndpointImpl> ep = EndpointImpl::pin(raw);
  if (!ep) return false;
  if (!state.completeWithError(AsyncError::kCanceled, "canceled by the caller")) return false;
  ep->sendCancel(static_cast<Lane*>(state.dispatcherArg()), state.callSeq(), &state);
  return true;
}

void EndpointImpl::sendAsyncReply(Lane* lane, std::uint32_t seq, AsyncStateBase* state, bool withValue) {
  std::size_t bytes;
  std::size_t frame;
  std::uint32_t msgs;
  forgetCanceled(lane, seq);
  // The list's size only while something is in it, as in beginReply().
  ThreadState& ts = threadState();
  const std::size_t refsFrom = ts.countsPending ? ts.refsSent.size() : 0;
  bool encoded = false;
  {
    std::lock_guard lock(lane->outMu);
    std::size_t start = lane->out.size();
    bool ok = state->hasValue();
    std::string unsendable;  // why the value could not be encoded
    if (ok) {
      start = openFrame(lane, FrameType::kReply);
      lane->out.commit(putVarint(lane->out.reserveTail(10), seq));
      try {
        if (withValue) {
          WireWriter w;
          limitFrame(w, lane, start);
          state->encodeValue(w, neg_->ctx());
          w.finish();
          checkFrameFits(lane->out.size() - start - 1, "the result");
        }
        encoded = true;
      } catch (const std::exception& e) {
        lane->out.resize(start);
        ok = false;
        unsendable = e.what();
      } catch (...) {
        lane->out.resize(start);
        ok = false;
      }
    }
    if (!ok) {
      start = openFrame(lane, FrameType::kReplyError);
      lane->out.commit(putVarint(lane->out.reserveTail(10), seq));
      WireWriter w(lane->out);
      // A value that failed because its call did not run says why (a FETCH
      // of an AsyncRef's value reports what its call's answer did).
      const AsyncError kind = state->isReady() ? state->error() : AsyncError::kNone;
      w.rawVarint(static_cast<std::uint8_t>(kind == AsyncError::kCanceled   ? WireErrorCode::kCanceled
                                            : kind == AsyncError::kTimedOut ? WireErrorCode::kTimedOut
                                                                            : WireErrorCode::kHandlerFailed));
      std::string why = !unsendable.empty()               ? unsendable
                        : state->errorMessage().empty() ? "the Async result could not be sent"
                                                        : state->errorMessage();
      clipErrorText(why);
      w.rawString(why);
    }
    closeFrame(lane->out, start);
    bytes = lane->out.size();
    frame = bytes - start;
    msgs = ++lane->outMsgs;
    markDirty(lane);
  }
  // After the unlock: an object the value referred to may send its RELEASE.
  if (ts.countsPending) [[unlikely]] {
    if (encoded) {
      ts.keepRefs(refsFrom);
    } else {
      takeBackRefs(refsFrom);
    }
  }
  afterAppend(lane, false, bytes, msgs, frame);
}

// ---------------------------------------------------------------------------
// Calls from this side

Lane* EndpointImpl::allocLocalLane() {
  std::lock_guard lock(lanesMu_);
  std::erase_if(retiredScopeLanes_, [&](Lane* l) {
    std::lock_guard laneLock(l->mu);
    if (!l->pending.empty()) return false;
    l->inUse = false;
    freeLocal_.push_back(l->slot);
    return true;
  });
  std::uint32_t slot;
  if (!freeLocal_.empty()) {
    slot = freeLocal_.back();
    freeLocal_.pop_back();
  } else {
    slot = static_cast<std::uint32_t>(localLanes_.size());
    localLanes_.push_back(std::make_unique<Lane>(true, slot));
  }
  Lane* lane = localLanes_[slot].get();
  lane->inUse = true;
  return lane;
}

Lane* EndpointImpl::laneForOwnCall() {
  ThreadState& ts = threadState();
  if (ts.scope) return scopeLane(*ts.scope);
  for (auto& o : ts.own) {
    if (o.raw == this && !o.ep.expired()) return o.lane;
  }
  Lane* lane = allocLocalLane();
  std::erase_if(ts.own, [](const ThreadState::Own& o) { return o.ep.expired(); });
  ts.own.push_back({weak_from_this(), this, lane});
  return lane;
}

Lane* EndpointImpl::scopeLane(LaneScope& scope) {
  for (auto& e : scope.active) {
    if (e.raw == this && !e.ep.expired()) return e.lane;
  }
  Lane* lane = allocLocalLane();
  lane->sendMode.store(scope.mode, std::memory_order_relaxed);
  // Announced ahead of the scope's first call on it: the peer runs what
  // follows on the lane as the scope asks.
  stageFrame(lane, FrameType::kLane, false, [&](WireWriter& w) {
    w.rawVarint(scope.mode);
    w.rawVarint(scope.threads);
  });
  scope.active.push_back({weak_from_this(), this, lane});
  // The scope's lane is the thread's own lane on this endpoint while the
  // scope lives: its replies and call-backs reach this thread as usual.
  ThreadState& ts = threadState();
  ts.own.insert(ts.own.begin(), {weak_from_this(), this, lane});
  return lane;
}

void EndpointImpl::endScopeLane(Lane* lane) {
  ThreadState& ts = threadState();
  std::erase_if(ts.own, [&](const ThreadState::Own& o) { return o.lane == lane; });
  if (connected()) {
    try {
      stageFrame(lane, FrameType::kLane, true, [](WireWriter& w) {
        w.rawVarint(kLanePool);
        w.rawVarint(1);
      });
      lane->sendMode.store(kLanePool, std::memory_order_relaxed);
    } catch (const std::exception&) {
      // Closed meanwhile: nothing to tell the peer.
    }
  }
  bool pending;
  {
    std::lock_guard lock(lane->mu);
    pending = !lane->pending.empty();
  }
  if (pending) {
    // Async replies of the scope are still to come: their callbacks must
    // not run on another thread's lane. The slot is freed once they came.
    flush();
    std::lock_guard lock(lanesMu_);
    retiredScopeLanes_.push_back(lane);
    return;
  }
  releaseLocalLane(lane);
}

bool EndpointImpl::waitLaneIdle(Lane* lane, std::int64_t timeoutMs) {
  if (!connected()) return false;
  lane->voidSinceBarrier.store(false, std::memory_order_relaxed);
  std::uint64_t token;
  std::size_t bytes;
  std::uint32_t msgs;
  {
    std::lock_guard lock(lane->outMu);
    token = stageBarrierLocked(lane);
    bytes = lane->out.size();
    msgs = lane->outMsgs;
  }
  afterAppend(lane, true, bytes, msgs);
  return waitWhileRunning(
      lane,
      [&] {
        std::lock_guard lock(lane->mu);
        return lane->barrierAcked >= token || !connected();
      },
      timeoutMs) &&
         connected();
}

void EndpointImpl::releaseLocalLane(Lane* lane) {
  flush();
  std::lock_guard lock(lanesMu_);
  lane->inUse = false;
  freeLocal_.push_back(lane->slot);
}

bool EndpointImpl::dropPending(Lane* lane, std::uint32_t seq) noexcept {
  PendingReply p;
  {
    std::lock_guard lock(lane->mu);
    if (!lane->pending.take(seq, p)) return false;  // a close took it meanwhile
    // The caller still holds outMu since addPending: no number was given
    // out after this one, and the peer numbers the calls it receives.
    if (lane->outSeq == seq + 1) --lane->outSeq;
    --lane->callsEntered;
  }
  if (p.async) p.async->release();  // the entry's reference
  return true;
}

bool EndpointImpl::abandonSync(Lane* lane, std::uint32_t seq, SyncReply* reply) {
  {
    std::lock_guard lock(lane->mu);
    PendingReply* p = lane->pending.find(seq);
    if (!p || p->sync != reply) return false;  // the reply is being delivered
    // The entry stays, empty, until the late reply comes and is dropped: a
    // reply to a call that is not pending faults the connection.
    *p = PendingReply{nullptr, nullptr, reply->readLate};
  }
  noteFinished(1);
  return true;
}

std::uint32_t EndpointImpl::addPending(Lane* lane, SyncReply* sync, AsyncStateBase* async) {
  std::lock_guard lock(lane->mu);
  if (!connected()) throw ConnectionClosedError("endpoint is not connected: " + error());
  std::uint32_t seq = lane->outSeq;
  lane->pending.insert(seq, PendingReply{sync, async});  // out of memory: no number taken
  ++lane->outSeq;
  // Counted for waitForIdle under the lock already held: a locked add on
  // an endpoint-wide count per call was 4-6 % of RoundTripStringAsyncCB's
  // rate at 1 thread (docs/benchmarks.md).
  ++lane->callsEntered;
  return seq;
}

void EndpointImpl::markDirtySlow(Lane* lane) {
  std::lock_guard lock(dirtyMu_);
  // Listed first: out of memory here leaves the lane unmarked, so that its
  // next call lists it. Marked but never listed, nothing it staged would
  // ever leave, and its callers would wait for good.
  dirty_.push_back(lane);
  lane->dirty = true;
}

void EndpointImpl::afterAppendSlow(Lane* lane, bool urgent, std::size_t laneBytes, std::uint32_t laneMsgs,
                                   std::size_t frameBytes, bool call) {
  if (urgent || laneBytes >= cfg_.maxMsgBatchSize || laneMsgs >= cfg_.maxBatchMsgs) {
    flush();
    return;
  }
  // Frames staged while this thread runs frames of this endpoint (replies of
  // the calls it runs, calls made by reply callbacks) leave together when the
  // thread has nothing left to run: the batch it received bounds the batch
  // it sends, with no guess. The timer below still sends them if the thread
  // stays busy.
  ThreadState& ts = threadState();
  // The innermost run of this endpoint on this thread, searched from the top
  // of the stack (usually its only entry).
  const ThreadState::Exec* run = nullptr;
  for (auto e = ts.running.rbegin(); e != ts.running.rend(); ++e) {
    if (e->ep == this) {
      run = &*e;
      break;
    }
  }
  if (run) {
    const bool inCall = run->inCall > 0;  // a call of the peer's, not a reply callback
    // A method of the peer's that makes calls while it runs (a stream):
    // the first of them leave early, with whatever else the lane holds, in
    // batches that double in size (EndpointConfig::sendRampBytes; values
    // above maxMsgBatchSize act as it) and hold sendRampMaxCalls calls at
    // most. Replies, and calls made by reply callbacks, leave with the
    // batch the thread received, below.
    if (call && inCall && cfg_.sendRampBytes) {
      const std::uint32_t max = cfg_.maxMsgBatchSize;
      const std::uint32_t at = rampAt(ts.sendRamp);
      if (laneBytes >= at || (cfg_.sendRampMaxCalls && laneMsgs >= cfg_.sendRampMaxCalls)) {
        ts.sendRamp = at >= max / 2 ? max : at * 2;
        flush();
        return;
      }
    }
    // Whatever the size of the batch received, what this thread stages
    // leaves once it comes to two full batches: the peer starts on it while
    // this thread goes on. Held for the whole batch received, a window of
    // calls larger than a read could take moved as one block, each side
    // idle while the other worked: UserProfileServiceCB at 20 x 128 in
    // flight ran at 1.9-2.1 M calls/s against 3.4 M at 20 x 32, and both
    // readers slept 600 times a second; with the bound, 3.4-3.6 M. Two
    // batches measured 3-7 % above one (docs/benchmarks.md).
    ts.deferredBytes += frameBytes;
    if (ts.deferredBytes >= 2 * std::uint64_t{cfg_.maxMsgBatchSize}) {
      flush();
      return;
    }
    // Listed once per thread and endpoint; the last one listed is usually
    // this one, and a stream's every call asked (12 instructions a call).
    const bool last = !ts.deferredFlush.empty() && ts.deferredFlush.back().raw == this &&
                      !ts.deferredFlush.back().ep.expired();
    if (!last) {
      bool listed = false;
      for (auto& d : ts.deferredFlush) listed |= d.raw == this && !d.ep.expired();
      if (!listed) {
        try {
          ts.deferredFlush.push_back({this, weak_from_this()});
        } catch (const std::bad_alloc&) {
          // Out of memory listing the endpoint: its frames leave now, as if
          // a threshold were reached (a call already staged is not
          // reported failed for a list it was not in).
          flush();
          return;
        }
      }
    }
    // No 50 µs timer here (arming one per batch woke the timer thread per
    // batch: 2.1 M → 3.4 M round trips/s with it gone, 1 thread, 512 in
    // flight). If the thread stays busy in the frame (a handler computing
    // after a call), the inline watch sends the frames after 1 to ~17 ms.
    // Checked on every append: any flush clears the time, and frames staged
    // after it need watching again.
    if (deferredSinceNs_.load(std::memory_order_relaxed) == 0) {
      std::int64_t zero = 0;
      if (deferredSinceNs_.compare_exchange_strong(zero, nowNs(), std::memory_order_relaxed)) {
        try {
          BatchAggregator::instance().watchInline(*this);
        } catch (...) {
          // Out of memory (or threads) arming the watch: the frames leave
          // now. Left set, the time would have kept later frames from being
          // watched until the next flush.
          deferredSinceNs_.store(0, std::memory_order_relaxed);
          flush();
          return;
        }
      }
    }
    // The next frames on this lane are held too while the lane stays below
    // every threshold above (the ramp's counted for any frame: more than
    // needed for replies, never less for calls). run is the innermost run
    // of this endpoint; afterAppend asks for it on top of the stack.
    if (run == &ts.running.back()) {
      const std::size_t belowBytes = cfg_.sendRampBytes ? rampAt(ts.sendRamp) : cfg_.maxMsgBatchSize;
      std::uint32_t belowMsgs = cfg_.maxBatchMsgs;
      if (cfg_.sendRampBytes && cfg_.sendRampMaxCalls) belowMsgs = std::min(belowMsgs, cfg_.sendRampMaxCalls);
      ts.holdEp = this;
      ts.holdLane = lane;
      ts.holdDepth = ts.running.size();
      ts.holdBelowBytes = belowBytes;
      ts.holdBelowMsgs = belowMsgs;
    }
    return;
  } else if (armed_.load(std::memory_order_acquire)) {
    // A batch is collecting and the timer will send it: nothing to decide,
    // and no clock to read (the clock was a third of a one-way call's cost).
    return;
  } else {
    // A call that is not part of a burst leaves at once; during a burst
    // (calls closer than burstGapUs) calls collect in their lane until the
    // batch is full or the timer flushes it (maxBatchYieldUs). The trade-off
    // is in EndpointConfig::burstGapUs.
    //
    // A steady rate too low for batching to pay is no burst either: when the
    // average gap is a quarter of maxBatchYieldUs or more, about four calls
    // or fewer would share a batch, and each would wait up to
    // maxBatchYieldUs and a timer wake-up for it. At 50,000 calls/s (20 us
    // apart) that wait was most of the latency: 86-110 us mean from the
    // scheduled send, against 19 us with every call written at once
    // (latency_client --mode fixedrate). At 100,000/s and more a write per
    // call cannot keep up on a 2-core machine (p99 1.6 ms): batching stays.
    // The average follows the gaps seen here and is reset from the size and
    // age of each batch the timer sends (flushOnTimer).
    if (cfg_.burstGapUs == 0) {  // no call is part of a burst: no clock to read
      flush();
      return;
    }
    const std::int64_t yieldNs = static_cast<std::int64_t>(cfg_.maxBatchYieldUs) * 1000;
    std::int64_t now = nowNs();
    std::int64_t gap = std::max<std::int64_t>(0, now - lastAppendNs_.exchange(now, std::memory_order_relaxed));
    // Racing callers may lose an update: the average is a hint.
    std::int64_t avg = gapAvgNs_.load(std::memory_order_relaxed);
    avg += (std::min(gap, maxGapNs()) - avg) / 16;
    gapAvgNs_.store(avg, std::memory_order_relaxed);
    if (gap > static_cast<std::int64_t>(std::min(cfg_.burstGapUs, cfg_.maxBatchYieldUs)) * 1000 ||
        4 * avg >= yieldNs) {
      flush();
      return;
    }
  }
  if (!armed_.exchange(true, std::memory_order_acq_rel)) {
    if (auto self = weak_from_this().lock()) BatchAggregator::instance().arm(self, cfg_.maxBatchYieldUs);
  }
}

std::uint64_t EndpointImpl::flushCounting(GatherTimes* times) {
  deferredSinceNs_.store(0, std::memory_order_relaxed);
  // Whatever this thread staged leaves with this flush (afterAppend's bound
  // counts from here). A thread without its state staged nothing.
  if (ThreadState* ts = tlsThreadState) ts->deferredBytes = 0;
  bool drained;
  std::uint64_t msgs;
  {
    std::lock_guard wlock(writeMu_);
    msgs = gatherLocked();
    // The frames of the next gather collect from now on: only a timer batch
    // asks (flushOnTimer), so the clock is read only while one is armed or
    // by the timer's own flush, not on every call's flush.
    if (msgs && (times || armed_.load(std::memory_order_relaxed))) {
      const std::int64_t now = steadyNowNs();
      if (times) *times = {lastGatherNs_, now};
      lastGatherNs_ = now;
    }
    drained = drainLocked();
  }
  if (!drained || writeFailed_.load()) afterPartialWrite();
  return msgs;
}

void EndpointImpl::flushOnTimer() {
  disarm();
  // The burst went on until now: the next call of the same burst should not
  // count as a lone call (appends skip the clock while armed, so the time
  // replaced is that of the call that armed the timer). Read before the
  // gather: a call appended after it then measures its gap from here.
  const std::int64_t armedAt = lastAppendNs_.exchange(steadyNowNs(), std::memory_order_relaxed);
  GatherTimes gathered;
  std::uint64_t msgs = flushCounting(&gathered);
  if (msgs == 0) return;  // another flush (a sync call's) took the batch: nothing learned
  // The batch's calls came (gathered.at - since) / msgs apart, the timer's
  // own lateness included, where `since` is when the timer was armed or, if
  // a flush came in between (a sync call's), that flush. The next gap
  // afterAppend measures starts at the timer, not at the batch's last call:
  // this is the better estimate. Capped as afterAppend caps a gap, so that
  // a timer that ran late (a busy CPU) does not pin the average high.
  const std::int64_t since = std::max(armedAt, gathered.before);
  const std::int64_t gap = std::max<std::int64_t>(0, gathered.at - since) / static_cast<std::int64_t>(msgs);
  gapAvgNs_.store(std::min(gap, maxGapNs()), std::memory_order_relaxed);
}

std::uint64_t EndpointImpl::gatherLocked() {
  {
    std::lock_guard dlock(dirtyMu_);
    // Room first: out of memory here leaves every lane listed, and nothing
    // below allocates, so no lane's frames are taken and then lost.
    wq_.reserve(dirty_.size());
    flushing_.swap(dirty_);
  }
  std::uint64_t msgs = 0;
  std::size_t largest = 0;
  for (Lane* l : flushing_) {
    ByteBuffer fresh;
    if (!freeBufs_.empty()) {
      fresh = std::move(freeBufs_.back());
      freeBufs_.pop_back();
    }
    {
      std::lock_guard lock(l->outMu);
      l->out.swap(fresh);
      msgs += l->outMsgs;
      l->outMsgs = 0;
      l->dirty = false;
    }
    if (fresh.empty()) {
      recycleLocked(std::move(fresh));
    } else {
      largest = std::max(largest, fresh.size());
      wqBytes_ += fresh.size();
      wq_.push_back(std::move(fresh));
    }
  }
  flushing_.clear();
  if (msgs) {
    add(counters_.messagesSent, msgs);
    std::size_t bucket = std::min<std::size_t>(63u - static_cast<unsigned>(__builtin_clzll(msgs)),
                                               EndpointStats::kBatchBuckets - 1);
    add(counters_.batches[bucket], 1);
    raiseTo(counters_.maxBatch, msgs);
    raiseTo(counters_.maxStaged, largest);
  }
  return msgs;
}

void EndpointImpl::recycleLocked(ByteBuffer&& b) noexcept {
  try {
    b.clearAndTrim(4 * 1024 * 1024, 64 * 1024);
    if (freeBufs_.size() < 64) freeBufs_.push_back(std::move(b));
  } catch (...) {
    // Out of memory: the buffer goes instead of being kept.
  }
}

bool EndpointImpl::drainLocked() {
  // With TLS, records already encrypted may wait in the session after the
  // queue is empty (sendSome with no iovecs writes them).
  while (!wq_.empty() || sock_->outputPending()) {
    if (state() != EndpointState::kConnected) {
      wq_.clear();
      wqBytes_ = 0;
      wqOffset_ = 0;
      break;
    }
    iov_.clear();
    for (std::size_t i = 0; i < wq_.size() && iov_.size() < 64; ++i) {
      std::size_t off = i == 0 ? wqOffset_ : 0;
      iov_.push_back({wq_[i].data() + off, wq_[i].size() - off});
    }
    // Never block here: a thread that must also read (the reader, a caller
    // waiting for its reply) would deadlock against a peer doing the same.
    long n = sock_->sendSome(iov_.data(), static_cast<int>(iov_.size()));
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (!wantWrite_.exchange(true)) {
          // The reader may be in a poll that does not watch for POLLOUT.
          std::lock_guard lock(readerWaiterMu_);
          if (readerWaiter_) readerWaiter_->notify();
        }
        return false;
      }
      writeErrno_.store(errno, std::memory_order_relaxed);
      writeFailed_ = true;
      wq_.clear();
      wqBytes_ = 0;
      wqOffset_ = 0;
      break;
    }
    add(counters_.socketWrites, 1);
    add(counters_.bytesSent, static_cast<std::uint64_t>(n));
    auto left = static_cast<std::size_t>(n);
    wqBytes_ -= left;
    while (left) {
      std::size_t avail = wq_.front().size() - wqOffset_;
      if (left < avail) {
        wqOffset_ += left;
        break;
      }
      left -= avail;
      wqOffset_ = 0;
      recycleLocked(std::move(wq_.front()));
      wq_.pop_front();
    }
  }
  wantWrite_.store(false);
  return true;
}

void EndpointImpl::closeIfWriteFailed() {
  if (!writeFailed_.exchange(false)) return;
  int err = writeErrno_.load(std::memory_order_relaxed);
  // A TLS failure is a fault (bad input or a broken session), a lost socket a close.
  close(err == EPROTO ? EndpointState::kFaulted : EndpointState::kClosed, reasonOr([&] {
          return "connection to " + peerAddress_ + " lost while sending: " + sock_->errorText(err);
        }));
}

void EndpointImpl::afterPartialWrite() {
  if (writeFailed_.load()) {
    closeIfWriteFailed();
    return;
  }
  // Back-pressure: a thread that does not read may wait for the socket to
  // take the backlog down below the limit. Threads that read (the reader, a
  // thread running a lane) never wait: the reader's poll finishes the write.
  ThreadState& ts = threadState();
  if (ts.isReader || !ts.running.empty()) return;
  while (connected()) {
    {
      std::lock_guard wlock(writeMu_);
      if (wqBytes_ <= cfg_.maxTotalSendBytes || drainLocked()) return;
    }
    pollfd p{sock_->fd(), POLLOUT, 0};
    ::poll(&p, 1, 50);
  }
}

void EndpointImpl::writePending() noexcept {
  // Called by the reader and other threads that poll the socket, none of
  // which has a caller to throw to: out of memory writing (TLS's records)
  // faults the connection, as a write error does.
  catchingAll(
      [&] {
        std::lock_guard wlock(writeMu_);
        drainLocked();
      },
      [&](const char* what) { faultWith("cannot write to the socket", what); });
  closeIfWriteFailed();
}

// ---------------------------------------------------------------------------
// Waiting

void EndpointImpl::claimLaneWaiter(Lane* lane) {
  std::lock_guard lock(lane->mu);
  // A parallel lane has no runner for a waiter to stand in for; its frames
  // keep going to tasks (pumpParallel) while this one waits.
  if (lane->mode == kLaneParallel) return;
  lane->waiters.push_back(&threadState().waiter);
  lane->waiterCount.store(static_cast<int>(lane->waiters.size()), std::memory_order_relaxed);
}

void EndpointImpl::releaseLaneWaiter(Lane* lane) {
  Waiter* me = &threadState().waiter;
  std::unique_lock lock(lane->mu);
  for (auto it = lane->waiters.end(); it != lane->waiters.begin();) {
    --it;
    if (*it == me) {
      lane->waiters.erase(it);
      break;
    }
  }
  lane->waiterCount.store(static_cast<int>(lane->waiters.size()), std::memory_order_relaxed);
  // Frames queued while we were the waiter were not given to the pool.
  if (lane->waiters.empty() && !lane->runner && !lane->scheduled &&
      (!lane->inbox.empty() || lane->workPos < lane->work.size())) {
    schedule(lane, lock);
  } else if (Waiter* w = lane->waiter(); w && w != me) {
    w->notify();  // another waiter takes over what arrived meanwhile
  }
}

bool EndpointImpl::waitWhileRunning(Lane* own, const std::function<bool()>& done, std::int64_t timeoutMs,
                                    bool ownClaimed) {
  ThreadState& ts = threadState();
  Lane* exec = (!ts.running.empty() && ts.running.back().ep == this) ? ts.running.back().lane : nullptr;
  bool claimed[2] = {ownClaimed, false};
  if (own && !own->localOrigin) {
    // A call made by a method the peer called, on the peer's lane it runs
    // (laneForCall): while it waits, only that lane's continuations may
    // run, not the calls queued behind the method. It waits as the lane's
    // runner does.
    exec = own;
    own = nullptr;
    claimed[1] = claimed[0];
    claimed[0] = false;
  }
  if (exec && !exec->localOrigin) {
    // A parallel lane has no runner to stand in for: its continuations
    // run as tasks of their own (pumpParallel; claimLaneWaiter did nothing).
    std::lock_guard lock(exec->mu);
    if (exec->mode == kLaneParallel) exec = nullptr;
  }
  Lane* lanes[2] = {own, exec == own ? nullptr : exec};
  // What the wait takes (its places among its lanes' waiters, its count
  // among the pollers, the watch of the socket) is given back also when it
  // throws (out of memory): a lane left waited on is never given to the
  // pool again, and a watch left standing keeps the reader off the socket.
  struct Leave {
    EndpointImpl* ep;
    ThreadState& ts;
    Lane* lanes[2] = {};
    bool polling = false;  // counted in callerPollers_
    bool watcher = false;
    bool inheritedWatch = false;
    void stopPolling() noexcept {
      if (!polling) return;
      polling = false;
      if (watcher) ep->watcherInPoll_.store(false, std::memory_order_release);  // a throw in the poll
      if (watcher && !inheritedWatch) {
        ts.watching.erase(std::find(ts.watching.begin(), ts.watching.end(), ep));
        ep->callerWatching_.store(false, std::memory_order_seq_cst);
        if (ep->callerPollers_.load(std::memory_order_seq_cst) > 1 || ep->sock_->inputBuffered()) {
          // Others still wait, or TLS plaintext waits in the session: the
          // reader takes the socket back at once.
          std::lock_guard lock(ep->readerWaiterMu_);
          if (ep->readerWaiter_) ep->readerWaiter_->notify();
        }
      }
      ep->callerPollers_.fetch_sub(1, std::memory_order_release);
    }
    void releaseLanes() noexcept {
      for (Lane*& l : lanes) {
        Lane* lane = std::exchange(l, nullptr);
        if (!lane) continue;
        try {
          ep->releaseLaneWaiter(lane);
        } catch (...) {
          // Out of memory handing a lane with frames to the pool
          // (postLane() left it unscheduled): the next frame for it
          // schedules it again.
        }
      }
    }
    ~Leave() {
      stopPolling();
      releaseLanes();
    }
  } leave{this, ts};
  for (int i = 0; i < 2; ++i) {
    if (claimed[i]) leave.lanes[i] = lanes[i];
  }
  for (int i = 0; i < 2; ++i) {
    if (lanes[i] && !claimed[i]) {
      claimLaneWaiter(lanes[i]);
      leave.lanes[i] = lanes[i];
    }
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs < 0 ? 0 : timeoutMs);
  bool result = false;
  // One waiting caller at a time watches the socket itself (the watcher);
  // the reader thread steps back meanwhile (it is woken only if it is in its
  // socket poll right now). Other waiting callers wait to be notified: all of
  // them polling the socket would wake them all for every packet.
  callerPollers_.fetch_add(1, std::memory_order_seq_cst);
  leave.polling = true;
  bool& watcher = leave.watcher;
  // A wait nested in a wait of this thread that watches (a callback run
  // meanwhile made a sync call) watches too: nobody else reads for it.
  leave.inheritedWatch = std::find(ts.watching.begin(), ts.watching.end(), this) != ts.watching.end();
  auto tryWatch = [&] {
    if (watcher) return;
    if (leave.inheritedWatch) {
      watcher = true;
      return;
    }
    if (callerWatching_.load(std::memory_order_relaxed)) return;
    ts.watching.reserve(ts.watching.size() + 1);  // before the watch is taken: it throws nothing after
    if (callerWatching_.exchange(true)) return;
    watcher = true;
    ts.watching.push_back(this);
    if (readerPolling_.load(std::memory_order_seq_cst)) {
      std::lock_guard lock(readerWaiterMu_);
      if (readerWaiter_) readerWaiter_->notify();
    }
  };
  for (;;) {
    if (done()) {
      result = true;
      break;
    }
    bool ran = false;
    if (lanes[0]) ran |= runQueued(lanes[0], false);
    if (lanes[1]) ran |= runQueued(lanes[1], true);
    if (ran) continue;
    if (done()) {
      result = true;
      break;
    }
    int waitMs = -1;
    if (timeoutMs >= 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      waitMs = static_cast<int>(left.count()) + 1;
    }
    // The watcher watches the socket too: the reply usually comes from
    // there, and reading it ourselves saves the reader's wake-up of us.
    tryWatch();
    ts.flushDeferred();
    if (watcher) watcherInPoll_.store(true, std::memory_order_release);
    short events = watcher && connected() && sock_->inputBuffered()
                       ? static_cast<short>(POLLIN)  // TLS plaintext waits in the session
                       : ts.waiter.waitOrReady(watcher && connected() ? sock_->fd() : -1,
                                               static_cast<short>(POLLIN | (wantWrite_.load() ? POLLOUT : 0)), waitMs,
                                               cfg_.pollSpinUs);
    if (watcher) watcherInPoll_.store(false, std::memory_order_release);
    if (events & POLLOUT) writePending();
    if (events & (POLLIN | POLLHUP | POLLERR)) {
      // The reader thread woke for the same bytes. If it got the socket
      // first it is routing them right now, likely our reply: spin briefly
      // rather than sleep on its mutex, which would cost a wake-up.
      bool got = readMu_.try_lock();
      for (int spin = 0; !got && spin < 2000 && !done(); ++spin) {
        cpuRelax();
        got = readMu_.try_lock();
      }
      if (got) {
        readMu_.unlock();
        readFromSocket(false, true);
      }
    }
  }
  leave.stopPolling();
  if (result) {
    // Frames that arrived before the reply belong before the call's return
    // (e.g. items a service streamed back during the call): run them now.
    // A pool thread that took our lane before we waited hands it back
    // after its current frame (runTurn).
    while (lanes[0]) {
      runQueued(lanes[0], false);
      {
        std::lock_guard lock(lanes[0]->mu);
        if (lanes[0]->runner == &ts) break;  // a nested wait: the outer run goes on
        if (!lanes[0]->runner) {
          // Nobody runs it: workPos may be read. Empty: done; else handed
          // back just now: run the rest.
          if (lanes[0]->workPos == lanes[0]->work.size() && lanes[0]->inbox.empty()) break;
          continue;
        }
      }
      ts.waiter.waitUntil(std::chrono::steady_clock::now() + std::chrono::milliseconds(1));
    }
    if (lanes[1]) runQueued(lanes[1], true);
  }
  leave.releaseLanes();
  ts.flushDeferred();  // back to the application: what the frames staged leaves
  return result;
}

bool EndpointImpl::waitForIdle(std::int64_t timeoutMs) {
  if (!connected()) return false;
  std::vector<Lane*> lanes;
  {
    std::lock_guard lock(lanesMu_);
    for (auto& l : localLanes_) lanes.push_back(l.get());
    for (auto& l : peerLanes_) lanes.push_back(l.get());
  }
  // Fire-and-forget calls are confirmed by a barrier that the peer answers
  // once every earlier call of the lane has run.
  for (Lane* l : lanes) {
    if (!l->voidSinceBarrier.exchange(false, std::memory_order_relaxed)) continue;
    std::lock_guard lock(l->outMu);
    stageBarrierLocked(l);
  }
  flush();
  // The test takes the lanes' locks, so it runs outside idleMu_: a finish
  // after it moves the generation on, and the wait below sees that. While
  // calls keep finishing, tests come at most one per kIdleTestGap, so that
  // a waiter does not keep every lane's lock busy.
  constexpr auto kIdleTestGap = std::chrono::microseconds(50);
  idleWaiters_.fetch_add(1, std::memory_order_seq_cst);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max<std::int64_t>(timeoutMs, 0));
  bool idle = false;
  for (auto lastTest = std::chrono::steady_clock::time_point{};;) {
    const auto now = std::chrono::steady_clock::now();
    if (timeoutMs >= 0 && now >= until) break;
    if (now - lastTest < kIdleTestGap) std::this_thread::sleep_for(kIdleTestGap - (now - lastTest));
    std::uint64_t seen;
    {
      std::lock_guard lock(idleMu_);
      seen = idleGeneration_;
    }
    if (!connected()) break;
    lastTest = std::chrono::steady_clock::now();
    if ((idle = idleNow())) break;
    std::unique_lock lock(idleMu_);
    auto moved = [&] { return idleGeneration_ != seen || !connected(); };
    if (timeoutMs < 0) {
      idleCv_.wait(lock, moved);
    } else if (!idleCv_.wait_until(lock, until, moved)) {
      break;
    }
  }
  idleWaiters_.fetch_sub(1, std::memory_order_relaxed);
  return connected() && (idle || idleNow());
}

EndpointStats EndpointImpl::stats(bool reset) {
  auto take = [reset](auto& a) { return reset ? a.exchange(0, std::memory_order_relaxed) : a.load(std::memory_order_relaxed); };
  EndpointStats st;
  std::int64_t now = nowNs();
  std::int64_t since = reset ? counters_.sinceNs.exchange(now) : counters_.sinceNs.load();
  st.seconds = static_cast<double>(now - since) / 1e9;
  st.messagesSent = take(counters_.messagesSent);
  st.messagesReceived = take(counters_.messagesReceived);
  st.bytesSent = take(counters_.bytesSent);
  st.bytesReceived = take(counters_.bytesReceived);
  st.socketWrites = take(counters_.socketWrites);
  st.socketReads = take(counters_.socketReads);
  for (std::size_t i = 0; i < EndpointStats::kBatchBuckets; ++i) st.sendBatchHistogram[i] = take(counters_.batches[i]);
  st.maxBatchMessages = take(counters_.maxBatch);
  st.maxStagedBytes = take(counters_.maxStaged);
  st.maxQueuedBytes = take(counters_.maxQueued);
  st.maxReceiveBufferBytes = take(counters_.maxRxBuffer);
  {
    std::lock_guard lock(lanesMu_);
    std::uint64_t total = 0;
    for (auto* lanes : {&localLanes_, &peerLanes_}) {
      for (auto& l : *lanes) total += l->callsRun.load(std::memory_order_relaxed);
    }
    st.callsExecuted = total - callsBase_;
    if (reset) callsBase_ = total;
  }
  for (std::size_t i = 0; Lane* l = laneAt(i); ++i) {
    std::lock_guard lock(l->mu);
    st.laneBufferBytes += l->inbox.capacity() + l->work.capacity();
  }
  st.valuesHeld = held_.size();
  return st;
}

// ---------------------------------------------------------------------------
// IncomingCall

AsyncError IncomingCall::skipError() const {
  if (skip_ == static_cast<std::uint8_t>(WireErrorCode::kCanceled)) return AsyncError::kCanceled;
  if (skip_ == static_cast<std::uint8_t>(WireErrorCode::kTimedOut)) return AsyncError::kTimedOut;
  return AsyncError::kRemoteError;
}

const char* IncomingCall::skipReasonText() const {
  if (skip_ == static_cast<std::uint8_t>(WireErrorCode::kCanceled)) return "canceled by the caller before it ran";
  if (skip_ == static_cast<std::uint8_t>(WireErrorCode::kTimedOut)) return "its deadline passed before it ran";
  return "the object was destroyed";
}

void IncomingCall::throwSkipped() const {
  if (skip_ != 0) throw CallSkipped{skip_};
  throw std::runtime_error("the object was destroyed");
}

WireWriter& IncomingCall::beginReply() {
  auto& d = *static_cast<EndpointImpl::Dispatch*>(impl_);
  d.ep->forgetCanceled(d.lane, d.seq);  // only sync and Async calls reply
  d.outLock = std::unique_lock(d.lane->outMu);
  // The list's size only while something is in it (a Dispatch serves the
  // calls taken along too: the mark is set for each).
  const ThreadState& ts = threadState();
  d.refsFrom = ts.countsPending ? static_cast<std::uint32_t>(ts.refsSent.size()) : 0;
  // Set before the frame is opened: if opening it throws (out of memory),
  // executeCall cuts the buffer back to here and gives the lock back.
  d.replyStart = d.lane->out.size();
  openFrame(d.lane, FrameType::kReply);
  d.lane->out.commit(putVarint(d.lane->out.reserveTail(10), d.seq));
  d.ep->limitFrame(d.writer.emplace(), d.lane, d.replyStart);
  return *d.writer;
}

void IncomingCall::endReply() {
  auto& d = *static_cast<EndpointImpl::Dispatch*>(impl_);
  d.writer->finish();
  // Too large for the peer: executeCall drops the frame and the call fails
  // with the reason.
  d.ep->checkFrameFits(d.lane->out.size() - d.replyStart - 1, "the result");
  d.writer.reset();
  Lane* lane = d.lane;
  closeFrame(lane->out, d.replyStart);
  std::size_t bytes = lane->out.size();
  std::uint32_t msgs = ++lane->outMsgs;
  d.ep->markDirty(lane);
  d.outLock.unlock();
  if (ThreadState& ts = threadState(); ts.countsPending) [[unlikely]] {
    ts.keepRefs(d.refsFrom);
  }
  // The caller of a sync call is blocked: its reply never waits for a batch.
  d.ep->afterAppend(lane, d.mode == CallMode::kSync, bytes, msgs, bytes - d.replyStart);
}

void IncomingCall::abortReply() noexcept {
  auto& d = *static_cast<EndpointImpl::Dispatch*>(impl_);
  if (!d.outLock.owns_lock()) return;
  d.lane->out.resize(d.replyStart);
  d.writer.reset();
  d.outLock.unlock();
  takeBackRefs(d.refsFrom);
}

std::uint64_t IncomingCall::exportNew(EndpointClass* obj, void (*destroy)(EndpointClass*)) {
  auto& d = *static_cast<EndpointImpl::Dispatch*>(impl_);
  ObjectCore* core = ObjectAccess::core(*obj);
  const bool fresh = core == nullptr;
  if (fresh) {
    core = new ObjectCore(false);  // its first reference is ours
    core->obj = obj;
    core->destroy = destroy;
    core->cls = cls_;
    // Bound before it is visible in the table: from then on a release (or
    // the connection closing) may destroy `obj` at any moment.
    ObjectAccess::bind(*obj, core);
  } else {
    // The constructor referred to the object already (it passed `*this`
    // on): that core is the object's. The reference its base pointer held
    // is ours now, and the runtime owns the object.
    std::lock_guard lock(core->mu);
    core->destroy = destroy;
    core->baseHolds = false;
  }
  std::uint64_t id = d.ep->exports().addRef(core, d.ep->config().maxAllocObjects);
  if (id == 0 || id == ExportTable::kFull) {
    if (fresh) {
      ObjectAccess::take(*obj);
      delete core;
    } else {
      std::lock_guard lock(core->mu);
      core->destroy = nullptr;
      core->baseHolds = true;
    }
    // The caller still owns `obj`.
    if (id == ExportTable::kFull) {
      // The peer's constructor call fails (not the connection).
      throw std::runtime_error("this side holds maxAllocObjects (" +
                               std::to_string(d.ep->config().maxAllocObjects) + ") objects for the peer already");
    }
    throw ConnectionClosedError("the connection closed while the object was being constructed");
  }
  releaseCore(core);  // ours: the entry holds the object now
  return id << 1;  // an object of the message's sender (objects.md §2)
}

namespace {
void dispatchCompletion(AsyncStateBase* state, void* lane) {
  state->endpoint()->postCompletion(static_cast<Lane*>(lane), state);
}
}  // namespace

void IncomingCall::replyWhenReady(AsyncStateBase* state) {
  auto& d = *static_cast<EndpointImpl::Dispatch*>(impl_);
  // If the method keeps no copy of a pending result, nobody can complete
  // it: answer with an error instead of leaving the caller waiting.
  if (!d.ep->replyWhenReady(d.lane, d.seq, state, true, objectCore_)) state->watchAbandon();
}

bool EndpointImpl::replyWhenReady(Lane* lane, std::uint32_t seq, AsyncStateBase* state, bool withValue,
                                  ObjectCore* keep) {
  if (state->isReady()) {
    sendAsyncReply(lane, seq, state, withValue);
    return true;
  }
  std::weak_ptr<EndpointImpl> weak = weak_from_this();
  // The object a pending result belongs to lives until the result is sent.
  if (keep) retainCore(keep);
  auto send = [weak, lane, state, keep, seq, withValue] {
    if (auto ep = weak.lock()) {
      if (ep->connected()) ep->sendAsyncReply(lane, seq, state, withValue);
    }
    if (keep) releaseCore(keep);
  };
  // Kept in the callback's own storage: a pending result costs no allocation.
  static_assert(sizeof(send) <= InlineCallback::kInlineBytes);
  state->addCallback(std::move(send));
  return false;
}

void IncomingCall::holdResult(AsyncStateBase* state, const std::type_info& type, bool answer) {
  auto& d = *static_cast<EndpointImpl::Dispatch*>(impl_);
  // Named as the caller names it (docs/async-and-errors.md §2): after the
  // call, on the caller's side of the lane.
  std::uint64_t id = heldValueId(d.lane->slot, d.seq, d.lane->localOrigin);
  const std::uint32_t max = d.ep->config().maxAllocValues;
  switch (d.ep->held().hold(id, state, type, max)) {
    case HeldValues::Result::kOk:
      break;
    case HeldValues::Result::kClosed:
      return;  // the connection closed meanwhile: nobody will name it
    case HeldValues::Result::kFull:
      WireReader::fail("the peer has " + std::to_string(max) + " values held here already (maxAllocValues)");
    default:
      WireReader::fail("value " + std::to_string(id) + " is still held when its name comes round again");
  }
  if (!answer) return;
  if (!d.ep->replyWhenReady(d.lane, d.seq, state, false, objectCore_)) state->watchAbandon();
}

void EndpointImpl::runValueFrame(Lane* lane, std::uint32_t seq, const std::uint8_t* body, std::size_t len) {
  WireReader r(body + 1, len - 1);
  r.rawVarint();  // slot
  std::uint64_t op = r.rawVarint();
  std::uint64_t id = r.rawVarint();
  if (!connected()) return;
  if (op == kValueDrop) {
    std::uint64_t mentions = r.rawVarint();
    HeldValues::Result res = held_.drop(id, mentions);
    if (res == HeldValues::Result::kOk) return;
    close(EndpointState::kFaulted, "invalid message from " + peerAddress_ + ": DROP of value " + std::to_string(id) +
                                       (res == HeldValues::Result::kUnknown  ? ", which this side does not hold"
                                        : res == HeldValues::Result::kTooFew ? ", after fewer mentions than it was named in"
                                                                             : ", which was dropped before"));
    return;
  }
  HeldValues::Result why;
  AsyncStateBase* state = held_.take(id, nullptr, why);
  if (!state) {
    close(EndpointState::kFaulted,
          "invalid message from " + peerAddress_ + ": FETCH of value " + std::to_string(id) + ", which this side does not hold");
    return;
  }
  // The reply leaves when the value is complete; the reference taken keeps
  // it until then.
  if (state->isReady()) {
    sendAsyncReply(lane, seq, state);
    state->release();
    return;
  }
  std::weak_ptr<EndpointImpl> weak = weak_from_this();
  state->addCallback([weak, lane, seq, state] {
    if (auto ep = weak.lock()) {
      if (ep->connected()) ep->sendAsyncReply(lane, seq, state);
    }
    state->release();
  });
}

void EndpointImpl::failLocally(AsyncStateBase* state, AsyncError kind, std::string message) noexcept {
  // Its completion entry counts down as a reply's does (runFrame).
  othersBegun_.fetch_add(1, std::memory_order_relaxed);
  try {
    if (state->completeWithError(kind, std::move(message))) return;
  } catch (...) {
  }
  noteFinished(1);
}

void EndpointImpl::bindReplyState(Lane* lane, AsyncStateBase* state) {
  state->setEndpoint(this);
  state->setCallbackDispatcher(&dispatchCompletion, lane);
}

std::uint32_t EndpointImpl::enterPending(Lane* lane, AsyncStateBase* state, bool unshared) {
  // Held by the pending entry. A call's own new state needs no atomic add:
  // the lane's lock, taken next, publishes it (a locked add was 5 % of
  // RoundTripStringAsyncCB's client samples).
  if (unshared) {
    state->addRefUnshared();
  } else {
    state->addRef();
  }
  try {
    std::uint32_t seq = addPending(lane, nullptr, state);
    state->setCall(seq);
    return seq;
  } catch (...) {
    state->release();
    throw;
  }
}

void EndpointImpl::sendFetch(Lane* lane, std::uint64_t id, AsyncStateBase* state, bool nested) {
  std::size_t bytes;
  std::size_t frame;
  std::uint32_t msgs;
  {
    std::lock_guard lock(lane->outMu);
    const std::size_t before = lane->out.size();
    std::uint32_t seq = enterPending(lane, state);
    std::size_t start;
    try {
      start = openFrame(lane, FrameType::kValue, nested);
      WireWriter w(lane->out);
      w.rawVarint(kValueFetch);
      w.rawVarint(id);
      closeFrame(lane->out, start);
      markDirty(lane);
    } catch (...) {
      // Out of memory before the fetch could leave: its entry would take
      // the next call's reply.
      lane->out.resize(before);
      dropPending(lane, seq);
      throw;
    }
    // Answered like an Async call: counted alike for asyncValueThrottle (a
    // fetch never waits for it: it may be sent from a callback). Under
    // outMu, before its frame can leave.
    countAsyncSent(lane);
    bytes = lane->out.size();
    frame = bytes - start;
    msgs = ++lane->outMsgs;
  }
  afterAppend(lane, false, bytes, msgs, frame);
}

void EndpointImpl::sendValueDrop(std::uint64_t id, std::uint64_t mentions) noexcept {
  stageVarints(FrameType::kValue, {kValueDrop, id, mentions});
}

// ---------------------------------------------------------------------------
// OutgoingCall

struct OutgoingCallAccess {
  static EndpointImpl*& ep(OutgoingCall& c) { return c.ep_; }
  static Lane*& lane(OutgoingCall& c) { return c.lane_; }
  static std::size_t& start(OutgoingCall& c) { return c.start_; }
  static bool& sent(OutgoingCall& c) { return c.sent_; }

  /// Binds a reply-expecting call's new state, which no other thread can
  /// reach yet, to its lane and enters it as pending (the entry holds a
  /// reference); returns its number.
  static std::uint32_t bindPending(OutgoingCall& c, AsyncStateBase* state) {
    ep(c)->bindReplyState(lane(c), state);
    return c.pendingSeq_ = ep(c)->enterPending(lane(c), state, true);
  }

  /// Sends a bound call (Async, AsyncRef): its frame's record, the
  /// asyncValueThrottle count, the local deadline (`deadline`: AsyncRef
  /// answers end only by the peer), then the waits for credit and throttle.
  static void sendBound(OutgoingCall& c, AsyncStateBase* state, bool deadline) {
    EndpointImpl* e = ep(c);
    Lane* l = lane(c);
    const bool throttled = e->countAsyncSent(l);
    ThreadState& ts = threadState();
    std::tuple<std::size_t, std::uint32_t, std::size_t> sealed;
    try {
      if (ts.frame) [[unlikely]] {
        ts.frame->addAsync(state);
      }
      sealed = seal(c);
    } catch (...) {
      // Out of memory before the call could leave: its entry would take
      // the next call's reply (and each later call the one before's), and
      // the frame would wait for it. A close that took the entry first has
      // failed the state (and answered its count).
      if (ts.frame) [[unlikely]] {
        ts.frame->forgetAsync(state);
      }
      if (e->dropPending(l, c.pendingSeq_) && e->countsAsyncSent(l)) e->noteAsyncAnswered(l);
      throw;
    }
    auto [bytes, msgs, frame] = sealed;
    if (deadline && ts.deadlineNs) [[unlikely]] {
      DeadlineTimer::instance().add(state, ts.deadlineNs);
    }
    e->afterAppend(l, false, bytes, msgs, frame, true);
    if (c.overCredit_) [[unlikely]] {
      e->waitForCredit(l);
    }
    if (throttled) [[unlikely]] {
      e->waitForThrottle(l);
    }
  }

  /// Ends the call's encoding and refuses it, before anything about it is
  /// recorded, when the peer would not take a message of its size (it
  /// would fault the connection, failing every call on it).
  static void checkFits(OutgoingCall& c) {
    c.writer_.finish();
    ep(c)->checkFrameFits(lane(c)->out.size() - start(c) - 1, "the call");
  }

  /// Closes the frame (checkFits() ended its encoding), releases the lane's
  /// send lock and returns the lane's staged bytes and messages, and the
  /// frame's bytes.
  static std::tuple<std::size_t, std::uint32_t, std::size_t> seal(OutgoingCall& c) { return seal(c, threadState()); }
  static std::tuple<std::size_t, std::uint32_t, std::size_t> seal(OutgoingCall& c, ThreadState& ts) {
    Lane* l = lane(c);
    closeFrame(l->out, start(c));
    ep(c)->markDirty(l);  // first: out of memory there leaves no count behind
    std::size_t bytes = l->out.size();
    // Our own lanes spend credit; calls made back on the peer's lane run on
    // its waiting thread and are not counted.
    if (l->localOrigin) {
      l->creditLeft -= static_cast<std::int64_t>(bytes - start(c));
      c.overCredit_ = l->creditLeft < 0;
    }
    std::uint32_t msgs = ++l->outMsgs;
    sent(c) = true;
    l->outMu.unlock();
    if (c.target_) c.target_->mentions.fetch_add(1, std::memory_order_relaxed);
    if (ts.countsPending) [[unlikely]] {
      ts.keepRefs(c.refsFrom_);
      settleMentions(c.mentionsFrom_, true);
    }
    return {bytes, msgs, bytes - start(c)};
  }
};

// The thread's state is looked up once per call and handed on: each lookup
// is a thread-local load and a test, and opening and sending a streamed call
// made eight of them (32 instructions; now 10).
OutgoingCall::OutgoingCall(int calledMethod, CallMode mode) : OutgoingCall(threadState(), calledMethod, mode) {}

inline __attribute__((always_inline)) OutgoingCall::OutgoingCall(ThreadState& ts, int calledMethod, CallMode mode) {
  open(ts, currentEndpoint(ts), calledMethod, mode, 0);
}

void OutgoingCall::sendVoid(int calledMethod, EncodeParamsFn encode, const void* params) {
  ThreadState& ts = threadState();
  OutgoingCall call(ts, calledMethod, CallMode::kAsyncVoid);
  encode(call, params);
  call.finishAsyncVoid(ts);
}

void OutgoingCall::sendVoidOn(int calledMethod, const EndpointClass& target, EncodeParamsFn encode,
                              const void* params) {
  OutgoingCall call(calledMethod, CallMode::kAsyncVoid, target);
  encode(call, params);
  call.finishAsyncVoid(threadState());
}

OutgoingCall::OutgoingCall(int calledMethod, CallMode mode, const EndpointClass& target) {
  ObjectCore* core = ObjectAccess::core(target);
  if (!core || !core->remote) {
    throw InvalidConfigurationError("an instance method was called on an object that stands for no peer's object");
  }
  target_ = core;
  open(threadState(), *core->ep, calledMethod, mode, core->id);
}

// Inlined into both constructors, with openCallFrame(): as calls of their
// own they cost a streamed call 21 instructions more (callgrind; measured
// together with markDirty()'s test made inline in seal()).
inline __attribute__((always_inline)) void OutgoingCall::open(ThreadState& ts, EndpointImpl& ep, int calledMethod,
                                                              CallMode mode, std::uint64_t object) {
  if (!ep.connected()) throw ConnectionClosedError("endpoint is not connected: " + ep.error(), ep.state());
  const Negotiated& neg = ep.negotiated();
  auto k = static_cast<std::size_t>(calledMethod);
  std::int64_t rid = neg.remoteMethodId(k);
  if (rid < 0) {
    throw UndefinedRemoteMethodError("the peer does not implement " + neg.calledName(k) +
                                     " (or implements it with another return type or mode)");
  }
  Lane* lane = ep.laneForCall(ts);
  // A continuation: made by a method the peer called on this very lane
  // (a reply callback running on the lane is not one).
  bool nested = sendsNested(ts, lane);
  paramPlan_ = &neg.callParamPlan(k);
  ctx_ = &neg.ctx();
  if (ts.countsPending) [[unlikely]] {  // a frame of this thread is open (the marks are 0 otherwise)
    mentionsFrom_ = static_cast<std::uint32_t>(ts.mentionsPending.size());
    refsFrom_ = static_cast<std::uint32_t>(ts.refsSent.size());
  }
  OutgoingCallAccess::ep(*this) = &ep;
  OutgoingCallAccess::lane(*this) = lane;
  lane->outMu.lock();
  const std::size_t start = lane->out.size();
  try {
    openCallFrame(lane, callFrameType(mode), nested, static_cast<std::uint64_t>(rid));
    if (object != 0) {
      lane->out.data()[start + 1] |= kObjectBit;
      lane->out.commit(putVarint(lane->out.reserveTail(10), object));
    }
    if (std::int64_t deadline = ts.deadlineNs) [[unlikely]] {
      // The callee learns how long the call has (docs/async-and-errors.md §3).
      lane->out.data()[start + 1] |= kDeadlineBit;
      std::int64_t leftUs = std::max<std::int64_t>(0, (deadline - nowNs()) / 1000);
      WireWriter(lane->out).rawU64(static_cast<std::uint64_t>(leftUs));
    }
  } catch (...) {
    // Out of memory while the head was written: no destructor runs for a
    // call whose constructor threw, so the partial head and the lane's lock
    // go here.
    lane->out.resize(start);
    lane->outMu.unlock();
    throw;
  }
  OutgoingCallAccess::start(*this) = start;
  ep.limitFrame(writer_, lane, start);
}

void OutgoingCall::abandon() noexcept {
  Lane* l = OutgoingCallAccess::lane(*this);  // open() set it: a constructor that throws leaves no call
  l->out.resize(OutgoingCallAccess::start(*this));  // encoding threw: drop the partial frame
  l->outMu.unlock();
  // After the unlock: a value released here may send its DROP on this lane,
  // an object its RELEASE.
  ThreadState& ts = threadState();
  if (ts.refsSent.size() > refsFrom_) takeBackRefs(refsFrom_);
  if (ts.mentionsPending.size() > mentionsFrom_) settleMentions(mentionsFrom_, false);
}

inline __attribute__((always_inline)) void OutgoingCall::finishAsyncVoid(ThreadState& ts) {
  OutgoingCallAccess::checkFits(*this);
  EndpointImpl* ep = OutgoingCallAccess::ep(*this);
  Lane* lane = OutgoingCallAccess::lane(*this);
  if (FrameState* f = ts.frame) [[unlikely]] {
    f->noteLane(ep, lane);
  }
  auto [bytes, msgs, frame] = OutgoingCallAccess::seal(*this, ts);
  ep->noteVoidSent(lane);
  ep->afterAppend(ts, lane, false, bytes, msgs, frame, true);
  if (overCredit_) [[unlikely]] {
    ep->waitForCredit(lane);
  }
}

void OutgoingCall::sendAsyncStatus() {
  OutgoingCallAccess::checkFits(*this);
  EndpointImpl* ep = OutgoingCallAccess::ep(*this);
  Lane* lane = OutgoingCallAccess::lane(*this);
  FrameState* f = threadState().frame;
  if (f) f->noteLane(ep, lane);
  // outMu is held from open() to seal(): the number and the segment are
  // in the order the calls leave.
  std::uint32_t vseq = lane->outStatusSeq++;
  bool confirm = false;
  if (lane->statusFrames.empty() || lane->statusFrames.back().frame.get() != f) {
    // Frames come and go faster than barriers confirm their calls: a
    // barrier after this call lets its ack drop the old segments.
    confirm = lane->statusFrames.size() >= Lane::kMaxStatusSegments;
    lane->statusFrames.push_back({vseq, f ? f->shared_from_this() : nullptr});
  }
  auto [bytes, msgs, frame] = OutgoingCallAccess::seal(*this);
  if (confirm) [[unlikely]] {
    std::lock_guard lock(lane->outMu);  // the call's frame is closed now
    ep->stageBarrierLocked(lane);
    bytes = lane->out.size();
    msgs = lane->outMsgs;
  }
  ep->noteVoidSent(lane);
  ep->afterAppend(lane, false, bytes, msgs, frame, true);
  if (overCredit_) [[unlikely]] {
    ep->waitForCredit(lane);
  }
}

namespace {
/// A sync call that gives up on its reply (out of memory) while another
/// thread completes it: `reply` lives on until that thread is done with it.
void waitDelivered(SyncReply& reply) noexcept {
  while (!reply.done.load(std::memory_order_acquire)) std::this_thread::yield();
  reply.waiter->barrier();
}
}  // namespace

void OutgoingCall::sendSync(ReplyDecodeFn decode, void* out, LateReplyFn readLate) {
  OutgoingCallAccess::checkFits(*this);
  EndpointImpl* ep = OutgoingCallAccess::ep(*this);
  Lane* lane = OutgoingCallAccess::lane(*this);
  // A CallTimeout scope bounds the wait (docs/async-and-errors.md §3).
  std::int64_t timeoutMs = -1;
  if (std::int64_t deadline = threadState().deadlineNs) [[unlikely]] {
    std::int64_t left = deadline - steadyNowNs();
    if (left <= 0) {
      CallTimeout::noteSyncTimeout();
      throw SyncTimeout("the call's CallTimeout had run out before it was sent");
    }
    timeoutMs = (left + 999'999) / 1'000'000;
  }
  SyncReply reply;
  reply.decode = decode;
  reply.readLate = readLate;
  reply.out = out;
  reply.waiter = &threadState().waiter;
  std::uint32_t seq = ep->addPending(lane, &reply, nullptr);
  // Become the lane's waiter before the call leaves: calls the peer makes
  // back to us during the call must reach this thread, however fast they are.
  bool claimed = false;
  std::tuple<std::size_t, std::uint32_t, std::size_t> sealed;
  try {
    ep->claimLaneWaiter(lane);
    claimed = true;
    sealed = OutgoingCallAccess::seal(*this);
  } catch (...) {
    // Out of memory before the call could leave: its entry would name
    // `reply` after this frame is gone, and take the next call's reply.
    // A close that took the entry first writes to `reply`: wait for it.
    if (!ep->dropPending(lane, seq)) waitDelivered(reply);
    if (claimed) ep->releaseLaneWaiter(lane);
    throw;
  }
  auto [bytes, msgs, frame] = sealed;
  bool delivered = false;
  try {
    ep->afterAppend(lane, true, bytes, msgs);
  } catch (...) {
    // Out of memory while the staged call was being sent: it leaves with
    // the next flush, and its reply is dropped when it comes, as after a
    // CallTimeout. If it is being delivered already, it is this call's.
    if (ep->abandonSync(lane, seq, &reply)) {
      ep->releaseLaneWaiter(lane);
      throw;
    }
    waitDelivered(reply);
    ep->releaseLaneWaiter(lane);
    delivered = true;
  }
  auto done = [&] { return reply.done.load(std::memory_order_acquire); };
  // Out of memory while it waits (running what comes on its lane) gives the
  // call up as a CallTimeout does: its reply is dropped when it comes. If it
  // is being delivered already, `reply` must outlive the delivery.
  auto wait = [&](std::int64_t ms, bool ownClaimed) {
    try {
      return ep->waitWhileRunning(lane, done, ms, ownClaimed);
    } catch (...) {
      if (!ep->abandonSync(lane, seq, &reply)) waitDelivered(reply);
      throw;
    }
  };
  if (!delivered && !wait(timeoutMs, true)) {
    if (ep->abandonSync(lane, seq, &reply)) {
      ep->sendCancel(lane, seq, nullptr);  // the callee may stop early
      CallTimeout::noteSyncTimeout();
      throw SyncTimeout("no reply within the call's CallTimeout");
    }
    // The reply is being delivered right now: it is this call's after all.
    wait(-1, false);
  }
  reply.waiter->barrier();  // the reader may still be inside notifyWith()
  if (!reply.ok) {
    switch (reply.error) {
      case AsyncError::kTimedOut:
        // The callee found the deadline passed before the call's turn.
        CallTimeout::noteSyncTimeout();
        throw SyncTimeout(reply.message);
      case AsyncError::kCanceled:
        throw CallCanceledError(reply.message);
      case AsyncError::kRemoteError:
        throw RemoteCallError(reply.message);
      case AsyncError::kInvalidMessage:
        throw InvalidMessageError(reply.message);
      default:
        throw ConnectionClosedError(reply.message, ep->state());
    }
  }
}

void OutgoingCall::sendAsync(AsyncStateBase* state) {
  OutgoingCallAccess::checkFits(*this);
  OutgoingCallAccess::bindPending(*this, state);
  OutgoingCallAccess::sendBound(*this, state, true);
}


RemoteValue* OutgoingCall::sendAsyncRef(AsyncStateBase* (*makeFetch)()) {
  OutgoingCallAccess::checkFits(*this);
  EndpointImpl* ep = OutgoingCallAccess::ep(*this);
  Lane* lane = OutgoingCallAccess::lane(*this);
  auto* v = new RemoteValue();
  v->ep = ep->weak_from_this();
  v->raw = ep;
  v->lane = lane;
  v->parallel = lane->sendMode.load(std::memory_order_relaxed) == kLaneParallel;
  v->nested = sendsNested(lane);
  v->makeFetch = makeFetch;
  // The answer carries no value. Only the peer's answer or the connection's
  // end complete it (no cancel, no local deadline): until then the holder
  // may not have the value, and a message naming it on another lane could
  // arrive first (docs/async-and-errors.md §2).
  auto* answer = new AsyncState<bool>();
  answer->setCodec(nullptr, [](AsyncStateBase*, WireReader&, const CodecCtx&) {});
  answer->setEndsOnlyByAnswer();
  v->answer = answer;  // the record's reference
  try {
    v->id = heldValueId(lane->slot, OutgoingCallAccess::bindPending(*this, answer), !lane->localOrigin);
    OutgoingCallAccess::sendBound(*this, answer, false);
  } catch (...) {
    if (OutgoingCallAccess::sent(*this)) {
      releaseRemoteValue(v);  // the peer holds the value: a DROP once it is made
    } else {
      answer->release();
      delete v;
    }
    throw;
  }
  return v;
}

bool waitForState(AsyncStateBase& state, std::int64_t timeoutMs) {
  EndpointImpl* raw = state.endpoint();
  // Complete for every thread (a reply whose callbacks ran: value() in a
  // then-callback) needs none of the search below (Async::wait tests it
  // before it calls here; AsyncRef does not).
  if (state.settled()) return true;
  ThreadState& ts = threadState();
  std::shared_ptr<EndpointImpl> keep;
  Lane* own = nullptr;
  bool runningIt = false;
  if (raw) {
    for (auto& o : ts.own) {
      if (o.raw == raw && (keep = o.ep.lock())) {
        own = o.lane;
        break;
      }
    }
    for (auto& r : ts.running) runningIt |= r.ep == raw;
  }
  // The reply of a call this thread made on its own lane is complete for
  // it only once the lane reached the reply (its completion entry ran): the
  // frames the peer sent before it, such as items a service streamed during
  // the call, have run by then, whichever thread ran the lane. Other
  // threads need only the value.
  const bool ordered = own && state.dispatcherArg() == own;
  auto done = [&] { return state.isReady() && (!ordered || state.callbacksDispatched()); };
  if (done()) return true;
  if (!state.addWaiter(&ts.waiter) && !ordered) return true;
  std::shared_ptr<EndpointImpl> runner;
  if (!raw && !ts.running.empty() && ts.running.back().inCall > 0) {
    // A method waits for a local value (an AsyncRef parameter whose call
    // has not finished): the lane it runs may hold what completes it (a
    // continuation, a reply's callback), so it runs those meanwhile.
    runner = ts.running.back().ep->weak_from_this().lock();
  }
  if (runner) {
    struct Allow {  // restored on every way out
      bool& flag;
      bool prev;
      ~Allow() { flag = prev; }
    } allow{ts.completionsRunNested, std::exchange(ts.completionsRunNested, true)};
    runner->waitWhileRunning(nullptr, done, timeoutMs);
  } else if (keep || runningIt) {
    raw->waitWhileRunning(own, done, timeoutMs);
  } else {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs < 0 ? 0 : timeoutMs);
    ts.flushDeferred();
    while (!state.isReady()) {
      if (timeoutMs < 0) {
        ts.waiter.wait();
      } else {
        if (std::chrono::steady_clock::now() >= deadline) break;
        ts.waiter.waitUntil(deadline);
      }
    }
  }
  state.removeWaiter(&ts.waiter);
  ts.waiter.barrier();
  return state.isReady();
}

}  // namespace myelin::detail

namespace myelin {

using detail::CallInfo;
using detail::EndpointImpl;

CallCtx::Ref CallCtx::ref() {
  Ref r;
  if (const CallInfo* c = detail::threadState().call) {
    r.ep_ = c->ep->weak_from_this();
    r.lane_ = c->lane;
    r.seq_ = c->seq;
    r.replies_ = c->replies;
    r.status_ = c->status;
    r.deadlineNs_ = c->deadlineNs;
  }
  return r;
}

bool CallCtx::Ref::isCanceled() const {
  if (!lane_) return false;  // not a call of a peer
  std::shared_ptr<EndpointImpl> ep = ep_.lock();
  if (!ep || !ep->connected()) return true;  // nobody is left to take the reply
  if (!replies_ || !lane_->hasCanceled.load(std::memory_order_relaxed)) return false;
  std::lock_guard lock(lane_->mu);
  return lane_->canceledLocked(seq_);
}

bool CallCtx::Ref::isTimedOut() const { return deadlineNs_ != 0 && detail::nowNs() >= deadlineNs_; }

std::int64_t CallCtx::Ref::remainingMs() const {
  if (deadlineNs_ == 0) return -1;
  return std::max<std::int64_t>(0, (deadlineNs_ - detail::nowNs() + 999'999) / 1'000'000);
}

bool CallCtx::Ref::isAsyncFrameCanceled() const {
  if (!status_) return isCanceled();
  std::shared_ptr<EndpointImpl> ep = ep_.lock();
  if (!ep || !ep->connected()) return true;
  if (!lane_->hasFrameCanceled.load(std::memory_order_relaxed)) return false;
  std::lock_guard lock(lane_->mu);
  return lane_->frameCanceledLocked(seq_);
}

bool CallCtx::sendAsyncFrameError(const Status& status) {
  const detail::CallInfo* c = detail::threadState().call;
  if (!c || !c->status || status.isOk()) return false;
  c->ep->sendStatusError(c->lane, c->seq, status);
  return true;
}

}  // namespace myelin
