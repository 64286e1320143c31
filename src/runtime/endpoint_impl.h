// EndpointImpl: one connection. Owns the socket, the negotiated tables, the
// lanes (one per calling thread on each side) and the reader thread that
// demultiplexes incoming frames into them. docs/threading.md describes how
// threads meet here.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <condition_variable>
#include <deque>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <functional>
#include <initializer_list>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "myelin/async.h"
#include "myelin/config.h"
#include "myelin/detail/light_mutex.h"
#include "myelin/detail/runtime_api.h"
#include "myelin/endpoint.h"
#include "runtime/executor.h"
#include "runtime/objects.h"
#include "runtime/pending_table.h"
#include "runtime/ring_queue.h"
#include "runtime/values.h"
#include "runtime/waiter.h"
#include "schema/negotiation.h"
#include "transport/tcp.h"
#include "transport/tls.h"
#include "wire/frame.h"

namespace myelin::detail {

struct ClassSchema;
struct FrameState;

class ServerImpl;

/// A sync call's slot for its reply, on the caller's stack.
struct SyncReply {
  ReplyDecodeFn decode = nullptr;
  LateReplyFn readLate = nullptr;  // OutgoingCall::sendSync
  void* out = nullptr;
  Waiter* waiter = nullptr;
  std::atomic<bool> done{false};
  bool ok = false;
  AsyncError error = AsyncError::kNone;
  std::string message;
};

struct PendingReply {
  SyncReply* sync = nullptr;         // either this
  AsyncStateBase* async = nullptr;   // or this (one reference held)
  /// Neither: a sync call whose caller stopped waiting. Reads its reply
  /// when it comes, to let go of the references it holds (null: none).
  LateReplyFn readLate = nullptr;
};

/// The queue of one calling thread of either side on this connection. Calls
/// made on a lane run on the peer in order; replies return to it.
/// Lane modes (LANE frames, docs/objects.md §7).
inline constexpr std::uint8_t kLanePool = 0;      ///< the executor's threads, one frame at a time
inline constexpr std::uint8_t kLanePinned = 1;    ///< one dedicated thread (RemoteThread)
inline constexpr std::uint8_t kLaneParallel = 2;  ///< up to `parallel` frames at once (RemoteThreadPool)
inline constexpr std::uint32_t kMaxLaneParallel = 256;

struct Lane {
  Lane(bool local, std::uint32_t s) : localOrigin(local), slot(s) {}

  const bool localOrigin;  // our thread's lane (else the peer's)
  const std::uint32_t slot;

  // Receive side, guarded by mu.
  SpinMutex mu;
  ByteBuffer inbox;  // frames to run, in arrival order
  ByteBuffer work;   // frames being run (swapped in from inbox)
  std::size_t workPos = 0;
  std::size_t workCounted = 0;  // bytes of `work` counted in the endpoint's queuedBytes_
  /// Frames wait to run (under mu, or by the runner).
  bool hasQueued() const { return workPos < work.size() || !inbox.empty(); }
  const void* runner = nullptr;  // thread running this lane's frames
  bool scheduled = false;        // queued on the executor
  // When the lane last ran dry holding more storage than an idle lane keeps
  // (0: none to give back); the timer gives it back once the lane has
  // stayed dry for idleLaneTrimMs (EndpointImpl::trimIdleLanes).
  std::int64_t dryAtNs = 0;
  // Threads blocked in a wait that may run this lane's frames, most recent
  // last; each removes itself by identity when its wait ends (waits of two
  // threads on one lane need not end in the order they began).
  std::vector<Waiter*> waiters;
  /// The waiter to tell of a frame for this lane (under mu): the lane's
  /// runner if it is one of the waiters (a callback it runs waits in a call
  /// of its own; only the runner may take the frame), else the most recent.
  Waiter* waiter() const;
  std::atomic<int> waiterCount{0};  // waiters.size(), read without mu by a pool thread's turn
  std::uint32_t inSeq = 0;       // calls received that expect a reply (under readMu_)
  std::uint32_t outSeq = 0;      // calls sent that expect a reply
  std::uint64_t callsEntered = 0;  // of them, entered as pending (under mu): waitForIdle counts them
  PendingTable<PendingReply> pending;
  std::uint64_t barrierSent = 0;
  std::uint64_t barrierAcked = 0;
  std::atomic<bool> voidSinceBarrier{false};
  std::atomic<std::uint64_t> callsRun{0};  // calls run on this lane (its runner, or a parallel lane's tasks)
  // Our lanes: how the peer runs the calls we send on it (kLaneParallel for
  // a RemoteThreadPool scope's lane), set by the owning thread.
  std::atomic<std::uint8_t> sendMode{kLanePool};

  // Send side, guarded by outMu (taken once for every frame sent).
  SpinMutex outMu;
  ByteBuffer out;
  std::uint32_t outMsgs = 0;
  bool dirty = false;

  bool inUse = false;  // local lanes: owned by a live thread (lanesMu_)

  // How this side runs a peer lane (docs/objects.md §7), changed by LANE
  // frames in the lane's order; guarded by mu.
  std::uint8_t mode = kLanePool;
  std::uint32_t parallel = 1;        // kLaneParallel: frames that may run at once
  std::uint32_t inFlight = 0;        // kLaneParallel: frames running now
  bool fenceRunning = false;         // kLaneParallel: a BARRIER or LANE frame runs, alone
  bool modeChanged = false;          // the runner ends its turn: another kind of thread takes over
  // AsyncStatus calls (docs/async-and-errors.md §3), numbered per lane and
  // direction. Sent ones are grouped in segments by the AsyncFrame they
  // were made in, so that a STATUS_ERROR finds its frame; a barrier's ack
  // drops the segments it covers. Guarded by outMu (inStatusSeq: readMu_).
  std::uint32_t outStatusSeq = 0;
  std::uint32_t inStatusSeq = 0;
  struct StatusSegment {
    std::uint32_t first;                 // vseq of its first call
    std::shared_ptr<FrameState> frame;   // null: made outside any frame
  };
  std::deque<StatusSegment> statusFrames;
  std::deque<std::pair<std::uint64_t, std::uint32_t>> statusMarks;  // barrier token, outStatusSeq then
  static constexpr std::size_t kMaxStatusSegments = 1024;

  // Flow control (docs/async-and-errors.md §5). Our lanes: bytes of calls
  // we may still send before the peer credits more (may go below zero by
  // the last call), under outMu. The peer's lanes: bytes of its calls run
  // since the last CREDIT (written by whoever runs the lane's calls, one at
  // a time; parallel lanes add atomically) and whether the first CREDIT,
  // which grants the window beyond the initial one, went out.
  std::int64_t creditLeft = kInitialCallWindow;
  // asyncValueThrottle (our lanes, only when it is set): Async calls sent
  // and not yet answered, and whether a thread waits for that to drop.
  std::atomic<std::uint32_t> asyncOutstanding{0};
  std::atomic<bool> throttleWaiting{false};
  std::atomic<std::int64_t> runSinceCredit{0};
  bool windowGranted = false;

  // Calls of the peer's on this lane that its caller canceled (CANCEL
  // frames), until their reply is sent; guarded by mu. Bounded: a peer that
  // cancels more calls than it has in flight drops the oldest entries.
  std::vector<std::uint32_t> canceled;
  std::atomic<bool> hasCanceled{false};
  static constexpr std::size_t kMaxCanceled = 1024;
  // A mark this many calls behind the lane's progress is stale.
  static constexpr std::uint32_t kCancelWindow = 1u << 16;
  // AsyncStatus calls (by vseq) whose caller canceled their AsyncFrame:
  // ranges {first, count}, the oldest forgotten beyond kMaxFrameCanceled;
  // guarded by mu.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> frameCanceled;
  std::atomic<bool> hasFrameCanceled{false};
  static constexpr std::size_t kMaxFrameCanceled = 64;
  bool frameCanceledLocked(std::uint32_t vseq) const {
    for (auto [first, count] : frameCanceled) {
      if (vseq - first < count) return true;
    }
    return false;
  }
  /// Whether call `seq` was canceled (mu held by the caller).
  bool canceledLocked(std::uint32_t seq) const {
    for (std::uint32_t s : canceled) {
      if (s == seq) return true;
    }
    return false;
  }

  // kLanePinned: the one thread that runs the lane. Shared: a thread that
  // posts to it keeps it alive until its post has returned (the executor
  // notifies its thread after releasing its lock).
  std::shared_ptr<Executor> pinned;
};

/// A call's head (kind, lane, method: the first `len` bytes of its body, at
/// most eight) as one word under a mask, so that another body's head is
/// compared with one load (`matches`, where eight bytes may be read there).
/// Used where calls of one head are queued (handleBuffered) and taken along
/// (executeCall).
struct HeadWord {
  std::uint64_t word = 0;
  std::uint64_t mask = 0;  // 0: none

  static HeadWord of(const std::uint8_t* body, std::size_t len) {
    HeadWord h;
    h.mask = len >= 8 ? ~std::uint64_t{0} : (std::uint64_t{1} << (8 * len)) - 1;
    for (std::size_t k = 0; k < len && k < 8; ++k) h.word |= std::uint64_t{body[k]} << (8 * k);
    return h;
  }
  bool matches(const std::uint8_t* p) const {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    if constexpr (std::endian::native == std::endian::big) w = __builtin_bswap64(w);  // first byte lowest
    return (w & mask) == word;
  }
};

class EndpointImpl : public std::enable_shared_from_this<EndpointImpl> {
 public:
  EndpointImpl(std::unique_ptr<TcpSocket> sock, const EndpointConfig& cfg, bool isServer);
  ~EndpointImpl();
  /// Endpoint objects not yet fully destroyed in this process (a service's
  /// are destroyed on its threads after it stopped; tests wait for them).
  static std::size_t liveObjects() { return LiveToken::count.load(std::memory_order_acquire); }

  /// Client: handshake on the calling thread, then start the reader.
  void startClient();
  /// Service: start the reader, which handshakes first; `onReady` runs
  /// after a successful handshake.
  void startServer(std::function<void(std::shared_ptr<EndpointImpl>)> onReady);

  /// TLS for this connection (set before start): the handshake runs before
  /// HELLO; a client checks the service's certificate against `host`.
  void setTls(std::shared_ptr<const TlsContext> ctx, std::string host) {
    tls_ = std::move(ctx);
    tlsHost_ = std::move(host);
  }
  std::string tlsInfo() const { return sock_->tlsInfo(); }

  /// Called once when the endpoint closes or faults (set before start).
  void setOnClosed(std::function<void(std::shared_ptr<EndpointImpl>)> cb) { onClosed_ = std::move(cb); }

  EndpointState state() const { return state_.load(std::memory_order_acquire); }
  std::string error() const;
  const std::string& remoteAddress() const { return peerAddress_; }
  const EndpointConfig& config() const { return cfg_; }
  /// The largest frame body the peer accepts (its HELLO said; 0 before).
  std::uint64_t peerMaxMessageSize() const { return peerMaxMessageSize_.load(std::memory_order_relaxed); }
  /// Throws UnsendableValueError when a frame whose body is `bodyBytes`
  /// long is more than the peer accepts; `what` names it ("the call").
  void checkFrameFits(std::size_t bodyBytes, const char* what) const {
    if (bodyBytes > peerMaxMessageSize()) [[unlikely]] {
      throwFrameTooLarge(bodyBytes, what);
    }
  }
  [[noreturn]] void throwFrameTooLarge(std::size_t bodyBytes, const char* what) const;
  /// Points `w` at `lane`'s staging buffer for a frame opened at `start`
  /// whose value may be refused while it is encoded (WireWriter::reset):
  /// the buffer grows no further than the peer's limit, the length byte,
  /// and what one reservation may ask beyond what it writes (a room of
  /// kMaxRoom bytes and a leaf's). A 1 GiB string for a peer that accepts
  /// 64 MiB stops at 64 MiB instead of being encoded whole first.
  void limitFrame(WireWriter& w, Lane* lane, std::size_t start) const {
    static_assert(sizeof(std::size_t) >= 8, "a buffer's size plus a 32-bit limit must not wrap");
    w.reset(lane->out, start + 1 + peerMaxMessageSize() + kMaxRoom + 2 * kLeafRoom);
  }
  /// Cuts an error's text that is sent to the peer to 64 KiB, and to half
  /// of what the peer accepts, so that reporting a failure never faults the
  /// connection.
  void clipErrorText(std::string& text) const;
  const Negotiated& negotiated() const { return *neg_; }
  bool connected() const { return state() == EndpointState::kConnected; }

  /// Closes in an orderly way (or faults when `fault`), failing pending
  /// calls with `reason`. Idempotent: the first reason wins.
  void close(EndpointState st, const std::string& reason) noexcept;
  /// Faults the connection for the peer's `what` ("invalid message from
  /// <peer>: <what>"), on a pool thread: for a fault found where running
  /// close() (failing pending calls, their callbacks) could surprise the
  /// caller, such as while a failed call unwinds.
  void faultLater(std::string what);
  /// Ends a service endpoint's handshake: connected, unless a close() came
  /// first (the service's stop() during the handshake), which stays. False then.
  bool markConnected();

  // --- calls -------------------------------------------------------------
  /// The lane a call from this thread uses: the peer's lane being run by
  /// this thread (a nested call), else this thread's own lane.
  Lane* laneForCall();      // inline, below ThreadState
  Lane* laneForCall(const struct ThreadState& ts);  // the same, for this thread's state at hand
  Lane* laneForOwnCall();   // laneForCall() when this thread runs no lane of ours
  /// Releases this thread's own lane (thread exit).
  void releaseLocalLane(Lane* lane);
  /// Registers a pending reply; returns its sequence number. Caller holds
  /// lane->outMu (so sequence order is frame order).
  std::uint32_t addPending(Lane* lane, SyncReply* sync, AsyncStateBase* async);
  /// Takes back the entry addPending made for a call that could not be
  /// sent (out of memory), and its number; the caller still holds outMu.
  /// False if a close took the entry first (and fails the call).
  bool dropPending(Lane* lane, std::uint32_t seq) noexcept;
  /// True if an Async call sent on `lane` counts for asyncValueThrottle.
  bool countsAsyncSent(const Lane* lane) const { return cfg_.asyncValueThrottle != 0 && lane->localOrigin; }
  /// A sync call `seq` of `lane` stops waiting for its reply (its deadline
  /// passed): the entry stays, empty, so the reply is dropped when it comes.
  /// False if the reply is already being delivered.
  bool abandonSync(Lane* lane, std::uint32_t seq, SyncReply* reply);
  /// Called after a frame was appended to lane->out (outMu released).
  /// Sends now or lets the frame wait for its batch (docs/threading.md,
  /// "Sending and batching"); `frameBytes`: the frame's size; `call`: the
  /// frame is a call (not a reply or a control frame), which a running
  /// handler's ramp sends early.
  inline void afterAppend(Lane* lane, bool urgent, std::size_t laneBytes, std::uint32_t laneMsgs,
                          std::size_t frameBytes = 0, bool call = false);
  /// The same, for this thread's state at hand (one thread-local lookup less).
  inline void afterAppend(struct ThreadState& ts, Lane* lane, bool urgent, std::size_t laneBytes,
                          std::uint32_t laneMsgs, std::size_t frameBytes, bool call);
  void afterAppendSlow(Lane* lane, bool urgent, std::size_t laneBytes, std::uint32_t laneMsgs, std::size_t frameBytes,
                       bool call);
  /// The lane bytes at which a running handler's next calls leave
  /// (sendRampBytes, doubled at each send, up to maxMsgBatchSize).
  std::uint32_t rampAt(std::uint32_t sendRamp) const {
    return std::min(std::max(sendRamp, cfg_.sendRampBytes), cfg_.maxMsgBatchSize);
  }
  /// Writes every staged frame of every lane to the socket.
  void flush() { flushCounting(); }
  /// When a flush took its frames from the lanes (`at`), and when the flush
  /// before it that took frames while a batch timer was armed, or the
  /// timer's last, did (`before`: lastGatherNs_).
  struct GatherTimes {
    std::int64_t before = 0;
    std::int64_t at = 0;
  };
  /// flush(), returning the number of frames it took from the lanes; if it
  /// took any and `times` is given (the timer's flush), also when.
  std::uint64_t flushCounting(GatherTimes* times = nullptr);
  /// The longest gap between calls that the burst average counts: a late
  /// timer or an idle spell weighs as this.
  std::int64_t maxGapNs() const { return 2 * static_cast<std::int64_t>(cfg_.maxBatchYieldUs) * 1000; }
  /// The batch timer's flush (BatchAggregator): sends the batch and learns
  /// from its size how far apart the calls that made it came (afterAppend).
  void flushOnTimer();
  /// The timer's look at lanes that ran dry holding a burst's storage: it
  /// goes back where the lane has stayed dry for idleLaneTrimMs.
  void trimIdleLanes();
  /// A fire-and-forget call left on `lane` (the next barrier confirms it).
  void noteVoidSent(Lane* lane) { lane->voidSinceBarrier.store(true, std::memory_order_relaxed); }
  /// Flow control: blocks this thread while `lane` (one of ours) has used
  /// up its credit, running calls addressed to it meanwhile; threads that
  /// run frames of a lane never block (docs/async-and-errors.md §5).
  void waitForCredit(Lane* lane);
  /// Blocks this thread, running calls addressed to it on `lane`, until
  /// `released()` or the endpoint closes; a thread that runs frames of a
  /// lane returns at once (flow control and the throttle share this rule).
  void holdBack(Lane* lane, const std::function<bool()>& released);
  /// Wakes the thread waiting on `lane`, if any.
  void wakeLaneWaiter(Lane* lane);
  /// Counts an answer-expecting call of `lane` for asyncValueThrottle;
  /// true when the thread has reached the limit (it should wait).
  bool countAsyncSent(Lane* lane) {
    const std::uint32_t throttle = cfg_.asyncValueThrottle;
    if (throttle == 0 || !lane->localOrigin) [[likely]] {
      return false;
    }
    return lane->asyncOutstanding.fetch_add(1, std::memory_order_relaxed) + 1 >= throttle;
  }
  /// asyncValueThrottle: blocks this application thread while `lane` has
  /// that many Async calls unanswered.
  void waitForThrottle(Lane* lane);
  /// An Async call of `lane` got its answer (or its connection closed).
  void noteAsyncAnswered(Lane* lane);
  /// Counts a call of the peer's lane that ran (`bytes` framed) and sends
  /// CREDIT when enough did.
  /// `concurrent`: a parallel lane's task, which may run beside others.
  void noteCallRun(Lane* lane, std::size_t bytes, bool concurrent) {
    // One runner at a time, except for a parallel lane's tasks: a plain load
    // and store where it can be (an atomic add per call is a measurable part
    // of a one-way call's cost). Inline: out of line it cost a one-way call
    // 32 instructions, most of them the call's own.
    std::int64_t run;
    if (concurrent) {
      run = lane->runSinceCredit.fetch_add(static_cast<std::int64_t>(bytes), std::memory_order_relaxed) +
            static_cast<std::int64_t>(bytes);
    } else {
      run = lane->runSinceCredit.load(std::memory_order_relaxed) + static_cast<std::int64_t>(bytes);
      lane->runSinceCredit.store(run, std::memory_order_relaxed);
    }
    // Credit in quarters of the window; the first one early, before the
    // sender runs out of its initial window, and with the rest of the window.
    const std::int64_t window = cfg_.receiveWindowBytes;
    if (run >= (lane->windowGranted ? window / 4 : kInitialCallWindow / 2)) [[unlikely]] grantCredit(lane);
  }
  /// noteCallRun's CREDIT, once enough ran.
  void grantCredit(Lane* lane);
  /// Appends a BARRIER to lane->out (outMu held) and returns its token.
  std::uint64_t stageBarrierLocked(Lane* lane);
  /// Sends the failure of the peer's AsyncStatus call `vseq` on `lane`.
  void sendStatusError(Lane* lane, std::uint32_t vseq, const Status& status);
  /// Tells the peer that `frame` was canceled: the AsyncStatus calls it
  /// made on `lane` that may not have run yet (a CANCEL with the O bit per
  /// range). Never throws.
  void sendFrameCancel(Lane* lane, const FrameState* frame) noexcept;

  /// The lane of `scope` on this endpoint, made (and announced to the peer
  /// with a LANE frame) on the scope's first call here.
  Lane* scopeLane(struct LaneScope& scope);
  /// Ends a scope's lane: the peer runs it in the pool again after the
  /// frames already sent, and the slot is free for reuse.
  void endScopeLane(Lane* lane);
  /// Waits until every call sent on `lane` so far has run on the peer (a
  /// barrier, which a parallel lane answers once all before it finished).
  bool waitLaneIdle(Lane* lane, std::int64_t timeoutMs);

  /// Waits until `done()` is true, running frames of this thread's lanes
  /// meanwhile. Returns false on timeout.
  /// `ownClaimed`: the caller already made this thread one of `own`'s
  /// waiters (claimLaneWaiter); the wait removes it when it ends.
  bool waitWhileRunning(Lane* own, const std::function<bool()>& done, std::int64_t timeoutMs,
                        bool ownClaimed = false);
  /// Adds this thread to `lane`'s waiters.
  void claimLaneWaiter(Lane* lane);
  /// Removes this thread from `lane`'s waiters; hands queued frames to the
  /// executor if nobody is left to run them.
  void releaseLaneWaiter(Lane* lane);
  bool waitForIdle(std::int64_t timeoutMs);
  EndpointStats stats(bool reset);

  /// Runs queued frames of `lane` until none are left (executor threads).
  void runLane(Lane* lane);
  /// Queues a completed Async's callbacks on the lane of its caller.
  void postCompletion(Lane* lane, AsyncStateBase* state);

  /// Sends the reply (value or error) of a completed Async call; without
  /// the value when `withValue` is false (the answer of an AsyncRef call).
  void sendAsyncReply(Lane* lane, std::uint32_t seq, AsyncStateBase* state, bool withValue = true);
  /// Sends the reply of call `seq` of `lane` once `state` completes (now,
  /// if it has: then true); `keep`, if set, is held until then.
  bool replyWhenReady(Lane* lane, std::uint32_t seq, AsyncStateBase* state, bool withValue, ObjectCore* keep);
  /// The values this side holds for the peer (AsyncRef results).
  HeldValues& held() { return held_; }
  /// Fails `state`, bound by bindReplyState but never sent, with `kind` and
  /// `message` (its completion is counted like a reply's).
  void failLocally(AsyncStateBase* state, AsyncError kind, std::string message) noexcept;
  /// Makes `state` the reply state of a request on `lane`: it completes on
  /// this endpoint, its callbacks run in the lane's order.
  void bindReplyState(Lane* lane, AsyncStateBase* state);
  /// Enters a bound `state` as pending on `lane` (the entry takes a
  /// reference) and returns the call's number; nothing is kept if it throws.
  /// `unshared`: no other thread can reach `state` yet.
  std::uint32_t enterPending(Lane* lane, AsyncStateBase* state, bool unshared = false);
  /// Sends FETCH for the peer's value `id` on `lane`; `state` (bound to
  /// `lane` by bindReplyState) completes with the value.
  void sendFetch(Lane* lane, std::uint64_t id, AsyncStateBase* state, bool nested);
  /// Sends DROP for the peer's value `id` on this thread's lane; nothing if
  /// the endpoint is closed. Never throws.
  void sendValueDrop(std::uint64_t id, std::uint64_t mentions) noexcept;
  /// Queues `lane` for the next flush (lane->outMu held). Inline: every
  /// frame staged asks, and the lane is queued already for all but the first.
  void markDirty(Lane* lane) {
    if (!lane->dirty) markDirtySlow(lane);
  }
  void markDirtySlow(Lane* lane);
  /// Sends GOODBYE and closes.
  void disconnect();
  /// `raw` kept alive, if it is an endpoint that still exists (null
  /// otherwise): for code that holds only an endpoint's address, such as an
  /// Async state being canceled or timing out on another thread.
  static std::shared_ptr<EndpointImpl> pin(EndpointImpl* raw);
  /// Tells the peer that this side gave up on call `seq` of `lane` (a
  /// CANCEL frame), if `state` (null for a sync call that stopped waiting)
  /// still waits for it there. Never throws.
  void sendCancel(Lane* lane, std::uint32_t seq, AsyncStateBase* state) noexcept;
  /// A reply to the peer's call `seq` of `lane` is about to be sent: a
  /// cancellation recorded for it is done with.
  void forgetCanceled(Lane* lane, std::uint32_t seq) {
    if (lane->hasCanceled.load(std::memory_order_relaxed)) [[unlikely]] {
      forgetCanceledSlow(lane, seq);
    }
  }
  /// Sends RELEASE for the peer's object `id` on this thread's lane
  /// (docs/objects.md §4); nothing if the endpoint is closed. Never throws.
  void sendRelease(std::uint64_t id, std::uint64_t refs, std::uint64_t mentions) noexcept;
  /// Stages a frame of `type` whose body is `fields` as varints on this
  /// thread's lane (RELEASE, VALUE DROP); nothing once closed, never throws.
  void stageVarints(FrameType type, std::initializer_list<std::uint64_t> fields) noexcept;
  /// Our objects the peer may name.
  ExportTable& exports() { return exports_; }
  /// The core standing for the peer's object `id`, with one reference for
  /// the caller and one more reference counted as received (objects.md §4):
  /// the live one, or a new one if the last was released.
  /// Throws InvalidMessageError if the peer named that object as another
  /// class before.
  ObjectCore* importRef(std::uint64_t id, const ClassHooksData& cls);
  /// Removes `core` (whose last reference is gone) from the import map and
  /// returns the references it received.
  std::uint64_t forgetImport(ObjectCore* core);

  // Used by IncomingCall.
  struct Dispatch {
    EndpointImpl* ep;
    Lane* lane;
    std::uint32_t seq;
    CallMode mode;
    std::size_t replyStart = 0;
    std::uint32_t refsFrom = 0;  // the reply's first entry in the thread's refsSent
    std::unique_lock<SpinMutex> outLock;
    std::optional<WireWriter> writer;
  };

 private:
  void readerMain(std::function<void(std::shared_ptr<EndpointImpl>)> onReady);
  /// Reads and routes what the socket has (takes readMu_), then runs the
  /// lanes it claimed, if any. `forCaller`: a caller waiting for its reply
  /// reads, and is thrown what cannot be queued (else the connection faults).
  void readFromSocket(bool mayClaim, bool forCaller = false);
  /// The reader thread's read; false if the reader must stop (the endpoint
  /// was released or is gone).
  bool readAsReader(struct ThreadState& ts);
  bool readAvailableLocked();
  /// Routes every complete frame in rx_ (readMu_ held).
  void handleBuffered();
  /// Runs, one after another, the lanes this thread claimed in its read.
  void runClaims();
  /// Runs up to kLaneTurnFrames frames of a lane this thread holds, then
  /// releases it (re-queued on the executor if frames remain).
  /// `inlineRun`: the reader runs it among its claims, and queues it behind
  /// them again if frames remain (pushClaim); true if it did. Never throws:
  /// the reader and pool threads that run turns have no caller to throw to
  /// (faultRun).
  bool runTurn(Lane* lane, bool inlineRun = false) noexcept;
  bool runTurnFrames(Lane* lane, bool inlineRun);
  /// A frame run by this thread as `lane`'s runner, with no caller to throw
  /// to, threw (out of memory while a call's failure was reported, say): the
  /// connection faults, since the peer may wait for a reply that never
  /// left; the lane is given back, and what it still holds runs on (the
  /// completions of the calls the close ended among it).
  void faultRun(Lane* lane, const char* what) noexcept;
  /// faultRun()'s close alone: for a parallel lane's task, which holds no
  /// lane, and a read that cannot run its claims (they go to the pool).
  void faultFrame(const char* what) noexcept;
  /// Faults the connection with "<failed>: <what>" (or "out of memory"
  /// where even that text cannot be made): for threads with no caller to
  /// throw to.
  void faultWith(const char* failed, const char* what) noexcept;
  static constexpr int kLaneTurnFrames = 256;
  void sendHello(int timeoutMs);
  void receiveHello(int timeoutMs);
  void handleFrame(const std::uint8_t* frame, std::size_t headerLen, std::size_t bodyLen);
  Lane* laneFor(bool receiverLane, std::uint32_t slot);
  Lane* laneForNew(bool receiverLane, std::uint32_t slot);  // laneFor() beyond the lanes it knows
  void enqueue(Lane* lane, std::uint32_t seq, const std::uint8_t* frame, std::size_t len);
  __attribute__((noinline)) void switchBatchLane(Lane* lane);  // enqueue() or postCompletion() for another lane than batchLane_
  void flushBatch();
  /// Makes `lane`'s inbox its work, the work being used up (lane->mu held,
  /// by its runner). Queued bytes stay counted until their work buffer is
  /// used up (releaseWork).
  void takeInbox(Lane* lane);
  /// `lane`'s work is used up: its bytes no longer count (lane->mu held).
  void releaseWork(Lane* lane) {
    if (lane->workCounted) {
      queuedBytes_.fetch_sub(std::exchange(lane->workCounted, 0), std::memory_order_relaxed);
    }
  }
  std::atomic<std::size_t> queuedBytes_{0};  // bytes in lane inboxes (maxAllocQueuedBytes)
  void schedule(Lane* lane, std::unique_lock<SpinMutex>& laneLock);
  /// schedule()'s hand-off of `lane` to `executor`: marks it scheduled and
  /// gives its lock back (and takes it again to unmark it should the post
  /// throw).
  void postLane(Executor& executor, Lane* lane, std::unique_lock<SpinMutex>& laneLock);
  /// Runs the next frame of `lane` (with up to maxFrames - 1 frames of the
  /// same kind queued behind it that it takes along: executeCall,
  /// runCompletions); returns the frames run, 0 if there was none.
  /// `yieldsToOwner`: a turn on a lane of our own by a thread that does not
  /// own it, which stops taking frames along once the owner waits.
  int runOneFrame(Lane* lane, bool releaseWhenEmpty, bool nestedOnly, int maxFrames, bool yieldsToOwner = false);
  /// Runs one frame taken off `lane` (a call, a completion, RELEASE,
  /// BARRIER or LANE); returns the frames run (a call or a completion may
  /// take those of its kind queued behind it along, up to maxFrames in all).
  /// `asRunner`: this thread is the lane's runner (not a parallel task).
  int runFrame(Lane* lane, std::uint32_t seq, const std::uint8_t* body, std::size_t bodyLen, bool asRunner,
               int maxFrames = 1, bool yieldsToOwner = false);
  /// Runs the callbacks of a completed Async (`body`: its queued entry) and,
  /// while maxFrames allows, those of the completions queued right behind
  /// it in the lane's `work`; returns the completions run.
  int runCompletions(Lane* lane, const std::uint8_t* body, int maxFrames, bool yieldsToOwner);
  /// True if a turn that yields to the lane's owner must stop taking frames
  /// along: the owner began waiting and runs the rest itself (runTurn).
  static bool ownerWaits(const Lane* lane, bool yieldsToOwner) {
    return yieldsToOwner && lane->waiterCount.load(std::memory_order_relaxed) > 0;
  }
  /// A LANE frame's turn: the lane's new mode takes effect here.
  void applyLaneMode(Lane* lane, const std::uint8_t* body, std::size_t bodyLen, bool asRunner);
  /// kLaneParallel: starts frames until `parallel` run; a BARRIER or LANE
  /// frame waits until the frames before it finished and then runs alone.
  void pumpParallel(Lane* lane, std::unique_lock<SpinMutex>& laneLock);
  void runParallelFrame(Lane* lane, std::uint32_t seq, const std::vector<std::uint8_t>& frame, bool fence);
  Lane* allocLocalLane();
  bool runQueued(Lane* lane, bool nestedOnly);
  void completeReply(PendingReply& p, bool isError, WireReader& r);
  /// Reads a reply whose caller stopped waiting with `read`
  /// (PendingReply::readLate) and lets go of what it holds on a pool
  /// thread, with this connection current.
  void dropLateReply(LateReplyFn read, WireReader& r);
  void finishSync(SyncReply* sr, bool ok, AsyncError error, std::string message);
  /// Runs a call, and while maxFrames allows, the calls of the same method
  /// queued right behind it in the lane's `work` (see its comment), counting
  /// each toward the peer's credit; returns the calls run. `concurrent`: a
  /// parallel lane's task (which takes none along).
  int executeCall(Lane* lane, std::uint32_t seq, const std::uint8_t* body, std::size_t len, int maxFrames,
                  bool concurrent, bool yieldsToOwner);
  /// The object an instance call names, held for the call; false (and the
  /// connection faulted) for a call that names none, or a wrong one.
  [[gnu::noinline]] bool holdCallObject(bool onObject, std::uint64_t objectId, std::uint32_t clsIndex,
                                        const ClassSchema& cls, const MethodInfo& mi, ObjectCore*& core,
                                        ObjectCore*& drop, EndpointClass*& object, bool& objectGone);
  /// Sends the error reply (or VOID_FAILED) of a call whose method threw.
  [[gnu::noinline]] void reportCallFailure(Lane* lane, std::uint32_t seq, std::uint64_t method, CallMode mode,
                                           const std::string& clsName, const std::string& methodName,
                                           const std::string& failure, WireErrorCode code);
  void failPending(const std::string& reason);
  /// The i-th lane (our own first, then the peer's), or null past the last;
  /// allocates nothing. Lanes live as long as the endpoint: a lane added
  /// while the lanes are visited by index shifts the peer lanes up by one,
  /// so one may be visited twice but none is skipped.
  Lane* laneAt(std::size_t i);
  /// A lane ran dry (its mutex held, its buffers emptied): true when it
  /// holds more than an idle lane keeps and the timer must look at it.
  bool ranDryLocked(Lane* lane);
  /// Shrinks a dry lane's queue buffers above kIdleLaneBufferLimit (its
  /// mutex held, no runner).
  void giveBackQueueStorage(Lane* lane);
  /// Arms the timer that gives back the storage of lanes that stayed dry,
  /// to look in `delayNs`.
  void armLaneTrim(std::int64_t delayNs);
  std::int64_t idleLaneTrimNs() const { return static_cast<std::int64_t>(cfg_.idleLaneTrimMs) * 1'000'000; }
  std::atomic<bool> laneTrimArmed_{false};
  void forgetCanceledSlow(Lane* lane, std::uint32_t seq);
  /// A STATUS_ERROR from the peer: to the frame its call was made in, in
  /// the lane's order; with no frame, the endpoint faults (reader).
  void routeStatusError(Lane* lane, std::uint32_t vseq, Status status);
  /// A barrier's ack: the AsyncStatus segments it covers go (reader).
  void dropStatusSegments(Lane* lane, std::uint64_t token);
  /// A CANCEL frame's effect: records the call as canceled (reader).
  void noteCanceled(Lane* lane, std::uint32_t seq);
  /// A CANCEL of AsyncStatus calls first… (count of them) by their AsyncFrame.
  void noteFrameCanceled(Lane* lane, std::uint32_t first, std::uint32_t count);
  /// Why a call that is due to run is answered without running it: 0 it
  /// runs, else the WireErrorCode (canceled, or its deadline passed).
  std::uint8_t skipReason(Lane* lane, std::uint32_t seq, CallMode mode, std::int64_t deadlineNs);
  /// `n` things waitForIdle waits for finished (calls answered and their
  /// callbacks run, barriers acknowledged).
  void noteFinished(std::uint64_t n);
  /// True when everything begun has finished (waitForIdle's test).
  bool idleNow();

  /// Counts EndpointImpl objects; declared first, so it is destroyed last:
  /// the count drops only once every member (socket, TLS session) is gone.
  struct LiveToken {
    static inline std::atomic<std::size_t> count{0};
    LiveToken() { count.fetch_add(1, std::memory_order_relaxed); }
    ~LiveToken() { count.fetch_sub(1, std::memory_order_release); }
    LiveToken(const LiveToken&) = delete;
    LiveToken& operator=(const LiveToken&) = delete;
  };
  LiveToken live_;
  EndpointConfig cfg_;
  std::unique_ptr<TcpSocket> sock_;
  std::shared_ptr<const TlsContext> tls_;
  std::string tlsHost_;
  const bool isServer_;
  std::string peerAddress_;
  std::unique_ptr<Negotiated> neg_;
  /// Set by receiveHello, before any frame of ours but the HELLO is made
  /// (atomic: a service's stop() may look at an endpoint in its handshake).
  std::atomic<std::uint64_t> peerMaxMessageSize_{0};
  std::thread reader_;
  std::mutex readMu_;  // whoever reads the socket: rx_, rxPos_, peerLanes_ growth, Lane::inSeq
  ByteBuffer rx_;
  std::size_t rxPos_ = 0;
  Lane* batchLane_ = nullptr;  // call frames read for one lane, not yet in its inbox (readMu_)
  /// readMu_: the head (kind, lane, method: up to 8 bytes) of the last call
  /// frame handleFrame queued, so that the calls with the same head right
  /// behind it (a stream, a window of one method's calls) are queued without
  /// being parsed again (handleBuffered). A lane lives as long as the
  /// endpoint and the accepted methods never change, so what the head
  /// decided then holds for them. mask 0: none.
  struct CallHead {
    HeadWord head;  // mask 0: none
    Lane* lane = nullptr;
    std::uint8_t headLen = 0;
    std::uint8_t seqKind = 0;  // kSeqNone, kSeqCall (inSeq) or kSeqStatus (inStatusSeq)
  };
  static constexpr std::uint8_t kSeqNone = 0, kSeqCall = 1, kSeqStatus = 2;
  /// The next number of `lane`'s calls of that kind (reply-expecting calls
  /// for their reply, AsyncStatus calls for their error), or 0.
  static std::uint32_t takeSeq(Lane* lane, std::uint8_t seqKind) {
    return seqKind == kSeqCall ? lane->inSeq++ : seqKind == kSeqStatus ? lane->inStatusSeq++ : 0;
  }
  CallHead lastCall_;
  ByteBuffer batch_;
  static constexpr std::uint32_t kMaxPeerLanes = 1u << 16;
  // Callers blocked in a wait on this endpoint read the socket themselves;
  // the reader thread parks meanwhile (docs/threading.md).
  static constexpr int kReaderParkMs = 1;
  std::atomic<int> callerPollers_{0};     // callers blocked in a wait on this endpoint
  std::atomic<bool> callerWatching_{false};  // one of them watches the socket
  std::atomic<bool> watcherInPoll_{false};   // ... and is in its poll right now
  std::atomic<bool> batchOwed_{false};       // a caller's read left frames unqueued: the reader queues them
  std::atomic<bool> readerPolling_{false};
  std::mutex readerWaiterMu_;
  Waiter* readerWaiter_ = nullptr;

  std::atomic<EndpointState> state_{EndpointState::kConnecting};
  mutable std::mutex stateMu_;
  std::string error_;

  std::mutex lanesMu_;
  std::uint64_t callsBase_ = 0;  // callsExecuted at the last stats reset (lanesMu_)
  std::vector<std::unique_ptr<Lane>> localLanes_;
  std::vector<std::uint32_t> freeLocal_;
  // Scope lanes that ended with replies still pending: their slots return
  // to freeLocal_ once nothing is pending (another thread must not run
  // their callbacks). lanesMu_.
  std::vector<Lane*> retiredScopeLanes_;
  std::atomic<int> pinnedLanes_{0};  // peer lanes with a thread of their own
  static constexpr int kMaxPinnedLanes = 64;
  std::vector<std::unique_ptr<Lane>> peerLanes_;  // reader thread only (lanesMu_ for iteration)
  /// readMu_: localLanes_' lanes as the reader last saw them, so that a
  /// reply or a callback's call finds its lane without lanesMu_ (a lane,
  /// once made, lives as long as the endpoint; only a slot beyond the copy
  /// takes the lock, to copy the new ones).
  std::vector<Lane*> localLanesSeen_;
  /// readMu_: the state whose reply completeReply is completing; its
  /// pending entry's reference goes to the completion postCompletion
  /// queues for it, instead of one reference taken and one dropped.
  AsyncStateBase* donatedRef_ = nullptr;

  // The write queue (under writeMu_): staged lane buffers move here in
  // order and leave as the socket takes them (docs/threading.md).
  std::mutex writeMu_;
  RingQueue<ByteBuffer> wq_;
  std::size_t wqBytes_ = 0;
  std::size_t wqOffset_ = 0;
  std::vector<ByteBuffer> freeBufs_;
  std::atomic<bool> wantWrite_{false};
  std::atomic<bool> writeFailed_{false};
  std::atomic<int> writeErrno_{0};  // why, for the close
  std::uint64_t gatherLocked();  // returns the frames taken
  bool drainLocked();
  void recycleLocked(ByteBuffer&& b) noexcept;
  void afterPartialWrite();
  /// Closes (or faults, for a TLS failure) after a write found the
  /// connection broken.
  void closeIfWriteFailed();
  /// Writes what waits for the socket (the queue, TLS records) without
  /// blocking; what that throws faults the connection.
  void writePending() noexcept;
  std::mutex dirtyMu_;
  std::vector<Lane*> dirty_;
  std::vector<Lane*> flushing_;
  std::vector<iovec> iov_;
  std::atomic<std::int64_t> lastAppendNs_{0};
  std::atomic<std::int64_t> gapAvgNs_{0};  // average gap between calls that read the clock (afterAppend)
  std::int64_t lastGatherNs_ = 0;            // when a flush took frames while armed, or the timer's (under writeMu_)
  std::atomic<bool> armed_{false};
  AdaptiveSpin readerSpin_{cfg_.pollSpinUs, cfg_.pollSpinMaxUs};  // the reader's polling (its thread only)

  std::function<void(std::shared_ptr<EndpointImpl>)> onClosed_;
  ExportTable exports_;
  std::mutex importsMu_;
  std::unordered_map<std::uint64_t, ObjectCore*> imports_;  // the peer's objects we hold, by id
  void runRelease(const std::uint8_t* body, std::size_t len);
  HeldValues held_;
  /// What close() took from held_ and exports_, let go of on a pool thread
  /// (close() may run under the reader's lock, and destructors may call).
  /// Made with the endpoint, so that closing allocates nothing to keep it:
  /// out of memory queuing that task, it is let go of when the endpoint
  /// ends instead of being kept for good.
  struct LeftAtClose {
    HeldValues::Taken values;
    ExportTable::Taken objects;
    std::weak_ptr<EndpointImpl> ep;  // current while the objects go
    void release() noexcept;
  };
  std::shared_ptr<LeftAtClose> leftAtClose_ = std::make_shared<LeftAtClose>();
  /// A VALUE frame's turn on `lane`: FETCH (call `seq`) or DROP.
  void runValueFrame(Lane* lane, std::uint32_t seq, const std::uint8_t* body, std::size_t len);
  /// Appends one frame of `type` on `lane` (its kind and slot, then what
  /// `fill` writes) and sends it by the batching rules.
  template <class Fill>
  void stageFrame(Lane* lane, FrameType type, bool urgent, Fill&& fill, std::uint8_t kindBits = 0);

  /// Counters behind getLocalStats(): written by the flushing thread (under
  /// writeMu_) or the reading thread (under readMu_), read by anyone.
  struct Counters {
    std::atomic<std::uint64_t> messagesSent{0}, messagesReceived{0}, bytesSent{0}, bytesReceived{0};
    std::atomic<std::uint64_t> socketWrites{0}, socketReads{0}, maxBatch{0};
    std::array<std::atomic<std::uint64_t>, EndpointStats::kBatchBuckets> batches{};
    std::atomic<std::size_t> maxStaged{0}, maxQueued{0}, maxRxBuffer{0};
    std::atomic<std::int64_t> sinceNs{0};
  } counters_;
  // What waitForIdle waits for, as counts that only grow: reply-expecting
  // calls entered on each lane (Lane::callsEntered, under the lane's lock:
  // no atomic add per call), other things begun (barriers, failures and
  // errors delivered as completions), and all of them finished. Idle when
  // what began equals what finished.
  std::atomic<std::uint64_t> othersBegun_{0};
  std::atomic<std::uint64_t> finished_{0};
  std::atomic<int> idleWaiters_{0};  // threads in waitForIdle: finishes notify them
  std::mutex idleMu_;
  std::condition_variable idleCv_;
  std::uint64_t idleGeneration_ = 0;  // moved on by each notified finish and by close() (idleMu_)

  friend class BatchAggregator;
  friend struct EndpointAccess;

 public:
  void disarm() { armed_.store(false, std::memory_order_release); }

  // Inline execution watch (BatchAggregator): when the reader thread has run
  // claimed lanes for long, an executor reads meanwhile (followRead).
  std::atomic<std::int64_t> inlineStartNs_{0};
  std::atomic<bool> followerActive_{false};
  std::atomic<bool> inlineWatched_{false};
  /// The lanes the reader claimed in its read, run after it (claimMu_). At
  /// 100 client threads, running them all there rather than one (the rest
  /// on the executor, a wake-up each) took RoundTripMediumMsgAsyncCB from
  /// 0.76-0.83 M to 0.95-1.15 M round trips/s (3 alternating runs).
  static constexpr int kMaxClaims = 256;
  /// Turns a run may add for lanes that still had frames after theirs (64
  /// turns of 256 frames), so that the reader gets back to its socket.
  static constexpr int kMaxRequeues = 64;
  LightMutex claimMu_;
  std::array<Lane*, kMaxClaims> claims_{};
  int claimNext_ = 0, claimEnd_ = 0, requeues_ = 0;
  /// Queues a lane among the claims (lane->mu held); `again`: after a turn
  /// of it, counted against kMaxRequeues. False when there is no room.
  bool pushClaim(Lane* lane, bool again);
  std::atomic<std::int64_t> claimLaneNs_{0};  // when the current claimed lane's turn began (0: the run's start)
  /// Hands the claimed lanes not yet started to the executor: the watch
  /// calls it when the inline run has taken long.
  void releaseClaims() noexcept;
  // When frames staged by a thread running this endpoint's frames started
  // waiting for that thread to go idle (0: none); the watch sends them if
  // it takes long.
  std::atomic<std::int64_t> deferredSinceNs_{0};
  void followRead();
};

/// This thread's view of the runtime: ambient endpoint, lanes it owns, and
/// what it is running right now.
/// A RemoteThread or RemoteThreadPool scope of one thread (docs/objects.md
/// §7): the lanes its calls use, one per endpoint, announced to the peer
/// with a LANE frame before their first call.
struct LaneScope {
  std::uint8_t mode = kLanePool;
  std::uint32_t threads = 1;
  LaneScope* outer = nullptr;
  struct Entry {
    std::weak_ptr<EndpointImpl> ep;
    EndpointImpl* raw;
    Lane* lane;
  };
  std::vector<Entry> active;    // the current queue's lanes
  std::vector<Entry> detached;  // earlier queues (detachActiveQueue), still covered by wait()
};

/// The peer's call a thread is running, as CallCtx sees it.
struct CallInfo {
  EndpointImpl* ep;
  Lane* lane;
  std::uint32_t seq;
  bool replies;             // expects a reply (not a CALL_VOID)
  std::int64_t deadlineNs;  // steady clock; 0: none
  bool status = false;      // an AsyncStatus call (`seq` is its vseq)
};

struct ThreadState {
  Waiter waiter;
  const CallInfo* call = nullptr;  // the innermost call of a peer this thread runs
  FrameState* frame = nullptr;     // the innermost AsyncFrame
  // The innermost CallTimeout scope (a CallTimeout*) and the deadline that
  // applies (steady clock ns; 0: none), read by every call this thread makes.
  void* timeout = nullptr;
  std::int64_t deadlineNs = 0;
  EndpointImpl* current = nullptr;            // innermost EndpointCtx
  std::shared_ptr<EndpointImpl> connected;    // set by connect() on this thread
  struct Exec {
    EndpointImpl* ep;
    Lane* lane;
    int inCall = 0;  // > 0 while a call of the peer runs (not a reply callback)
  };
  std::vector<Exec> running;  // lanes being run, innermost last
  /// Room in `running` for one more, made before a lane is taken: out of
  /// memory in the push after would leave the lane taken for good.
  void roomToRun() { running.reserve(running.size() + 1); }
  struct Own {
    std::weak_ptr<EndpointImpl> ep;
    EndpointImpl* raw;
    Lane* lane;
  };
  std::vector<Own> own;
  ByteBuffer scratch;  // a continuation frame taken out of its queue
  // A method waits for a value this side holds (an AsyncRef parameter):
  // the lane's completion entries may run ahead too, since the value may be
  // completed by a callback queued there.
  bool completionsRunNested = false;
  // AsyncRef values named by the call being encoded (one reference each):
  // counted as mentions once the call is sent, forgotten if it is dropped.
  std::vector<RemoteValue*> mentionsPending;
  // Object references encoded into the frame being made (encodeRef), each
  // already counted: as a mention of a peer's object (`ep` null) or as one
  // more sent on our export entry at `ep`. A frame that is dropped takes
  // them back (takeBackRefs); one that is sent forgets them. (Two words:
  // the marks taken per call are a shift, not a division.)
  struct SentRef {
    EndpointImpl* ep;
    ObjectCore* core;
    std::uint64_t id = 0, gen = 0;  // an export's entry (ep set), for unsend()
  };
  std::vector<SentRef> refsSent;
  // True while mentionsPending or refsSent holds anything: one test of a
  // byte on the path of every call instead of two lists' sizes (3.5 % of a
  // streamed call's instructions with both, docs/benchmarks.md).
  bool countsPending = false;
  void noteCountsSettled() { countsPending = !refsSent.empty() || !mentionsPending.empty(); }
  /// A reference encodeRef is about to count (pushed first: a push that
  /// throws leaves nothing counted).
  void noteRefSent(EndpointImpl* ep, ObjectCore* core) {
    refsSent.push_back({ep, core});
    countsPending = true;
  }
  /// An AsyncRef value the call being encoded names.
  void noteMention(RemoteValue* v) {
    mentionsPending.push_back(v);
    countsPending = true;
  }
  /// The frame whose references start at `from` was sent: they stay counted.
  void keepRefs(std::size_t from) {
    refsSent.resize(from);
    noteCountsSettled();
  }
  struct LaneScope* scope = nullptr;  // innermost RemoteThread / RemoteThreadPool
  bool isReader = false;  // an endpoint's reader thread: never waits to write
  // Endpoints with frames this thread staged while running frames of theirs;
  // flushed before the thread sleeps or returns to the application
  // (docs/threading.md, "Sending and batching"). Weak: the list never keeps
  // an endpoint the application dropped (its destructor sends what is staged).
  struct Deferred {
    EndpointImpl* raw;
    std::weak_ptr<EndpointImpl> ep;
  };
  std::vector<Deferred> deferredFlush;
  // Bytes the calls a method of the peer's makes must reach before they
  // leave without waiting for the thread to go idle (sendRampBytes, doubled
  // at each such send, whether bytes or sendRampMaxCalls sent it); 0: none
  // sent yet since the thread was last idle.
  std::uint32_t sendRamp = 0;
  // Bytes of the frames this thread staged while running frames since it
  // last flushed (afterAppend sends them at two maxMsgBatchSize).
  std::uint64_t deferredBytes = 0;
  // afterAppend's shortcut: the endpoint and lane whose frame
  // afterAppendSlow last held while this thread ran frames of that
  // endpoint (with `running` that deep), and the lane's bytes and messages
  // below which the next frame is held too (the least of its thresholds,
  // the ramp's included, whatever the frame). Cleared wherever the ramp
  // starts again: before the list of endpoints to flush is emptied, and
  // between an executor's jobs.
  const EndpointImpl* holdEp = nullptr;
  const Lane* holdLane = nullptr;
  std::size_t holdDepth = 0;
  std::size_t holdBelowBytes = 0;
  std::uint32_t holdBelowMsgs = 0;
  void restartRamp() {
    sendRamp = 0;
    holdEp = nullptr;
  }
  void flushDeferred();
  // Endpoints whose socket this thread watches in a wait further out.
  std::vector<EndpointImpl*> watching;
  ~ThreadState();
};
/// Set to this thread's ThreadState on first use (and cleared when it is
/// destroyed): a plain thread-local pointer is one load, where the
/// ThreadState itself is reached through a TLS init check and a call
/// (2-6 % of the time in the call-heavy benchmarks).
inline thread_local ThreadState* tlsThreadState = nullptr;
ThreadState& initThreadState();
inline ThreadState& threadState() {
  if (ThreadState* ts = tlsThreadState) [[likely]] return *ts;
  return initThreadState();
}

/// A frame staged on `lane` (laneBytes and laneMsgs now staged there) is
/// held like the one before it when nothing afterAppendSlow decides on has
/// changed: this thread still runs frames of this endpoint, the lane is
/// below the thresholds found then, the thread's held bytes below theirs,
/// and the watch that sends held frames is armed. Stream calls took 85
/// instructions each in afterAppend before (docs/benchmarks.md).
inline void EndpointImpl::afterAppend(Lane* lane, bool urgent, std::size_t laneBytes, std::uint32_t laneMsgs,
                                      std::size_t frameBytes, bool call) {
  afterAppend(threadState(), lane, urgent, laneBytes, laneMsgs, frameBytes, call);
}

inline void EndpointImpl::afterAppend(ThreadState& ts, Lane* lane, bool urgent, std::size_t laneBytes,
                                      std::uint32_t laneMsgs, std::size_t frameBytes, bool call) {
  if (ts.holdEp == this && ts.holdLane == lane && !urgent && laneBytes < ts.holdBelowBytes &&
      laneMsgs < ts.holdBelowMsgs && ts.running.size() == ts.holdDepth && ts.running.back().ep == this &&
      ts.deferredBytes + frameBytes < 2 * std::uint64_t{cfg_.maxMsgBatchSize} &&
      deferredSinceNs_.load(std::memory_order_relaxed) != 0) [[likely]] {
    ts.deferredBytes += frameBytes;
    return;
  }
  afterAppendSlow(lane, urgent, laneBytes, laneMsgs, frameBytes, call);
}

/// Whether a frame this thread sends on `lane` now is a continuation (the N
/// bit): it runs a call of the peer's on that very lane.
inline bool sendsNested(const ThreadState& ts, const Lane* lane) {
  return !ts.running.empty() && ts.running.back().lane == lane && ts.running.back().inCall > 0;
}
inline bool sendsNested(const Lane* lane) { return sendsNested(threadState(), lane); }

/// Releases object cores (null entries skipped) with `ep` as this thread's
/// current endpoint, so a destructor that runs here calls that connection.
void releaseCoresAs(EndpointImpl* ep, std::span<ObjectCore* const> cores);
inline void releaseCoresAs(EndpointImpl* ep, std::initializer_list<ObjectCore*> cores) {
  releaseCoresAs(ep, std::span<ObjectCore* const>(cores.begin(), cores.size()));
}

/// The endpoint calls from this thread go to; throws NoEndpointOnStackError.
/// Inline, as laneForCall(): every call made looks up both (a one-way call
/// sent took 469 -> 438 instructions with both inline, callgrind of
/// StreamSmallMsgFromServer's service).
EndpointImpl& currentEndpointOutside();  // no EndpointCtx: the connect()ed endpoint
inline EndpointImpl& currentEndpoint(const ThreadState& ts) {
  if (ts.current) [[likely]] return *ts.current;
  return currentEndpointOutside();
}
inline EndpointImpl& currentEndpoint() { return currentEndpoint(threadState()); }

inline Lane* EndpointImpl::laneForCall() { return laneForCall(threadState()); }

inline Lane* EndpointImpl::laneForCall(const ThreadState& ts) {
  if (!ts.running.empty() && ts.running.back().ep == this) return ts.running.back().lane;
  return laneForOwnCall();
}

}  // namespace myelin::detail
