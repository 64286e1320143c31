// TLS over OpenSSL (see tls.h, docs/tls.md). OpenSSL reads and writes the
// session's own buffers through two small BIOs; the socket is read and
// written outside OpenSSL's lock, so a thread blocked on the socket never
// holds it, and whole batches are encrypted into records of up to 16 KiB.
#include "transport/tls.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <vector>

#include "myelin/detail/light_mutex.h"

namespace myelin::detail {

namespace {

/// Plaintext gathered into one record: TLS's largest.
constexpr std::size_t kRecordBytes = 16 * 1024;
/// Plaintext one send() encrypts at most; what waits for the socket stays
/// below about this much (plus a record the receiving side may add).
constexpr std::size_t kMaxEncryptBytes = 256 * 1024;
/// Ciphertext read from the socket at once.
constexpr std::size_t kCipherReadBytes = 64 * 1024;
/// TLS 1.3's largest record on the wire: header, 16 KiB and 256 of expansion.
constexpr std::size_t kMaxRecordWire = 5 + 16 * 1024 + 256;

/// The session's lock: the runtime's LightMutex, tried again for a while
/// before it sleeps. Its holders work on memory for a record's time at most
/// (a few microseconds), but a thread that sleeps waits for a wake-up, ~80 us
/// on this 2-core machine when it slept on the other CPU: so a thread that
/// finds it held first tries again for up to 20 us.
class SessionMutex {
 public:
  void lock() {
    if (mu_.try_lock()) return;
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
    do {
      for (int i = 0; i < 32; ++i) {
        cpuRelax();
        if (mu_.try_lock()) return;
      }
    } while (std::chrono::steady_clock::now() < until);
    mu_.lock();
  }
  void unlock() { mu_.unlock(); }

 private:
  LightMutex mu_;
};

/// OpenSSL's queued errors as one line (and the queue emptied).
std::string opensslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    // "error:0A000086:SSL routines::certificate verify failed": keep the reason.
    const char* reason = std::strrchr(buf, ':');
    if (!out.empty()) out += "; ";
    out += reason && reason[1] ? reason + 1 : buf;
  }
  return out.empty() ? "unknown TLS error" : out;
}

bool isIpAddress(const std::string& host) {
  unsigned char tmp[16];
  return ::inet_pton(AF_INET, host.c_str(), tmp) == 1 || ::inet_pton(AF_INET6, host.c_str(), tmp) == 1;
}

}  // namespace

std::shared_ptr<TlsContext> TlsContext::create(const TlsConfig& cfg, bool server) {
  std::shared_ptr<TlsContext> c(new TlsContext(cfg, server));
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
  if (!ctx) throw InvalidConfigurationError("TLS: cannot create a context: " + opensslErrors());
  c->ctx_ = ctx;
  // TLS 1.3 preferred (OpenSSL's default maximum); 1.2 the oldest accepted.
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // A service's order of cipher suites decides, not the client's, except
  // for a client that puts ChaCha20-Poly1305 first (it has no AES
  // instructions, and AES in software would be its slowest choice).
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                               (server ? SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_PRIORITIZE_CHACHA : 0));
  auto fail = [&](const std::string& what) -> void {
    throw InvalidConfigurationError("TLS: " + what + ": " + opensslErrors());
  };
  const std::string suites = cfg.cipherSuites.empty() ? kDefaultTlsCipherSuites : cfg.cipherSuites;
  if (SSL_CTX_set_ciphersuites(ctx, suites.c_str()) != 1) fail("cannot use the TLS 1.3 cipher suites '" + suites + "'");
  if (cfg.certFile.empty() != cfg.keyFile.empty()) {
    throw InvalidConfigurationError("TLS: a certificate needs its key and a key its certificate (setOpenSsl(true, "
                                    "certFile, keyFile))");
  }
  if (server && cfg.certFile.empty()) {
    throw InvalidConfigurationError("TLS: a service needs a certificate and key (setOpenSsl(true, certFile, keyFile))");
  }
  if (!cfg.certFile.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx, cfg.certFile.c_str()) != 1) {
      fail("cannot use certificate file '" + cfg.certFile + "'");
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, cfg.keyFile.c_str(), SSL_FILETYPE_PEM) != 1) {
      fail("cannot use key file '" + cfg.keyFile + "'");
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
      fail("key file '" + cfg.keyFile + "' does not belong to certificate '" + cfg.certFile + "'");
    }
  }
  bool verify = cfg.verifyPeer.value_or(!server);
  if (verify || !cfg.caFile.empty()) {
    if (!cfg.caFile.empty()) {
      if (SSL_CTX_load_verify_locations(ctx, cfg.caFile.c_str(), nullptr) != 1) {
        fail("cannot use CA file '" + cfg.caFile + "'");
      }
      if (server) {
        // Tells clients which CA their certificate must come from.
        if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(cfg.caFile.c_str())) {
          SSL_CTX_set_client_CA_list(ctx, names);
        }
      }
    } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
      fail("cannot load the system's CA certificates");
    }
  }
  if (server && verify && cfg.caFile.empty()) {
    throw InvalidConfigurationError("TLS: a service that verifies client certificates needs a CA file "
                                    "(setTlsCaFile)");
  }
  SSL_CTX_set_verify(ctx, verify ? SSL_VERIFY_PEER | (server ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0) : SSL_VERIFY_NONE,
                     nullptr);
  if (server) {
    // No resumption: tickets would be bytes on every new connection for
    // nothing, and without a cache no state outlives a connection.
    SSL_CTX_set_num_tickets(ctx, 0);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  }
  return c;
}

TlsContext::~TlsContext() { SSL_CTX_free(static_cast<SSL_CTX*>(ctx_)); }

struct TlsSession::Impl {
  int fd = -1;
  // Guards ssl and both BIOs: held only while OpenSSL works on memory,
  // never across a socket call.
  mutable SessionMutex sslMu;
  SSL* ssl = nullptr;
  // Records OpenSSL made (its write BIO appends them here); sslMu held.
  std::vector<std::uint8_t> produced;
  // Sending side (one sender at a time): records taken from `produced`, not
  // yet written.
  std::vector<std::uint8_t> out;
  std::size_t outPos = 0;
  std::atomic<std::size_t> outLeft{0};
  std::vector<std::uint8_t> stage;  // small iovecs gathered into one record
  int brokenErrno = 0;              // a failed write: reported by the next send
  // Receiving side (one receiver at a time). Ciphertext read from the
  // socket: OpenSSL's read BIO takes [inPos, inEnd) under sslMu; the socket
  // fills the room after inEnd outside it.
  std::vector<std::uint8_t> cipherIn;
  std::size_t inPos = 0;
  std::size_t inEnd = 0;
  std::atomic<bool> inputBuffered{false};
  // `produced` holds records the receiving side made (alerts, key-update
  // answers).
  std::atomic<bool> readerOutput{false};
  // Receiving side: a failure found after plaintext was returned, reported
  // by the next recv() (EPROTO for TLS, else the socket's errno; -1: none).
  int deferredErrno = -1;
  bool deferredEof = false;
  std::atomic<bool> failed{false};  // OpenSSL reported a fatal error: the session is unusable
  mutable std::mutex errMu;
  std::string lastError;  // the first failure's reason
  int firstByte = -1;  // the first byte the peer sent (a plain peer is told apart by it)

  ~Impl() {
    if (ssl) SSL_free(ssl);
  }

  /// Records why the session failed; the first reason stays.
  void setError(std::string e) {
    failed.store(true, std::memory_order_relaxed);
    std::lock_guard lock(errMu);
    if (lastError.empty()) lastError = std::move(e);
  }

  /// Whether a read can return plaintext without the socket: decrypted
  /// bytes not yet returned, or a whole record waiting in cipherIn (OpenSSL
  /// takes a record's header and then its body from the read BIO, no more,
  /// so what is left there begins with a record). sslMu held.
  bool moreWithoutSocketLocked() const {
    if (SSL_pending(ssl) > 0) return true;
    std::size_t n = inEnd - inPos;
    if (n < 5) return false;
    const std::uint8_t* p = cipherIn.data() + inPos;
    return n >= 5 + (static_cast<std::size_t>(p[3]) << 8 | p[4]);
  }

  /// Makes room after the unread ciphertext for a socket read (at least a
  /// whole record: OpenSSL asks for more only when less than one is
  /// there); sslMu held. Returns where the read goes.
  std::uint8_t* roomLocked() {
    if (inPos == inEnd) {
      inPos = inEnd = 0;
    } else if (cipherIn.size() - inEnd < kMaxRecordWire) {
      std::memmove(cipherIn.data(), cipherIn.data() + inPos, inEnd - inPos);
      inEnd -= inPos;
      inPos = 0;
    }
    return cipherIn.data() + inEnd;
  }

  /// Moves the records OpenSSL made to `out` (without a copy when `out` is
  /// written out); sslMu held.
  void takeOutputLocked() {
    readerOutput.store(false, std::memory_order_relaxed);
    if (produced.empty()) return;
    if (outPos == out.size()) {
      out.swap(produced);
      outPos = 0;
    } else {
      out.insert(out.end(), produced.begin(), produced.end());
    }
    produced.clear();
    outLeft.store(out.size() - outPos, std::memory_order_relaxed);
  }

  /// Writes what waits in `out` as far as the socket takes it. True when
  /// nothing waits; false with errno otherwise.
  bool flushOut() {
    if (brokenErrno) {
      errno = brokenErrno;
      return false;
    }
    if (readerOutput.load(std::memory_order_relaxed)) {
      std::lock_guard lock(sslMu);
      takeOutputLocked();
    }
    while (outPos < out.size()) {
      ssize_t n = ::send(fd, out.data() + outPos, out.size() - outPos, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) brokenErrno = errno;
        return false;
      }
      outPos += static_cast<std::size_t>(n);
      outLeft.store(out.size() - outPos, std::memory_order_relaxed);
    }
    out.clear();
    outPos = 0;
    return true;
  }

  // OpenSSL's two BIOs: the read BIO serves [inPos, inEnd) of cipherIn
  // (empty means "retry", not the end), the write BIO appends to
  // `produced`. Both are used under sslMu only. OpenSSL's memory BIOs
  // cost one more copy each way: RoundTripLargeMsgList at 100 threads with
  // TLS did 3,146 RPC/s with them and 4,348 without (medians of 3 runs).
  static Impl& of(BIO* b) { return *static_cast<Impl*>(BIO_get_data(b)); }
  static int bioRead(BIO* b, char* buf, std::size_t len, std::size_t* got) {
    Impl& s = of(b);
    BIO_clear_retry_flags(b);
    std::size_t n = std::min(len, s.inEnd - s.inPos);
    *got = n;
    if (n == 0) {
      BIO_set_retry_read(b);
      return 0;
    }
    std::memcpy(buf, s.cipherIn.data() + s.inPos, n);
    s.inPos += n;
    return 1;
  }
  static int bioWrite(BIO* b, const char* buf, std::size_t len, std::size_t* put) {
    Impl& s = of(b);
    BIO_clear_retry_flags(b);
    // As bytes: from `const char*` into bytes the insert was a 16-byte
    // loop (2 % of the client's samples in RoundTripLargeMsgList with TLS);
    // between like types it is one memmove.
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(buf);
    s.produced.insert(s.produced.end(), bytes, bytes + len);
    *put = len;
    return 1;
  }
  static long bioReadCtrl(BIO* b, int cmd, long, void*) {
    if (cmd == BIO_CTRL_PENDING) return static_cast<long>(of(b).inEnd - of(b).inPos);
    return cmd == BIO_CTRL_FLUSH ? 1 : 0;
  }
  static long bioWriteCtrl(BIO*, int cmd, long, void*) { return cmd == BIO_CTRL_FLUSH ? 1 : 0; }
  static const BIO_METHOD* method(bool reading) {
    auto make = [](const char* name, bool r) {
      BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, name);
      if (!m) return m;
      if (r) {
        BIO_meth_set_read_ex(m, bioRead);
        BIO_meth_set_ctrl(m, bioReadCtrl);
      } else {
        BIO_meth_set_write_ex(m, bioWrite);
        BIO_meth_set_ctrl(m, bioWriteCtrl);
      }
      return m;
    };
    static const BIO_METHOD* in = make("myelin ciphertext in", true);
    static const BIO_METHOD* out = make("myelin ciphertext out", false);
    return reading ? in : out;
  }
  /// A BIO over this session's buffers, or null.
  BIO* newBio(bool reading) {
    const BIO_METHOD* m = method(reading);
    BIO* b = m ? BIO_new(m) : nullptr;
    if (b) {
      BIO_set_data(b, this);
      BIO_set_init(b, 1);
    }
    return b;
  }

  /// Encrypts `n` bytes (a record's worth at most) into `produced`, under
  /// sslMu. False on a TLS failure.
  bool encrypt(const void* p, std::size_t n) {
    if (failed.load(std::memory_order_relaxed)) return false;
    std::size_t written = 0;
    int r;
    {
      std::lock_guard lock(sslMu);
      r = SSL_write_ex(ssl, p, n, &written);
    }
    if (r == 1 && written == n) return true;
    setError("TLS: " + opensslErrors());
    return false;
  }
};

TlsSession::TlsSession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TlsSession::~TlsSession() = default;

std::unique_ptr<TlsSession> TlsSession::handshake(const TlsContext& ctx, int fd, const std::string& host,
                                                  const std::string& peer, int timeoutMs) {
  auto impl = std::make_unique<Impl>();
  Impl& s = *impl;
  s.fd = fd;
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  ERR_clear_error();
  s.ssl = SSL_new(static_cast<SSL_CTX*>(ctx.ctx_));
  BIO* rbio = s.newBio(true);
  BIO* wbio = s.newBio(false);
  if (!s.ssl || !rbio || !wbio) {
    BIO_free(rbio);
    BIO_free(wbio);
    throw ConnectionClosedError("TLS: cannot create a session: " + opensslErrors());
  }
  SSL_set_bio(s.ssl, rbio, wbio);
  const std::string what = ctx.server() ? "TLS handshake with client " + peer : "TLS handshake with " + peer;
  if (ctx.server()) {
    SSL_set_accept_state(s.ssl);
  } else {
    SSL_set_connect_state(s.ssl);
    const std::string& name = ctx.config().hostname.empty() ? host : ctx.config().hostname;
    if (!name.empty()) {
      if (isIpAddress(name)) {
        X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(s.ssl), name.c_str());
      } else {
        SSL_set_tlsext_host_name(s.ssl, name.c_str());
        SSL_set1_host(s.ssl, name.c_str());
      }
    }
  }
  s.cipherIn.resize(kCipherReadBytes);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  auto waitFor = [&](short events) {
    for (;;) {
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0) {
        throw ConnectionClosedError(what + " failed: no answer within " + std::to_string(timeoutMs) + " ms");
      }
      pollfd p{fd, events, 0};
      int r = ::poll(&p, 1, static_cast<int>(left));
      if (r > 0) return;
      if (r < 0 && errno != EINTR) throw ConnectionClosedError(what + " failed: " + std::strerror(errno));
    }
  };
  auto flushAll = [&] {
    {
      std::lock_guard lock(s.sslMu);
      s.takeOutputLocked();
    }
    while (!s.flushOut()) {
      if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
      waitFor(POLLOUT);
    }
    return true;
  };
  // A peer's first byte that cannot begin a TLS record (handshake 22, alert
  // 21) means it speaks plain Myelin.
  auto plainPeer = [&] { return s.firstByte >= 0 && s.firstByte != 22 && s.firstByte != 21; };
  for (;;) {
    int r;
    int err;
    {
      std::lock_guard lock(s.sslMu);
      r = SSL_do_handshake(s.ssl);
      err = r == 1 ? SSL_ERROR_NONE : SSL_get_error(s.ssl, r);
    }
    std::string reason;
    if (r != 1 && err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
      if (plainPeer()) {
        // No alert: a plain peer would read it as a message.
        throw TlsPlainPeerError(what + " failed: the peer does not speak TLS (it sent plain data; is TLS off " +
                                (ctx.server() ? std::string("on the client?)") : std::string("on the service?)")));
      }
      long verify = SSL_get_verify_result(s.ssl);
      reason = opensslErrors();
      if (verify != X509_V_OK && (SSL_get_verify_mode(s.ssl) & SSL_VERIFY_PEER)) {
        reason = std::string("certificate verify failed: ") + X509_verify_cert_error_string(verify);
      }
    }
    // Our records (or the alert that says why we stop) go out first.
    bool sent = flushAll();
    if (r == 1) break;
    if (!reason.empty()) throw ConnectionClosedError(what + " failed: " + reason);
    if (!sent) throw ConnectionClosedError(what + " failed: " + std::strerror(errno));
    if (err == SSL_ERROR_WANT_WRITE) continue;
    waitFor(POLLIN);
    std::uint8_t* room;
    {
      std::lock_guard lock(s.sslMu);
      room = s.roomLocked();
    }
    ssize_t n = ::recv(fd, room, s.cipherIn.size() - s.inEnd, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
    if (n <= 0) {
      throw ConnectionClosedError(what + " failed: the peer closed the connection" +
                                  (n < 0 ? std::string(" (") + std::strerror(errno) + ")" : std::string()));
    }
    if (s.firstByte < 0) s.firstByte = room[0];
    std::lock_guard lock(s.sslMu);
    s.inEnd += static_cast<std::size_t>(n);
  }
  // The read that finished the handshake may have brought the peer's first
  // records too (its HELLO right behind its Finished): they wait in the
  // session, and the socket will not announce them.
  {
    std::lock_guard lock(s.sslMu);
    s.inputBuffered.store(s.moreWithoutSocketLocked(), std::memory_order_relaxed);
  }
  return std::unique_ptr<TlsSession>(new TlsSession(std::move(impl)));
}

long TlsSession::send(const iovec* iov, int count) {
  Impl& s = *impl_;
  if (!s.flushOut()) return -1;
  if (count == 0) return 0;
  std::size_t taken = 0;
  bool ok = true;
  ERR_clear_error();
  s.stage.clear();  // the sender's own: gathered without the lock
  // The lock is taken for each record, not for the whole send: the thread
  // reading this connection decrypts under the same lock, and waited up to
  // the time 256 KiB take to encrypt (~80 us) before. The reader of
  // RoundTripMediumMsgListAsyncCB's service (1 thread, TLS) found it held
  // 2,328 times in 3 s and slept 222 ms in all; see docs/benchmarks.md.
  for (int i = 0; i < count && ok && taken < kMaxEncryptBytes; ++i) {
    const auto* p = static_cast<const std::uint8_t*>(iov[i].iov_base);
    const std::size_t len = std::min(iov[i].iov_len, kMaxEncryptBytes - taken);
    std::size_t n = len;
    if (s.stage.empty() && (n >= kRecordBytes || i + 1 == count)) {
      // Large, or alone: a record at a time, straight from the iovec.
      while (n && ok) {
        const std::size_t k = std::min(n, kRecordBytes);
        ok = s.encrypt(p, k);
        p += k;
        n -= k;
      }
    } else {
      while (n && ok) {
        std::size_t k = std::min(n, kRecordBytes - s.stage.size());
        s.stage.insert(s.stage.end(), p, p + k);
        p += k;
        n -= k;
        if (s.stage.size() == kRecordBytes) {
          ok = s.encrypt(s.stage.data(), s.stage.size());
          s.stage.clear();
        }
      }
    }
    if (ok) taken += len;
  }
  if (ok && !s.stage.empty()) ok = s.encrypt(s.stage.data(), s.stage.size());
  {
    std::lock_guard lock(s.sslMu);
    s.takeOutputLocked();
  }
  if (!ok) {
    errno = EPROTO;
    return -1;
  }
  // The records belong to the session now: a full socket only delays them.
  if (!s.flushOut() && errno != EAGAIN && errno != EWOULDBLOCK) return -1;
  return static_cast<long>(taken);
}

bool TlsSession::outputPending() const {
  return impl_->outLeft.load(std::memory_order_relaxed) != 0 || impl_->readerOutput.load(std::memory_order_relaxed);
}

long TlsSession::recv(void* buf, std::size_t n) {
  Impl& s = *impl_;
  if (s.deferredEof || s.deferredErrno >= 0) {  // found while returning plaintext
    s.inputBuffered.store(false, std::memory_order_relaxed);
    if (s.deferredEof) return 0;
    errno = s.deferredErrno;
    return -1;
  }
  if (s.failed.load(std::memory_order_relaxed)) {
    errno = EPROTO;
    return -1;
  }
  auto* out = static_cast<std::uint8_t*>(buf);
  std::size_t got = 0;
  bool readSocket = false;
  bool socketFull = false;  // the last socket read filled the room
  // Returns what was read; what ends the stream comes with the next call.
  auto finish = [&](int err, bool eof) -> long {
    if (got) {
      s.deferredErrno = eof ? -1 : err;
      s.deferredEof = eof;
      s.inputBuffered.store(true, std::memory_order_relaxed);  // come back for it
      return static_cast<long>(got);
    }
    s.inputBuffered.store(false, std::memory_order_relaxed);
    if (eof) return 0;
    errno = err;
    return -1;
  };
  for (;;) {
    std::size_t k = 0;
    int r;
    int err;
    bool more = false;  // the buffer filled: more can be decrypted without the socket
    std::uint8_t* room = nullptr;  // OpenSSL wants more: where the socket read goes
    {
      std::lock_guard lock(s.sslMu);
      ERR_clear_error();
      r = SSL_read_ex(s.ssl, out + got, n - got, &k);
      err = r == 1 ? SSL_ERROR_NONE : SSL_get_error(s.ssl, r);
      if (!s.produced.empty()) s.readerOutput.store(true, std::memory_order_relaxed);
      if (err == SSL_ERROR_SSL || err == SSL_ERROR_SYSCALL) s.setError("TLS: " + opensslErrors());
      if (r == 1 && got + k == n) more = s.moreWithoutSocketLocked();
      if (err == SSL_ERROR_WANT_READ) room = s.roomLocked();
    }
    if (r == 1) {
      got += k;
      if (got == n) {
        // The buffer is full: no poll will say what is left in the session.
        s.inputBuffered.store(more, std::memory_order_relaxed);
        return static_cast<long>(got);
      }
      continue;
    }
    if (err == SSL_ERROR_ZERO_RETURN) return finish(0, true);  // the peer's close_notify
    if (err != SSL_ERROR_WANT_READ) return finish(EPROTO, false);
    // OpenSSL needs more ciphertext: read the socket, again only while the
    // last read filled the room (the socket likely has more), so that a
    // large frame comes in one call rather than one call and poll each
    // (RoundTripLargeMsgList, 100 threads, TLS: 4,348 -> 6,462 RPC/s,
    // medians of 3 runs).
    if (got && readSocket && !socketFull) {
      s.inputBuffered.store(false, std::memory_order_relaxed);
      return static_cast<long>(got);
    }
    const std::size_t roomBytes = s.cipherIn.size() - s.inEnd;
    ssize_t m;
    do {
      m = ::recv(s.fd, room, roomBytes, MSG_DONTWAIT);
    } while (m < 0 && errno == EINTR);
    if (m < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      s.inputBuffered.store(false, std::memory_order_relaxed);
      if (got) return static_cast<long>(got);
      return -1;  // errno EAGAIN: nothing there
    }
    if (m < 0) return finish(errno, false);
    if (m == 0) {
      bool midRecord;
      {
        std::lock_guard lock(s.sslMu);
        midRecord = SSL_has_pending(s.ssl) == 1 || s.inEnd > s.inPos;
      }
      if (!midRecord) return finish(0, true);
      s.setError("TLS: the peer closed the connection in the middle of a record");
      return finish(EPROTO, false);
    }
    readSocket = true;
    socketFull = static_cast<std::size_t>(m) == roomBytes;
    std::lock_guard lock(s.sslMu);
    s.inEnd += static_cast<std::size_t>(m);
  }
}

bool TlsSession::inputBuffered() const { return impl_->inputBuffered.load(std::memory_order_relaxed); }

std::string TlsSession::lastError() const {
  std::lock_guard lock(impl_->errMu);
  return impl_->lastError;
}

std::string TlsSession::describe() const {
  std::lock_guard lock(impl_->sslMu);
  std::string d = std::string(SSL_get_version(impl_->ssl)) + " " + SSL_get_cipher_name(impl_->ssl);
  if (X509* cert = SSL_get0_peer_certificate(impl_->ssl)) {
    char name[256];
    X509_NAME_oneline(X509_get_subject_name(cert), name, sizeof name);
    d += std::string(", peer ") + name;
  }
  return d;
}

}  // namespace myelin::detail
