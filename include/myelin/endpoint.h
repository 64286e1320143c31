// Endpoints: one connection to a peer, the handle user code holds, and the
// ambient "current endpoint" of a thread that remote calls use.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "myelin/async.h"
#include "myelin/config.h"
#include "myelin/control.h"
#include "myelin/errors.h"
#include "myelin/result.h"
#include "myelin/stats.h"

namespace myelin {

namespace detail {
struct ObjectCore;
struct ObjectAccess;
}  // namespace detail

/// Base of an interface class: its public methods become remote calls.
/// Derive from it in a header that both sides compile. In the program that
/// calls the class, constructing an instance creates one on the peer and
/// its instance methods run there; destroying it releases the peer's
/// instance (docs/objects.md). Instances are identities: not copyable, not
/// movable.
class EndpointClass {
 protected:
  EndpointClass() noexcept = default;
  /// Releases the peer's instance (a proxy), or withdraws this object from
  /// every peer it was exported to.
  ~EndpointClass();

 public:
  EndpointClass(const EndpointClass&) = delete;
  EndpointClass& operator=(const EndpointClass&) = delete;

 private:
  mutable detail::ObjectCore* myelinCore_ = nullptr;  // read and set atomically (ObjectAccess)
  friend struct detail::ObjectAccess;
};

/// Base of a class served on both sides of a connection (symmetric peers):
/// both programs implement it, and each calls the other's through the
/// proxy myelin-gen emits, `remote::<Class>` (docs/objects.md §6).
class CommonEndpointClass : public EndpointClass {
 protected:
  CommonEndpointClass() noexcept = default;
  ~CommonEndpointClass() = default;
};

namespace detail {
class EndpointImpl;
}

/// A connection to one peer. Copies share the connection. Calls on a closed
/// endpoint throw ConnectionClosedError.
///
/// @par Thread Safety
/// Every member may be called from any thread.
class Endpoint {
 public:
  Endpoint() = default;
  explicit Endpoint(std::shared_ptr<detail::EndpointImpl> impl) : impl_(std::move(impl)) {}

  /// True while calls can flow.
  bool isConnected() const;
  /// Closes the connection. Pending calls end with ConnectionClosedError.
  void disconnect();
  EndpointState getState() const;
  /// Why the endpoint faulted or closed ("" while connected).
  std::string getError() const;
  /// Blocks until every call made through this endpoint (including
  /// fire-and-forget calls, which are confirmed by the peer) has run and
  /// every reply callback has finished. timeoutMs < 0: no limit. Returns
  /// false on timeout or if the endpoint closed first.
  bool waitForIdle(std::int64_t timeoutMs = -1);
  /// Address of the peer as "host:port".
  std::string remoteAddress() const;
  /// The connection's TLS protocol and cipher suite, and the subject of the
  /// peer's certificate if it presented one; "" without TLS.
  std::string tlsInfo() const;
  /// The largest message the peer accepts (its maxMessageSize, announced in
  /// the handshake): a call or a result that would be larger is refused
  /// with UnsendableValueError where it is encoded, and fails alone.
  /// 0 for an empty Endpoint.
  std::uint64_t peerMaxMessageSize() const;
  /// Counters of this side of the connection since it connected or since the
  /// last reset; `reset` starts a new interval.
  EndpointStats getLocalStats(bool reset = false);

  explicit operator bool() const { return impl_ != nullptr; }
  bool operator==(const Endpoint& o) const { return impl_ == o.impl_; }
  const std::shared_ptr<detail::EndpointImpl>& impl() const { return impl_; }

 private:
  std::shared_ptr<detail::EndpointImpl> impl_;
};

/// Makes `ep` the current endpoint of this thread for its lifetime; remote
/// calls made on this thread go to it. Nests: the innermost wins.
/// Must be destroyed on the thread that created it.
class EndpointCtx {
 public:
  explicit EndpointCtx(const Endpoint& ep);
  ~EndpointCtx();
  EndpointCtx(const EndpointCtx&) = delete;
  EndpointCtx& operator=(const EndpointCtx&) = delete;

  /// The current endpoint of this thread; throws NoEndpointOnStackError if
  /// there is none.
  static Endpoint current();
  /// True if this thread has a current endpoint.
  static bool hasCurrent();

 private:
  detail::EndpointImpl* prev_;
  std::shared_ptr<detail::EndpointImpl> keep_;
};

}  // namespace myelin
