// The small, stable set of runtime entry points that generated code and the
// header templates call. Everything behind these declarations is compiled
// into myelin::core (src/runtime, src/schema, src/transport).
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include "myelin/class_ref.h"
#include "myelin/detail/codec.h"
#include "myelin/errors.h"

namespace myelin::detail {

class AsyncStateBase;
struct RemoteValue;
class EndpointImpl;
struct ObjectCore;
struct Lane;

/// Which side of an interface a program has: it serves the class, or it
/// calls it on the peer.
enum class Role : std::uint8_t { kImplements = 1, kCalls = 2 };

/// How a method returns; part of a method's identity on the wire.
enum class CallMode : std::uint8_t { kSync = 0, kAsyncVoid = 1, kAsync = 2, kAsyncStatus = 3, kAsyncRef = 4 };

struct NamedSig {
  std::string name;
  std::string sig;
};

class IncomingCall;
using DispatchFn = void (*)(IncomingCall& call);

struct MethodInfo {
  std::string name;
  CallMode mode = CallMode::kSync;
  std::string returnSig;  // "" for void / AsyncVoid
  std::vector<NamedSig> params;
  DispatchFn dispatch = nullptr;  // set for implemented methods
  bool instance = false;          // called on an object (docs/objects.md)
};

/// Registers a struct type's schema; returns its local index (the same
/// index for a name registered twice).
int registerStructInfo(std::string name, std::vector<NamedSig> fields);
void registerEnumInfo(std::string name, std::vector<std::pair<std::string, std::int64_t>> values);
/// Registers a class in a role; returns the local index of its first
/// method in that role's method table.
int registerClassInfo(std::string name, Role role, std::vector<MethodInfo> methods);

/// Thrown by IncomingCall::throwSkipped for a call answered without running
/// its method; `code` is the WireErrorCode of the reply (canceled, timed
/// out). Not a std::exception: nothing but the runtime catches it.
struct CallSkipped {
  std::uint8_t code;
};

/// A call being received: its parameters and the way to answer it.
/// Created by the runtime for the duration of one dispatch.
class IncomingCall {
 public:
  WireReader& reader() { return *reader_; }
  const FieldPlan& paramPlan() const { return *paramPlan_; }
  const CodecCtx& ctx() const { return *ctx_; }
  CallMode mode() const { return mode_; }

  /// Starts the reply frame for a sync call or a ready Async value; encode
  /// the value with the returned writer, then call endReply().
  WireWriter& beginReply();
  void endReply();
  /// The reply could not be encoded (or is too large for the peer): drops
  /// its frame and takes back the references it counted, while the value
  /// that holds them still lives. The caller rethrows.
  void abortReply() noexcept;
  /// Reports the failure of an AsyncStatus call to its caller's AsyncFrame.
  void sendStatusError(const Status& status);
  /// Sends the reply of an Async call once `state` completes (now, if it is
  /// already complete).
  void replyWhenReady(AsyncStateBase* state);
  /// An AsyncRef call's result: kept in the connection's value table under
  /// the call's name (values of type `type`) and, if `answer`, answered
  /// with an empty reply (or the error) once `state` completes (a call that
  /// failed is answered by the runtime). Takes no reference from the caller.
  void holdResult(AsyncStateBase* state, const std::type_info& type, bool answer = true);
  /// The object an instance method is called on (null for static methods).
  EndpointClass* object() const { return object_; }
  /// True if the call is answered without running its method: it names an
  /// object that was destroyed (a tombstone), its caller canceled it, or its
  /// deadline passed. The parameters are decoded all the same (the
  /// references they carry are counted in and released again), then
  /// throwSkipped() ends the call with the reason.
  bool skipped() const { return objectGone_ || skip_ != 0; }
  [[noreturn]] void throwSkipped() const;
  /// Why a skipped call did not run, as an error of its result and in words.
  AsyncError skipError() const;
  const char* skipReasonText() const;
  /// Exports `obj`, which a constructor call just created, to the caller:
  /// the runtime owns it from here on and deletes it with `destroy` when no
  /// reference is left. Returns the reference's wire value for the reply.
  std::uint64_t exportNew(EndpointClass* obj, void (*destroy)(EndpointClass*));

  // Runtime-owned fields.
  WireReader* reader_ = nullptr;
  const FieldPlan* paramPlan_ = nullptr;
  const CodecCtx* ctx_ = nullptr;
  CallMode mode_ = CallMode::kSync;
  void* impl_ = nullptr;
  EndpointClass* object_ = nullptr;
  ObjectCore* objectCore_ = nullptr;  // held until an Async reply is sent
  bool objectGone_ = false;
  std::uint8_t skip_ = 0;             // WireErrorCode of a call answered without running
  std::uint32_t cls_ = 0;             // the called method's class
};

using ReplyDecodeFn = void (*)(WireReader& r, const CodecCtx& c, void* out);
/// Reads a sync reply whose caller stopped waiting; returns what to let go
/// of where a destructor may run (null: nothing). Sets `invalid` (or
/// throws InvalidMessageError) for a reply that breaks the format.
using LateReplyFn = std::shared_ptr<void> (*)(WireReader& r, const CodecCtx& c, std::exception_ptr& invalid);

/// What a sync call throws when its CallTimeout ran out: a TimeoutError,
/// which the stub of a void method swallows (the caller reads
/// CallTimeout::isSyncRequestTimedOut()).
struct SyncTimeout : TimeoutError {
  using TimeoutError::TimeoutError;
};

/// A call being made from this thread. Construction finds the thread's
/// endpoint, checks that the peer has the method (else throws
/// UndefinedRemoteMethodError) and opens a frame in the thread's staging
/// buffer; exactly one send*() completes it. Destroying an unsent call
/// discards the partial frame.
class OutgoingCall;
/// Encodes a call's parameters, held at `params`, into the open `call`.
using EncodeParamsFn = void (*)(OutgoingCall& call, const void* params);

class OutgoingCall {
 public:
  /// A one-way (AsyncVoid) call of `calledMethod` on this thread's current
  /// endpoint, opened, encoded by `encode` and sent in one call of the
  /// runtime: opened, encoded and sent by three calls from the stub, a
  /// streamed SmallMessage cost 8 instructions more (callgrind).
  static void sendVoid(int calledMethod, EncodeParamsFn encode, const void* params);
  /// The same for an instance method of `target`'s peer object.
  static void sendVoidOn(int calledMethod, const EndpointClass& target, EncodeParamsFn encode, const void* params);

  OutgoingCall(int calledMethod, CallMode mode);
  /// A call of an instance method on `target`, a proxy bound to an object
  /// of a peer: it goes to that object's endpoint.
  OutgoingCall(int calledMethod, CallMode mode, const EndpointClass& target);
  OutgoingCall(const OutgoingCall&) = delete;
  OutgoingCall& operator=(const OutgoingCall&) = delete;
  // The test inline: a destructor wholly out of line cost every call a
  // call of its own (7 instructions a streamed message, callgrind).
  ~OutgoingCall() {
    if (!sent_) [[unlikely]] abandon();
  }

  WireWriter& writer() { return writer_; }
  const FieldPlan& paramPlan() const { return *paramPlan_; }
  const CodecCtx& ctx() const { return *ctx_; }

  /// An AsyncStatus call: sent as a fire-and-forget call, numbered on its
  /// lane so that a failure can find the AsyncFrame it was made in.
  void sendAsyncStatus();
  /// Sends and blocks for the reply, running calls addressed to this thread
  /// meanwhile; `decode` reads the result into `out` (may be null for void).
  /// `readLate` reads a reply that comes after this thread stopped waiting
  /// (CallTimeout), so that the references it holds are counted and let
  /// go; null for a result that holds none.
  void sendSync(ReplyDecodeFn decode, void* out, LateReplyFn readLate = nullptr);
  /// Sends; `state` completes when the reply arrives. `state` is new: no
  /// other thread can reach it yet.
  void sendAsync(AsyncStateBase* state);
  /// Sends an AsyncRef call; returns the handle's record of the value the
  /// peer will hold (one reference). `makeFetch` makes the state a fetch
  /// of the value decodes into.
  RemoteValue* sendAsyncRef(AsyncStateBase* (*makeFetch)());
  /// The endpoint the call goes to.
  EndpointImpl* endpoint() const { return ep_; }

 private:
  // A call destroyed unsent (its encoding threw): drops its partial frame.
  void abandon() noexcept;
  // Inline: defined, and called, in the runtime's one source file.
  inline OutgoingCall(struct ThreadState& ts, int calledMethod, CallMode mode);
  inline void finishAsyncVoid(struct ThreadState& ts);
  inline void open(struct ThreadState& ts, EndpointImpl& ep, int calledMethod, CallMode mode, std::uint64_t object);
  // Set by open(), which every constructor calls (a constructor that
  // throws leaves nothing to destroy): left without initialisers, which
  // GCC stored and open() stored again, 8 instructions a call.
  WireWriter writer_;
  const FieldPlan* paramPlan_;
  const CodecCtx* ctx_;
  EndpointImpl* ep_;
  Lane* lane_;
  std::size_t start_;
  std::uint32_t pendingSeq_;  // set by bindPending (Async and AsyncRef calls)
  bool sent_ = false;
  bool overCredit_ = false;       // the call used up its lane's credit (flow control)
  std::uint32_t mentionsFrom_ = 0;  // this call's first entry in the thread's pending mentions
  std::uint32_t refsFrom_ = 0;      // and in the references its encoding counted (refsSent)
  ObjectCore* target_ = nullptr;  // counts the mention when sent
  friend struct OutgoingCallAccess;
};

/// The endpoint a call made now goes to: `self`'s, for an instance call on
/// a proxy, else this thread's current one (null if it has none).
EndpointImpl* callTarget(const EndpointClass* self);
/// Before a call to `target` opens its frame: true if the value `v` will be
/// named (its holder is `target`); then, if the call could reach the holder
/// before the call that makes the value ran, this waits for that call's
/// answer. False: the value must travel inline (fetch it first).
bool prepareRemoteValueArg(RemoteValue* v, EndpointImpl* target);
/// The wire name of `v` for a call to `ep` (counted as a mention), or 0 if
/// `ep` does not hold it.
std::uint64_t mentionRemoteValue(RemoteValue* v, EndpointImpl* ep);
/// The value `id` that `ep` holds for its peer, of type `type`, with one
/// reference for the caller; throws InvalidMessageError if it holds none
/// by that name, or one of another type.
AsyncStateBase* takeHeldValue(EndpointImpl* ep, std::uint64_t id, const std::type_info& type);

/// A decoded object reference: the core (one reference for the caller, null
/// for the null reference) and the object it stands for here.
struct DecodedRef {
  ObjectCore* core = nullptr;
  EndpointClass* target = nullptr;
};
/// The wire value of a reference to `core` (null: 0) sent to `ep`'s peer:
/// exports a local object or names the peer's own (docs/objects.md §5).
/// Throws WrongEndpointOnStackError for an object of another connection.
std::uint64_t encodeRef(EndpointImpl* ep, ObjectCore* core, const ClassHooksData& h);
/// Reads a reference from `ep`'s peer; throws InvalidMessageError for an id
/// that names nothing, or an object of another class.
DecodedRef decodeRef(EndpointImpl* ep, std::uint64_t leaf, const ClassHooksData& h);
/// While the runtime makes a stand-in for a peer's object of class `h`,
/// binds `self` to that object and returns true (constructor stubs call it).
bool bindPendingProxy(EndpointClass& self, const ClassHooksData& h);
/// The local index of a registered class (ObjectCore::cls).
std::int32_t localClassIndex(const std::string& name);

/// Binds `self`, a proxy whose constructor call just returned `ref` from
/// `ep`, to the peer's new object. Throws InvalidMessageError for a value
/// that does not name an object of the peer.
void bindRemoteObject(EndpointClass& self, EndpointImpl* ep, std::uint64_t ref, const ClassHooksData& cls);
/// Lets go of the peer's new object `ref` names (a constructor's reply that
/// came after its caller stopped waiting).
void dropRemoteObject(EndpointImpl* ep, std::uint64_t ref, const ClassHooksData& cls);
/// True if `obj` is bound to an object (a proxy) or exported (a local one).
bool hasObjectCore(const EndpointClass& obj);

}  // namespace myelin::detail
