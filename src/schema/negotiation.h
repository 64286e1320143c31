// Negotiation: from our schema and the peer's HELLO, the tables that drive
// every later message of a connection — struct field plans both ways, method
// id mapping, parameter plans, and the remoteCaps answers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "myelin/detail/codec.h"
#include "schema/local_schema.h"

namespace myelin::detail {

/// Owned storage for one FieldPlan.
struct PlanStorage {
  std::vector<std::uint16_t> order;
  FieldPlan view() const { return {order.data(), static_cast<std::uint32_t>(order.size())}; }
};

/// Immutable after construction; shared by all threads of a connection.
class Negotiated {
 public:
  Negotiated(const SchemaDescriptor& local, const std::vector<MethodRef>& localImplemented,
             const std::vector<MethodRef>& localCalled, SchemaDescriptor peer);
  // Its tables point into its own copy of the schema: it stays where it is made.
  Negotiated(const Negotiated&) = delete;
  Negotiated& operator=(const Negotiated&) = delete;

  const CodecCtx& ctx() const { return ctx_; }
  /// Names the connection in the codec context (set once, before any call).
  void setEndpoint(EndpointImpl* ep) { ctx_.ep = ep; }

  /// Wire id of local called method `k` on the peer, or -1 if the peer does
  /// not serve it compatibly.
  std::int64_t remoteMethodId(std::size_t k) const { return k < remoteId_.size() ? remoteId_[k] : -1; }
  const FieldPlan& callParamPlan(std::size_t k) const { return callPlans_[k]; }
  /// For our implemented method with wire id `id`: may the peer call it
  /// (it declared calling it), and the plan to read its parameters.
  /// How a call of implemented method `id` is taken: refused (the peer did
  /// not declare it so), accepted, or accepted as an AsyncStatus call (whose
  /// CALL_VOID frames each side numbers, docs/async-and-errors.md §3).
  static constexpr std::uint8_t kRefuse = 0, kAccept = 1, kAcceptStatus = 2;
  std::uint8_t callAcceptance(std::size_t id) const { return id < implAccept_.size() ? implAccept_[id] : kRefuse; }
  bool acceptsCall(std::size_t id) const { return callAcceptance(id) != kRefuse; }
  const FieldPlan& implParamPlan(std::size_t id) const { return implPlans_[id]; }
  std::size_t implementedCount() const { return implAccept_.size(); }
  /// The class and method a call of implemented method `id` runs (`id`
  /// accepted by callAcceptance): one lookup a call instead of a walk from
  /// the process schema's flat table through its class to the method.
  struct Implemented {
    const ClassSchema* cls;
    const MethodInfo* method;
    std::uint32_t clsIndex;
  };
  const Implemented& implemented(std::size_t id) const { return impl_[id]; }

  /// Human-readable "Class::method" of a local called method (for errors).
  std::string calledName(std::size_t k) const;

  // remoteCaps
  bool hasClass(std::string_view c) const { return has(classes_, c); }
  bool hasMethod(std::string_view c, std::string_view m) const { return has(methods_, key(c, m)); }
  bool hasMethodParam(std::string_view c, std::string_view m, std::string_view p) const {
    return has(params_, key(key(c, m), p));
  }
  bool hasMethodReturn(std::string_view c, std::string_view m) const { return has(returns_, key(c, m)); }
  bool hasStruct(std::string_view s) const { return has(structs_, s); }
  bool hasStructField(std::string_view s, std::string_view f) const { return has(fields_, key(s, f)); }
  bool hasEnum(std::string_view e) const { return has(enums_, e); }

 private:
  static std::string key(std::string_view a, std::string_view b) {
    std::string k(a);
    k += '\x1f';
    k += b;
    return k;
  }
  static bool has(const std::unordered_set<std::string>& s, std::string_view k) { return s.count(std::string(k)) != 0; }

  SchemaDescriptor local_;
  std::vector<MethodRef> localCalled_;
  std::vector<PlanStorage> sendStore_, recvStore_, callStore_, implStore_;
  std::vector<FieldPlan> send_, recv_, callPlans_, implPlans_;
  std::vector<std::int64_t> remoteId_;
  std::vector<std::uint8_t> implAccept_;
  std::vector<Implemented> impl_;
  CodecCtx ctx_;
  std::unordered_set<std::string> classes_, methods_, params_, returns_, structs_, fields_, enums_;
};

}  // namespace myelin::detail
