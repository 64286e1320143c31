#!/usr/bin/env bash
# The main job: builds Myelin and the gRPC baseline in Release and runs the
# benchmark suite — Table A (Myelin vs gRPC C++, alternating runs, medians),
# then the load programs (one-way call rate; sync round trips beside raw TCP
# ping-pong of the same sizes, in the same run) and the codec micro-benchmark.
# Installs what is missing first. Results and charts go to results/<time>/.
# Usage: ./scripts/bench.sh [--quick] [--duration S] [--threads N] [--repeat R]
#                           [--only REGEX] [--tables ABC]
#                           [--connect HOST:PORT --connect-grpc HOST:PORT --connect-raw HOST:PORT
#                            --connect-ceiling HOST:PORT]
# Two hosts: start build-release/bench/{bench_service,grpc/grpc_service,raw_echo_service} HOST:PORT
# and build-release/bench/raw_ceiling --serve HOST:PORT on the service host (each serves until
# its stdin closes) and pass their addresses.
set -euo pipefail
source "$(dirname "$0")/lib/setup.sh"
cd "$myelin_root"
myelin_setup

quick=0
for a in "$@"; do
  if [ "$a" = "--quick" ]; then quick=1; fi
done

cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DMYELIN_BUILD_TESTS=OFF \
  -DMYELIN_BUILD_BENCH=ON -DMYELIN_BUILD_EXAMPLES=ON -DMYELIN_REQUIRE_GRPC=ON \
  -DMYELIN_GEN_PYTHON="$myelin_root/.venv/bin/python" >/dev/null
cmake --build build-release -j 2

echo
echo "== greeter example"
scripts/lib/run_example.sh build-release/examples/greeter/greeter_service build-release/examples/greeter/greeter_client

echo
echo "== Table A: Myelin vs gRPC"
.venv/bin/python scripts/bench/driver.py --build-dir build-release "$@"

echo
echo "== load: one-way calls, sync round trips beside raw TCP ping-pong"
if [ "$quick" = 1 ]; then
  build-release/bench/load_client --quick
else
  build-release/bench/load_client
fi

echo
echo "== codec micro-benchmark"
min_time=0.5
if [ "$quick" = 1 ]; then min_time=0.05; fi
build-release/bench/codec_bench --benchmark_min_time="$min_time"
