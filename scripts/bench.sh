#!/usr/bin/env bash
# Builds Myelin in Release and runs the benchmarks: the greeter example's
# service and client, the load programs (one-way call rate, sync round-trip
# latency beside raw TCP ping-pong of the same sizes, measured in one run) and
# the codec micro-benchmark. Installs what is missing first.
# Usage: ./scripts/bench.sh [--quick] [--duration S] [--calls N] [--connect host:port]
set -euo pipefail
source "$(dirname "$0")/lib/setup.sh"
cd "$myelin_root"
myelin_setup

quick=0
for a in "$@"; do
  if [ "$a" = "--quick" ]; then quick=1; fi
done

cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DMYELIN_BUILD_TESTS=OFF \
  -DMYELIN_BUILD_BENCH=ON -DMYELIN_BUILD_EXAMPLES=ON -DMYELIN_GEN_PYTHON="$myelin_root/.venv/bin/python" >/dev/null
cmake --build build-release -j 2

echo
echo "== Machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores," \
     "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u +%Y-%m-%dT%H:%MZ)"

echo
echo "== greeter example"
scripts/lib/run_greeter.sh build-release/examples/greeter

echo
echo "== load: one-way calls, sync round trips, raw TCP ping-pong"
build-release/bench/load_client "$@"

echo
echo "== codec micro-benchmark"
min_time=0.5
if [ "$quick" = 1 ]; then min_time=0.05; fi
build-release/bench/codec_bench --benchmark_min_time="$min_time"
