// Byte-level writer and reader of Myelin's value encoding (docs/wire-format.md):
// varints, zigzag, the `default` leaf marker and runs of defaults, strict
// decoding. Header-only because generated serializers inline these calls:
// each primitive has a small inline fast path for the common one-byte case
// and keeps the rest out of line (figures in docs/benchmarks.md, "Codec fast
// paths").
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <string_view>

#include "myelin/errors.h"

#define MYELIN_NOINLINE __attribute__((noinline))
#define MYELIN_COLD __attribute__((noinline, cold))
#define MYELIN_INLINE inline __attribute__((always_inline))

namespace myelin::detail {

/// Growable byte buffer with malloc/realloc storage (no value-initialisation
/// on growth). Not thread-safe.
class ByteBuffer {
 public:
  ByteBuffer() = default;
  ByteBuffer(const ByteBuffer&) = delete;
  ByteBuffer& operator=(const ByteBuffer&) = delete;
  ByteBuffer(ByteBuffer&& o) noexcept : data_(o.data_), size_(o.size_), cap_(o.cap_) {
    o.data_ = nullptr;
    o.size_ = o.cap_ = 0;
  }
  ByteBuffer& operator=(ByteBuffer&& o) noexcept {
    if (this != &o) {
      std::free(data_);
      data_ = o.data_;
      size_ = o.size_;
      cap_ = o.cap_;
      o.data_ = nullptr;
      o.size_ = o.cap_ = 0;
    }
    return *this;
  }
  ~ByteBuffer() { std::free(data_); }

  std::uint8_t* data() { return data_; }
  const std::uint8_t* data() const { return data_; }
  /// Where the next byte goes (data() + size()).
  std::uint8_t* tail() { return data_ + size_; }
  std::size_t size() const { return size_; }
  std::size_t capacity() const { return cap_; }
  bool empty() const { return size_ == 0; }
  void clear() { size_ = 0; }
  void swap(ByteBuffer& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(cap_, o.cap_);
  }

  /// Makes room for `n` more bytes and returns a pointer to them; the caller
  /// fills them and calls `commit(n)` (or fewer).
  std::uint8_t* reserveTail(std::size_t n) {
    if (cap_ - size_ < n) grow(n);
    return data_ + size_;
  }
  void commit(std::size_t n) { size_ += n; }
  void resize(std::size_t n) {
    if (n > cap_) grow(n - size_);
    size_ = n;
  }
  void append(const void* p, std::size_t n) {
    std::memcpy(reserveTail(n), p, n);
    size_ += n;
  }
  void push(std::uint8_t b) {
    *reserveTail(1) = b;
    ++size_;
  }
  /// Makes room for `n` more bytes as reserveTail() does, but with the
  /// capacity doubling no further than `ceiling` (at least size() + n):
  /// for a buffer whose contents are bounded, so that it is not left
  /// holding twice the bound.
  void growWithin(std::size_t n, std::size_t ceiling) {
    if (cap_ - size_ < n) grow(n, ceiling);
  }
  /// Empties the buffer and, if it holds more than `limit` bytes of
  /// storage, gives back all but `keep` of them: a buffer that goes idle
  /// after a burst does not keep the most it ever held.
  void clearAndTrim(std::size_t limit, std::size_t keep) {
    size_ = 0;
    if (cap_ > limit) shrinkTo(keep);
  }
  /// Releases storage above `keep` bytes of capacity (used to keep idle
  /// buffers small after a burst).
  void shrinkTo(std::size_t keep) {
    if (cap_ > keep && size_ <= keep) {
      auto* p = static_cast<std::uint8_t*>(std::realloc(data_, keep ? keep : 1));
      if (p) {
        data_ = p;
        cap_ = keep ? keep : 1;
      }
    }
  }

 private:
  // Out of line so that reserveTail() inlines as one compare and branch.
  MYELIN_NOINLINE void grow(std::size_t n, std::size_t ceiling = ~std::size_t{0}) {
    std::size_t want = size_ + n;
    std::size_t cap = cap_ ? cap_ * 2 : 256;
    while (cap < want) cap *= 2;
    if (cap > ceiling) cap = std::max(want, ceiling);
    auto* p = static_cast<std::uint8_t*>(std::realloc(data_, cap));
    if (!p) throw std::bad_alloc();
    data_ = p;
    cap_ = cap;
  }

  std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t cap_ = 0;
};

/// Number of bytes the varint encoding of `v` takes (1..10).
inline std::size_t varintSize(std::uint64_t v) {
  std::size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

/// varintSize() of a value with `i` leading zero bits (0..63).
inline constexpr auto kVarintSizeByLeadingZeros = [] {
  std::array<std::uint8_t, 64> t{};
  for (int i = 0; i < 64; ++i) t[i] = static_cast<std::uint8_t>((64 - i + 6) / 7);
  return t;
}();

/// Writes LEB128 varint `v` at `p`, exactly varintSize(v) bytes; returns
/// bytes written.
inline std::size_t putVarint(std::uint8_t* p, std::uint64_t v) {
  std::size_t n = 0;
  while (v >= 0x80) {
    p[n++] = static_cast<std::uint8_t>(v | 0x80);
    v >>= 7;
  }
  p[n++] = static_cast<std::uint8_t>(v);
  return n;
}

/// putVarintInRoom() for v >= 0x80, out of line. Two-byte values are
/// written directly; longer ones have their low 56 bits spread into eight
/// 7-bit groups with shifts and masks and stored as one word, whatever the
/// length: no loop and no branch per byte. Floats and doubles are 5 and 10
/// bytes long; the six multi-byte leaves of a MediumMessage cost 185
/// instructions with the byte loop and 120 like this.
/// Spreads the low 56 bits of `v` into eight 7-bit groups, one per byte
/// (high bits clear), least significant group first.
MYELIN_INLINE std::uint64_t spreadGroups(std::uint64_t v) {
  std::uint64_t x = v & 0x00ffffffffffffffull;
  x = (x & 0x000000000fffffffull) | ((x & 0x00fffffff0000000ull) << 4);
  x = (x & 0x00003fff00003fffull) | ((x & 0x0fffc0000fffc000ull) << 2);
  return (x & 0x007f007f007f007full) | ((x & 0x3f803f803f803f80ull) << 1);
}
/// Stores `x` at `p` as eight little-endian bytes.
MYELIN_INLINE void storeWord(std::uint8_t* p, std::uint64_t x) {
  if constexpr (std::endian::native == std::endian::big) x = __builtin_bswap64(x);
  std::memcpy(p, &x, 8);
}

/// The bytes after the first eight of varint `v` >= 2^56, whose first eight
/// are written: the ninth, and a tenth holding bit 63. Returns the length.
MYELIN_INLINE std::size_t putTopBytes(std::uint8_t* p, std::uint64_t v) {
  const auto top = static_cast<std::uint8_t>(v >> 56);
  if (top < 0x80) {
    p[8] = top;
    return 9;
  }
  p[8] = static_cast<std::uint8_t>(top | 0x80);
  p[9] = 1;
  return 10;
}

MYELIN_NOINLINE inline std::size_t putVarintMultiByteInRoom(std::uint8_t* p, std::uint64_t v) {
  if (v < 0x4000) {
    p[0] = static_cast<std::uint8_t>(v | 0x80);
    p[1] = static_cast<std::uint8_t>(v >> 7);
    return 2;
  }
  std::uint64_t x = spreadGroups(v);
  std::size_t n = kVarintSizeByLeadingZeros[__builtin_clzll(v)];
  // Continuation bits on bytes 0 .. n - 2 (all eight when n > 8).
  x |= n > 8 ? 0x8080808080808080ull : 0x8080808080808080ull >> (8 * (9 - n));
  storeWord(p, x);
  return n > 8 ? putTopBytes(p, v) : n;
}

/// Copies n bytes, sizeof(W) <= n <= 2 * sizeof(W), as two words that
/// overlap when n is below their sum.
template <class W>
MYELIN_INLINE void copyTwoWords(std::uint8_t* d, const std::uint8_t* s, std::size_t n) {
  W head;
  W tail;
  std::memcpy(&head, s, sizeof(W));
  std::memcpy(&tail, s + n - sizeof(W), sizeof(W));
  std::memcpy(d, &head, sizeof(W));
  std::memcpy(d + n - sizeof(W), &tail, sizeof(W));
}

/// Copies `n` bytes, inline when n <= 16: two overlapping loads and stores
/// of 8 or 4 bytes (three single bytes below 4), instead of a call into
/// libc's memcpy (which picks its method by size at run time). Strings on
/// the wire are mostly this short: SmallMsgList's round trips ran 8 %
/// faster this way (docs/benchmarks.md).
MYELIN_INLINE void copySmall(void* dst, const void* src, std::size_t n) {
  auto* d = static_cast<std::uint8_t*>(dst);
  const auto* s = static_cast<const std::uint8_t*>(src);
  if (n > 16) [[unlikely]] {
    std::memcpy(d, s, n);
  } else if (n >= 8) {
    copyTwoWords<std::uint64_t>(d, s, n);
  } else if (n >= 4) {
    copyTwoWords<std::uint32_t>(d, s, n);
  } else if (n != 0) {
    const std::uint8_t first = s[0];
    const std::uint8_t middle = s[n / 2];
    const std::uint8_t last = s[n - 1];
    d[0] = first;
    d[n / 2] = middle;
    d[n - 1] = last;
  }
}

/// copySmall() inline up to 128 bytes: 17 to 32, 33 to 64 and 65 to 128 as
/// two overlapping words of 16, 32 and 64 bytes. For whole frames, most of which
/// are this short (a queued call; EndpointImpl::enqueue).
MYELIN_INLINE void copyUpTo128(void* dst, const void* src, std::size_t n) {
  struct Bytes16 {
    std::uint8_t b[16];
  };
  struct Bytes32 {
    std::uint8_t b[32];
  };
  struct Bytes64 {
    std::uint8_t b[64];
  };
  auto* d = static_cast<std::uint8_t*>(dst);
  const auto* s = static_cast<const std::uint8_t*>(src);
  if (n <= 16) {
    copySmall(d, s, n);
  } else if (n <= 32) {
    copyTwoWords<Bytes16>(d, s, n);
  } else if (n <= 64) {
    copyTwoWords<Bytes32>(d, s, n);
  } else if (n <= 128) {
    // Where the caller bounds n (a frame with a one-byte length), GCC made
    // a memcpy of these lengths a `rep movsq`, whose start-up was 5 % of
    // the service's samples in RoundTripMediumMsgAsyncCB (frames of 65-128
    // bytes).
    copyTwoWords<Bytes64>(d, s, n);
  } else {
    std::memcpy(d, s, n);
  }
}

/// Writes LEB128 varint `v` at `p`, which must have room for 10 bytes: the
/// bytes after the varint's own may be overwritten. Returns the varint's
/// length. Most leaves are below 128: that case is one inline store.
MYELIN_INLINE std::size_t putVarintInRoom(std::uint8_t* p, std::uint64_t v) {
  if (v < 0x80) {
    *p = static_cast<std::uint8_t>(v);
    return 1;
  }
  return putVarintMultiByteInRoom(p, v);
}

inline std::uint64_t zigzag(std::int64_t v) {
  return (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63);
}
inline std::int64_t unzigzag(std::uint64_t v) {
  return static_cast<std::int64_t>(v >> 1) ^ -static_cast<std::int64_t>(v & 1);
}

/// Writes the marker of `k` pending default leaves at `p` and returns the
/// position after it: `00` or `00 00` for one or two, else the run marker
/// `80 00 varint(k - 3)`. Needs room for 12 bytes.
MYELIN_NOINLINE inline std::uint8_t* putDefaultsInRoom(std::uint8_t* p, std::uint64_t k) {
  if (k < 3) {
    p[0] = 0;
    if (k == 2) p[1] = 0;
    return p + k;
  }
  p[0] = 0x80;
  p[1] = 0x00;
  return p + 2 + putVarintInRoom(p + 2, k - 3);
}

/// The leaves both writers build on their own defaultLeaf() and leafHead():
/// integers (0 is the default leaf), zigzag for signed ones, and floats and
/// doubles as their byte-swapped bits.
template <class W>
struct LeafValues {
  /// A leaf whose value is the unsigned integer `v` (0 = default).
  MYELIN_INLINE void leafUnsigned(std::uint64_t v) {
    if (v == 0) {
      self().defaultLeaf();
    } else {
      self().leafHead(v);
    }
  }
  MYELIN_INLINE void leafSigned(std::int64_t v) { leafUnsigned(zigzag(v)); }
  MYELIN_INLINE void leafFloat(float f) {
    std::uint32_t bits;
    std::memcpy(&bits, &f, 4);
    leafUnsigned(__builtin_bswap32(bits));
  }
  MYELIN_INLINE void leafDouble(double d) {
    std::uint64_t bits;
    std::memcpy(&bits, &d, 8);
    leafUnsigned(__builtin_bswap64(bits));
  }

 private:
  MYELIN_INLINE W& self() { return static_cast<W&>(*this); }
};

/// Room a leaf needs in a RoomWriter at most, a byte string's own bytes
/// aside: 10 for a varint written in room, and 12 for the marker of the
/// defaults before it, which every default leaf's unused 12 pays for.
inline constexpr std::size_t kLeafRoom = 12;

/// Writes leaves into room reserved once beforehand (WireWriter::beginRoom),
/// the same bytes as WireWriter's leaves but with no capacity check and no
/// buffer to go through: a position and the count of pending defaults, two
/// words that codecs pass by value and return, so they stay in registers.
/// Whoever reserves must reserve kLeafRoom for each leaf plus each byte
/// string's length, and kLeafRoom more for defaults pending when it begins.
struct RoomWriter : LeafValues<RoomWriter> {
  RoomWriter(std::uint8_t* at, std::uint64_t pendingDefaults) : p(at), pending(pendingDefaults) {}

  std::uint8_t* p;
  std::uint64_t pending;

  MYELIN_INLINE void defaultLeaf() { ++pending; }
  MYELIN_INLINE void leafHead(std::uint64_t v) {
    flushPending();
    if (v < 0x80) {
      *p++ = static_cast<std::uint8_t>(v);
    } else if (v < 0x4000) {
      p[0] = static_cast<std::uint8_t>(v | 0x80);
      p[1] = static_cast<std::uint8_t>(v >> 7);
      p += 2;
    } else {
      p += putVarintMultiByteInRoom(p, v);
    }
  }
  /// A float's or a double's leaf, written inline at the lengths most
  /// values take (five bytes for a float whose lowest mantissa byte is 16
  /// or more, nine or ten for a double whose lowest is not zero); others
  /// as any leaf: codec_bench's encode/Medium took 478 instructions with
  /// both through putVarintMultiByteInRoom and 434 this way, encode/Large
  /// 994 -> 904 (callgrind).
  MYELIN_INLINE void leafFloat(float f) {
    std::uint32_t bits;
    std::memcpy(&bits, &f, 4);
    const std::uint32_t v = __builtin_bswap32(bits);
    if (v < (1u << 28)) {
      leafUnsigned(v);
      return;
    }
    flushPending();
    storeWord(p, spreadGroups(v) | 0x0000000080808080ull);  // bytes 0-3 continue
    p += 5;
  }
  MYELIN_INLINE void leafDouble(double d) {
    std::uint64_t bits;
    std::memcpy(&bits, &d, 8);
    const std::uint64_t v = __builtin_bswap64(bits);
    if (v < (std::uint64_t{1} << 56)) {
      leafUnsigned(v);
      return;
    }
    flushPending();
    storeWord(p, spreadGroups(v) | 0x8080808080808080ull);
    p += putTopBytes(p, v);
  }
  MYELIN_INLINE void leafBytes(const void* s, std::size_t n) {
    if (n == 0) {
      ++pending;
      return;
    }
    flushPending();
    std::size_t h = putVarintInRoom(p, n);
    copySmall(p + h, s, n);
    p += h + n;
  }

 private:
  MYELIN_INLINE void flushPending() {
    if (pending) [[unlikely]] {
      p = putDefaultsInRoom(p, pending);
      pending = 0;
    }
  }
};

/// How deep values may nest: structs, present optionals and shared pointers
/// and Results each count a level (a vector's or map's elements sit at the
/// level of the container). A reader refuses a message nested deeper, and a
/// writer refuses to encode such a value, so that it is the caller that
/// learns of it and not the peer, whose connection would fault.
inline constexpr int kMaxNesting = 256;

/// Appends encoded values to a ByteBuffer. A value is a sequence of leaves;
/// default leaves are counted and written lazily as one `0x00` each or, for
/// three or more in a row, as one run marker. Call `finish()` at the end of a
/// message to write a pending run.
class WireWriter : public LeafValues<WireWriter> {
 public:
  /// A writer to point somewhere with reset() before use (its members
  /// are left unset: a call's writer, set by reset() as the call opens,
  /// was otherwise written twice per call).
  WireWriter() = default;
  explicit WireWriter(ByteBuffer& out) : out_(&out), pendingDefaults_(0), depth_(0), limitEnd_(~std::size_t{0}) {}
  /// Points the writer at `out` with no pending defaults.
  void reset(ByteBuffer& out) { reset(out, ~std::size_t{0}); }
  /// The same for a message the peer accepts only so much of: once writing
  /// would take `out` past `end`, the value is refused (UnsendableValueError)
  /// before the buffer grows further, instead of being encoded whole and
  /// refused after. `end` lies past the message's start by what the peer
  /// accepts and the most any one reservation asks beyond what it writes,
  /// so that only a message certain to be too large stops here. The limit
  /// is checked where the buffer must grow (room it already has is used
  /// first; the frame's exact check when it is sealed catches the rest),
  /// and binds the leaves and rawVarint(), not rawByte(), rawU64() or
  /// rawString(), which frame heads and the handshake use.
  void reset(ByteBuffer& out, std::size_t end) {
    out_ = &out;
    pendingDefaults_ = 0;
    depth_ = 0;
    limitEnd_ = end;
  }

  /// Nesting (kMaxNesting): a value one level further down, and back up.
  /// Deeper than any peer decodes is the caller's error
  /// (UnsendableValueError); the frame it was part of is dropped.
  MYELIN_INLINE void enterNested() {
    if (++depth_ > kMaxNesting) [[unlikely]] failTooDeep();
  }
  MYELIN_INLINE void leaveNested() { --depth_; }
  /// Levels entered so far: where a value about to be written sits.
  int depth() const { return depth_; }

  /// A leaf holding its type's default (zero) value.
  MYELIN_INLINE void defaultLeaf() { ++pendingDefaults_; }

  /// A non-default leaf whose encoding starts with varint `v` (v != 0).
  MYELIN_INLINE void leafHead(std::uint64_t v) {
    if (pendingDefaults_) flushDefaults();
    rawVarint(v);
  }
  /// A length-prefixed byte string leaf (strings, byte vectors).
  void leafBytes(const void* p, std::size_t n) {
    if (n == 0) {
      ++pendingDefaults_;
      return;
    }
    if (pendingDefaults_) flushDefaults();
    // One reservation for the length and the bytes, one copy.
    std::uint8_t* dst = reserve(10 + n);
    std::size_t h = putVarintInRoom(dst, n);
    copySmall(dst + h, p, n);
    out_->commit(h + n);
  }

  /// Reserves `bytes` (a bound from the value's codec; codec.h, "Room")
  /// plus the pending defaults' room, and hands both to a RoomWriter;
  /// endRoom() takes back what it wrote.
  MYELIN_INLINE RoomWriter beginRoom(std::size_t bytes) {
    return {reserve(bytes + kLeafRoom), pendingDefaults_};
  }
  MYELIN_INLINE void endRoom(RoomWriter w) {
    out_->commit(static_cast<std::size_t>(w.p - out_->tail()));
    pendingDefaults_ = w.pending;
  }

  /// Writes any pending defaults. Called at the end of a message.
  void finish() {
    if (pendingDefaults_) flushDefaults();
  }

  // Plain (non-leaf) primitives used by framing and the handshake.
  MYELIN_INLINE void rawVarint(std::uint64_t v) { out_->commit(putVarintInRoom(reserve(10), v)); }
  void rawByte(std::uint8_t b) { out_->push(b); }
  void rawU64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) out_->push(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  void rawString(std::string_view s) {
    rawVarint(s.size());
    out_->append(s.data(), s.size());
  }

  ByteBuffer& buffer() { return *out_; }
  std::uint64_t pendingDefaults() const { return pendingDefaults_; }

 private:
  /// out_->reserveTail(n), within the limit reset() set.
  MYELIN_INLINE std::uint8_t* reserve(std::size_t n) {
    ByteBuffer& out = *out_;
    if (out.capacity() - out.size() < n) [[unlikely]] growFor(out, n, limitEnd_);
    return out.tail();
  }
  MYELIN_NOINLINE static void growFor(ByteBuffer& out, std::size_t n, std::size_t end) {
    if (n > end - std::min(end, out.size())) failTooLarge();
    out.growWithin(n, end);
  }
  [[noreturn]] MYELIN_COLD static void failTooLarge() {
    throw UnsendableValueError(
        "the value would make a message larger than the peer accepts (its maxMessageSize, which "
        "Endpoint::peerMaxMessageSize() gives); refused before it was encoded whole");
  }

  MYELIN_NOINLINE void flushDefaults() {
    std::uint8_t* p = reserve(kLeafRoom);
    out_->commit(static_cast<std::size_t>(putDefaultsInRoom(p, pendingDefaults_) - p));
    pendingDefaults_ = 0;
  }

  [[noreturn]] MYELIN_COLD static void failTooDeep() {
    throw UnsendableValueError("a value nested deeper than " + std::to_string(kMaxNesting) +
                               " levels cannot be sent: no peer decodes it");
  }

  ByteBuffer* out_;
  std::uint64_t pendingDefaults_;
  int depth_;
  std::size_t limitEnd_;  // where `out_` may grow to (reset())
};

/// A message that would decode into more container memory than the
/// receiver's maxDecodeBytes. Its frame is intact: a message of plain
/// values fails only the call (or reply) it carries, and the connection
/// goes on; one that may carry references faults it (decodeCounted).
class DecodeBudgetError : public InvalidMessageError {
 public:
  using InvalidMessageError::InvalidMessageError;
};

/// Reads what WireWriter wrote, strictly: truncation, overlong varints, values
/// out of range and trailing bytes all throw InvalidMessageError.
class WireReader {
 public:
  WireReader(const std::uint8_t* p, std::size_t n) : p_(p), end_(p + n) {}

  std::size_t remaining() const { return static_cast<std::size_t>(end_ - p_); }
  const std::uint8_t* position() const { return p_; }

  /// True (and consumed) when the next leaf is a default.
  bool leafIsDefault() {
    if (pendingDefaults_) {
      --pendingDefaults_;
      return true;
    }
    if (p_ == end_) fail("truncated message: a value is missing");
    if (*p_ == 0) {
      ++p_;
      return true;
    }
    if (*p_ == 0x80) return startRun();
    return false;
  }

  /// An unsigned leaf (0 = default). A first byte below 0x80 is the whole
  /// leaf, 0 included (a default): one inline load and compare. This alone
  /// took SmallList100 decoding from 24,037 to 18,098 instructions.
  MYELIN_INLINE std::uint64_t leafUnsigned() {
    if (pendingDefaults_ == 0 && p_ != end_ && *p_ < 0x80) return *p_++;
    return leafUnsignedSlow();
  }
  /// leafUnsigned() for integer fields, whose values often take two bytes
  /// (128 to 16,383 unsigned; 64 to 8,191 and -65 to -8,192 signed, after
  /// zigzag): those are read inline too. Only integers: taking this path
  /// for a string's length as well slowed the string codec
  /// (StreamMediumMsgFromServer's client).
  MYELIN_INLINE std::uint64_t leafInteger() {
    if (pendingDefaults_ == 0 && end_ - p_ >= 2) [[likely]] {
      const std::uint8_t b0 = p_[0];
      if (b0 < 0x80) {
        ++p_;
        return b0;
      }
      const std::uint8_t b1 = p_[1];
      if (b1 - 1u < 0x7fu) {  // 1..127: a second and last byte, not overlong
        p_ += 2;
        return (b0 & 0x7fu) | static_cast<std::uint64_t>(b1) << 7;
      }
    }
    return leafUnsigned();
  }
  MYELIN_INLINE std::uint64_t leafInteger(std::uint64_t max, const char* what) {
    return atMost(leafInteger(), max, what);
  }
  MYELIN_INLINE std::uint64_t leafUnsigned(std::uint64_t max, const char* what) {
    return atMost(leafUnsigned(), max, what);
  }
  std::int64_t leafSigned() { return unzigzag(leafUnsigned()); }
  /// A float's leaf: the varint of its byte-swapped bits, five bytes long
  /// whenever the lowest mantissa byte is 16 or more (12.3f, 0.1f, most
  /// computed values). That length is read inline from one word, the rest
  /// as any leaf. The float and the double of a MediumMessage took 145
  /// instructions through leafUnsigned()'s out-of-line path and about 90
  /// this way; with the number codecs' decode inlined too, codec_bench's
  /// decodeKept/Medium went 631 -> 546 instructions, decodeKept/Large
  /// 1,428 -> 1,227, MediumList100 60,459 -> 49,960 (callgrind).
  MYELIN_INLINE float leafFloat() {
    std::uint32_t bits;
    std::uint64_t w;
    if (pendingDefaults_ == 0 && end_ - p_ >= 8 && ((w = loadWord(p_)) & 0x8080808080ull) == 0x0080808080ull &&
        ((w >> 32) & 0xff) - 1u < 0x0fu) [[likely]] {
      // Bytes 0-3 continue; byte 4 ends the leaf with bits 28-31, not all
      // zero (not overlong) and nothing above bit 31 (1 to 15). A run
      // marker (80 00) has a second byte without its high bit: not this.
      p_ += 5;
      bits = static_cast<std::uint32_t>(packGroups(w & 0x0f7f7f7f7full));
    } else {
      bits = static_cast<std::uint32_t>(leafUnsigned(0xffffffffu, "float"));
    }
    bits = __builtin_bswap32(bits);
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  /// A double's leaf: ten bytes when the lowest mantissa byte is 128 or
  /// more (45.6), nine when it is 1 to 127: most computed values take one
  /// of the two. Both are read inline from one word and one or two bytes,
  /// the rest as any leaf.
  MYELIN_INLINE double leafDouble() {
    std::uint64_t bits;
    std::uint64_t w;
    if (pendingDefaults_ == 0 && end_ - p_ >= 10 &&
        ((w = loadWord(p_)) & 0x8080808080808080ull) == 0x8080808080808080ull) [[likely]] {
      bits = takeNineOrTen(p_, w);  // what readMultiByte() does there, errors included
    } else {
      bits = leafUnsigned();
    }
    bits = __builtin_bswap64(bits);
    double d;
    std::memcpy(&d, &bits, 8);
    return d;
  }
  /// A length-prefixed byte string leaf; returns a view into the message.
  std::string_view leafBytes() {
    std::uint64_t n = leafUnsigned();  // the length; 0 is the default leaf
    if (n > remaining()) fail("truncated message: byte string runs past the end");
    auto* s = reinterpret_cast<const char*>(p_);
    p_ += n;
    return {s, static_cast<std::size_t>(n)};
  }

  /// A plain varint (no default handling). Rejects overlong forms.
  MYELIN_INLINE std::uint64_t rawVarint() {
    if (p_ != end_ && *p_ < 0x80) return *p_++;
    return rawVarintMultiByte();
  }
  std::uint8_t rawByte() {
    if (p_ == end_) fail("truncated message");
    return *p_++;
  }
  /// A little-endian 64-bit word (framing only: a call's deadline).
  std::uint64_t rawU64() {
    if (remaining() < 8) fail("truncated message: a 64-bit field is cut off");
    std::uint64_t v;
    std::memcpy(&v, p_, 8);
    p_ += 8;
    return v;  // the wire and all supported hosts are little-endian
  }
  std::string_view rawString(std::size_t maxLen = 1u << 20) {
    std::uint64_t n = rawVarint();
    if (n > remaining() || n > maxLen) fail("truncated message: string runs past the end");
    auto* s = reinterpret_cast<const char*>(p_);
    p_ += n;
    return {s, static_cast<std::size_t>(n)};
  }

  /// Accounts for `bytes` of container storage about to be allocated.
  void chargeAllocation(std::size_t count, std::size_t elemSize) {
    if (elemSize && count > budget_ / elemSize) failOverBudget();
    budget_ -= count * elemSize;
  }
  void setBudget(std::size_t b) { budget_ = b; }
  void enterNested() {
    if (++depth_ > kMaxNesting) fail("values nested deeper than 256 levels");
  }
  void leaveNested() { --depth_; }

  /// Requires the message to be consumed to its last byte.
  void finish() {
    if (pendingDefaults_) fail("run of defaults extends past the last value");
    if (p_ != end_) fail("trailing bytes after the last value");
  }

  [[noreturn]] MYELIN_COLD static void fail(const char* why) { throw InvalidMessageError(why); }
  [[noreturn]] MYELIN_COLD static void fail(const std::string& why) { throw InvalidMessageError(why); }
  [[noreturn]] MYELIN_COLD static void failOverBudget() {
    throw DecodeBudgetError("the message decodes into more memory than this side's maxDecodeBytes allows");
  }

 private:
  // The slow halves of the inline fast paths above: same checks, out of line.

  /// The leaf starts with 0x80: a run marker `80 00 varint(k - 3)` (this
  /// leaf is its first default), or else a multi-byte varint.
  MYELIN_NOINLINE bool startRun() {
    if (end_ - p_ >= 2 && p_[1] == 0) {
      p_ += 2;
      std::uint64_t extra = rawVarint();
      if (extra > (std::uint64_t{1} << 62)) fail("run of defaults too long");
      pendingDefaults_ = extra + 2;  // this leaf is the first of extra + 3
      return true;
    }
    return false;
  }
  /// leafUnsigned() when a run is pending, the message ends, or the first
  /// byte has its continuation bit set (0x80 may open a run marker).
  MYELIN_NOINLINE std::uint64_t leafUnsignedSlow() {
    if (pendingDefaults_) {
      --pendingDefaults_;
      return 0;
    }
    if (p_ == end_) fail("truncated message: a value is missing");
    if (*p_ == 0x80 && startRun()) return 0;
    return readMultiByte();  // inlined here: one call less per long leaf
  }
  /// A varint whose first byte has the continuation bit set (or that is
  /// missing). Where ten bytes remain, the end is checked once for the whole
  /// varint instead of once per byte, two-byte varints are read directly and
  /// longer ones eight bytes at a time: the stop byte is found with one
  /// count of trailing zeros and the 7-bit groups are packed with shifts and
  /// masks. Floats and doubles are 5 and 10 bytes long; the six multi-byte
  /// leaves of a MediumMessage cost 302 instructions with an unrolled byte
  /// loop and 222 like this.
  MYELIN_NOINLINE std::uint64_t rawVarintMultiByte() { return readMultiByte(); }
  MYELIN_INLINE std::uint64_t readMultiByte() {
    const std::uint8_t* q = p_;
    const std::ptrdiff_t left = end_ - q;
    // Two and three bytes also near the end: a one-way call's last integer
    // argument of 128 or more took the byte loop below (45 instructions).
    if (left >= 2 && q[1] < 0x80) {
      if (q[1] == 0) fail("bad varint: overlong encoding");
      p_ = q + 2;
      return (q[0] & 0x7fu) | static_cast<std::uint64_t>(q[1]) << 7;
    }
    if (left >= 3 && q[2] < 0x80) {
      // Three bytes: a reply's call number from the 16,384th call on (a
      // round trip's client read it in 43 instructions the long way).
      if (q[2] == 0) fail("bad varint: overlong encoding");
      p_ = q + 3;
      return (q[0] & 0x7fu) | static_cast<std::uint64_t>(q[1] & 0x7fu) << 7 | static_cast<std::uint64_t>(q[2]) << 14;
    }
    if (left < 10) return left <= 5 ? rawVarintNearEnd() : readMultiBytePadded(q, left);
    const std::uint64_t w = loadWord(q);
    std::uint64_t stops = ~w & 0x8080808080808080ull;  // high bit clear: a last byte
    if (stops != 0) return takeStopped(q, w, stops, left);
    return takeNineOrTen(q, w);
  }
  /// The varint at `q`, ten bytes or more of it there, whose first eight
  /// bytes (`w`) all continue: nine or ten bytes long, checked, consumed
  /// and returned.
  MYELIN_INLINE std::uint64_t takeNineOrTen(const std::uint8_t* q, std::uint64_t w) {
    std::uint64_t v = packGroups(w & 0x7f7f7f7f7f7f7f7full);
    std::uint8_t b = q[8];
    v |= static_cast<std::uint64_t>(b & 0x7f) << 56;
    if (b < 0x80) {
      if (b == 0) fail("bad varint: overlong encoding");
      p_ = q + 9;
      return v;
    }
    b = q[9];
    if (b > 1) fail("bad varint: more than 64 bits");
    if (b == 0) fail("bad varint: overlong encoding");
    p_ = q + 10;
    return v | std::uint64_t{1} << 63;
  }
  /// The varint at `q` whose first eight bytes are `w`, when one of them
  /// ends it (`stops`: their high bits, clear in `w`): checked, consumed and
  /// returned. A stop beyond the `left` bytes there is the zero above a
  /// word gathered near the end: the message ended inside the varint.
  MYELIN_INLINE std::uint64_t takeStopped(const std::uint8_t* q, std::uint64_t w, std::uint64_t stops,
                                          std::ptrdiff_t left) {
    int len = (__builtin_ctzll(stops) >> 3) + 1;  // 4 .. 8: the first three bytes continue
    if (len > left) fail("truncated message: varint runs past the end");
    std::uint64_t x = w & (stops ^ (stops - 1)) & 0x7f7f7f7f7f7f7f7full;  // this varint's groups
    if ((x >> (8 * (len - 1))) == 0) fail("bad varint: overlong encoding");
    p_ = q + len;
    return packGroups(x);
  }
  /// The eight bytes at `q` as a little-endian word.
  MYELIN_INLINE static std::uint64_t loadWord(const std::uint8_t* q) {
    std::uint64_t w;
    std::memcpy(&w, q, 8);
    if constexpr (std::endian::native == std::endian::big) w = __builtin_bswap64(w);
    return w;
  }
  /// Packs eight 7-bit groups held one per byte (high bits clear) into 56
  /// bits, least significant group first.
  MYELIN_INLINE static std::uint64_t packGroups(std::uint64_t x) {
    x = (x & 0x007f007f007f007full) | ((x & 0x7f007f007f007f00ull) >> 1);
    x = (x & 0x00003fff00003fffull) | ((x & 0x3fff00003fff0000ull) >> 2);
    return (x & 0x000000000fffffffull) | ((x & 0x0fffffff00000000ull) >> 4);
  }
  /// readMultiByte() with six to nine bytes left (a frame's last leaf,
  /// such as a nanosecond timestamp, nine bytes, or a closing double whose
  /// lowest mantissa byte is 1 to 127, also nine): the bytes left are
  /// gathered into a word in registers, zero above them, and read as
  /// above, a stop byte found in the zeroes meaning the message ended
  /// first. Each byte is loaded once, by overlapping loads; gathered
  /// through a buffer on the stack instead, the word's load spanned the
  /// narrower stores before it (no store forwarding) and was slower than
  /// the byte loop. A loop reading a 9-byte varint that ends
  /// its buffer (-O3, fastest of six runs): 7.7 ns and 156 instructions an
  /// iteration with the byte loop, 5.4 ns and 92 this way. With five bytes
  /// left or fewer the byte loop is as fast or faster (a 4-byte varint
  /// gathered like this took 8.1-9.1 ns against its 6.0-6.5) and reads them.
  MYELIN_NOINLINE std::uint64_t readMultiBytePadded(const std::uint8_t* q, std::ptrdiff_t left) {
    const auto n = static_cast<std::size_t>(left);  // 6 .. 9
    std::uint64_t w;
    if (n >= 8) {
      w = loadWord(q);
    } else {
      std::uint32_t lo;
      std::uint32_t hi;
      std::memcpy(&lo, q, 4);
      std::memcpy(&hi, q + n - 4, 4);
      if constexpr (std::endian::native == std::endian::big) {
        lo = __builtin_bswap32(lo);
        hi = __builtin_bswap32(hi);
      }
      w = lo | static_cast<std::uint64_t>(hi) << (8 * (n - 4));  // the overlap is the same bytes
    }
    std::uint64_t stops = ~w & 0x8080808080808080ull;
    if (stops != 0) return takeStopped(q, w, stops, left);
    // Nine bytes or ten; at most nine are left.
    if (n < 9 || q[8] >= 0x80) fail("truncated message: varint runs past the end");
    const std::uint8_t b = q[8];
    if (b == 0) fail("bad varint: overlong encoding");
    p_ = q + 9;
    return packGroups(w & 0x7f7f7f7f7f7f7f7full) | static_cast<std::uint64_t>(b) << 56;
  }
  /// The same, byte by byte, checking the end each time (five bytes left
  /// or fewer).
  MYELIN_NOINLINE std::uint64_t rawVarintNearEnd() {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) fail("truncated message: varint runs past the end");
      std::uint8_t b = *p_++;
      if (shift == 63 && b > 1) fail("bad varint: more than 64 bits");
      v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) {
        if (b == 0 && shift != 0) fail("bad varint: overlong encoding");
        return v;
      }
    }
    fail("bad varint: more than 10 bytes");
  }
  /// `v`, or a clear error naming `what` when it is above `max`.
  MYELIN_INLINE static std::uint64_t atMost(std::uint64_t v, std::uint64_t max, const char* what) {
    if (v > max) [[unlikely]] failOutOfRange(what);
    return v;
  }
  [[noreturn]] MYELIN_COLD static void failOutOfRange(const char* what) {
    fail(std::string("value out of range for ") + what);
  }

  const std::uint8_t* p_;
  const std::uint8_t* end_;
  std::uint64_t pendingDefaults_ = 0;
  std::size_t budget_ = 256u * 1024 * 1024;
  int depth_ = 0;
};

}  // namespace myelin::detail

#undef MYELIN_NOINLINE
#undef MYELIN_COLD
#undef MYELIN_INLINE
