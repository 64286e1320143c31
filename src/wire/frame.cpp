// Frame parsing and length-prefix patching (see frame.h).
#include "wire/frame.h"

#include <string>

namespace myelin::detail {

std::optional<FrameSpan> peekFrameSlow(const std::uint8_t* p, std::size_t n, std::size_t maxBody) {
  std::uint64_t len = 0;
  std::size_t i = 0;
  for (;; ++i) {
    if (i == n) return std::nullopt;
    if (i == kMaxLengthPrefix) throw InvalidMessageError("bad frame length: prefix longer than 5 bytes");
    std::uint8_t b = p[i];
    len |= static_cast<std::uint64_t>(b & 0x7f) << (7 * i);
    if (!(b & 0x80)) {
      if (b == 0 && i != 0) throw InvalidMessageError("bad frame length: overlong varint");
      break;
    }
  }
  if (len == 0) throw InvalidMessageError("empty frame");
  if (len > maxBody) {
    throw InvalidMessageError("frame of " + std::to_string(len) + " bytes exceeds maxMessageSize (" +
                              std::to_string(maxBody) + ")");
  }
  return FrameSpan{i + 1, static_cast<std::size_t>(len)};
}

void closeLongFrame(ByteBuffer& out, std::size_t start) {
  std::size_t body = out.size() - start - 1;
  std::size_t prefix = varintSize(body);
  out.reserveTail(prefix - 1);
  std::uint8_t* base = out.data() + start;
  std::memmove(base + prefix, base + 1, body);
  out.commit(prefix - 1);
  putVarint(out.data() + start, body);
}

}  // namespace myelin::detail
