// Resident memory of this process, for the benchmarks' memory reports: the
// current and the peak resident set (VmRSS, VmHWM) from /proc/self/status.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace bench {

/// {VmRSS, VmHWM} in KiB; zeros where /proc is not available.
inline std::array<std::uint64_t, 2> residentMemoryKb() {
  std::array<std::uint64_t, 2> kb{0, 0};
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return kb;
  char line[256];
  while (std::fgets(line, sizeof line, f)) {
    unsigned long long v = 0;
    if (std::sscanf(line, "VmRSS: %llu kB", &v) == 1) kb[0] = v;
    if (std::sscanf(line, "VmHWM: %llu kB", &v) == 1) kb[1] = v;
  }
  std::fclose(f);
  return kb;
}

}  // namespace bench
