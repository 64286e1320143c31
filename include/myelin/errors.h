// Exceptions Myelin throws for misuse and fatal faults.
// Expected failures of a call (peer gone, remote handler failed) surface as
// these exceptions on synchronous calls and as error states on Async values.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <stdexcept>
#include <string>

namespace myelin {

/// Where an endpoint is in its life; getState() on a closed or faulted one
/// tells why it ended (Endpoint::getError()).
enum class EndpointState : std::uint8_t {
  kConnecting = 0,  ///< TCP connected, handshake not finished
  kConnected,       ///< calls flow
  kClosed,          ///< closed by either side in an orderly way
  kFaulted,         ///< closed because of an error; see getError()
};

const char* toString(EndpointState s);

/// Base of every exception Myelin throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A remote call was made on a thread with no endpoint on its stack
/// (see `EndpointCtx`).
class NoEndpointOnStackError : public Error {
 public:
  NoEndpointOnStackError()
      : Error("no Myelin endpoint on this thread's stack: call connect() on this "
              "thread or create an EndpointCtx") {}
};

/// The endpoint on the stack cannot serve this call (for example it belongs
/// to another connection than the object being called).
class WrongEndpointOnStackError : public Error {
 public:
  using Error::Error;
};

/// The peer does not implement the called method, or implements it with an
/// incompatible return type or return mode.
class UndefinedRemoteMethodError : public Error {
 public:
  using Error::Error;
};

/// A message from the peer broke the wire format. The endpoint that received
/// it faults; other endpoints are unaffected.
class InvalidMessageError : public Error {
 public:
  using Error::Error;
};

/// A value handed to a call, or returned by a method, cannot be sent: it is
/// nested deeper than any peer decodes (256 levels: structs, present
/// optionals and shared pointers, Results), or the message would be larger
/// than the peer accepts (its maxMessageSize, announced in the handshake).
/// Thrown where the value is encoded, before any of the call leaves: the
/// call fails and the connection goes on. A method's result of that kind
/// fails the call on the caller's side with RemoteCallError.
class UnsendableValueError : public Error {
 public:
  using Error::Error;
};

/// A configuration value is out of range or contradicts another one.
class InvalidConfigurationError : public Error {
 public:
  using Error::Error;
};


/// The connection closed (or faulted) before the call completed, or the call
/// was made on an endpoint that is no longer connected.
class ConnectionClosedError : public Error {
 public:
  explicit ConnectionClosedError(const std::string& what, EndpointState state = EndpointState::kClosed)
      : Error(what), state_(state) {}
  /// How the endpoint ended: closed in order, or faulted.
  EndpointState state() const noexcept { return state_; }

 private:
  EndpointState state_;
};

/// No service could be found for a connection request: the address does
/// not resolve, or nothing accepts connections there. A ConnectionClosedError
/// too, so code that handles a lost connection handles this as well.
class NoBackendServiceError : public ConnectionClosedError {
 public:
  explicit NoBackendServiceError(const std::string& what) : ConnectionClosedError(what) {}
};

/// The remote handler of a call failed (threw); `what()` carries the remote
/// message.
class RemoteCallError : public Error {
 public:
  using Error::Error;
};

/// A wait on an asynchronous value ran past its timeout.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

/// The value of an asynchronous call that was canceled (Async::cancel) was
/// asked for.
class CallCanceledError : public Error {
 public:
  using Error::Error;
};

/// Receives an exception that left user code the runtime ran for nobody to
/// catch: an `Async` callback (`then`), a service's `onConnect` or
/// `onDisconnect`, an `AsyncFrame`'s `onError`. `where` names which of
/// these ("Async callback", "onConnect", "onDisconnect", "AsyncFrame
/// onError"). It runs on the thread that ran the user's code, which then
/// goes on: the Async's other callbacks still run, the connection stays up
/// and its notices keep their order. It must not throw (what it throws is
/// dropped). It also receives what leaves a task of Myelin's pool or a
/// flush on one of its threads ("a task of Myelin's pool", "a pool
/// thread's flush", "the reader's flush": out of memory, say; the frames a
/// flush could not send stay staged for the next). A frame of a peer's
/// that cannot be run faults its connection instead (getError()).
using UncaughtHandler = std::function<void(const char* where, std::exception_ptr error)>;

/// Sets the process's handler of such exceptions and returns the one it
/// replaces. An empty handler restores the default, which writes one line
/// to stderr: "myelin: an exception left <where>: <what()>".
UncaughtHandler setUncaughtHandler(UncaughtHandler handler);

}  // namespace myelin
