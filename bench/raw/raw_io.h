// Blocking whole-buffer socket reads and writes for the raw TCP baselines
// (raw_echo_service, raw_ceiling): loop until every byte has moved.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <cstddef>

namespace raw_io {

/// Reads exactly `n` bytes; false on EOF or error.
inline bool readAll(int fd, void* p, std::size_t n) {
  auto* b = static_cast<char*>(p);
  while (n) {
    ssize_t r = ::recv(fd, b, n, 0);
    if (r <= 0) return false;
    b += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

/// Writes exactly `n` bytes; false on error.
inline bool writeAll(int fd, const void* p, std::size_t n) {
  const auto* b = static_cast<const char*>(p);
  while (n) {
    ssize_t r = ::send(fd, b, n, MSG_NOSIGNAL);
    if (r <= 0) return false;
    b += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

}  // namespace raw_io
