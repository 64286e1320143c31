// TLS for the benchmark programs (docs/benchmark-suite.md): the suite's
// `--tls` makes a throwaway certificate and passes it to every program it
// starts in three environment variables; without them everything is plain.
#pragma once

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace bench {

struct TlsEnv {
  std::string cert;  ///< MYELIN_BENCH_TLS_CERT: a service's certificate (PEM file)
  std::string key;   ///< MYELIN_BENCH_TLS_KEY: its private key (PEM file)
  std::string ca;    ///< MYELIN_BENCH_TLS_CA: what clients trust (PEM file)

  static TlsEnv fromEnvironment() {
    auto get = [](const char* name) {
      const char* v = std::getenv(name);
      return std::string(v ? v : "");
    };
    return {get("MYELIN_BENCH_TLS_CERT"), get("MYELIN_BENCH_TLS_KEY"), get("MYELIN_BENCH_TLS_CA")};
  }
  bool service() const { return !cert.empty() && !key.empty(); }
  bool client() const { return !ca.empty(); }

  /// A file's contents (gRPC takes PEM text, not paths).
  static std::string read(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read " + path);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
};

/// Turns TLS on for a Myelin service or client when the suite asked for it.
template <class ConnectionInfo>
ConnectionInfo& withBenchTls(ConnectionInfo& ci, bool service) {
  TlsEnv tls = TlsEnv::fromEnvironment();
  if (service && tls.service()) ci.setOpenSsl(true, tls.cert, tls.key);
  if (!service && tls.client()) ci.setOpenSsl(true).setTlsCaFile(tls.ca);
  return ci;
}

}  // namespace bench
