// EndpointConfig: the tunables of one endpoint (batching, limits, threads).
// Values are read when the endpoint is created; `validate()` rejects
// contradictory settings with InvalidConfigurationError.
#pragma once

#include <cstddef>
#include <cstdint>

namespace myelin {

/// Settings of an endpoint. All limits are per endpoint (one connection).
struct EndpointConfig {
  /// Most messages merged into one socket write.
  std::uint32_t maxBatchMsgs = 4096;
  /// Most bytes a lane's staged frames come to before they are sent. What
  /// one thread stages while it runs the peer's frames (replies, calls from
  /// callbacks) is sent once it comes to twice this, over all lanes,
  /// instead of waiting for the thread to go idle (docs/threading.md).
  std::uint32_t maxMsgBatchSize = 64 * 1024;
  /// How long an asynchronous call made by an application thread may wait
  /// in a staging buffer for more calls to join its batch, in microseconds.
  /// A lone call is never delayed: only calls made while a burst is in
  /// progress wait, and at most this long plus one thread wake-up. (Replies,
  /// and calls made from handlers and callbacks, leave when their thread has
  /// run everything it received, but for a handler's first calls:
  /// sendRampBytes; see docs/threading.md.)
  std::uint32_t maxBatchYieldUs = 50;
  /// A call made within this many microseconds of the endpoint's previous
  /// one is part of a burst and may wait for its batch (up to
  /// maxBatchYieldUs); a call after a longer gap is written at once. So is
  /// every call while calls come on average a quarter of maxBatchYieldUs
  /// apart or more (fewer than about four would share a batch): at a steady
  /// 50,000 calls/s each call leaves at once (p50 10 us from the scheduled
  /// send instead of 85-105 us), while from about 80,000 calls/s on they
  /// collect again. 0 writes every call at once. Values above
  /// maxBatchYieldUs act as maxBatchYieldUs.
  std::uint32_t burstGapUs = 50;
  /// A method that makes calls while it runs (a stream of items to its
  /// caller, say) sends its first this many bytes of them at once, then
  /// twice as many each time up to maxMsgBatchSize, instead of holding them
  /// until its thread has run everything it received or a batch is full:
  /// the peer, idle until then, starts on them while the method goes on.
  /// The ramp starts again whenever the thread waits or goes idle. With
  /// 4 KiB, StreamSmallMsgFromServer (10,000 calls per method) ran at
  /// 8.50 M against 8.09 M calls/s (medians of 5 alternating runs, 1 thread;
  /// docs/benchmarks.md). Values above maxMsgBatchSize act as
  /// maxMsgBatchSize. 0: off (the calls leave once the thread has run
  /// everything it received, or a batch is full).
  std::uint32_t sendRampBytes = 4096;
  /// Each batch of such a stream (sendRampBytes) also leaves once its lane
  /// holds this many messages, below the batch's bytes: the peer waits
  /// while each batch is made, and small calls take longest to fill one
  /// (64 KiB of 17-byte calls is some 90 us of encoding, over a quarter of
  /// a 10,000-call stream). StreamSmallMsgFromServer at 1 thread ran at
  /// 34.9 M against 32.2 M calls/s with 2,048 (means of 3 alternating runs;
  /// 1,024: +9 % in 3, 512: +2 % in 2; docs/benchmarks.md); streams of
  /// larger calls fill 64 KiB first and are unchanged. 0, or a value at or
  /// above maxBatchMsgs: batches are bounded by bytes and maxBatchMsgs only.
  std::uint32_t sendRampMaxCalls = 2048;
  /// Before a thread that watches this endpoint's socket (its reader, or
  /// the caller that waits for a reply) goes to sleep, it polls the socket
  /// for up to this many microseconds, yielding its CPU to any thread that
  /// is ready to run: what arrives meanwhile costs no wake-up of that
  /// thread, which takes tens of microseconds when it must be woken on
  /// another CPU. One thread of the process polls at a time. The price is
  /// CPU time: a wait that finds nothing spends this long polling first.
  /// On a 2-core machine, 50 us took a sync ping-pong of 64 bytes from 111
  /// to 14 us (mean) and async round trips from 1.18 M to 1.69 M/s
  /// (medians of alternating runs; docs/benchmarks.md). 0: sleep at once.
  std::uint32_t pollSpinUs = 50;
  /// While the endpoint's reader keeps finding the next read within this
  /// many microseconds on average (the peer answers batch after batch), it
  /// polls for up to twice that average, or twice the time it works
  /// between reads if that is shorter, at most this long, instead of
  /// pollSpinUs: a batch that takes the peer 100-250 us to answer then
  /// costs no wake-up. Once reads come further apart, or each brings only a
  /// few us of work (single calls a few hundred us apart), it polls
  /// pollSpinUs, so an idle or lightly loaded endpoint costs no more CPU
  /// than with pollSpinUs alone. With many calls in flight from 100
  /// threads it raised RoundTripMediumMsgAsyncCB's rate by 7-42 % (median
  /// 29 %) in six alternating runs on the 2-core machine
  /// (docs/benchmarks.md). Values below pollSpinUs act as pollSpinUs; with
  /// pollSpinUs 0 nothing polls.
  std::uint32_t pollSpinMaxUs = 250;
  /// Largest framed message accepted from the peer; a frame announcing more
  /// is rejected before anything is allocated, and faults the connection.
  /// The handshake tells the peer, which refuses a call or result that would
  /// be larger where it is encoded (UnsendableValueError): it fails alone.
  /// At least kMinMessageSize.
  std::uint32_t maxMessageSize = 64u * 1024 * 1024;
  static constexpr std::uint32_t kMinMessageSize = 1024;
  /// Most container storage one message may decode into (bounds what runs
  /// of defaults can expand to).
  std::size_t maxDecodeBytes = 256u * 1024 * 1024;
  /// Bytes of calls a peer's thread may have sent this endpoint that have
  /// not run yet (flow control, docs/async-and-errors.md §5): a producer
  /// that gets this far ahead waits until calls ran here. Bounds the memory
  /// queued per calling thread of the peer. At least 256 KiB. With 1 MiB
  /// a one-way flood of 5-byte calls ran at 14.3 M/s against 17.0 M/s
  /// without flow control (the producer stalled for credit); with 8 MiB it
  /// ran at 17.0 M/s (Table B, OneParamToSrvAsyncVoid, alternating runs).
  std::uint32_t receiveWindowBytes = 8 * 1024 * 1024;
  /// Most Async calls one thread may have waiting for their reply on this
  /// endpoint; a thread at the limit waits in its next Async call until
  /// replies come (running calls addressed to it meanwhile). 0: no limit
  /// (flow control still bounds the calls the peer has not run).
  std::uint32_t asyncValueThrottle = 0;
  /// Most values this endpoint holds for its peer (results of AsyncRef
  /// calls the peer still has handles to); a peer that makes more faults
  /// the connection.
  std::uint32_t maxAllocValues = 1u << 20;
  /// Most objects exported to the peer, and most of the peer's objects
  /// referred to, at once. Exporting more throws InvalidConfigurationError
  /// (a peer's constructor call fails instead); a peer that sends
  /// references to more of its objects faults the connection.
  std::uint32_t maxAllocObjects = 1u << 20;
  /// Most bytes of received messages queued on this endpoint that have not
  /// run yet. Flow control keeps a well-behaved peer far below it (about
  /// receiveWindowBytes per calling thread); a peer that ignores it and
  /// passes this faults the connection.
  std::size_t maxAllocQueuedBytes = std::size_t{2} << 30;
  /// How long a lane must stay dry before the storage its queue of received
  /// frames grew to in a burst (above 1 MiB per buffer) goes back, ms. A
  /// lane in steady use keeps it: given back each time the lane ran dry, it
  /// was faulted in again by the next burst (StreamLargeMsgFromServer, 100
  /// threads: 114,000 page faults a second and 17 % of the rate). 0 gives it
  /// back every time the lane runs dry.
  std::uint32_t idleLaneTrimMs = 1000;
  /// Bytes waiting in the socket's write queue above which a thread that
  /// makes a call waits for the socket to take them.
  std::uint32_t maxTotalSendBytes = 8u * 1024 * 1024;
  /// How long connect() waits for the TCP connection and the handshake, ms.
  std::uint32_t connectTimeoutMs = 10000;
  /// How long a service waits for a new peer's handshake, ms.
  std::uint32_t handshakeTimeoutMs = 10000;

  /// Throws InvalidConfigurationError naming the first bad value.
  void validate() const;
};

}  // namespace myelin
