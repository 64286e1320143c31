// PerfTimer and PerfReport: the report's arithmetic (rate, merged latency
// from many threads, summed statistics) and the lines of the details block.
#include "myelin/perf_timer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace myelin {
namespace {

std::string printed(const PerfReport& r) {
  char* buf = nullptr;
  std::size_t len = 0;
  std::FILE* f = open_memstream(&buf, &len);
  r.printDetails(f);
  std::fclose(f);
  std::string s(buf, len);
  std::free(buf);
  return s;
}

TEST(PerfTimer, CountsRpcsAndMergesLatencyFromThreads) {
  PerfTimer timer("T", "a test", std::vector<Endpoint>{});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&timer, t] {
      for (std::uint64_t i = 1; i <= 1000; ++i) {
        timer.recordLatency(i + static_cast<std::uint64_t>(t) * 1000);
        timer.addRpcs(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  LatencyHistogram extra;
  extra.record(10);
  timer.mergeLatency(extra);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  PerfReport r = timer.stop();
  EXPECT_EQ(r.name, "T");
  EXPECT_EQ(r.rpcs, 4000u);
  EXPECT_GE(r.seconds, 0.02);
  EXPECT_DOUBLE_EQ(r.rps, 4000.0 / r.seconds);
  EXPECT_EQ(r.latency.count(), 4001u);
  EXPECT_EQ(r.latency.min(), 1u);
  EXPECT_EQ(r.latency.max(), 4000u);
  EXPECT_FALSE(r.hasRemote);
}

TEST(PerfTimer, RemoteStatsAreCarriedIntoTheReport) {
  PerfTimer timer("T", "", std::vector<Endpoint>{});
  EndpointStats remote;
  remote.messagesSent = 7;
  timer.setRemoteStats(remote);
  PerfReport r = timer.stop();
  EXPECT_TRUE(r.hasRemote);
  EXPECT_EQ(r.remote.messagesSent, 7u);
}

TEST(PerfTimer, MergeStatsSumsCountersAndKeepsHighWaterMarks) {
  EndpointStats a, b;
  a.messagesSent = 10;
  a.bytesSent = 100;
  a.socketWrites = 2;
  a.sendBatchHistogram[1] = 2;
  a.maxStagedBytes = 50;
  a.maxBatchMessages = 6;
  a.seconds = 1.0;
  b.messagesSent = 5;
  b.bytesSent = 40;
  b.socketWrites = 5;
  b.sendBatchHistogram[0] = 5;
  b.maxStagedBytes = 80;
  b.maxBatchMessages = 1;
  b.seconds = 2.0;
  mergeStats(a, b);
  EXPECT_EQ(a.messagesSent, 15u);
  EXPECT_EQ(a.bytesSent, 140u);
  EXPECT_EQ(a.socketWrites, 7u);
  EXPECT_EQ(a.sendBatchHistogram[0], 5u);
  EXPECT_EQ(a.sendBatchHistogram[1], 2u);
  EXPECT_EQ(a.maxStagedBytes, 80u);
  EXPECT_EQ(a.maxBatchMessages, 6u);
  EXPECT_DOUBLE_EQ(a.seconds, 2.0);
}

PerfReport sampleReport() {
  PerfReport r;
  r.name = "OneParamToSrvAsyncVoid";
  r.description = "A single client uses 1 thread to invoke async calls with 1 parameter to the service.";
  r.seconds = 2.0;
  r.rpcs = 1000000;
  r.rps = 500000;
  r.local.messagesSent = 1000005;
  r.local.bytesSent = 9800049;
  r.local.messagesReceived = 10;
  r.local.bytesReceived = 81;
  r.local.socketWrites = 500;
  r.local.sendBatchHistogram[0] = 5;     // 1 message
  r.local.sendBatchHistogram[11] = 495;  // 2048 - 4095 messages
  r.local.maxStagedBytes = 65536;
  r.hasRemote = true;
  r.remote.messagesSent = 10;
  r.remote.socketWrites = 10;
  r.remote.sendBatchHistogram[0] = 10;
  r.remote.maxQueuedBytes = 230;
  return r;
}

TEST(PerfReport, RatesAndBusiestBatch) {
  PerfReport r = sampleReport();
  EXPECT_DOUBLE_EQ(r.sendBytesPerSecond(), 9800049 / 2.0);
  EXPECT_DOUBLE_EQ(r.recvBytesPerSecond(), 81 / 2.0);
  EXPECT_DOUBLE_EQ(r.busiestAverageBatch(), 1000005.0 / 500.0);
  r.remote.messagesSent = 5000000;
  r.remote.socketWrites = 1000;
  EXPECT_DOUBLE_EQ(r.busiestAverageBatch(), 5000.0);
}

TEST(PerfReport, PrintsTheDetailsBlock) {
  std::string s = printed(sampleReport());
  EXPECT_NE(s.find("#### Start of test OneParamToSrvAsyncVoid ####"), std::string::npos) << s;
  EXPECT_NE(s.find("Description:       A single client uses 1 thread"), std::string::npos) << s;
  EXPECT_NE(s.find("Duration:          2.00 s"), std::string::npos) << s;
  EXPECT_NE(s.find("Total test RPCs:   1,000,000\n"), std::string::npos) << s;
  EXPECT_NE(s.find("RPC/s:             500,000\n"), std::string::npos) << s;
  EXPECT_NE(s.find("One RPC every:     2.0 us"), std::string::npos) << s;
  EXPECT_NE(s.find("Total msgs:        send: 1,000,005 | recv: 10\n"), std::string::npos) << s;
  EXPECT_NE(s.find("Avg msg size:      send: 9.8 | recv: 8.1\n"), std::string::npos) << s;
  EXPECT_NE(s.find("Total send bytes:  9,800,049      (4,900,025 bytes/sec)"), std::string::npos) << s;
  EXPECT_NE(s.find("Total recv bytes:  81             (41 bytes/sec)"), std::string::npos) << s;
  EXPECT_NE(s.find(" Local:           |           65,536 |                0 |"), std::string::npos) << s;
  EXPECT_NE(s.find(" Remote:          |                0 |              230 |"), std::string::npos) << s;
  EXPECT_NE(s.find(" Local  -> Remote |     1,000,005 |           500 |         2000.0 |    0.05%"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find(" Remote -> Local  |            10 |            10 |            1.0 |  100.00%"),
            std::string::npos)
      << s;
  EXPECT_EQ(s.find("Latency:"), std::string::npos) << s;  // none recorded
  // Histogram: every bucket from the first to the last non-empty one, the
  // largest with a 60-star bar.
  EXPECT_NE(s.find("Local batch histogram:\n"), std::string::npos) << s;
  EXPECT_NE(s.find("\n    1        |         5\n"), std::string::npos) << s;
  EXPECT_NE(s.find("\n 1024 - 2047 |         0\n"), std::string::npos) << s;
  EXPECT_NE(s.find(" 2048 - 4095 |       495  " + std::string(60, '*') + "\n"), std::string::npos) << s;
  EXPECT_NE(s.find("Remote batch histogram:\n 1     |        10  " + std::string(60, '*')), std::string::npos) << s;
}

TEST(PerfReport, PrintsLatencyWhenRecorded) {
  PerfReport r = sampleReport();
  for (std::uint64_t v = 1; v <= 100; ++v) r.latency.record(v * 1000000);  // 1 .. 100 ms
  std::string s = printed(r);
  EXPECT_NE(s.find("Latency:           min: 1.00 ms | avg: 50.50 ms | max: 100 ms"), std::string::npos) << s;
  EXPECT_NE(s.find("Latency %:         50% in "), std::string::npos) << s;
  EXPECT_NE(s.find("| 99% in "), std::string::npos) << s;
}

}  // namespace
}  // namespace myelin
