// End-to-end calls against a real service process on 127.0.0.1: every return
// mode, errors, ordering, both directions, streaming during a sync call,
// remoteCaps and framed sizes counted on the socket.
#include <gtest/gtest.h>
#include <myelin/myelin.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>
#include <type_traits>
#include <vector>

#include "calc.h"
#include "calc_gen.h"  // traits for the typed remoteCaps queries
#include "client_sink.h"
#include "eventually.h"
#include "service_fixture.h"
#include "tcp_proxy.h"
#include "varying_chunks.h"

namespace myelin_test {

// The client side of ClientSink. Runs one call at a time per lane, so the
// plain counters need no lock (a data race here would fail under TSan).
namespace {
std::uint32_t gItems = 0;
std::uint32_t gOutOfOrder = 0;
std::uint32_t gOnOtherThread = 0;
std::thread::id gCallerThread;
}  // namespace

myelin::AsyncVoid ClientSink::onItem(std::uint32_t i) {
  if (i != gItems) ++gOutOfOrder;
  if (std::this_thread::get_id() != gCallerThread) ++gOnOtherThread;
  ++gItems;
  return {};
}
namespace {
std::uint32_t gChunks = 0;
std::uint64_t gChunkBytes = 0;
std::uint32_t gFirstChunkPauseMs = 0;  // the first chunk holds its lane this long
bool gChunksVary = false;               // each chunk must be chunkOfVaryingSize(i)
std::uint32_t gWrongChunks = 0;
}  // namespace
myelin::AsyncVoid ClientSink::onChunk(std::uint32_t i, const std::string& bytes) {
  if (i == 0 && gFirstChunkPauseMs) std::this_thread::sleep_for(std::chrono::milliseconds(gFirstChunkPauseMs));
  if (gChunksVary && bytes != chunkOfVaryingSize(i)) ++gWrongChunks;
  if (i != gChunks) ++gOutOfOrder;
  ++gChunks;
  gChunkBytes += bytes.size();
  return {};
}
std::int32_t ClientSink::twice(std::int32_t x) { return 2 * x; }
std::int32_t ClientSink::twiceViaService(std::int32_t x) { return Calc::add(x, x); }

namespace {
std::atomic<std::int64_t> gProgressAtNs[3] = {};
std::int64_t steadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace
myelin::AsyncVoid ClientSink::progress(std::uint32_t step) {
  if (step < 3) gProgressAtNs[step].store(steadyNowNs());
  return {};
}

namespace {

class Calls : public ServiceTest {
 protected:

};

void expectEqual(const LargeStruct& a, const LargeStruct& b) {
  EXPECT_EQ(a.sint32Val, b.sint32Val);
  EXPECT_EQ(a.uint64Val, b.uint64Val);
  EXPECT_EQ(a.floatVal, b.floatVal);
  EXPECT_EQ(a.doubleVal, b.doubleVal);
  EXPECT_EQ(a.charVal, b.charVal);
  EXPECT_EQ(a.stringVal, b.stringVal);
  EXPECT_EQ(a.uint32Vec, b.uint32Vec);
  EXPECT_EQ(a.byteBuffer, b.byteBuffer);
  EXPECT_EQ(a.stringVec, b.stringVec);
  EXPECT_EQ(a.smallStruct.str, b.smallStruct.str);
  EXPECT_EQ(a.mediumStruct.vec2, b.mediumStruct.vec2);
  EXPECT_EQ(a.mediumStruct.optStr, b.mediumStruct.optStr);
  EXPECT_EQ(a.mood, b.mood);
}

TEST_F(Calls, SyncCallsReturnValues) {
  EXPECT_EQ(Calc::add(2, 3), 5);
  EXPECT_EQ(Calc::add(4), 5) << "default argument";
  EXPECT_EQ(Calc::echo("héllo"), "héllo");
  EXPECT_EQ(Calc::echo(std::string(100000, 'x')).size(), 100000u);
  SmallStruct s = Calc::echoSmall(makeSmall());
  EXPECT_EQ(s.val1, 123u);
  EXPECT_EQ(s.str, "Hello World");
  LargeStruct l = makeLarge();
  l.charVal = 'q';
  l.mood = Mood::kHappy;
  l.mediumStruct.optStr = "";
  expectEqual(Calc::echoLarge(l), l);
  Calc::nop();
}

/// Inside one AsyncFrame, a fire-and-forget, an AsyncStatus and an Async
/// call each with `fits` and then with `refused`: each refused call must
/// throw UnsendableValueError on this thread, and the frame must see no
/// error. Returns what the Async call with `fits` answered.
template <class V, class VoidCall, class StatusCall, class AsyncCall>
auto eachModeRefuses(const V& fits, const V& refused, VoidCall voidCall, StatusCall statusCall,
                     AsyncCall asyncCall) {
  std::vector<myelin::Status> frameErrors;
  std::remove_cvref_t<decltype(asyncCall(fits).value())> answer{};
  {
    myelin::AsyncFrame frame;
    frame.onError([&](const myelin::Status& s) { frameErrors.push_back(s); });
    voidCall(fits);
    EXPECT_THROW(voidCall(refused), myelin::UnsendableValueError);
    statusCall(fits);
    EXPECT_THROW(statusCall(refused), myelin::UnsendableValueError);
    auto a = asyncCall(fits);
    EXPECT_THROW(asyncCall(refused), myelin::UnsendableValueError);
    answer = a.value(10000);
    EXPECT_TRUE(frame.wait(10000));
  }
  EXPECT_TRUE(frameErrors.empty());
  return answer;
}

TEST_F(Calls, RemoteExceptionReachesTheCaller) {
  try {
    Calc::fail("boom 42");
    FAIL() << "expected RemoteCallError";
  } catch (const myelin::RemoteCallError& e) {
    EXPECT_NE(std::string(e.what()).find("boom 42"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(ep_.isConnected());
  EXPECT_EQ(Calc::add(1, 1), 2);
}

TEST_F(Calls, AnInvalidMessageErrorFromAHandlerFailsItsCallNotTheConnection) {
  // What the handler throws is the handler's failure, whatever its type:
  // this call's own message was valid, so only the call fails.
  try {
    Calc::failAsInvalid("a reply the handler got was invalid");
    FAIL() << "expected RemoteCallError";
  } catch (const myelin::RemoteCallError& e) {
    EXPECT_NE(std::string(e.what()).find("a reply the handler got was invalid"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(ep_.isConnected());
  EXPECT_EQ(Calc::add(1, 1), 2);
  EXPECT_TRUE(Calc::faults().empty());
}

TEST_F(Calls, AValueNestedDeeperThanAPeerDecodesFailsItsCallAlone) {
  // As deep as a peer decodes, both ways.
  EXPECT_EQ(Calc::depthOf(makeChain(256)), 256u);
  EXPECT_EQ(chainDepth(Calc::chainOf(256)), 256u);
  EXPECT_EQ(chainDepth(Calc::chainLater(256).value(10000)), 256u);
  // One level more as an argument: refused on this thread before any of
  // the call leaves; the connection goes on.
  try {
    Calc::depthOf(makeChain(257));
    FAIL() << "expected UnsendableValueError";
  } catch (const myelin::UnsendableValueError& e) {
    EXPECT_NE(std::string(e.what()).find("256 levels"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(ep_.isConnected());
  EXPECT_EQ(Calc::add(1, 1), 2);
  // As a result: the service's handler fails its call, and says why.
  try {
    Calc::chainOf(257);
    FAIL() << "expected RemoteCallError";
  } catch (const myelin::RemoteCallError& e) {
    EXPECT_NE(std::string(e.what()).find("256 levels"), std::string::npos) << e.what();
  }
  auto later = Calc::chainLater(300);
  ASSERT_TRUE(later.wait(10000));
  EXPECT_TRUE(later.isError());
  EXPECT_NE(later.errorMessage().find("256 levels"), std::string::npos) << later.errorMessage();
  EXPECT_TRUE(ep_.isConnected());
  EXPECT_EQ(Calc::add(2, 2), 4);
  EXPECT_TRUE(Calc::faults().empty());
}

TEST_F(Calls, AnArgumentNestedTooDeepIsRefusedInEveryCallMode) {
  // Fire-and-forget, AsyncStatus and Async calls encode on the caller's
  // thread too: the call throws there, nothing of it leaves, and the calls
  // around it (the same methods, 256 levels) run.
  const std::uint64_t before = Calc::depthsNoted();
  EXPECT_EQ(eachModeRefuses(makeChain(256), makeChain(257), &Calc::noteDepth, &Calc::checkDepth, &Calc::depthAsync),
            256u);
  EXPECT_TRUE(ep_.waitForIdle(10000));
  EXPECT_EQ(Calc::depthsNoted(), before + 2 * 256) << "the fitting calls ran, the refused ones never left";
  EXPECT_TRUE(ep_.isConnected());
  EXPECT_TRUE(Calc::faults().empty());
}

TEST_F(Calls, AnArgumentLargerThanThePeerAcceptsFailsItsCallAlone) {
  // The service takes messages of up to 1 MiB (service_main.cpp) and said
  // so in its HELLO; this side takes 64 MiB.
  const std::uint64_t limit = ep_.peerMaxMessageSize();
  ASSERT_EQ(limit, 1u << 20);
  // Growing an argument byte by byte: every size runs until the first that
  // would make a message of limit + 1 bytes, which is refused on this
  // thread. So the largest message the service takes is sent, and one byte
  // more is not.
  std::size_t n = limit - 64;
  std::string refusal;
  for (; n < limit && refusal.empty(); ++n) {
    try {
      EXPECT_EQ(Calc::echo(std::string(n, 'x')).size(), n);
    } catch (const myelin::UnsendableValueError& e) {
      refusal = e.what();
    }
  }
  EXPECT_NE(refusal.find("a message of " + std::to_string(limit + 1) + " bytes"), std::string::npos) << refusal;
  EXPECT_NE(refusal.find("maxMessageSize"), std::string::npos) << refusal;
  EXPECT_GT(n, limit - 60) << "a few sizes must fit";
  EXPECT_TRUE(ep_.isConnected());

  // Every call mode refuses on this thread, inside a frame that sees no
  // error, while the calls around it run.
  const std::string fits(1000, 'f');
  const std::string tooLarge(limit, 't');
  const std::uint64_t before = Calc::bytesNoted();
  EXPECT_EQ(eachModeRefuses(fits, tooLarge, &Calc::noteBytes, &Calc::checkBytes, &Calc::asyncEcho), fits);
  EXPECT_THROW(Calc::echo(tooLarge), myelin::UnsendableValueError);
  EXPECT_TRUE(ep_.waitForIdle(10000));
  EXPECT_EQ(Calc::bytesNoted(), before + 2 * fits.size()) << "the fitting calls ran, the refused ones never left";
  EXPECT_TRUE(ep_.isConnected());
  EXPECT_EQ(Calc::add(1, 1), 2);
  EXPECT_TRUE(Calc::faults().empty());
}

TEST_F(Calls, ACallWhoseArgumentsDecodeIntoMoreThanTheServiceAllowsFailsAlone) {
  // The service decodes at most 8 MiB of container memory a message
  // (service_main.cpp). 100,000 empty strings (about 100 KB on the wire,
  // 3.2 MB decoded) run; 400,000 (400 KB, 12.8 MB) are refused there: the
  // call fails with the reason, and the connection goes on.
  EXPECT_EQ(Calc::countStrings(std::vector<std::string>(100000)), 100000u);
  try {
    Calc::countStrings(std::vector<std::string>(400000));
    FAIL() << "expected RemoteCallError";
  } catch (const myelin::RemoteCallError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("Calc::countStrings failed: its arguments decode into more than " + std::to_string(8u << 20) +
                        " bytes (the receiving side's maxDecodeBytes)"),
              std::string::npos)
        << what;
  }
  EXPECT_TRUE(ep_.isConnected());
  EXPECT_EQ(Calc::countStrings(std::vector<std::string>(1000)), 1000u);
  EXPECT_TRUE(Calc::faults().empty());
}

TEST_F(Calls, AReplyThatDecodesIntoMoreThanTheCallerAllowsFailsItsCallAlone) {
  // A client that decodes at most 1 MiB of container memory a message:
  // 10,000 empty strings (320 KB decoded) arrive; 100,000 (3.2 MB, about
  // 100 KB on the wire) fail their call, sync and Async, with the reason,
  // and the connection goes on.
  myelin::EndpointConfig cfg;
  cfg.maxMessageSize = 1u << 20;  // maxDecodeBytes may not be less
  cfg.maxDecodeBytes = 1u << 20;
  myelin::Endpoint small = myelin::ConnectionInfo().setConnectAddress(service_->address()).setConfig(cfg).connect();
  myelin::EndpointCtx back(ep_);
  {
    myelin::EndpointCtx ctx(small);
    EXPECT_EQ(Calc::emptyStrings(10000).size(), 10000u);
    const std::string reason = std::to_string(1u << 20) + " bytes (this side's maxDecodeBytes)";
    try {
      Calc::emptyStrings(100000);
      FAIL() << "expected InvalidMessageError";
    } catch (const myelin::InvalidMessageError& e) {
      EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
    }
    auto later = Calc::emptyStringsLater(100000);
    ASSERT_TRUE(later.wait(10000));
    ASSERT_TRUE(later.isError());
    EXPECT_NE(later.errorMessage().find(reason), std::string::npos) << later.errorMessage();
    EXPECT_TRUE(small.isConnected());
    EXPECT_EQ(Calc::emptyStringsLater(10).value(10000).size(), 10u);
    EXPECT_EQ(Calc::add(1, 1), 2);
  }
  small.disconnect();
  EXPECT_TRUE(Calc::faults().empty());
}

TEST_F(Calls, AValueFarLargerThanThePeerAcceptsIsRefusedBeforeItIsEncodedWhole) {
  // The service takes 1 MiB (service_main.cpp). A 64 MiB argument, a
  // vector of many small numbers and a result far over the caller's limit
  // are each refused once their message passes what the peer accepts (and
  // what one reservation may ask beyond it), not after being encoded whole.
  const std::string early = "refused before it was encoded whole";
  const std::string huge(64u << 20, 'h');
  try {
    Calc::echo(huge);
    FAIL() << "expected UnsendableValueError";
  } catch (const myelin::UnsendableValueError& e) {
    EXPECT_NE(std::string(e.what()).find(early), std::string::npos) << e.what();
  }
  LargeStruct many;
  many.uint32Vec.assign(4u << 20, 0x0fffffffu);  // 4 M four-byte varints
  try {
    Calc::echoLarge(many);
    FAIL() << "expected UnsendableValueError";
  } catch (const myelin::UnsendableValueError& e) {
    EXPECT_NE(std::string(e.what()).find(early), std::string::npos) << e.what();
  }
  // Every mode of call, inside a frame that sees no error.
  const std::string fits(1000, 'f');
  const std::uint64_t before = Calc::bytesNoted();
  EXPECT_EQ(eachModeRefuses(fits, huge, &Calc::noteBytes, &Calc::checkBytes, &Calc::asyncEcho), fits);
  EXPECT_TRUE(ep_.waitForIdle(10000));
  EXPECT_EQ(Calc::bytesNoted(), before + 2 * fits.size());

  // A result: the service's handler stops encoding it at the caller's limit.
  myelin::EndpointConfig cfg;
  cfg.maxMessageSize = 64 * 1024;
  myelin::Endpoint small = myelin::ConnectionInfo().setConnectAddress(service_->address()).setConfig(cfg).connect();
  {
    myelin::EndpointCtx ctx(small);
    try {
      Calc::bytesOfSize(16u << 20);
      FAIL() << "expected RemoteCallError";
    } catch (const myelin::RemoteCallError& e) {
      EXPECT_NE(std::string(e.what()).find(early), std::string::npos) << e.what();
    }
    auto async = Calc::asyncEcho(std::string(900 * 1024, 'a'));  // fits the service, not this side
    ASSERT_TRUE(async.wait(10000));
    EXPECT_TRUE(async.isError());
    EXPECT_NE(async.errorMessage().find(early), std::string::npos) << async.errorMessage();
    EXPECT_EQ(Calc::bytesOfSize(60000), std::string(60000, 'b'));
  }
  EXPECT_TRUE(small.isConnected());
  EXPECT_TRUE(ep_.isConnected());
  EXPECT_EQ(Calc::add(1, 1), 2);
  EXPECT_TRUE(Calc::faults().empty());
}

TEST_F(Calls, AResultLargerThanTheCallerAcceptsFailsItsCallAlone) {
  myelin::EndpointConfig cfg;
  cfg.maxMessageSize = 64 * 1024;
  myelin::Endpoint small = myelin::ConnectionInfo().setConnectAddress(service_->address()).setConfig(cfg).connect();
  myelin::EndpointCtx ctx(small);
  const std::string said = "the peer accepts at most 65536";
  // A sync result: the service's handler fails its call, and says why.
  try {
    Calc::bytesOfSize(100000);
    FAIL() << "expected RemoteCallError";
  } catch (const myelin::RemoteCallError& e) {
    EXPECT_NE(std::string(e.what()).find(said), std::string::npos) << e.what();
  }
  // An Async result, ready at once and made later on another thread.
  auto now = Calc::asyncEcho(std::string(100000, 'a'));
  ASSERT_TRUE(now.wait(10000));
  EXPECT_TRUE(now.isError());
  EXPECT_NE(now.errorMessage().find(said), std::string::npos) << now.errorMessage();
  auto later = Calc::park(100000);
  ASSERT_TRUE(eventually([] { return Calc::parkedCount() == 1; }));
  Calc::answerParkedCountingWrites();
  ASSERT_TRUE(later.wait(10000));
  EXPECT_TRUE(later.isError());
  EXPECT_NE(later.errorMessage().find(said), std::string::npos) << later.errorMessage();
  // A failure's text too long for this side is cut, not sent whole.
  try {
    Calc::fail(std::string(100000, 'w'));
    FAIL() << "expected RemoteCallError";
  } catch (const myelin::RemoteCallError& e) {
    EXPECT_NE(std::string(e.what()).find("www... (cut)"), std::string::npos);
    EXPECT_LT(std::string(e.what()).size(), 33u * 1024);
  }
  // So is an AsyncStatus call's Status, which keeps its code.
  std::vector<myelin::Status> failures;
  {
    myelin::AsyncFrame frame;
    frame.onError([&](const myelin::Status& s) { failures.push_back(s); });
    Calc::failWithBytes(100000);
    EXPECT_TRUE(frame.wait(10000));
  }
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_TRUE(failures[0].is(Mood::kHappy)) << failures[0].getFormattedMessage();
  EXPECT_EQ(failures[0].message().size(), 32u * 1024);
  EXPECT_TRUE(failures[0].message().ends_with("sss... (cut)"));
  // What fits still comes back, on the same connection.
  EXPECT_EQ(Calc::bytesOfSize(60000), std::string(60000, 'b'));
  EXPECT_TRUE(small.isConnected());
  EXPECT_EQ(small.peerMaxMessageSize(), 1u << 20);
  EXPECT_TRUE(Calc::faults().empty());
}

TEST_F(Calls, AsyncValuesAndCallbacks) {
  auto sq = Calc::squareLater(12);
  EXPECT_EQ(sq.value(5000), 144);
  EXPECT_TRUE(sq.isSuccess());
  auto e = Calc::asyncEcho("ready");
  std::atomic<bool> ran{false};
  e.then([&] { ran = true; });
  EXPECT_EQ(e.value(5000), "ready");
  EXPECT_TRUE(ep_.waitForIdle(5000));
  EXPECT_TRUE(ran.load());
}

TEST_F(Calls, AnAbandonedServiceResultFailsInsteadOfHanging) {
  auto a = Calc::abandon();
  ASSERT_TRUE(a.wait(10000)) << "the caller must not wait forever";
  EXPECT_TRUE(a.isError());
  EXPECT_NE(a.errorMessage().find("dropped its Async result"), std::string::npos) << a.errorMessage();
  EXPECT_THROW(a.value(), myelin::RemoteCallError);
  EXPECT_TRUE(ep_.isConnected());
}

TEST_F(Calls, CallbacksRunInReplyOrderOnePerThreadAtATime) {
  std::vector<std::int64_t> seen;  // no lock: callbacks of one thread never overlap
  std::vector<myelin::Async<std::int64_t>> all;
  for (int i = 0; i < 2000; ++i) {
    auto a = Calc::squareLater(i % 100);
    a.then([&seen, a] { seen.push_back(a.value()); });
    all.push_back(a);
  }
  ASSERT_TRUE(ep_.waitForIdle(20000));
  ASSERT_EQ(seen.size(), 2000u);
  std::int64_t total = 0, expected = 0;
  for (int i = 0; i < 2000; ++i) expected += (i % 100) * (i % 100);
  for (auto v : seen) total += v;
  EXPECT_EQ(total, expected);
}

TEST_F(Calls, ACallbackTakingItsAsyncRunsInReplyOrder) {
  std::vector<std::string> seen;  // no lock: callbacks of one thread never overlap
  for (int i = 0; i < 2000; ++i) {
    auto a = Calc::asyncEcho(std::to_string(i));
    a.then([&](const myelin::Async<std::string>& done) {
      seen.push_back(done.isSuccess() ? done.value() : "failed: " + done.errorMessage());
    });
  }  // each handle goes at once, often before its reply: the runtime keeps the state
  ASSERT_TRUE(ep_.waitForIdle(20000));
  ASSERT_EQ(seen.size(), 2000u);
  for (int i = 0; i < 2000; ++i) EXPECT_EQ(seen[static_cast<std::size_t>(i)], std::to_string(i));
}

TEST_F(Calls, ACallbackOnAnAnsweredCallMayDropItsLastHandle) {
  // The reply was read and its callbacks ran: then() runs this one at once,
  // on this thread, and the handle it drops is the last one.
  std::optional<myelin::Async<std::string>> cur(Calc::asyncEcho("answered"));
  ASSERT_TRUE(cur->wait(10000));
  std::string got;
  cur->then([&](const myelin::Async<std::string>& a) {
    cur.reset();
    got = a.value();
  });
  EXPECT_FALSE(cur.has_value());
  EXPECT_EQ(got, "answered");
}

TEST_F(Calls, FireAndForgetIsConfirmedByWaitForIdle) {
  std::uint64_t before = Calc::noteSum();
  for (int i = 0; i < 20000; ++i) Calc::note(2);
  ASSERT_TRUE(ep_.waitForIdle(20000));
  EXPECT_EQ(Calc::noteSum() - before, 40000u);
}

TEST_F(Calls, FailedFireAndForgetFaultsTheEndpoint) {
  Calc::failVoid();
  EXPECT_FALSE(ep_.waitForIdle(5000));
  EXPECT_EQ(ep_.getState(), myelin::EndpointState::kFaulted);
  EXPECT_NE(ep_.getError().find("failVoid always fails"), std::string::npos) << ep_.getError();
  EXPECT_THROW(Calc::add(1, 2), myelin::ConnectionClosedError);
}

TEST_F(Calls, ServiceStreamsToClientDuringOneSyncCall) {
  gItems = 0;
  gOutOfOrder = 0;
  gOnOtherThread = 0;
  gCallerThread = std::this_thread::get_id();
  for (int round = 0; round < 20; ++round) {
    gItems = 0;
    EXPECT_EQ(Calc::streamToClient(round == 0 ? 100000 : 10), round == 0 ? 100000u : 10u);
    EXPECT_EQ(gItems, round == 0 ? 100000u : 10u) << "every item ran before the call returned";
  }
  EXPECT_EQ(gOutOfOrder, 0u);
  EXPECT_EQ(gOnOtherThread, 0u) << "calls made back during a sync call run on the waiting thread";
}

TEST_F(Calls, ServiceCallsBackIntoTheWaitingCaller) { EXPECT_EQ(Calc::askClient(20), 41); }

TEST_F(Calls, ReportsSentByABusyHandlerArriveWhileItStillWorks) {
  // Frames a handler stages wait for its thread to go idle; one that stays
  // busy must not hold them until it returns — neither the first report nor
  // one staged after the first was sent.
  for (auto& t : gProgressAtNs) t.store(0);
  std::int64_t start = steadyNowNs();
  EXPECT_EQ(Calc::progressThenWork(1000), 1000u);
  std::int64_t returned = steadyNowNs();
  std::int64_t first = gProgressAtNs[1].load();
  std::int64_t second = gProgressAtNs[2].load();
  ASSERT_NE(first, 0) << "the first report never arrived";
  ASSERT_NE(second, 0) << "the second report never arrived";
  // The second report leaves the handler 1 s in; the handler returns 3 s in
  // (long enough that a slow, shared machine still shows the difference).
  // Either report must come well before the return.
  EXPECT_LT(first - start, (returned - start) / 3)
      << "first report after " << (first - start) / 1000000 << " ms of " << (returned - start) / 1000000;
  EXPECT_LT(second - start, 2 * (returned - start) / 3)
      << "second report after " << (second - start) / 1000000 << " ms of " << (returned - start) / 1000000;
}

// A method that streams calls to its caller sends the first of them while it
// still runs, in batches that double from sendRampBytes (4 KiB by default):
// 40 calls of 1 KiB leave as about 4, 8 and 16 KiB before it returns, three
// writes, where waiting for a full batch (64 KiB) or for the method to
// return would make none.
TEST_F(Calls, AStreamingMethodSendsItsFirstCallsWhileItRuns) {
  gChunks = 0;
  gChunkBytes = 0;
  gOutOfOrder = 0;
  EXPECT_GE(Calc::streamChunksCountingWrites(40, 1024), 3u);
  EXPECT_EQ(gChunks, 40u) << "every item ran before the call returned";
  EXPECT_EQ(gChunkBytes, 40u * 1024);
  EXPECT_EQ(gOutOfOrder, 0u);
}

// A stream of small calls leaves in batches of at most sendRampMaxCalls
// (2,048 by default) messages, not only by bytes: 11,000 calls of a one-byte
// chunk (6-7 bytes framed, 74 KiB in all) leave in batches of about 600,
// 1,170 and 2,048 calls (the ramp's 4 and 8 KiB, then the bound at 14 KiB),
// then 2,048 at a time. Bounded by bytes alone the third batch would carry
// 2,341 calls (16 KiB) and the fourth up to 4,096 (maxBatchMsgs). The largest
// batch is read from the service's statistics: writes that find the socket
// full, or a flush by the inline watch, can merge or split writes but make
// no batch larger.
TEST_F(Calls, AStreamOfSmallCallsLeavesInBatchesOfBoundedCalls) {
  ASSERT_EQ(myelin::EndpointConfig{}.sendRampMaxCalls, 2048u);
  gChunks = 0;
  gChunkBytes = 0;
  gOutOfOrder = 0;
  const std::uint64_t largest = Calc::streamChunksLargestBatch(11000, 1);
  EXPECT_GE(largest, 64u) << "the calls left in batches, not one by one";
  EXPECT_LE(largest, 2048u);
  EXPECT_EQ(gChunks, 11000u) << "every item ran before the call returned";
  EXPECT_EQ(gChunkBytes, 11000u);
  EXPECT_EQ(gOutOfOrder, 0u);
}

// A stream whose calls' bodies cross 128 bytes back and forth: the reader
// queues runs of calls with a one-byte length prefix without parsing them
// (handleBuffered), and every other frame the general way. Each call must
// arrive whole, in order, as sent: straight, and through a proxy that
// passes the service's bytes on in pieces of 61 bytes, so that the client's
// reads end inside frames, at every offset in turn.
TEST_F(Calls, AStreamOfCallsWhoseSizesCrossALongerPrefixArrivesWholeAndInOrder) {
  for (bool chopped : {false, true}) {
    SCOPED_TRACE(chopped ? "in pieces" : "straight");
    std::unique_ptr<TcpProxy> proxy;
    myelin::Endpoint ep = ep_;
    if (chopped) {
      proxy = std::make_unique<TcpProxy>(service_->port());
      proxy->chopServiceBytes(61, 20);
      ep = myelin::ConnectionInfo().setConnectAddress("127.0.0.1:" + std::to_string(proxy->port())).connect();
    }
    myelin::EndpointCtx ctx(ep);
    gChunks = 0;
    gChunkBytes = 0;
    gOutOfOrder = 0;
    gWrongChunks = 0;
    gChunksVary = true;
    const std::uint32_t count = chopped ? 2000 : 100000;
    const std::uint64_t sent = Calc::streamChunksOfVaryingSize(count);
    gChunksVary = false;
    EXPECT_EQ(gChunks, count);
    EXPECT_EQ(gChunkBytes, sent);
    EXPECT_EQ(gOutOfOrder, 0u);
    EXPECT_EQ(gWrongChunks, 0u);
    EXPECT_EQ(ep.getState(), myelin::EndpointState::kConnected);
  }
}

// A lane whose queue grew past 1 MiB in a burst keeps that storage when it
// runs dry (a lane in steady use would fault it in again with every burst)
// and gives it back once it has stayed dry for idleLaneTrimMs. The burst:
// the first of 48 chunks of 64 KiB holds this thread's lane for a second
// while the service streams the rest into its queue.
TEST_F(Calls, ALanesBurstStorageGoesBackOnceTheLaneStaysDry) {
  constexpr std::size_t kMiB = 1024 * 1024;
  for (std::uint32_t trimMs : {600000u, 50u}) {
    myelin::EndpointConfig cfg;
    cfg.idleLaneTrimMs = trimMs;
    auto ep = myelin::ConnectionInfo().setConnectAddress(service_->address()).setConfig(cfg).connect();
    myelin::EndpointCtx ctx(ep);
    gChunks = 0;
    gChunkBytes = 0;
    gOutOfOrder = 0;
    gFirstChunkPauseMs = 1000;
    Calc::streamChunksCountingWrites(48, 64 * 1024);
    gFirstChunkPauseMs = 0;
    ASSERT_EQ(gChunks, 48u);
    EXPECT_EQ(gOutOfOrder, 0u);
    ASSERT_GT(ep.getLocalStats().maxQueuedBytes, kMiB) << "the burst queued behind the first chunk";
    const std::size_t queued = ep.getLocalStats().maxQueuedBytes;
    if (trimMs == 600000u) {
      EXPECT_GE(ep.getLocalStats().laneBufferBytes, queued) << "the storage that held the burst is kept";
    } else {
      // Buffers above 1 MiB shrink; the lane's two may each keep up to 1 MiB,
      // and the endpoint's other lanes hold a little.
      EXPECT_TRUE(eventually([&] { return ep.getLocalStats().laneBufferBytes <= 2 * kMiB + kMiB / 2; }))
          << ep.getLocalStats().laneBufferBytes << " bytes still held after a burst of " << queued;
    }
    ep.disconnect();
  }
}

// Frames a thread stages while it runs frames wait for it to go idle, but no
// longer than two batches' worth (2 x maxMsgBatchSize, 128 KiB by default):
// a peer with many calls in flight starts on the first replies while this
// side still works. Six replies of 60,000 bytes, each on its own lane and
// below the lane's own limit (64 KiB), staged by one handler: the third
// passes 128 KiB, and that batch leaves before the handler returns (with a
// margin of three replies for any the parking thread answers itself, when
// its reply is not yet registered as the value comes).
TEST_F(Calls, RepliesPastTwoBatchesLeaveBeforeTheThreadGoesIdle) {
  constexpr std::uint32_t kSize = 60000;
  constexpr int kLanes = 6;
  ASSERT_EQ(Calc::parkedCount(), 0u);
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int i = 0; i < kLanes; ++i) {
    threads.emplace_back([&, this] {
      myelin::EndpointCtx ctx(ep_);  // each thread calls on its own lane
      try {
        auto reply = Calc::park(kSize);
        if (reply.value(20000) == std::string(kSize, 'p')) ++good;
      } catch (const std::exception&) {
        // counted as not good below
      }
    });
  }
  EXPECT_TRUE(eventually([] { return Calc::parkedCount() == kLanes; }));
  EXPECT_GE(Calc::answerParkedCountingWrites(), 1u);
  for (auto& t : threads) t.join();
  EXPECT_EQ(good.load(), kLanes);
}

// A batch size below the default ramp (4 KiB) is still a valid setting: the
// ramp acts as the batch size.
TEST_F(Calls, ABatchSizeBelowTheSendRampIsTaken) {
  myelin::EndpointConfig cfg;
  cfg.maxMsgBatchSize = 1024;
  ASSERT_GT(cfg.sendRampBytes, cfg.maxMsgBatchSize);
  auto ep = myelin::ConnectionInfo().setConnectAddress(service_->address()).setConfig(cfg).connect();
  myelin::EndpointCtx ctx(ep);
  EXPECT_EQ(Calc::add(2, 3), 5);
  EXPECT_EQ(Calc::echo(std::string(3000, 'x')), std::string(3000, 'x'));
}

TEST_F(Calls, ItemsStreamedBeforeAnAsyncResultRunBeforeItsWaitReturns) {
  gCallerThread = std::this_thread::get_id();
  for (std::uint32_t round = 0; round < 200; ++round) {
    gItems = 0;
    auto a = Calc::streamThenAsync(50);
    ASSERT_EQ(a.value(10000), 50u);
    ASSERT_EQ(gItems, 50u) << "round " << round << ": items the service sent before the result";
  }
}

TEST_F(Calls, AnotherThreadGetsAValueWhileTheLaneIsBusyInACallback) {
  // The callback of `a` runs on this thread's lane and blocks until another
  // thread has the value of `b`, whose reply is queued behind it on that
  // lane: that thread needs the value only, not the lane's turn.
  auto a = Calc::asyncEcho("first");
  auto b = Calc::asyncEcho("second");
  std::atomic<bool> got{false};
  a.then([&] {
    std::thread other([&] { got = b.value(10000) == "second"; });
    other.join();
  });
  ASSERT_TRUE(ep_.waitForIdle(20000));
  EXPECT_TRUE(got.load());
}

TEST_F(Calls, ACallBackMayItselfCallTheServiceAgain) {
  // The waiting thread runs the service's call back and, inside it, waits
  // for a nested reply: somebody must still read the socket.
  for (int i = 0; i < 20; ++i) EXPECT_EQ(Calc::askClientNested(i), 2 * i + 1);
}

TEST_F(Calls, CallbacksAndSyncCallsOfOneThreadShareItsLaneSafely) {
  // A reply callback (run by another thread on this thread's lane) makes a
  // sync call while this thread is in a sync call of its own; later
  // callbacks of the lane must still run.
  std::atomic<int> first{0}, second{0};
  auto a = Calc::asyncEcho("one");
  a.then([&first] {
    EXPECT_EQ(Calc::add(1, 1), 2);
    ++first;
  });
  Calc::sleepMs(50);
  auto b = Calc::asyncEcho("two");
  b.then([&second] { ++second; });
  ASSERT_TRUE(ep_.waitForIdle(10000));
  EXPECT_EQ(first.load(), 1);
  EXPECT_EQ(second.load(), 1);
}

TEST_F(Calls, ACallbackMayHoldTheLastReferenceToItsEndpoint) {
  std::atomic<bool> ran{false};
  std::thread([&ran] {
    auto ep = myelin::ConnectionInfo().setConnectAddress(service_->address()).connect();
    {
      myelin::EndpointCtx ctx(ep);
      Calc::asyncEcho("bye").then([ep, &ran]() mutable {
        ran = true;
        ep = myelin::Endpoint();  // may be the last reference
      });
    }
    ep = myelin::Endpoint();
  }).join();  // the thread's own references are gone with it
  for (int i = 0; i < 500 && !ran; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(ran.load());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let the endpoint go away
  EXPECT_EQ(Calc::add(2, 3), 5) << "other endpoints are unaffected";
}

TEST_F(Calls, ACallbackMayCallAndThenDropTheLastReference) {
  // The call is staged by the thread running the callback (the reader) and
  // waits for it to go idle, holding the endpoint meanwhile: that must not
  // leave the endpoint to be destroyed under its own reader.
  std::atomic<bool> ran{false};
  std::uint64_t before = Calc::noteSum();
  std::thread([&ran] {
    auto ep = myelin::ConnectionInfo().setConnectAddress(service_->address()).connect();
    {
      myelin::EndpointCtx ctx(ep);
      Calc::asyncEcho("bye").then([ep, &ran]() mutable {
        Calc::note(7);
        ran = true;
        ep = myelin::Endpoint();  // may be the last reference
      });
    }
    ep = myelin::Endpoint();
  }).join();
  for (int i = 0; i < 500 && !ran; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(ran.load());
  for (int i = 0; i < 500 && Calc::noteSum() == before; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(Calc::noteSum(), before + 7) << "the call made just before the last reference went was sent";
}

TEST_F(Calls, CallsOfOneThreadRunInOrder) {
  std::uint32_t before = Calc::recordViolations();
  std::vector<std::thread> threads;
  for (std::uint32_t t = 0; t < 4; ++t) {
    threads.emplace_back([this, t] {
      myelin::EndpointCtx ctx(ep_);
      std::uint32_t stream = 1000 + t + 10 * static_cast<std::uint32_t>(::getpid() % 1000);
      for (std::uint32_t i = 0; i < 5000; ++i) {
        Calc::record(stream, i);
        if (i % 500 == 0) Calc::nop();  // sync and async calls share the order
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(ep_.waitForIdle(20000));
  EXPECT_EQ(Calc::recordViolations(), before);
}

TEST_F(Calls, CallsOfOneMethodQueuedTogetherEachRunAsTheirOwn) {
  // A burst of calls to one method reaches the service in a few reads, and
  // the first of each run takes the calls queued behind it along
  // (executeCall): each must still get its own reply or failure, and the
  // nested calls some of them make back (whose wait takes more of the burst
  // into the lane's queue, moving it) must not disturb the calls after them.
  constexpr std::int32_t kCalls = 3000;
  std::vector<myelin::Async<std::int32_t>> all;
  all.reserve(kCalls);
  for (std::int32_t x = 0; x < kCalls; ++x) all.push_back(Calc::doubleOrAsk(x));
  ASSERT_TRUE(ep_.waitForIdle(20000));
  int failed = 0, asked = 0;
  for (std::int32_t x = 0; x < kCalls; ++x) {
    const auto& a = all[static_cast<std::size_t>(x)];
    if (x % 7 == 3) {
      ASSERT_FALSE(a.isSuccess()) << x;
      EXPECT_NE(a.errorMessage().find("no double for " + std::to_string(x)), std::string::npos)
          << x << ": " << a.errorMessage();
      ++failed;
    } else {
      ASSERT_TRUE(a.isSuccess()) << x << ": " << a.errorMessage();
      EXPECT_EQ(a.value(), x % 11 == 5 ? 2 * x + 1 : 2 * x) << x;
      asked += x % 11 == 5;
    }
  }
  EXPECT_EQ(failed, 429);
  EXPECT_EQ(asked, 234);
  EXPECT_TRUE(ep_.isConnected());
}

TEST_F(Calls, QueuedCallsOfEverySizeArriveIntact) {
  // Calls sent in one burst are copied into their lane's queue as they are
  // read (EndpointImpl::enqueue, copyUpTo128), frames of up to 16, 32, 64
  // and 128 bytes each by their own inline copy and longer ones by memcpy: every argument from
  // 0 to 300 bytes, each byte depending on its place, must come back intact.
  std::vector<std::string> sent;
  std::vector<myelin::Async<std::string>> all;
  for (std::size_t round = 0; round < 2; ++round) {
    for (std::size_t n = 0; n <= 300; ++n) {
      std::string s(n, '\0');
      for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + n + round) % 26);
      all.push_back(Calc::asyncEcho(s));
      sent.push_back(std::move(s));
    }
  }
  ASSERT_TRUE(ep_.waitForIdle(20000));
  for (std::size_t k = 0; k < all.size(); ++k) {
    ASSERT_TRUE(all[k].isSuccess()) << k << ": " << all[k].errorMessage();
    EXPECT_EQ(all[k].value(), sent[k]) << "argument of " << sent[k].size() << " bytes";
  }
  EXPECT_TRUE(ep_.isConnected());
}

TEST_F(Calls, CallbacksOfRepliesQueuedTogetherRunOnceEachInOrder) {
  // The replies of a burst of Async calls reach the client in a few reads,
  // and the reader, running the lane, takes the completions queued behind
  // the first along (runCompletions). Each callback must run once, in call
  // order, with its own value or error, also when callbacks throw, when one
  // makes a sync call of its own (a nested wait, which may take more of the
  // burst's replies into the lane's queue and move it), and when the
  // service calls back into the client between two replies (x % 11 == 5).
  // The sync call below may begin while a callback's call waits on the
  // reader: two waiters on one lane, of which only the reader, running the
  // lane, can take the call-back (the test hung in 8 of 12 runs when the
  // most recent waiter was told of it instead).
  constexpr std::int32_t kCalls = 3000;
  std::atomic<int> thrown{0};
  auto previous = myelin::setUncaughtHandler([&](const char*, std::exception_ptr) { ++thrown; });
  // Callbacks of one lane run one at a time: the vectors need no lock, and
  // `ran` publishes them to this thread.
  std::vector<std::int32_t> order;
  std::vector<std::int32_t> values(kCalls, -1);
  std::vector<std::int32_t> nested(kCalls, -1);
  std::atomic<int> ran{0};
  order.reserve(kCalls);
  for (std::int32_t x = 0; x < kCalls; ++x) {
    auto a = Calc::doubleOrAsk(x);
    a.then([&, x, a] {
      order.push_back(x);
      if (x % 13 == 0) nested[static_cast<std::size_t>(x)] = Calc::add(x, 1);
      if (!a.isSuccess()) {
        ran.fetch_add(1, std::memory_order_release);
        throw std::runtime_error("callback of a failed call");
      }
      values[static_cast<std::size_t>(x)] = a.value();
      ran.fetch_add(1, std::memory_order_release);
    });
  }
  // A sync call returns only after the frames queued before its reply ran:
  // the reader hands the lane over when this thread starts waiting.
  EXPECT_EQ(Calc::add(1, 2), 3);
  EXPECT_EQ(ran.load(std::memory_order_acquire), kCalls);
  ASSERT_TRUE(eventually([&] { return ran.load(std::memory_order_acquire) == kCalls; }));
  myelin::setUncaughtHandler(previous);
  ASSERT_EQ(order.size(), static_cast<std::size_t>(kCalls));
  for (std::int32_t x = 0; x < kCalls; ++x) {
    const auto i = static_cast<std::size_t>(x);
    ASSERT_EQ(order[i], x);
    EXPECT_EQ(values[i], x % 7 == 3 ? -1 : x % 11 == 5 ? 2 * x + 1 : 2 * x) << x;
    EXPECT_EQ(nested[i], x % 13 == 0 ? x + 1 : -1) << x;
  }
  EXPECT_EQ(thrown.load(), 429);
  EXPECT_TRUE(ep_.isConnected());
}

TEST_F(Calls, ALongCallDoesNotHoldUpOtherThreads) {
  // The service's reader may run a call itself; while that call runs long,
  // another thread reads the connection and serves the other lanes.
  std::atomic<bool> longDone{false};
  std::thread slow([&] {
    myelin::EndpointCtx ctx(ep_);
    Calc::sleepMs(3000);
    longDone = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(Calc::add(1, 2), 3);
  EXPECT_EQ(Calc::echo("still here"), "still here");
  EXPECT_FALSE(longDone.load()) << "the calls above completed while the long call was still running";
  slow.join();
  EXPECT_TRUE(longDone.load());
}

namespace {
/// The service's reader runs the lanes it read calls for one after another;
/// when one lane's call runs long, the lanes after it go to the executor. A
/// proxy passes the calls on in one write: a short call first if asked (so
/// the long one is not the run's first lane), then the long one, then a
/// quick one from a third thread, which must not wait for the long one.
void quickCallAfterALongOneInOneRead(std::uint16_t servicePort, bool shortFirst) {
  TcpProxy proxy(servicePort);
  auto ep = myelin::ConnectionInfo().setConnectAddress("127.0.0.1:" + std::to_string(proxy.port())).connect();
  myelin::EndpointCtx ctx(ep);
  Calc::nop();  // the handshake is behind us once a call returned
  proxy.holdClientBytes();
  auto sentSince = [&proxy](std::uint64_t mark) {
    for (int i = 0; i < 5000 && proxy.clientToService() == mark; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return proxy.clientToService() > mark;
  };
  std::uint64_t mark = proxy.clientToService();
  std::optional<myelin::Async<std::string>> first;
  if (shortFirst) {
    first = Calc::asyncEcho("first");
    EXPECT_TRUE(sentSince(mark)) << "the short call never left";
    mark = proxy.clientToService();
  }
  std::atomic<bool> longDone{false};
  std::thread slow([&] {
    myelin::EndpointCtx slowCtx(ep);
    Calc::sleepMs(3000);
    longDone = true;
  });
  EXPECT_TRUE(sentSince(mark)) << "the long call never left";
  mark = proxy.clientToService();
  std::optional<myelin::Async<std::string>> quick;
  std::thread([&] {
    myelin::EndpointCtx quickCtx(ep);
    quick = Calc::asyncEcho("quick");
  }).join();
  EXPECT_TRUE(sentSince(mark)) << "the quick call never left";
  proxy.releaseClientBytes();
  if (quick->wait(2500)) {
    EXPECT_EQ(quick->value(), "quick");
    EXPECT_FALSE(longDone.load()) << "the quick call waited for the long one";
  } else {
    ADD_FAILURE() << "the quick call waited for the long one";
  }
  if (first) {
    EXPECT_EQ(first->value(), "first");
  }
  slow.join();
  EXPECT_TRUE(longDone.load());
  ep.disconnect();
}
}  // namespace

TEST_F(Calls, ALongCallDoesNotHoldUpCallsReadWithIt) { quickCallAfterALongOneInOneRead(service_->port(), false); }

TEST_F(Calls, ALongCallAfterAShortOneDoesNotHoldUpCallsReadWithIt) {
  quickCallAfterALongOneInOneRead(service_->port(), true);
}

TEST_F(Calls, LargeAsyncRoundTripsIssuedFromCallbacksDoNotDeadlock) {
  // Replies re-issue calls from their callbacks, which run on threads that
  // also read the socket; with 64 KiB payloads both directions fill their
  // socket buffers. Nobody may block on a full socket while others wait for
  // it to read.
  const std::string payload(64 * 1024, 'p');
  constexpr int kThreads = 3, kWindow = 32, kPerThread = 300;
  std::atomic<int> done{0}, bad{0};
  struct Chain {
    Chain(const std::string* p, std::atomic<int>* d, std::atomic<int>* b) : payload(p), done(d), bad(b) {}
    const std::string* payload;
    std::atomic<int>* done;
    std::atomic<int>* bad;
    std::atomic<int> issued{0};  // the first calls and the callbacks may overlap
    void next() {
      if (issued.fetch_add(1) >= kPerThread) return;
      auto a = Calc::asyncEcho(*payload);
      a.then([this, a] {
        if (!a.isSuccess() || a.value().size() != payload->size()) ++*bad;
        ++*done;
        next();
      });
    }
  };
  std::vector<std::unique_ptr<Chain>> chains;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    chains.push_back(std::make_unique<Chain>(&payload, &done, &bad));
    threads.emplace_back([this, c = chains.back().get()] {
      myelin::EndpointCtx ctx(ep_);
      for (int i = 0; i < kWindow; ++i) c->next();
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(ep_.waitForIdle(60000)) << "done " << done.load() << " of " << kThreads * kPerThread;
  EXPECT_EQ(done.load(), kThreads * kPerThread);
  EXPECT_EQ(bad.load(), 0);
}

TEST_F(Calls, NoEndpointOnStackThrows) {
  std::thread([] { EXPECT_THROW(Calc::add(1, 2), myelin::NoEndpointOnStackError); }).join();
  std::thread([this] {
    myelin::EndpointCtx ctx(ep_);
    EXPECT_EQ(Calc::add(1, 2), 3);
  }).join();
}

TEST_F(Calls, RemoteCapsAnswerFromTheNegotiatedTables) {
  using namespace myelin::remoteCaps;
  EXPECT_TRUE(hasClass("myelin_test::Calc"));
  EXPECT_FALSE(hasClass("myelin_test::Nope"));
  EXPECT_TRUE(hasMethod("myelin_test::Calc", "add"));
  EXPECT_FALSE(hasMethod("myelin_test::Calc", "subtract"));
  EXPECT_TRUE(hasMethodParam("myelin_test::Calc", "add", "b"));
  EXPECT_FALSE(hasMethodParam("myelin_test::Calc", "add", "c"));
  EXPECT_TRUE(hasMethodReturn("myelin_test::Calc", "echo"));
  EXPECT_TRUE(hasStruct("myelin_test::LargeStruct"));
  EXPECT_TRUE(hasStructField("myelin_test::SmallStruct", "str"));
  EXPECT_FALSE(hasStructField("myelin_test::SmallStruct", "missing"));
  EXPECT_TRUE(hasEnum("myelin_test::Mood"));

  EXPECT_TRUE(hasClass<Calc>());
  EXPECT_TRUE((hasMethod<Calc, &Calc::add>()));
  EXPECT_TRUE((hasMethod<Calc, &Calc::squareLater>()));
  EXPECT_TRUE((hasMethodParam<Calc, &Calc::add>("a")));
  EXPECT_FALSE((hasMethodParam<Calc, &Calc::add>("z")));
  EXPECT_TRUE((hasMethodReturn<Calc, &Calc::echoLarge>()));
  EXPECT_TRUE(hasStruct<MediumStruct>());
  EXPECT_TRUE(hasStructField<&MediumStruct::optStr>());
  EXPECT_TRUE(hasStructField<&LargeStruct::mood>());
  EXPECT_TRUE(hasEnum<Mood>());
}

TEST_F(Calls, PeerKilledMidCallFailsEveryPendingCall) {
  ServiceProcess victim(MYELIN_TEST_SERVICE);
  auto ep = myelin::ConnectionInfo().setConnectAddress(victim.address()).connect();
  myelin::EndpointCtx ctx(ep);
  auto pending = Calc::sleepAsync(20000);
  std::atomic<bool> threw{false};
  std::thread sync([&] {
    myelin::EndpointCtx inner(ep);
    try {
      Calc::sleepMs(20000);
    } catch (const myelin::ConnectionClosedError&) {
      threw = true;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto start = std::chrono::steady_clock::now();
  victim.kill9();
  sync.join();
  EXPECT_TRUE(threw.load());
  EXPECT_TRUE(pending.wait(5000));
  EXPECT_TRUE(pending.isError());
  EXPECT_EQ(pending.error(), myelin::AsyncError::kConnectionClosed);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_FALSE(ep.isConnected());
  EXPECT_THROW(Calc::add(1, 2), myelin::ConnectionClosedError);
  EXPECT_THROW(Calc::note(1), myelin::ConnectionClosedError);
}

TEST_F(Calls, FramedWireSizes) {
  TcpProxy proxy(service_->port());
  auto ep = myelin::ConnectionInfo().setConnectAddress("127.0.0.1:" + std::to_string(proxy.port())).connect();
  myelin::EndpointCtx ctx(ep);
  Calc::nop();  // the handshake is behind us once a call returned
  std::uint64_t zero = framedSize(proxy, [] { Calc::zero(); });
  std::uint64_t one = framedSize(proxy, [] { Calc::one(123); });
  std::uint64_t small = framedSize(proxy, [] { Calc::small(makeSmall()); });
  std::uint64_t medium = framedSize(proxy, [] { Calc::medium(makeMedium()); });
  std::uint64_t large = framedSize(proxy, [] { Calc::large(makeLarge()); });
  RecordProperty("zero", std::to_string(zero));
  RecordProperty("one", std::to_string(one));
  RecordProperty("small", std::to_string(small));
  RecordProperty("medium", std::to_string(medium));
  RecordProperty("large", std::to_string(large));
  std::printf("framed sizes: zero=%llu one=%llu small=%llu medium=%llu large=%llu\n",
              static_cast<unsigned long long>(zero), static_cast<unsigned long long>(one),
              static_cast<unsigned long long>(small), static_cast<unsigned long long>(medium),
              static_cast<unsigned long long>(large));
  EXPECT_EQ(zero, 4u);
  EXPECT_EQ(one, 5u);
  EXPECT_EQ(small, 17u);  // 4 header + 1 (123) + 1 + 11 ("Hello World")
  EXPECT_EQ(medium, 74u);
  EXPECT_LE(large, 205u);
  ep.disconnect();
}

TEST_F(Calls, LocalStatsCountWhatTheSocketCarried) {
  TcpProxy proxy(service_->port());
  auto ep = myelin::ConnectionInfo().setConnectAddress("127.0.0.1:" + std::to_string(proxy.port())).connect();
  myelin::EndpointCtx ctx(ep);
  Calc::nop();  // the handshake is behind us once a call returned
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ep.getLocalStats(true);
  std::uint64_t sentBefore = proxy.clientToService();
  std::uint64_t receivedBefore = proxy.serviceToClient();
  for (int i = 0; i < 5000; ++i) Calc::note(1);
  EXPECT_EQ(Calc::add(2, 2), 4);
  ASSERT_TRUE(ep.waitForIdle(10000));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  myelin::EndpointStats st = ep.getLocalStats();
  EXPECT_EQ(st.bytesSent, proxy.clientToService() - sentBefore);
  EXPECT_EQ(st.bytesReceived, proxy.serviceToClient() - receivedBefore);
  EXPECT_GE(st.messagesSent, 5002u) << "5000 notes, one add, one barrier";
  EXPECT_GE(st.messagesReceived, 2u) << "the add's reply and the barrier's ack";
  std::uint64_t writes = 0;
  for (auto n : st.sendBatchHistogram) writes += n;
  EXPECT_EQ(writes, st.socketWrites);
  EXPECT_LE(st.socketWrites, st.messagesSent);
  EXPECT_GE(st.maxBatchMessages, 1u);
  EXPECT_GT(st.seconds, 0.0);
  myelin::EndpointStats after = ep.getLocalStats(true);
  EXPECT_EQ(after.bytesSent, st.bytesSent);
  EXPECT_EQ(ep.getLocalStats().bytesSent, 0u) << "reset starts a new interval";
  ep.disconnect();
}

// Calls closer than burstGapUs are a burst, but a steady rate at which
// fewer than a few calls would share a batch is not: each call is written at
// once instead of waiting up to maxBatchYieldUs for company. A tight burst
// after it still shares writes. (Times are scaled up to milliseconds so
// that a slow build keeps the gaps: calls 5 ms apart, a 10 ms batch yield.)
TEST_F(Calls, CallsAtASteadyLowRateAreWrittenAtOnce) {
  myelin::EndpointConfig cfg;
  cfg.maxBatchYieldUs = 10'000;
  cfg.burstGapUs = 10'000;
  auto ep = myelin::ConnectionInfo().setConnectAddress(service_->address()).setConfig(cfg).connect();
  myelin::EndpointCtx ctx(ep);
  EXPECT_EQ(Calc::add(1, 1), 2);
  // The first calls 5 ms apart may still join batches while the endpoint
  // learns the rate (a few); the later ones each go alone.
  for (int i = 0; i < 30; ++i) {
    Calc::note(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const std::uint64_t before = ep.getLocalStats().socketWrites;
  constexpr int kSteady = 30;
  for (int i = 0; i < kSteady; ++i) {
    Calc::note(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const std::uint64_t steadyWrites = ep.getLocalStats().socketWrites - before;
  EXPECT_GE(steadyWrites, static_cast<std::uint64_t>(kSteady)) << "each call of the steady rate in a write of its own";
  EXPECT_LE(steadyWrites, static_cast<std::uint64_t>(kSteady) + 2);

  const std::uint64_t burstFrom = ep.getLocalStats().socketWrites;
  constexpr int kBurst = 3000;
  for (int i = 0; i < kBurst; ++i) Calc::note(1);
  ASSERT_TRUE(ep.waitForIdle(10000));
  const std::uint64_t burstWrites = ep.getLocalStats().socketWrites - burstFrom;
  EXPECT_LT(burstWrites, 200u) << "a burst's calls share writes";
  ep.disconnect();
}

}  // namespace
}  // namespace myelin_test
