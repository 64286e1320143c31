// Byte-level writer and reader of Myelin's value encoding (docs/wire-format.md):
// varints, zigzag, the `default` leaf marker and runs of defaults, strict
// decoding. Header-only because generated serializers inline these calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <string_view>

#include "myelin/errors.h"

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
  void grow(std::size_t n) {
    std::size_t want = size_ + n;
    std::size_t cap = cap_ ? cap_ * 2 : 256;
    while (cap < want) cap *= 2;
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

/// Writes LEB128 varint `v` at `p`; returns bytes written.
inline std::size_t putVarint(std::uint8_t* p, std::uint64_t v) {
  std::size_t n = 0;
  while (v >= 0x80) {
    p[n++] = static_cast<std::uint8_t>(v | 0x80);
    v >>= 7;
  }
  p[n++] = static_cast<std::uint8_t>(v);
  return n;
}

inline std::uint64_t zigzag(std::int64_t v) {
  return (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63);
}
inline std::int64_t unzigzag(std::uint64_t v) {
  return static_cast<std::int64_t>(v >> 1) ^ -static_cast<std::int64_t>(v & 1);
}

/// Appends encoded values to a ByteBuffer. A value is a sequence of leaves;
/// default leaves are counted and written lazily as one `0x00` each or, for
/// three or more in a row, as one run marker. Call `finish()` at the end of a
/// message to write a pending run.
class WireWriter {
 public:
  WireWriter() = default;
  explicit WireWriter(ByteBuffer& out) : out_(&out) {}
  /// Points the writer at `out` with no pending defaults.
  void reset(ByteBuffer& out) {
    out_ = &out;
    pendingDefaults_ = 0;
  }

  /// A leaf holding its type's default (zero) value.
  void defaultLeaf() { ++pendingDefaults_; }

  /// A non-default leaf whose encoding starts with varint `v` (v != 0).
  void leafHead(std::uint64_t v) {
    if (pendingDefaults_) flushDefaults();
    rawVarint(v);
  }
  /// A leaf whose value is the unsigned integer `v` (0 = default).
  void leafUnsigned(std::uint64_t v) {
    if (v == 0) {
      ++pendingDefaults_;
    } else {
      leafHead(v);
    }
  }
  void leafSigned(std::int64_t v) { leafUnsigned(zigzag(v)); }
  void leafFloat(float f) {
    std::uint32_t bits;
    std::memcpy(&bits, &f, 4);
    leafUnsigned(__builtin_bswap32(bits));
  }
  void leafDouble(double d) {
    std::uint64_t bits;
    std::memcpy(&bits, &d, 8);
    leafUnsigned(__builtin_bswap64(bits));
  }
  /// A length-prefixed byte string leaf (strings, byte vectors).
  void leafBytes(const void* p, std::size_t n) {
    if (n == 0) {
      ++pendingDefaults_;
      return;
    }
    if (pendingDefaults_) flushDefaults();
    std::uint8_t* dst = out_->reserveTail(10 + n);
    std::size_t h = putVarint(dst, n);
    std::memcpy(dst + h, p, n);
    out_->commit(h + n);
  }

  /// Writes any pending defaults. Called at the end of a message.
  void finish() {
    if (pendingDefaults_) flushDefaults();
  }

  // Plain (non-leaf) primitives used by framing and the handshake.
  void rawVarint(std::uint64_t v) { out_->commit(putVarint(out_->reserveTail(10), v)); }
  void rawByte(std::uint8_t b) { out_->push(b); }
  void rawString(std::string_view s) {
    rawVarint(s.size());
    out_->append(s.data(), s.size());
  }

  ByteBuffer& buffer() { return *out_; }
  std::uint64_t pendingDefaults() const { return pendingDefaults_; }

 private:
  void flushDefaults() {
    std::uint8_t* p = out_->reserveTail(12);
    if (pendingDefaults_ < 3) {
      p[0] = 0;
      if (pendingDefaults_ == 2) p[1] = 0;
      out_->commit(pendingDefaults_);
    } else {
      p[0] = 0x80;
      p[1] = 0x00;
      out_->commit(2 + putVarint(p + 2, pendingDefaults_ - 3));
    }
    pendingDefaults_ = 0;
  }

  ByteBuffer* out_ = nullptr;
  std::uint64_t pendingDefaults_ = 0;
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
    if (*p_ == 0x80 && end_ - p_ >= 2 && p_[1] == 0) {
      p_ += 2;
      std::uint64_t extra = rawVarint();
      if (extra > (std::uint64_t{1} << 62)) fail("run of defaults too long");
      pendingDefaults_ = extra + 2;  // this leaf is the first of extra + 3
      return true;
    }
    return false;
  }

  std::uint64_t leafUnsigned() { return leafIsDefault() ? 0 : rawVarint(); }
  std::uint64_t leafUnsigned(std::uint64_t max, const char* what) {
    std::uint64_t v = leafUnsigned();
    if (v > max) fail(std::string("value out of range for ") + what);
    return v;
  }
  std::int64_t leafSigned() { return unzigzag(leafUnsigned()); }
  float leafFloat() {
    std::uint64_t v = leafUnsigned(0xffffffffu, "float");
    std::uint32_t bits = __builtin_bswap32(static_cast<std::uint32_t>(v));
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  double leafDouble() {
    std::uint64_t bits = __builtin_bswap64(leafUnsigned());
    double d;
    std::memcpy(&d, &bits, 8);
    return d;
  }
  /// A length-prefixed byte string leaf; returns a view into the message.
  std::string_view leafBytes() {
    if (leafIsDefault()) return {};
    std::uint64_t n = rawVarint();
    if (n > remaining()) fail("truncated message: byte string runs past the end");
    auto* s = reinterpret_cast<const char*>(p_);
    p_ += n;
    return {s, static_cast<std::size_t>(n)};
  }

  /// A plain varint (no default handling). Rejects overlong forms.
  std::uint64_t rawVarint() {
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
  std::uint8_t rawByte() {
    if (p_ == end_) fail("truncated message");
    return *p_++;
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
    if (elemSize && count > budget_ / elemSize) fail("message decodes into more memory than maxDecodeBytes allows");
    budget_ -= count * elemSize;
  }
  void setBudget(std::size_t b) { budget_ = b; }
  void enterNested() {
    if (++depth_ > kMaxDepth) fail("values nested deeper than 256 levels");
  }
  void leaveNested() { --depth_; }

  /// Requires the message to be consumed to its last byte.
  void finish() {
    if (pendingDefaults_) fail("run of defaults extends past the last value");
    if (p_ != end_) fail("trailing bytes after the last value");
  }

  [[noreturn]] static void fail(const std::string& why) { throw InvalidMessageError(why); }

 private:
  static constexpr int kMaxDepth = 256;
  const std::uint8_t* p_;
  const std::uint8_t* end_;
  std::uint64_t pendingDefaults_ = 0;
  std::size_t budget_ = 256u * 1024 * 1024;
  int depth_ = 0;
};

}  // namespace myelin::detail
