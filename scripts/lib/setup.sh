# Shared set-up for scripts/test.sh and scripts/bench.sh (sourced, not run):
# installs the Debian packages Myelin builds with, if missing, and the pinned
# Python venv (.venv) that runs the generator. Idempotent; says what it installs.

myelin_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

# Packages: compiler and build tools, standalone Asio, GoogleTest, Google
# Benchmark, OpenSSL, Python for the generator, clang 14 for the second
# compiler check.
myelin_apt_packages=(cmake ninja-build g++ clang-14 libasio-dev libgtest-dev libbenchmark-dev libssl-dev openssl
                     python3 python3-venv python3-pip
                     libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc pkg-config)

myelin_install_packages() {
  local missing=()
  local p
  for p in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "setup: Debian packages present: $*"
    return 0
  fi
  echo "setup: installing Debian packages: ${missing[*]}"
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

myelin_setup_venv() {
  local venv="$myelin_root/.venv"
  # The generator's pins (libclang) and the benchmark driver's (matplotlib).
  local reqs=("$myelin_root/tools/myelin-gen/requirements.txt" "$myelin_root/scripts/bench/requirements.txt")
  local stamp="$venv/.requirements.sha256"
  local want
  want="$(cat "${reqs[@]}" | sha256sum | cut -d' ' -f1)"
  if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "setup: Python venv .venv is up to date ($(cat "${reqs[@]}" | tr '\n' ' '))"
    return 0
  fi
  echo "setup: creating Python venv .venv with: $(cat "${reqs[@]}" | tr '\n' ' ')"
  python3 -m venv "$venv"
  local r
  for r in "${reqs[@]}"; do
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$r"
  done
  echo "$want" > "$stamp"
}

myelin_setup() {
  myelin_install_packages "${myelin_apt_packages[@]}" "$@"
  myelin_setup_venv
}
