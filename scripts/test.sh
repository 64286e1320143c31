#!/usr/bin/env bash
# Builds and runs every Myelin test: unit and integration tests (ctest), the
# generator's pytest suite, the benchmark suite once in --quick mode (every
# test must run and verify its replies; speed is never asserted), an
# ASan+UBSan build and a TSan build of the C++ tests, a clang-14 warning
# check, and the examples (greeter, city guide, chat) built against the
# installed package and run.
# Installs what is missing first. Usage: ./scripts/test.sh
set -euo pipefail
source "$(dirname "$0")/lib/setup.sh"
cd "$myelin_root"
myelin_setup

jobs=2
passed=0
failed=0

# Runs ctest in build dir $1 with extra args; adds its counts to the totals.
run_ctest() {
  local dir="$1"
  shift
  local log="$dir/ctest.log"
  local rc=0
  ctest --test-dir "$dir" --output-on-failure -j "$jobs" "$@" 2>&1 | tee "$log" || rc=$?
  local line
  line="$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1 || true)"
  if [ -z "$line" ]; then
    echo "test.sh: no ctest summary in $dir" >&2
    failed=$((failed + 1))
    return 0
  fi
  local f total
  f="$(echo "$line" | sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/')"
  total="$(echo "$line" | sed -E 's/.* failed out of ([0-9]+).*/\1/')"
  passed=$((passed + total - f))
  failed=$((failed + f))
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then failed=$((failed + 1)); fi
}

configure() {
  local dir="$1"
  shift
  cmake -S . -B "$dir" -G Ninja -DMYELIN_GEN_PYTHON="$myelin_root/.venv/bin/python" "$@" >/dev/null
}

echo "== Debug build (g++) and tests"
configure build -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS="-Werror" -DMYELIN_REQUIRE_GRPC=ON
cmake --build build -j "$jobs"
run_ctest build

echo "== Benchmark suite, --quick (each test runs and verifies; no speed asserted)"
if .venv/bin/python scripts/bench/driver.py --build-dir build --quick --results build/bench-quick; then
  passed=$((passed + 1))
else
  echo "test.sh: the quick benchmark run failed" >&2
  failed=$((failed + 1))
fi

echo "== Generator tests (pytest)"
pylog="build/pytest.log"
rc=0
(cd tools/myelin-gen && "$myelin_root/.venv/bin/python" -m pytest -q tests) 2>&1 | tee "$pylog" || rc=$?
p="$(grep -Eo '[0-9]+ passed' "$pylog" | tail -1 | cut -d' ' -f1 || true)"
f="$(grep -Eo '[0-9]+ failed' "$pylog" | tail -1 | cut -d' ' -f1 || true)"
passed=$((passed + ${p:-0}))
failed=$((failed + ${f:-0}))
if [ "$rc" -ne 0 ] && [ -z "$f" ]; then failed=$((failed + 1)); fi

echo "== ASan+UBSan build and tests"
configure build-asan -DCMAKE_BUILD_TYPE=Debug -DMYELIN_BUILD_BENCH=OFF -DMYELIN_SANITIZE=address,undefined
cmake --build build-asan -j "$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 run_ctest build-asan

echo "== TSan build and tests"
configure build-tsan -DCMAKE_BUILD_TYPE=Debug -DMYELIN_BUILD_BENCH=OFF -DMYELIN_SANITIZE=thread
cmake --build build-tsan -j "$jobs"
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 run_ctest build-tsan

echo "== clang-14 warning check"
configure build-clang -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_CXX_FLAGS="-Werror" \
  -DMYELIN_BUILD_TESTS=ON -DMYELIN_BUILD_BENCH=ON
cmake --build build-clang -j "$jobs"

echo "== examples against the installed package"
rm -rf build/install build/examples
cmake --install build --prefix build/install >/dev/null
# example directory, then its service and client commands (run_example.sh)
examples=(
  "greeter" "greeter_service" "greeter_client"
  "city_guide" "guide_service" "guide_client"
  "chat" "chat_peer --listen" "chat_peer --connect"
)
for ((i = 0; i < ${#examples[@]}; i += 3)); do
  name=${examples[i]}
  dir="build/examples/$name"
  echo "-- $name"
  cmake -S "examples/$name" -B "$dir" -G Ninja -DCMAKE_PREFIX_PATH="$myelin_root/build/install" \
    -DMYELIN_GEN_PYTHON="$myelin_root/.venv/bin/python" >/dev/null
  cmake --build "$dir" -j "$jobs"
  if scripts/lib/run_example.sh "$dir/${examples[i + 1]}" "$dir/${examples[i + 2]}"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
  fi
done

echo
echo "test.sh summary (ctest, pytest, sanitizer builds, examples):"
echo "${passed} passed, ${failed} failed"
[ "$failed" -eq 0 ]
