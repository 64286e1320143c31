// Computes the per-connection mapping tables (see negotiation.h and
// docs/wire-format.md §4): identity is name + type signature everywhere.
#include "schema/negotiation.h"

#include <unordered_map>

namespace myelin::detail {

namespace {

/// Indices of `ours` (by name + sig) in the order of `theirs`.
PlanStorage planInOrderOf(const std::vector<NamedSig>& ours, const std::vector<NamedSig>& theirs) {
  PlanStorage p;
  for (const auto& t : theirs) {
    for (std::size_t i = 0; i < ours.size(); ++i) {
      if (ours[i].name == t.name && ours[i].sig == t.sig) {
        p.order.push_back(static_cast<std::uint16_t>(i));
        break;
      }
    }
  }
  return p;
}

template <class T>
const T* findByName(const std::vector<T>& v, const std::string& name) {
  for (const auto& e : v) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

}  // namespace

Negotiated::Negotiated(const SchemaDescriptor& local, const std::vector<MethodRef>& localImplemented,
                       const std::vector<MethodRef>& localCalled, SchemaDescriptor peer)
    : local_(local), localCalled_(localCalled) {
  // Structs: we send in the peer's field order, we read in our own order
  // restricted to the fields the peer has.
  for (const auto& s : local_.structs) {
    const StructSchema* ps = findByName(peer.structs, s.name);
    static const std::vector<NamedSig> kNone;
    const auto& pf = ps ? ps->fields : kNone;
    sendStore_.push_back(planInOrderOf(s.fields, pf));
    PlanStorage recv;
    for (std::size_t i = 0; i < s.fields.size(); ++i) {
      for (const auto& f : pf) {
        if (f.name == s.fields[i].name && f.sig == s.fields[i].sig) {
          recv.order.push_back(static_cast<std::uint16_t>(i));
          fields_.insert(key(s.name, f.name));
          break;
        }
      }
    }
    recvStore_.push_back(std::move(recv));
  }
  for (const auto& ps : peer.structs) structs_.insert(ps.name);
  for (const auto& pe : peer.enums) enums_.insert(pe.name);

  // The peer's implemented methods by wire id (its descriptor order).
  std::unordered_map<std::string, std::pair<std::int64_t, const MethodInfo*>> peerImpl;
  std::int64_t id = 0;
  for (const auto& pc : peer.classes) {
    classes_.insert(pc.name);
    for (const auto& m : pc.implemented) peerImpl[key(pc.name, m.name)] = {id++, &m};
  }

  // Methods we call.
  for (std::size_t k = 0; k < localCalled_.size(); ++k) {
    const ClassSchema& c = local_.classes[localCalled_[k].cls];
    const MethodInfo& m = c.called[localCalled_[k].method];
    auto it = peerImpl.find(key(c.name, m.name));
    std::int64_t rid = -1;
    PlanStorage plan;
    if (it != peerImpl.end()) {
      const MethodInfo& pm = *it->second.second;
      if (pm.returnSig == m.returnSig) returns_.insert(key(c.name, m.name));
      if (pm.mode == m.mode && pm.instance == m.instance && pm.returnSig == m.returnSig) {
        rid = it->second.first;
        methods_.insert(key(c.name, m.name));
      }
      plan = planInOrderOf(m.params, pm.params);
      for (const auto& p : pm.params) {
        for (const auto& q : m.params) {
          if (p.name == q.name && p.sig == q.sig) params_.insert(key(key(c.name, m.name), p.name));
        }
      }
    }
    remoteId_.push_back(rid);
    callStore_.push_back(std::move(plan));
  }

  // Methods we serve: read parameters in our order, restricted to those the
  // peer's declaration (as a caller) has.
  for (const MethodRef& ref : localImplemented) {
    const ClassSchema& c = local_.classes[ref.cls];
    const MethodInfo& m = c.implemented[ref.method];
    const ClassSchema* pc = findByName(peer.classes, c.name);
    const MethodInfo* pm = pc ? findByName(pc->called, m.name) : nullptr;
    PlanStorage plan;
    bool accept = pm && pm->mode == m.mode && pm->instance == m.instance && pm->returnSig == m.returnSig;
    if (pm) {
      for (std::size_t i = 0; i < m.params.size(); ++i) {
        for (const auto& p : pm->params) {
          if (p.name == m.params[i].name && p.sig == m.params[i].sig) {
            plan.order.push_back(static_cast<std::uint16_t>(i));
            params_.insert(key(key(c.name, m.name), p.name));
            break;
          }
        }
      }
      if (pm->returnSig == m.returnSig) returns_.insert(key(c.name, m.name));
    }
    implAccept_.push_back(!accept ? kRefuse : m.mode == CallMode::kAsyncStatus ? kAcceptStatus : kAccept);
    impl_.push_back({&c, &m, ref.cls});
    implStore_.push_back(std::move(plan));
  }

  auto views = [](const std::vector<PlanStorage>& st, std::vector<FieldPlan>& out) {
    out.reserve(st.size());
    for (const auto& p : st) out.push_back(p.view());
  };
  views(sendStore_, send_);
  views(recvStore_, recv_);
  views(callStore_, callPlans_);
  views(implStore_, implPlans_);
  ctx_.sendStructs = send_.data();
  ctx_.recvStructs = recv_.data();
}

std::string Negotiated::calledName(std::size_t k) const {
  const ClassSchema& c = local_.classes[localCalled_[k].cls];
  return c.name + "::" + c.called[localCalled_[k].method].name;
}

}  // namespace myelin::detail
