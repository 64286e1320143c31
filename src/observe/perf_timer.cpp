// PerfTimer and PerfReport (see myelin/perf_timer.h): the measuring region
// of a raw benchmark and the text of its details block.
#include "myelin/perf_timer.h"

#include <algorithm>
#include <cinttypes>
#include <functional>
#include <sstream>
#include <thread>

namespace myelin {

namespace {

constexpr int kHistogramBarWidth = 60;
constexpr std::size_t kDescriptionWidth = 72;
constexpr const char* kIndent = "                   ";  // width of "Description:      "

std::string withCommas(std::uint64_t v) {
  std::string digits = std::to_string(v);
  std::string out;
  int n = static_cast<int>(digits.size());
  for (int i = 0; i < n; ++i) {
    out += digits[static_cast<std::size_t>(i)];
    int left = n - 1 - i;
    if (left > 0 && left % 3 == 0) out += ',';
  }
  return out;
}

/// "16,007.9": thousands separated, one decimal.
std::string decimalWithCommas(double v) {
  if (v < 0) v = 0;
  auto tenths = static_cast<std::uint64_t>(v * 10.0 + 0.5);
  return withCommas(tenths / 10) + "." + std::to_string(tenths % 10);
}

double ratio(double num, double den) { return den > 0 ? num / den : 0.0; }

std::string histogramLabel(std::size_t i, int lowWidth, int highWidth) {
  char buf[64];
  std::uint64_t low = EndpointStats::batchBucketLow(i);
  if (i + 1 == EndpointStats::kBatchBuckets) {
    std::snprintf(buf, sizeof buf, "%*" PRIu64 " +%*s", lowWidth, low, highWidth + 1, "");
  } else if (i == 0) {
    std::snprintf(buf, sizeof buf, "%*" PRIu64 "   %*s", lowWidth, low, highWidth, "");
  } else {
    std::uint64_t high = (low << 1) - 1;
    std::snprintf(buf, sizeof buf, "%*" PRIu64 " - %-*" PRIu64, lowWidth, low, highWidth, high);
  }
  return buf;
}

void printHistogram(std::FILE* out, const char* title, const EndpointStats& st) {
  std::fprintf(out, "%s batch histogram:\n", title);
  const auto& h = st.sendBatchHistogram;
  std::size_t first = h.size(), last = 0;
  std::uint64_t peak = 0;
  for (std::size_t i = 0; i < h.size(); ++i) {
    if (h[i] == 0) continue;
    first = std::min(first, i);
    last = i;
    peak = std::max(peak, h[i]);
  }
  if (peak == 0) {
    std::fprintf(out, "   (no socket writes)\n\n");
    return;
  }
  int lowWidth = static_cast<int>(std::to_string(EndpointStats::batchBucketLow(last)).size());
  int highWidth = static_cast<int>(std::to_string((EndpointStats::batchBucketLow(last) << 1) - 1).size());
  int countWidth = std::max(9, static_cast<int>(withCommas(peak).size()));
  for (std::size_t i = first; i <= last; ++i) {
    auto stars = static_cast<int>(h[i] * static_cast<std::uint64_t>(kHistogramBarWidth) / peak);
    std::string bar = stars > 0 ? "  " + std::string(static_cast<std::size_t>(stars), '*') : "";
    std::fprintf(out, " %s | %*s%s\n", histogramLabel(i, lowWidth, highWidth).c_str(), countWidth,
                 withCommas(h[i]).c_str(), bar.c_str());
  }
  std::fprintf(out, "\n");
}

/// Greedy word wrap of the description, continuation lines indented.
void printDescription(std::FILE* out, const std::string& text) {
  std::istringstream words(text);
  std::string word, line;
  bool firstLine = true;
  auto emit = [&] {
    std::fprintf(out, "%s%s\n", firstLine ? "Description:       " : kIndent, line.c_str());
    firstLine = false;
    line.clear();
  };
  while (words >> word) {
    if (!line.empty() && line.size() + 1 + word.size() > kDescriptionWidth - std::char_traits<char>::length(kIndent)) {
      emit();
    }
    if (!line.empty()) line += ' ';
    line += word;
  }
  if (!line.empty() || firstLine) emit();
}

}  // namespace

void mergeStats(EndpointStats& into, const EndpointStats& from) {
  into.seconds = std::max(into.seconds, from.seconds);
  into.messagesSent += from.messagesSent;
  into.messagesReceived += from.messagesReceived;
  into.bytesSent += from.bytesSent;
  into.bytesReceived += from.bytesReceived;
  into.socketWrites += from.socketWrites;
  into.socketReads += from.socketReads;
  for (std::size_t i = 0; i < EndpointStats::kBatchBuckets; ++i) {
    into.sendBatchHistogram[i] += from.sendBatchHistogram[i];
  }
  into.maxBatchMessages = std::max(into.maxBatchMessages, from.maxBatchMessages);
  into.maxStagedBytes = std::max(into.maxStagedBytes, from.maxStagedBytes);
  into.maxQueuedBytes = std::max(into.maxQueuedBytes, from.maxQueuedBytes);
  into.maxReceiveBufferBytes = std::max(into.maxReceiveBufferBytes, from.maxReceiveBufferBytes);
  into.callsExecuted += from.callsExecuted;
  into.laneBufferBytes += from.laneBufferBytes;
}

// --- PerfReport ---------------------------------------------------------------

double PerfReport::sendBytesPerSecond() const { return ratio(static_cast<double>(local.bytesSent), seconds); }
double PerfReport::recvBytesPerSecond() const { return ratio(static_cast<double>(local.bytesReceived), seconds); }

double PerfReport::busiestAverageBatch() const {
  // Symmetric tests send as many messages each way: report the local side.
  if (hasRemote && remote.messagesSent > 2 * local.messagesSent) return remote.averageBatch();
  return local.averageBatch();
}

void PerfReport::printDetails(std::FILE* out) const {
  const std::uint64_t recvMsgs = local.messagesReceived;
  std::fprintf(out, "\n#### Start of test %s ####\n", name.c_str());
  printDescription(out, description);
  std::fprintf(out, "\nResults for:       %s\n", name.c_str());
  std::fprintf(out, "Duration:          %s\n", formatNanos(seconds * 1e9).c_str());
  std::fprintf(out, "Total test RPCs:   %s\n", withCommas(rpcs).c_str());
  std::fprintf(out, "RPC/s:             %s\n", withCommas(static_cast<std::uint64_t>(rps + 0.5)).c_str());
  if (rps > 0) std::fprintf(out, "One RPC every:     %s\n", formatNanos(1e9 / rps).c_str());
  std::fprintf(out, "Total msgs:        send: %s | recv: %s\n", withCommas(local.messagesSent).c_str(),
               withCommas(recvMsgs).c_str());
  const double avgSent = ratio(static_cast<double>(local.bytesSent), static_cast<double>(local.messagesSent));
  const double avgRecv = ratio(static_cast<double>(local.bytesReceived), static_cast<double>(recvMsgs));
  std::fprintf(out, "Avg msg size:      send: %s | recv: %s\n", decimalWithCommas(avgSent).c_str(),
               decimalWithCommas(avgRecv).c_str());
  if (latency.count() > 0) {
    std::fprintf(out, "Latency:           min: %s | avg: %s | max: %s\n",
                 formatNanos(static_cast<double>(latency.min())).c_str(), formatNanos(latency.mean()).c_str(),
                 formatNanos(static_cast<double>(latency.max())).c_str());
    std::fprintf(out, "Latency %%:         50%% in %s | 90%% in %s | 95%% in %s | 99%% in %s\n",
                 formatNanos(static_cast<double>(latency.percentile(50))).c_str(),
                 formatNanos(static_cast<double>(latency.percentile(90))).c_str(),
                 formatNanos(static_cast<double>(latency.percentile(95))).c_str(),
                 formatNanos(static_cast<double>(latency.percentile(99))).c_str());
  }
  std::fprintf(out, "\nTotal send bytes:  %-14s (%s bytes/sec)\n", withCommas(local.bytesSent).c_str(),
               withCommas(static_cast<std::uint64_t>(sendBytesPerSecond() + 0.5)).c_str());
  std::fprintf(out, "Total recv bytes:  %-14s (%s bytes/sec)\n", withCommas(local.bytesReceived).c_str(),
               withCommas(static_cast<std::uint64_t>(recvBytesPerSecond() + 0.5)).c_str());

  std::fprintf(out, "\nMax Buffered:     | Max Staged Bytes | Max Queued Bytes | Max Recv Buffer\n");
  auto marks = [&](const char* who, const EndpointStats& st) {
    std::fprintf(out, " %-16s | %16s | %16s | %15s\n", who, withCommas(st.maxStagedBytes).c_str(),
                 withCommas(st.maxQueuedBytes).c_str(), withCommas(st.maxReceiveBufferBytes).c_str());
  };
  marks("Local:", local);
  if (hasRemote) marks("Remote:", remote);

  std::fprintf(out, "\nBatching:         | Messages Sent | Socket Writes | Avg Batch Msgs |  Percent\n");
  auto batching = [&](const char* who, const EndpointStats& st) {
    std::fprintf(out, " %-16s | %13s | %13s | %14.1f | %7.2f%%\n", who, withCommas(st.messagesSent).c_str(),
                 withCommas(st.socketWrites).c_str(), st.averageBatch(),
                 100.0 * ratio(static_cast<double>(st.socketWrites), static_cast<double>(st.messagesSent)));
  };
  batching("Local  -> Remote", local);
  if (hasRemote) {
    batching("Remote -> Local", remote);
  } else {
    std::fprintf(out, " %-16s | %13s | %13s | %14s | %8s\n", "Remote -> Local", withCommas(recvMsgs).c_str(), "n/a",
                 "n/a", "n/a");
  }
  std::fprintf(out, "\n");
  printHistogram(out, "Local", local);
  if (hasRemote) printHistogram(out, "Remote", remote);
  std::fflush(out);
}

// --- PerfTimer ----------------------------------------------------------------

PerfTimer::PerfTimer(std::string name, std::string description, std::vector<Endpoint> endpoints)
    : name_(std::move(name)), description_(std::move(description)), endpoints_(std::move(endpoints)) {
  for (auto& ep : endpoints_) ep.getLocalStats(true);
  start_ = std::chrono::steady_clock::now();
}

void PerfTimer::recordLatency(std::uint64_t ns) {
  Shard& s = shards_[std::hash<std::thread::id>{}(std::this_thread::get_id()) % kShards];
  std::lock_guard lock(s.mu);
  s.histogram.record(ns);
}

void PerfTimer::mergeLatency(const LatencyHistogram& h) {
  Shard& s = shards_[0];
  std::lock_guard lock(s.mu);
  s.histogram.merge(h);
}

void PerfTimer::setRemoteStats(const EndpointStats& remote) {
  remote_ = remote;
  hasRemote_ = true;
}

PerfReport PerfTimer::stop() {
  PerfReport r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  r.name = name_;
  r.description = description_;
  r.rpcs = rpcs_.load();
  r.rps = ratio(static_cast<double>(r.rpcs), r.seconds);
  for (auto& ep : endpoints_) mergeStats(r.local, ep.getLocalStats(false));
  for (auto& s : shards_) {
    std::lock_guard lock(s.mu);
    r.latency.merge(s.histogram);
  }
  r.remote = remote_;
  r.hasRemote = hasRemote_;
  return r;
}

}  // namespace myelin
