// The raw TCP floor for Table C: a service that speaks the simplest possible
// protocol — [u32 length][u8 flags][payload] — and echoes a message back when
// flags & 1. One blocking thread per connection, TCP_NODELAY. Prints
// "PORT <n>" and serves until stdin closes.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "raw_io.h"

namespace {

using raw_io::readAll;
using raw_io::writeAll;

void serve(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::vector<char> buf;
  for (;;) {
    std::uint32_t len;
    if (!readAll(fd, &len, 4) || len < 1 || len > (64u << 20)) break;
    buf.resize(4 + len);
    std::memcpy(buf.data(), &len, 4);
    if (!readAll(fd, buf.data() + 4, len)) break;
    if ((buf[4] & 1) && !writeAll(fd, buf.data(), buf.size())) break;
  }
  ::close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  std::string addr = argc > 1 ? argv[1] : "127.0.0.1:0";
  auto colon = addr.rfind(':');
  int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  ::setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(std::stoi(addr.substr(colon + 1))));
  ::inet_pton(AF_INET, addr.substr(0, colon).c_str(), &a.sin_addr);
  if (::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(lfd, 128) != 0) {
    std::perror("raw_echo_service: listen");
    return 1;
  }
  socklen_t len = sizeof a;
  ::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len);
  std::printf("PORT %u\n", ntohs(a.sin_port));
  std::fflush(stdout);
  std::thread([lfd] {
    for (;;) {
      int fd = ::accept(lfd, nullptr, nullptr);
      if (fd < 0) return;
      std::thread(serve, fd).detach();
    }
  }).detach();
  char b[64];
  while (::read(0, b, sizeof b) > 0) {
  }
  ::shutdown(lfd, SHUT_RDWR);
  return 0;
}
