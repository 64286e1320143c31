// Message framing (docs/wire-format.md §2): a varint length, a kind byte, a
// lane slot and kind-specific fields. Parsing never reads past the frame and
// rejects anything it does not know.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "myelin/detail/wire_codec.h"

namespace myelin::detail {

/// Frame types (low four bits of the kind byte).
enum class FrameType : std::uint8_t {
  kValue = 0,       ///< slot, op, id [mentions]: a value held for the peer (docs/async-and-errors.md §2)
  kCallVoid = 1,    ///< slot, method, params; no reply
  kCallSync = 2,    ///< slot, method, params; reply expected, caller blocked
  kCallAsync = 3,   ///< slot, method, params; reply expected
  kReply = 4,       ///< slot, seq, value
  kReplyError = 5,  ///< slot, seq, code, message
  kVoidFailed = 6,  ///< slot, method, code, message
  kBarrier = 7,     ///< slot, token
  kBarrierAck = 8,  ///< slot, token
  kHello = 9,       ///< schema descriptor
  kGoodbye = 10,    ///< reason
  kRelease = 11,    ///< slot, object, refs, mentions (docs/objects.md §4)
  kLane = 12,       ///< slot, mode, threads: how the receiver runs the lane (docs/objects.md §7)
  kCancel = 13,     ///< slot, seq: the caller gave up on the call (docs/async-and-errors.md §3)
  kStatusError = 14,  ///< slot, vseq, status: an AsyncStatus call failed
  kCredit = 15,       ///< slot, bytes: the receiver ran calls of the lane; that many more may come
};

/// Operations of a VALUE frame.
inline constexpr std::uint8_t kValueFetch = 1;  ///< send the value (a reply-expecting request)
inline constexpr std::uint8_t kValueDrop = 2;   ///< the sender dropped its handles, after `mentions` messages

/// Bytes of call frames a sender may have sent on one of its lanes beyond
/// what the receiver has credited back (docs/async-and-errors.md §5): every
/// lane starts with this window; a receiver grants more with CREDIT.
inline constexpr std::int64_t kInitialCallWindow = 256 * 1024;

/// Kind bit: the slot names a lane of the frame's receiver (set on nested
/// calls made back to a waiting caller and on replies to calls the receiver
/// made from its own lanes).
inline constexpr std::uint8_t kReceiverLaneBit = 0x10;
/// Kind bit: a call made while the sender was running a call of the same
/// lane, i.e. a continuation of that call. A receiver whose thread waits
/// inside a call of this lane runs such frames at once, ahead of ordinary
/// calls queued behind the one it is running.
inline constexpr std::uint8_t kNestedBit = 0x20;
/// Kind bit: a call on an object of the receiver; `object:varint` follows
/// the method id (docs/objects.md §2). On a CANCEL: the sender's AsyncFrame
/// canceled a range of AsyncStatus calls (`first count` in place of `seq`).
inline constexpr std::uint8_t kObjectBit = 0x40;
/// Kind bit: a call with a deadline; `deadline:u64le`, the microseconds it
/// had left when sent, follows the object id (or the method id). The
/// receiver rewrites it in its buffer to the local steady-clock time in
/// nanoseconds by which the call must have run.
inline constexpr std::uint8_t kDeadlineBit = 0x80;
inline constexpr std::uint8_t kTypeMask = 0x0f;

/// Error codes carried by kReplyError and kVoidFailed.
enum class WireErrorCode : std::uint8_t {
  kHandlerFailed = 1,    ///< the handler threw
  kUndefinedMethod = 2,  ///< the receiver has no such method
  kDecodeFailed = 3,     ///< parameters could not be decoded (the receiver faults too)
  kCanceled = 4,         ///< the caller canceled the call before it ran
  kTimedOut = 5,         ///< the call's deadline passed before it ran
};

/// Largest varint length prefix of a frame (32-bit lengths).
inline constexpr std::size_t kMaxLengthPrefix = 5;

/// Result of looking for one frame at the front of a receive buffer.
struct FrameSpan {
  std::size_t headerLen = 0;  ///< bytes of the length prefix
  std::size_t bodyLen = 0;    ///< bytes after it
  std::size_t total() const { return headerLen + bodyLen; }
};

/// peekFrame's general path: prefixes of any length, and every error.
std::optional<FrameSpan> peekFrameSlow(const std::uint8_t* p, std::size_t n, std::size_t maxBody);

/// Reads the length prefix of the frame at `p[0..n)`. Returns nullopt while
/// the prefix itself is incomplete; the frame is complete when
/// `n >= headerLen + bodyLen`. Throws InvalidMessageError for a bad prefix,
/// an empty body or a body longer than `maxBody` (checked before anything is
/// allocated for it).
inline std::optional<FrameSpan> peekFrame(const std::uint8_t* p, std::size_t n, std::size_t maxBody) {
  // A one-byte prefix (bodies of 1 to 127 bytes: most calls) inline; it is
  // read twice per received frame (once as read, once as queued), and the
  // two calls out of line were 62 of a small one-way call's ~860
  // instructions (callgrind of StreamSmallMsgFromServer's client).
  if (n != 0 && static_cast<unsigned>(p[0]) - 1u < 0x7fu && p[0] <= maxBody) [[likely]] {
    return FrameSpan{1, p[0]};
  }
  // A two-byte prefix (bodies of 128 to 16,383 bytes: a LargeMessage, a
  // list) inline too: out of line it held 2.3 % of
  // StreamLargeMsgFromServer's client's samples. A second byte of 1 to
  // 127 ends the prefix and is not overlong.
  if (n >= 2 && p[0] >= 0x80 && static_cast<unsigned>(p[1]) - 1u < 0x7fu) {
    const std::size_t len = (p[0] & 0x7fu) | static_cast<std::size_t>(p[1]) << 7;
    if (len <= maxBody) return FrameSpan{2, len};
  }
  return peekFrameSlow(p, n, maxBody);
}

/// closeFrame() for a body of 128 bytes or more: the body moves up to make
/// room for a longer prefix.
void closeLongFrame(ByteBuffer& out, std::size_t start);

/// Writes the length prefix for the body that starts at `start + 1` in
/// `out` and runs to its end, where one placeholder byte was reserved at
/// `start`. A short body's prefix is one store, inline (sending a one-way
/// call took 190 -> 173 instructions; docs/benchmarks.md).
inline void closeFrame(ByteBuffer& out, std::size_t start) {
  std::size_t body = out.size() - start - 1;
  if (body < 0x80) [[likely]] {
    out.data()[start] = static_cast<std::uint8_t>(body);
    return;
  }
  closeLongFrame(out, start);
}

/// Appends a frame to `out` whose body is produced by `fill(WireWriter&)`.
/// The length prefix is written after the body is known (one memmove when
/// the body needs a longer prefix than one byte).
template <class Fill>
void appendFrame(ByteBuffer& out, Fill&& fill) {
  std::size_t start = out.size();
  out.push(0);  // 1-byte length placeholder
  WireWriter w(out);
  fill(w);
  w.finish();
  closeFrame(out, start);
}


}  // namespace myelin::detail
