// Unit tests of Negotiated (docs/wire-format.md §4): struct field plans in
// both directions, method id mapping onto the peer's wire ids, parameter
// plans, which incoming calls are accepted, and every remoteCaps answer.
#include "schema/negotiation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace myelin::detail {
namespace {

MethodInfo method(std::string name, CallMode mode, std::string ret, std::vector<NamedSig> params = {}) {
  MethodInfo m;
  m.name = std::move(name);
  m.mode = mode;
  m.returnSig = std::move(ret);
  m.params = std::move(params);
  return m;
}

std::vector<std::uint16_t> planOf(const FieldPlan& p) {
  return std::vector<std::uint16_t>(p.order, p.order + p.count);
}

using Plan = std::vector<std::uint16_t>;

/// Our side: struct 0 ns::Point, struct 1 ns::LocalOnly; class 0 svc::Calc
/// (calls and serves), class 1 svc::Other (calls one, serves one).
SchemaDescriptor localDescriptor() {
  SchemaDescriptor d;
  d.structs.push_back({"ns::Point",
                       {{"x", "i32"}, {"y", "i32"}, {"label", "s"}, {"z", "f64"}, {"onlyLocal", "u8"}}});
  d.structs.push_back({"ns::LocalOnly", {{"a", "u32"}}});
  d.enums.push_back({"ns::Color", {{"kRed", -1}}});
  d.enums.push_back({"ns::LocalEnum", {}});
  ClassSchema calc;
  calc.name = "svc::Calc";
  calc.called = {
      method("fire", CallMode::kAsyncVoid, ""),                                             // k0
      method("add", CallMode::kSync, "i32", {{"a", "i32"}, {"b", "i32"}, {"d", "u8"}}),  // k1
      method("get", CallMode::kAsync, "s"),                                                 // k2
      method("changedRet", CallMode::kSync, "i32", {{"q", "u8"}}),                          // k3
      method("changedMode", CallMode::kSync, "i32"),                                        // k4
      method("missing", CallMode::kSync, ""),                                               // k5
      method("same", CallMode::kSync, "", {{"p", "u8"}, {"q", "u16"}}),                    // k6
  };
  calc.implemented = {
      method("sum", CallMode::kSync, "i64", {{"x", "i64"}, {"y", "i64"}, {"z", "i64"}}),  // id 0
      method("notify", CallMode::kAsyncVoid, "", {{"msg", "s"}}),                         // id 1
      method("fetch", CallMode::kAsync, "s"),                                             // id 2
      method("retChanged", CallMode::kSync, "i32"),                                       // id 3
      method("notCalledByPeer", CallMode::kSync, ""),                                     // id 4
  };
  d.classes.push_back(calc);
  ClassSchema other;
  other.name = "svc::Other";
  other.called = {method("o2", CallMode::kSync, "b")};    // k7
  other.implemented = {method("ping", CallMode::kSync, "")};  // id 5
  d.classes.push_back(other);
  return d;
}

std::vector<MethodRef> localImplemented() { return {{0, 0}, {0, 1}, {0, 2}, {0, 3}, {0, 4}, {1, 0}}; }
std::vector<MethodRef> localCalled() { return {{0, 0}, {0, 1}, {0, 2}, {0, 3}, {0, 4}, {0, 5}, {0, 6}, {1, 0}}; }

/// The peer: classes in a different order than ours, so its wire ids count
/// svc::Other's implemented methods first.
SchemaDescriptor peerDescriptor() {
  SchemaDescriptor d;
  d.structs.push_back({"ns::PeerOnly", {{"x", "i32"}}});
  d.structs.push_back({"ns::Point",
                       {{"label", "s"}, {"onlyPeer", "b"}, {"z", "f32"}, {"y", "i32"}, {"x", "i32"}}});
  d.enums.push_back({"ns::PeerEnum", {}});
  d.enums.push_back({"ns::Color", {{"kRed", -1}, {"kBlue", 2}}});
  ClassSchema other;
  other.name = "svc::Other";
  other.implemented = {method("o1", CallMode::kSync, ""),   // wire id 0
                       method("o2", CallMode::kSync, "b")};  // wire id 1
  d.classes.push_back(other);
  ClassSchema calc;
  calc.name = "svc::Calc";
  calc.implemented = {
      method("mul", CallMode::kSync, "i64"),                                               // 2
      method("add", CallMode::kSync, "i32", {{"b", "i32"}, {"c", "s"}, {"a", "i32"}}),  // 3
      method("get", CallMode::kAsync, "s"),                                                // 4
      method("fire", CallMode::kAsyncVoid, ""),                                            // 5
      method("changedRet", CallMode::kSync, "i64", {{"q", "u8"}}),                         // 6
      method("changedMode", CallMode::kAsync, "i32"),                                      // 7
      method("same", CallMode::kSync, "", {{"p", "u8"}, {"q", "u16"}}),                   // 8
  };
  calc.called = {
      method("sum", CallMode::kSync, "i64", {{"z", "i64"}, {"w", "s"}, {"x", "i64"}}),
      method("notify", CallMode::kAsyncVoid, "", {{"msg", "s"}}),
      method("fetch", CallMode::kSync, "s"),
      method("retChanged", CallMode::kSync, "i64"),
  };
  d.classes.push_back(calc);
  d.classes.push_back({"svc::PeerOnlyClass", {}, {}});
  return d;
}

class NegotiationTest : public ::testing::Test {
 protected:
  Negotiated n{localDescriptor(), localImplemented(), localCalled(), peerDescriptor()};
};

TEST_F(NegotiationTest, StructSendPlanIsOurIndicesInThePeersOrder) {
  // Peer order: label, onlyPeer (ours lacks), z (sig differs), y, x.
  EXPECT_EQ(planOf(n.ctx().sendStructs[0]), (Plan{2, 1, 0}));
  // A struct the peer does not have sends nothing.
  EXPECT_EQ(planOf(n.ctx().sendStructs[1]), Plan{});
}

TEST_F(NegotiationTest, StructRecvPlanIsOurOrderRestrictedToCommonFields) {
  EXPECT_EQ(planOf(n.ctx().recvStructs[0]), (Plan{0, 1, 2}));
  EXPECT_EQ(planOf(n.ctx().recvStructs[1]), Plan{});
}

TEST_F(NegotiationTest, FieldWithChangedSignatureIsInNeitherPlan) {
  // Local field 3 is z:f64; the peer's z is f32.
  for (const FieldPlan* plans : {n.ctx().sendStructs, n.ctx().recvStructs}) {
    Plan p = planOf(plans[0]);
    EXPECT_EQ(std::count(p.begin(), p.end(), 3), 0);
    EXPECT_EQ(std::count(p.begin(), p.end(), 4), 0);  // onlyLocal
  }
  EXPECT_FALSE(n.hasStructField("ns::Point", "z"));
}

TEST_F(NegotiationTest, CalledMethodsMapToThePeersWireIds) {
  EXPECT_EQ(n.remoteMethodId(0), 5);  // fire
  EXPECT_EQ(n.remoteMethodId(1), 3);  // add
  EXPECT_EQ(n.remoteMethodId(2), 4);  // get
  EXPECT_EQ(n.remoteMethodId(6), 8);  // same
  EXPECT_EQ(n.remoteMethodId(7), 1);  // svc::Other::o2, counted before svc::Calc
  EXPECT_EQ(n.calledName(1), "svc::Calc::add");
  EXPECT_EQ(n.calledName(7), "svc::Other::o2");
}

TEST_F(NegotiationTest, IncompatibleOrMissingMethodsMapToMinusOne) {
  EXPECT_EQ(n.remoteMethodId(3), -1);  // return sig differs
  EXPECT_EQ(n.remoteMethodId(4), -1);  // call mode differs
  EXPECT_EQ(n.remoteMethodId(5), -1);  // the peer has no such method
  EXPECT_EQ(n.remoteMethodId(8), -1);  // beyond our called methods
  EXPECT_EQ(n.remoteMethodId(1000), -1);

  EXPECT_FALSE(n.hasMethod("svc::Calc", "changedRet"));
  EXPECT_FALSE(n.hasMethodReturn("svc::Calc", "changedRet"));
  EXPECT_FALSE(n.hasMethod("svc::Calc", "changedMode"));
  EXPECT_TRUE(n.hasMethodReturn("svc::Calc", "changedMode"));  // same return sig, other mode
  EXPECT_FALSE(n.hasMethod("svc::Calc", "missing"));
  EXPECT_FALSE(n.hasMethodReturn("svc::Calc", "missing"));
}

TEST_F(NegotiationTest, CallParameterPlansFollowThePeersOrder) {
  // Ours: a, b, d. Peer's: b, c (added), a. d was removed on the peer.
  EXPECT_EQ(planOf(n.callParamPlan(1)), (Plan{1, 0}));
  EXPECT_EQ(planOf(n.callParamPlan(6)), (Plan{0, 1}));  // unchanged
  EXPECT_EQ(planOf(n.callParamPlan(0)), Plan{});        // no parameters
  EXPECT_EQ(planOf(n.callParamPlan(5)), Plan{});        // peer lacks the method
}

TEST_F(NegotiationTest, IncomingCallsAreAcceptedOnlyWhenThePeerDeclaresThemCompatibly) {
  EXPECT_EQ(n.implementedCount(), 6u);
  EXPECT_TRUE(n.acceptsCall(0));   // sum
  EXPECT_TRUE(n.acceptsCall(1));   // notify
  EXPECT_FALSE(n.acceptsCall(2));  // fetch: the peer calls it sync, we serve Async
  EXPECT_FALSE(n.acceptsCall(3));  // retChanged: other return sig
  EXPECT_FALSE(n.acceptsCall(4));  // not declared by the peer
  EXPECT_FALSE(n.acceptsCall(5));  // svc::Other::ping: the peer calls nothing of svc::Other
  EXPECT_FALSE(n.acceptsCall(6));  // beyond our implemented methods
  EXPECT_FALSE(n.acceptsCall(1u << 20));
}

TEST_F(NegotiationTest, ImplementedParameterPlansAreOurOrderRestrictedToThePeers) {
  // Ours: x, y, z. Peer's: z, w (added), x; y removed.
  EXPECT_EQ(planOf(n.implParamPlan(0)), (Plan{0, 2}));
  EXPECT_EQ(planOf(n.implParamPlan(1)), Plan{0});
  EXPECT_EQ(planOf(n.implParamPlan(4)), Plan{});
}

TEST_F(NegotiationTest, RemoteCapsClassesAndMethods) {
  EXPECT_TRUE(n.hasClass("svc::Calc"));
  EXPECT_TRUE(n.hasClass("svc::Other"));
  EXPECT_TRUE(n.hasClass("svc::PeerOnlyClass"));
  EXPECT_FALSE(n.hasClass("svc::Nope"));
  EXPECT_FALSE(n.hasClass("Calc"));

  EXPECT_TRUE(n.hasMethod("svc::Calc", "fire"));
  EXPECT_TRUE(n.hasMethod("svc::Calc", "add"));
  EXPECT_TRUE(n.hasMethod("svc::Calc", "get"));
  EXPECT_TRUE(n.hasMethod("svc::Other", "o2"));
  EXPECT_FALSE(n.hasMethod("svc::Other", "add"));  // right method name, wrong class
  EXPECT_FALSE(n.hasMethod("svc::Calc", "sum"));   // the peer calls it but does not serve it
  EXPECT_FALSE(n.hasMethod("svc::Nope", "add"));

  EXPECT_TRUE(n.hasMethodReturn("svc::Calc", "add"));
  EXPECT_TRUE(n.hasMethodReturn("svc::Calc", "fire"));
  EXPECT_TRUE(n.hasMethodReturn("svc::Calc", "fetch"));  // served by us, called by the peer
  EXPECT_FALSE(n.hasMethodReturn("svc::Calc", "retChanged"));
  EXPECT_FALSE(n.hasMethodReturn("svc::Calc", "mul"));  // we do not call it
}

TEST_F(NegotiationTest, RemoteCapsParameters) {
  EXPECT_TRUE(n.hasMethodParam("svc::Calc", "add", "a"));
  EXPECT_TRUE(n.hasMethodParam("svc::Calc", "add", "b"));
  EXPECT_FALSE(n.hasMethodParam("svc::Calc", "add", "c"));  // only the peer has it
  EXPECT_FALSE(n.hasMethodParam("svc::Calc", "add", "d"));  // only we have it
  EXPECT_TRUE(n.hasMethodParam("svc::Calc", "sum", "x"));
  EXPECT_TRUE(n.hasMethodParam("svc::Calc", "sum", "z"));
  EXPECT_FALSE(n.hasMethodParam("svc::Calc", "sum", "y"));
  EXPECT_FALSE(n.hasMethodParam("svc::Calc", "sum", "w"));
  EXPECT_FALSE(n.hasMethodParam("svc::Other", "add", "a"));
  EXPECT_FALSE(n.hasMethodParam("svc::Calc", "missing", "a"));
}

TEST_F(NegotiationTest, RemoteCapsStructsAndEnums) {
  EXPECT_TRUE(n.hasStruct("ns::Point"));
  EXPECT_TRUE(n.hasStruct("ns::PeerOnly"));
  EXPECT_FALSE(n.hasStruct("ns::LocalOnly"));
  EXPECT_FALSE(n.hasStruct("Point"));

  EXPECT_TRUE(n.hasStructField("ns::Point", "x"));
  EXPECT_TRUE(n.hasStructField("ns::Point", "y"));
  EXPECT_TRUE(n.hasStructField("ns::Point", "label"));
  EXPECT_FALSE(n.hasStructField("ns::Point", "z"));          // type changed
  EXPECT_FALSE(n.hasStructField("ns::Point", "onlyPeer"));   // we lack it
  EXPECT_FALSE(n.hasStructField("ns::Point", "onlyLocal"));  // the peer lacks it
  EXPECT_FALSE(n.hasStructField("ns::LocalOnly", "a"));
  EXPECT_FALSE(n.hasStructField("ns::Nope", "x"));

  EXPECT_TRUE(n.hasEnum("ns::Color"));
  EXPECT_TRUE(n.hasEnum("ns::PeerEnum"));
  EXPECT_FALSE(n.hasEnum("ns::LocalEnum"));
}

TEST(Negotiation, EmptyPeerGivesEmptyPlansAndNoCapabilities) {
  Negotiated n(localDescriptor(), localImplemented(), localCalled(), SchemaDescriptor{});
  EXPECT_EQ(planOf(n.ctx().sendStructs[0]), Plan{});
  EXPECT_EQ(planOf(n.ctx().recvStructs[0]), Plan{});
  for (std::size_t k = 0; k < localCalled().size(); ++k) EXPECT_EQ(n.remoteMethodId(k), -1) << k;
  for (std::size_t id = 0; id < localImplemented().size(); ++id) EXPECT_FALSE(n.acceptsCall(id)) << id;
  EXPECT_FALSE(n.hasClass("svc::Calc"));
  EXPECT_FALSE(n.hasStruct("ns::Point"));
  EXPECT_FALSE(n.hasEnum("ns::Color"));
}

TEST(Negotiation, IdenticalSchemasGiveIdentityPlans) {
  // Two programs built from the same headers: one serves what the other calls.
  SchemaDescriptor server;
  server.structs.push_back({"p::S", {{"a", "u8"}, {"b", "s"}, {"c", "v<u8>"}}});
  server.classes.push_back({"p::Svc", {method("m", CallMode::kSync, "S:p::S", {{"x", "u8"}, {"y", "S:p::S"}})}, {}});
  SchemaDescriptor client;
  client.structs = server.structs;
  client.classes.push_back({"p::Svc", {}, server.classes[0].implemented});

  Negotiated atClient(client, {}, {{0, 0}}, server);
  EXPECT_EQ(planOf(atClient.ctx().sendStructs[0]), (Plan{0, 1, 2}));
  EXPECT_EQ(planOf(atClient.ctx().recvStructs[0]), (Plan{0, 1, 2}));
  EXPECT_EQ(atClient.remoteMethodId(0), 0);
  EXPECT_EQ(planOf(atClient.callParamPlan(0)), (Plan{0, 1}));

  Negotiated atServer(server, {{0, 0}}, {}, client);
  EXPECT_TRUE(atServer.acceptsCall(0));
  EXPECT_EQ(planOf(atServer.implParamPlan(0)), (Plan{0, 1}));
  EXPECT_TRUE(atServer.hasClass("p::Svc"));
  EXPECT_FALSE(atServer.hasMethod("p::Svc", "m"));  // the client does not serve it
  EXPECT_TRUE(atServer.hasMethodReturn("p::Svc", "m"));
}

}  // namespace
}  // namespace myelin::detail
