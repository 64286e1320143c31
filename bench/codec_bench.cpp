// Micro-benchmark of Myelin's value codec: encoding and decoding the small,
// medium and large benchmark structs, and lists of 100 of each (the payloads
// of the suite's list round trips), with the runtime's Codec<T> templates and
// identity field plans (both sides share one schema), no transport.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "bench_data.h"
#include "codec_probe_gen.h"
#include "myelin/detail/codec.h"
#include "schema/local_schema.h"

namespace bench {

// The service side of the probe interface; never called, only registered.
void CodecProbe::take(const SmallMessage&, const MediumMessage&, const LargeMessage&) {}

}  // namespace bench

namespace {

using myelin::detail::ByteBuffer;
using myelin::detail::Codec;
using myelin::detail::CodecCtx;
using myelin::detail::FieldPlan;
using myelin::detail::StructIndex;
using myelin::detail::WireReader;
using myelin::detail::WireWriter;

/// A CodecCtx whose plans send and receive every registered struct's fields
/// in declaration order: what two programs built from the same headers
/// negotiate.
class IdentityCodecCtx {
 public:
  static const CodecCtx& get() {
    static const IdentityCodecCtx kInstance;
    return kInstance.ctx_;
  }

 private:
  IdentityCodecCtx() {
    const auto& schema = myelin::detail::LocalSchema::instance().frozen();
    orders_.resize(schema.structs.size());
    plans_.resize(schema.structs.size());
    for (std::size_t i = 0; i < schema.structs.size(); ++i) {
      orders_[i].resize(schema.structs[i].fields.size());
      std::iota(orders_[i].begin(), orders_[i].end(), std::uint16_t{0});
      plans_[i] = FieldPlan{orders_[i].data(), static_cast<std::uint32_t>(orders_[i].size())};
    }
    ctx_ = CodecCtx{plans_.data(), plans_.data()};
  }

  std::vector<std::vector<std::uint16_t>> orders_;
  std::vector<FieldPlan> plans_;
  CodecCtx ctx_;
};

template <class T>
struct ValueMaker;
template <class T>
T makeValue() {
  return ValueMaker<T>::make();
}
template <>
struct ValueMaker<bench::SmallMessage> {
  static bench::SmallMessage make() { return bench::makeSmall(); }
};
template <>
struct ValueMaker<bench::MediumMessage> {
  static bench::MediumMessage make() { return bench::makeMedium(); }
};
template <>
struct ValueMaker<bench::LargeMessage> {
  static bench::LargeMessage make() { return bench::makeLarge(); }
};

/// The suite's list payloads: 100 copies of one message
/// (bench/myelin/bench_client.cpp, RoundTrip*MsgListAsyncCB).
template <class T>
struct ValueMaker<std::vector<T>> {
  static std::vector<T> make() { return std::vector<T>(100, ValueMaker<T>::make()); }
};

/// The struct whose registration a value needs: T itself or a list's element.
template <class T>
struct RegisteredStruct {
  using type = T;
};
template <class T>
struct RegisteredStruct<std::vector<T>> {
  using type = T;
};

template <class T>
void encodeInto(ByteBuffer& buf, const T& v, const CodecCtx& ctx) {
  buf.clear();
  WireWriter w(buf);
  Codec<T>::encode(w, v, ctx);
  w.finish();
}

template <class T>
T decodeFrom(const ByteBuffer& buf, const CodecCtx& ctx) {
  T out{};
  WireReader r(buf.data(), buf.size());
  Codec<T>::decode(r, out, ctx);
  r.finish();
  return out;
}

/// Checks that T is registered and that decode(encode(v)) encodes to the
/// same bytes; returns false (and marks the benchmark failed) otherwise.
template <class T>
bool checkRoundTrip(benchmark::State& state, ByteBuffer& encoded) {
  if (StructIndex<typename RegisteredStruct<T>::type>::value < 0) {
    state.SkipWithError("struct not registered: generated code missing");
    return false;
  }
  const CodecCtx& ctx = IdentityCodecCtx::get();
  encodeInto(encoded, makeValue<T>(), ctx);
  ByteBuffer again;
  encodeInto(again, decodeFrom<T>(encoded, ctx), ctx);
  if (again.size() != encoded.size() || std::memcmp(again.data(), encoded.data(), encoded.size()) != 0) {
    state.SkipWithError("round trip changed the encoding");
    return false;
  }
  return true;
}

void reportSize(benchmark::State& state, std::size_t bytes) {
  state.counters["bytes"] = benchmark::Counter(static_cast<double>(bytes));
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(bytes));
}

template <class T>
void bmEncode(benchmark::State& state) {
  ByteBuffer buf;
  if (!checkRoundTrip<T>(state, buf)) return;
  const CodecCtx& ctx = IdentityCodecCtx::get();
  const T value = makeValue<T>();
  WireWriter w;
  for (auto _ : state) {
    buf.clear();  // keeps its capacity: no allocation in the loop
    w.reset(buf);
    Codec<T>::encode(w, value, ctx);
    w.finish();
    benchmark::DoNotOptimize(buf.data());
    benchmark::ClobberMemory();
  }
  reportSize(state, buf.size());
}

template <class T>
void bmDecode(benchmark::State& state) {
  ByteBuffer buf;
  if (!checkRoundTrip<T>(state, buf)) return;
  const CodecCtx& ctx = IdentityCodecCtx::get();
  for (auto _ : state) {
    // A fresh value-initialised object each time, as the runtime decodes.
    T out{};
    WireReader r(buf.data(), buf.size());
    Codec<T>::decode(r, out, ctx);
    r.finish();
    benchmark::DoNotOptimize(out);
  }
  reportSize(state, buf.size());
}

/// Decoding into the value the last iteration decoded, as the runtime does
/// for a value it kept (kept_values.h: only values that own heap blocks
/// are kept; the others decode fresh as in bmDecode).
template <class T>
void bmDecodeKept(benchmark::State& state) {
  ByteBuffer buf;
  if (!checkRoundTrip<T>(state, buf)) return;
  const CodecCtx& ctx = IdentityCodecCtx::get();
  T out{};
  for (auto _ : state) {
    WireReader r(buf.data(), buf.size());
    Codec<T>::decode(r, out, ctx);
    r.finish();
    benchmark::DoNotOptimize(out);
  }
  reportSize(state, buf.size());
}

}  // namespace

namespace {

/// Registers one encode and two decode benchmarks for T. With
/// MYELIN_CODEC_BENCH_ITERATIONS=N in the environment every benchmark runs
/// exactly N iterations, so that instruction counts under
/// `valgrind --tool=callgrind` are comparable between builds: the count at
/// 2N minus the count at N, divided by N, is the cost of one iteration.
template <class T>
void registerPair(const char* name) {
  const char* fixed = std::getenv("MYELIN_CODEC_BENCH_ITERATIONS");
  for (auto [prefix, fn] : {std::pair{"encode/", &bmEncode<T>}, std::pair{"decode/", &bmDecode<T>},
                            std::pair{"decodeKept/", &bmDecodeKept<T>}}) {
    auto* b = benchmark::RegisterBenchmark((std::string(prefix) + name).c_str(), fn);
    if (fixed) b->Iterations(std::atoll(fixed));
  }
}

const bool kRegistered = [] {
  registerPair<bench::SmallMessage>("Small");
  registerPair<bench::MediumMessage>("Medium");
  registerPair<bench::LargeMessage>("Large");
  registerPair<std::vector<bench::SmallMessage>>("SmallList100");
  registerPair<std::vector<bench::MediumMessage>>("MediumList100");
  registerPair<std::vector<bench::LargeMessage>>("LargeList100");
  return true;
}();

}  // namespace
