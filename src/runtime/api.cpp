// The public API objects (Endpoint, EndpointCtx, ConnectionInfo, Server,
// EndpointConfig, remoteCaps) as thin fronts over the runtime.
#include <algorithm>
#include <condition_variable>
#include <deque>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "myelin/connection_info.h"
#include "myelin/remote_caps.h"
#include "myelin/remote_thread.h"
#include "runtime/endpoint_impl.h"
#include "runtime/executor.h"
#include "runtime/thread_name.h"
#include "runtime/uncaught.h"
#include "schema/local_schema.h"

namespace myelin {

using detail::EndpointImpl;

const char* toString(EndpointState s) {
  switch (s) {
    case EndpointState::kConnecting:
      return "connecting";
    case EndpointState::kConnected:
      return "connected";
    case EndpointState::kClosed:
      return "closed";
    case EndpointState::kFaulted:
      return "faulted";
  }
  return "?";
}

void EndpointConfig::validate() const {
  auto bad = [](const char* what) { throw InvalidConfigurationError(std::string("EndpointConfig: ") + what); };
  if (maxBatchMsgs == 0) bad("maxBatchMsgs must be at least 1");
  if (maxMsgBatchSize < 64) bad("maxMsgBatchSize must be at least 64 bytes");
  if (maxBatchYieldUs > 1000000) bad("maxBatchYieldUs must be at most 1 s");
  if (pollSpinUs > 1000000) bad("pollSpinUs must be at most 1 s");
  if (pollSpinMaxUs > 1000000) bad("pollSpinMaxUs must be at most 1 s");
  if (maxMessageSize < kMinMessageSize) bad("maxMessageSize must be at least 1024 bytes");
  if (maxDecodeBytes < maxMessageSize) bad("maxDecodeBytes must be at least maxMessageSize");
  if (connectTimeoutMs == 0 || handshakeTimeoutMs == 0) bad("timeouts must be positive");
  if (receiveWindowBytes < 256 * 1024) bad("receiveWindowBytes must be at least 256 KiB");
  if (maxTotalSendBytes < maxMsgBatchSize) bad("maxTotalSendBytes must be at least maxMsgBatchSize");
  if (maxAllocValues == 0) bad("maxAllocValues must be at least 1");
  if (maxAllocObjects == 0) bad("maxAllocObjects must be at least 1");
  if (maxAllocQueuedBytes < 2 * std::size_t{receiveWindowBytes} || maxAllocQueuedBytes < maxMessageSize) {
    bad("maxAllocQueuedBytes must be at least twice receiveWindowBytes and at least maxMessageSize");
  }
}

// --- Endpoint ---------------------------------------------------------------

bool Endpoint::isConnected() const { return impl_ && impl_->connected(); }
void Endpoint::disconnect() {
  if (impl_) impl_->disconnect();
}
EndpointState Endpoint::getState() const { return impl_ ? impl_->state() : EndpointState::kClosed; }
std::string Endpoint::getError() const { return impl_ ? impl_->error() : "no endpoint"; }
bool Endpoint::waitForIdle(std::int64_t timeoutMs) { return impl_ && impl_->waitForIdle(timeoutMs); }
std::string Endpoint::remoteAddress() const { return impl_ ? impl_->remoteAddress() : std::string(); }
std::string Endpoint::tlsInfo() const { return impl_ ? impl_->tlsInfo() : std::string(); }
std::uint64_t Endpoint::peerMaxMessageSize() const { return impl_ ? impl_->peerMaxMessageSize() : 0; }
EndpointStats Endpoint::getLocalStats(bool reset) { return impl_ ? impl_->stats(reset) : EndpointStats{}; }

EndpointCtx::EndpointCtx(const Endpoint& ep) : keep_(ep.impl()) {
  if (!keep_) throw NoEndpointOnStackError();
  auto& ts = detail::threadState();
  prev_ = ts.current;
  ts.current = keep_.get();
}
EndpointCtx::~EndpointCtx() { detail::threadState().current = prev_; }

namespace {

std::unique_ptr<detail::LaneScope> beginScope(std::uint8_t mode, std::uint32_t threads) {
  auto scope = std::make_unique<detail::LaneScope>();
  auto& ts = detail::threadState();
  scope->mode = mode;
  scope->threads = threads;
  scope->outer = ts.scope;
  ts.scope = scope.get();
  return scope;
}

void endScope(detail::LaneScope& scope) {
  auto& ts = detail::threadState();
  // Normally the innermost; a scope ended out of order is unlinked where it is.
  for (detail::LaneScope** link = &ts.scope; *link; link = &(*link)->outer) {
    if (*link == &scope) {
      *link = scope.outer;
      break;
    }
  }
  for (auto* list : {&scope.active, &scope.detached}) {
    for (auto& e : *list) {
      if (auto ep = e.ep.lock()) ep->endScopeLane(e.lane);
    }
  }
}

/// Waits for the lanes of `entries` within one deadline.
bool waitLanes(const std::vector<detail::LaneScope::Entry>& entries, std::int64_t timeoutMs) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs < 0 ? 0 : timeoutMs);
  bool ok = true;
  for (const auto& e : entries) {
    auto ep = e.ep.lock();
    if (!ep) return false;
    std::int64_t left = -1;
    if (timeoutMs >= 0) {
      left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
      if (left < 0) left = 0;
    }
    ok = ep->waitLaneIdle(e.lane, left) && ok;
  }
  return ok;
}

}  // namespace

RemoteThread::RemoteThread() : scope_(beginScope(detail::kLanePinned, 1)) {}
RemoteThread::~RemoteThread() { endScope(*scope_); }

RemoteThreadPool::RemoteThreadPool(int threads) {
  if (threads < 1 || static_cast<std::uint32_t>(threads) > detail::kMaxLaneParallel) {
    throw InvalidConfigurationError("RemoteThreadPool of " + std::to_string(threads) + " threads (1 to " +
                                    std::to_string(detail::kMaxLaneParallel) + ")");
  }
  scope_ = beginScope(detail::kLaneParallel, static_cast<std::uint32_t>(threads));
}
RemoteThreadPool::~RemoteThreadPool() { endScope(*scope_); }

bool RemoteThreadPool::wait(std::int64_t timeoutMs) {
  std::vector<detail::LaneScope::Entry> all = scope_->detached;
  all.insert(all.end(), scope_->active.begin(), scope_->active.end());
  return waitLanes(all, timeoutMs);
}

bool RemoteThreadPool::waitForActiveQueueIdle(std::int64_t timeoutMs) { return waitLanes(scope_->active, timeoutMs); }

void RemoteThreadPool::detachActiveQueue() {
  auto& ts = detail::threadState();
  for (auto& e : scope_->active) {
    std::erase_if(ts.own, [&](const detail::ThreadState::Own& o) { return o.lane == e.lane; });
    scope_->detached.push_back(e);
  }
  scope_->active.clear();
}

Endpoint EndpointCtx::current() {
  EndpointImpl& ep = detail::currentEndpoint();
  return Endpoint(ep.shared_from_this());
}
bool EndpointCtx::hasCurrent() {
  auto& ts = detail::threadState();
  return ts.current || ts.connected;
}

// --- Server -----------------------------------------------------------------

namespace detail {

/// The service's notices of its connections (onConnect, onDisconnect).
/// Each connection's notices run in order on a thread of their own (user
/// code may block, make calls or sleep there, and another connection's
/// notices do not wait for it); a connection's onDisconnect runs after its
/// onConnect returned. stop() waits until every connection's last notice
/// has run, so no notice runs after it returns.
class ServiceNotices : public std::enable_shared_from_this<ServiceNotices> {
 public:
  /// One connection's queue of notices; guarded by the ServiceNotices' mutex.
  struct Strand {
    std::deque<std::function<void()>> queue;
    bool running = false;  // a thread is taking this queue's notices
    bool closed = false;   // the disconnect notice is queued: no connect notice after it
  };

  /// A connection arrived: its disconnect notice is owed.
  std::shared_ptr<Strand> open() {
    std::lock_guard lock(mu_);
    ++owed_;
    return std::make_shared<Strand>();
  }

  /// Queues `fn` as the connection's connect notice (dropped when it closed
  /// first).
  void postConnect(const std::shared_ptr<Strand>& strand, std::function<void()> fn) {
    std::lock_guard lock(mu_);
    if (!strand->closed) postLocked(strand, std::move(fn));
  }

  /// Queues `fn` as the connection's last notice; the debt of open() is
  /// paid when it has run.
  void postDisconnect(const std::shared_ptr<Strand>& strand, std::function<void()> fn) {
    std::lock_guard lock(mu_);
    if (std::exchange(strand->closed, true)) return;
    // The notices thread owns `this` while this runs.
    postLocked(strand, [self = this, fn = std::move(fn)]() mutable {
      fn();
      fn = nullptr;  // what it holds (the endpoint, the user's callback) goes before the debt is paid
      std::vector<std::shared_ptr<EndpointImpl>> kept;
      {
        std::lock_guard lock(self->mu_);
        if (--self->owed_ == 0) {
          kept.swap(self->kept_);
          self->cv_.notify_all();
        }
      }
    });
  }

  /// Keeps `eps` until every debt is paid: a close another thread began
  /// reaches the close callback only while the endpoint has an owner. Called
  /// on a notice thread, whose own connection's debt is still open.
  void keepUntilPaid(std::vector<std::shared_ptr<EndpointImpl>> eps) {
    std::lock_guard lock(mu_);
    kept_.insert(kept_.end(), std::make_move_iterator(eps.begin()), std::make_move_iterator(eps.end()));
  }

  /// Whether this thread runs one of these notices.
  bool onNoticeThread() const { return current_ == this; }

  /// Waits until every opened connection's disconnect notice has run;
  /// returns at once on a notice's own thread (its connection's notices
  /// wait behind it).
  void waitAll() {
    if (onNoticeThread()) return;
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return owed_ == 0; });
  }

 private:
  void postLocked(const std::shared_ptr<Strand>& strand, std::function<void()> fn) {
    strand->queue.push_back(std::move(fn));
    if (std::exchange(strand->running, true)) return;
    // The thread owns what it uses: it may outlive the service.
    auto drain = [self = shared_from_this(), strand] {
      current_ = self.get();
      std::unique_lock lock(self->mu_);
      while (!strand->queue.empty()) {
        std::function<void()> next = std::move(strand->queue.front());
        strand->queue.pop_front();
        lock.unlock();
        next();
        next = nullptr;  // outside the lock: an endpoint it releases may close and post here
        lock.lock();
      }
      strand->running = false;
      current_ = nullptr;
    };
    try {
      std::thread([drain] {
        nameThisThread("myelin-notice");
        drain();
      }).detach();
    } catch (const std::system_error&) {
      // No thread to be had (a process or memory limit): a pool thread
      // takes this connection's notices rather than nobody, for stop()
      // waits until they ran.
      Executor::instance().post(std::function<void()>(drain));
    }
  }

  static thread_local const ServiceNotices* current_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::size_t owed_ = 0;  // opened connections whose disconnect notice has not run
  std::vector<std::shared_ptr<EndpointImpl>> kept_;  // keepUntilPaid()
};

thread_local const ServiceNotices* ServiceNotices::current_ = nullptr;

class ServerImpl {
 public:
  ServerImpl(const std::string& addr, const EndpointConfig& cfg, std::shared_ptr<const TlsContext> tls,
             std::function<void(Endpoint)> onConnect, std::function<void(Endpoint)> onDisconnect)
      : listener_(addr),
        cfg_(cfg),
        tls_(std::move(tls)),
        onConnect_(std::move(onConnect)),
        onDisconnect_(std::move(onDisconnect)) {
    LocalSchema::instance().frozen();
    thread_ = std::thread([this] {
      nameThisThread("myelin-accept");
      acceptLoop();
    });
  }
  ~ServerImpl() { stop(); }

  std::uint16_t port() const { return listener_.port(); }

  void stop() {
    std::vector<std::shared_ptr<EndpointImpl>> eps;
    {
      std::unique_lock lock(mu_);
      if (stopped_) {
        // Another caller stops it (perhaps a notice, which does not wait):
        // this one returns, like the first, after the last notice.
        cv_.wait(lock, [&] { return closedAll_; });
        lock.unlock();
        notices_->waitAll();
        return;
      }
      stopped_ = true;
    }
    listener_.close();
    if (thread_.joinable()) thread_.join();
    {
      std::lock_guard lock(live_->mu);
      eps.swap(live_->eps);
    }
    for (auto& ep : eps) ep->close(EndpointState::kClosed, "service stopped");
    {
      std::lock_guard lock(mu_);
      closedAll_ = true;
    }
    cv_.notify_all();
    // Held until their notices ran: a close that another thread began
    // reaches the close callback only while the endpoint has an owner.
    if (notices_->onNoticeThread()) {
      notices_->keepUntilPaid(std::move(eps));
    } else {
      notices_->waitAll();
    }
  }

  void wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return stopped_; });
  }

  std::vector<Endpoint> endpoints() {
    std::lock_guard lock(live_->mu);
    std::vector<Endpoint> out;
    for (auto& ep : live_->eps) {
      if (ep->connected()) out.emplace_back(ep);
    }
    return out;
  }

 private:
  void acceptLoop() {
    while (auto sock = listener_.accept()) {
      auto ep = std::make_shared<EndpointImpl>(std::move(sock), cfg_, true);
      if (tls_) ep->setTls(tls_, "");
      auto strand = notices_->open();
      // A closed connection leaves the service's list at once, on its
      // notices' thread (close() may run on its reader, under its locks):
      // its socket closes when the last handle goes, and a peer still
      // sending into a full window is reset rather than left waiting.
      ep->setOnClosed([dcb = onDisconnect_, live = std::weak_ptr<Live>(live_), notices = notices_,
                       strand](std::shared_ptr<EndpointImpl> closed) {
        notices->postDisconnect(strand, [dcb, live, closed] {
          if (dcb) runReporting("onDisconnect", [&] { dcb(Endpoint(closed)); });
          if (auto l = live.lock()) {
            std::lock_guard lock(l->mu);
            std::erase(l->eps, closed);
          }
        });
      });
      {
        std::lock_guard lock(live_->mu);
        live_->eps.push_back(ep);
      }
      ep->startServer([cb = onConnect_, notices = notices_, strand](std::shared_ptr<EndpointImpl> ready) {
        // User code may make calls: never on the reader thread.
        if (cb) {
          notices->postConnect(strand, [cb, ready] { runReporting("onConnect", [&] { cb(Endpoint(ready)); }); });
        }
      });
    }
  }

  TcpListener listener_;
  EndpointConfig cfg_;
  std::shared_ptr<const TlsContext> tls_;
  std::function<void(Endpoint)> onConnect_;
  std::function<void(Endpoint)> onDisconnect_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;
  bool closedAll_ = false;  // stop() closed every connection
  /// The connections not yet closed; shared with their close callbacks,
  /// which may outlive the service.
  struct Live {
    std::mutex mu;
    std::vector<std::shared_ptr<EndpointImpl>> eps;
  };
  std::shared_ptr<Live> live_ = std::make_shared<Live>();
  std::shared_ptr<ServiceNotices> notices_ = std::make_shared<ServiceNotices>();
  std::thread thread_;
};

}  // namespace detail

std::uint16_t Server::port() const { return impl_ ? impl_->port() : 0; }
void Server::stop() {
  if (impl_) impl_->stop();
}
void Server::wait() {
  if (impl_) impl_->wait();
}
std::vector<Endpoint> Server::endpoints() const { return impl_ ? impl_->endpoints() : std::vector<Endpoint>{}; }

// --- ConnectionInfo -----------------------------------------------------------

ConnectionInfo& ConnectionInfo::setListenAddress(std::string hostPort) {
  listen_ = std::move(hostPort);
  return *this;
}
ConnectionInfo& ConnectionInfo::setConnectAddress(std::string hostPort) {
  connect_ = std::move(hostPort);
  return *this;
}
ConnectionInfo& ConnectionInfo::setConfig(const EndpointConfig& config) {
  config_ = config;
  return *this;
}
ConnectionInfo& ConnectionInfo::setServiceThreads(unsigned n) {
  serviceThreads_ = n;
  return *this;
}
ConnectionInfo& ConnectionInfo::setOpenSsl(bool enable, std::string certFile, std::string keyFile) {
  tls_.enabled = enable;
  tls_.certFile = std::move(certFile);
  tls_.keyFile = std::move(keyFile);
  return *this;
}
ConnectionInfo& ConnectionInfo::setTlsCaFile(std::string caFile) {
  tls_.caFile = std::move(caFile);
  return *this;
}
ConnectionInfo& ConnectionInfo::setTlsVerifyPeer(bool verify) {
  tls_.verifyPeer = verify;
  return *this;
}
ConnectionInfo& ConnectionInfo::setTlsHostname(std::string name) {
  tls_.hostname = std::move(name);
  return *this;
}
ConnectionInfo& ConnectionInfo::setTlsCipherSuites(std::string suites) {
  tls_.cipherSuites = std::move(suites);
  return *this;
}
ConnectionInfo& ConnectionInfo::setOnConnect(std::function<void(Endpoint)> cb) {
  onConnect_ = std::move(cb);
  return *this;
}
ConnectionInfo& ConnectionInfo::setOnDisconnect(std::function<void(Endpoint)> cb) {
  onDisconnect_ = std::move(cb);
  return *this;
}

namespace {
unsigned defaultThreads(unsigned requested) {
  if (requested) return requested;
  return std::max(2u, std::thread::hardware_concurrency());
}
}  // namespace

Endpoint ConnectionInfo::connect() const {
  config_.validate();
  if (connect_.empty()) throw InvalidConfigurationError("ConnectionInfo: no connect address set");
  detail::Executor::instance().ensureThreads(defaultThreads(serviceThreads_));
  std::shared_ptr<const detail::TlsContext> tls;
  if (tls_.enabled) tls = detail::TlsContext::create(tls_, false);
  auto sock = detail::TcpSocket::connect(connect_, static_cast<int>(config_.connectTimeoutMs));
  auto ep = std::make_shared<EndpointImpl>(std::move(sock), config_, false);
  if (tls) ep->setTls(std::move(tls), detail::HostPort::parse(connect_).host);
  ep->startClient();
  detail::threadState().connected = ep;
  return Endpoint(ep);
}

Server ConnectionInfo::start() const {
  config_.validate();
  if (listen_.empty()) throw InvalidConfigurationError("ConnectionInfo: no listen address set");
  detail::Executor::instance().ensureThreads(defaultThreads(serviceThreads_));
  std::shared_ptr<const detail::TlsContext> tls;
  if (tls_.enabled) tls = detail::TlsContext::create(tls_, true);
  return Server(std::make_shared<detail::ServerImpl>(listen_, config_, std::move(tls), onConnect_, onDisconnect_));
}

void ConnectionInfo::listen() const { start().wait(); }

// --- remoteCaps ---------------------------------------------------------------

namespace remoteCaps {
namespace {
const detail::Negotiated& neg(const Endpoint& ep) {
  if (!ep.impl()) throw NoEndpointOnStackError();
  if (ep.getState() == EndpointState::kConnecting) throw ConnectionClosedError("handshake not finished");
  return ep.impl()->negotiated();
}
const detail::Negotiated& negCurrent() { return detail::currentEndpoint().negotiated(); }
}  // namespace

bool hasClass(std::string_view c) { return negCurrent().hasClass(c); }
bool hasMethod(std::string_view c, std::string_view m) { return negCurrent().hasMethod(c, m); }
bool hasMethodParam(std::string_view c, std::string_view m, std::string_view p) {
  return negCurrent().hasMethodParam(c, m, p);
}
bool hasMethodReturn(std::string_view c, std::string_view m) { return negCurrent().hasMethodReturn(c, m); }
bool hasStruct(std::string_view s) { return negCurrent().hasStruct(s); }
bool hasStructField(std::string_view s, std::string_view f) { return negCurrent().hasStructField(s, f); }
bool hasEnum(std::string_view e) { return negCurrent().hasEnum(e); }

bool hasClass(const Endpoint& ep, std::string_view c) { return neg(ep).hasClass(c); }
bool hasMethod(const Endpoint& ep, std::string_view c, std::string_view m) { return neg(ep).hasMethod(c, m); }
bool hasMethodParam(const Endpoint& ep, std::string_view c, std::string_view m, std::string_view p) {
  return neg(ep).hasMethodParam(c, m, p);
}
bool hasMethodReturn(const Endpoint& ep, std::string_view c, std::string_view m) {
  return neg(ep).hasMethodReturn(c, m);
}
bool hasStruct(const Endpoint& ep, std::string_view s) { return neg(ep).hasStruct(s); }
bool hasStructField(const Endpoint& ep, std::string_view s, std::string_view f) {
  return neg(ep).hasStructField(s, f);
}
bool hasEnum(const Endpoint& ep, std::string_view e) { return neg(ep).hasEnum(e); }

}  // namespace remoteCaps

}  // namespace myelin
