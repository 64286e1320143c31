// TLS when Myelin is built without OpenSSL (MYELIN_WITH_OPENSSL=OFF, or AUTO
// without libssl-dev): asking for TLS is a configuration error, said once,
// when the ConnectionInfo connects or starts.
#include "transport/tls.h"

namespace myelin::detail {

std::shared_ptr<TlsContext> TlsContext::create(const TlsConfig&, bool) {
  throw InvalidConfigurationError("TLS: this Myelin was built without OpenSSL (MYELIN_WITH_OPENSSL=OFF or libssl-dev "
                                  "missing)");
}

TlsContext::~TlsContext() = default;

struct TlsSession::Impl {};
TlsSession::TlsSession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TlsSession::~TlsSession() = default;
std::unique_ptr<TlsSession> TlsSession::handshake(const TlsContext&, int, const std::string&, const std::string&,
                                                  int) {
  throw InvalidConfigurationError("TLS: built without OpenSSL");
}
long TlsSession::send(const iovec*, int) { return -1; }
bool TlsSession::outputPending() const { return false; }
long TlsSession::recv(void*, std::size_t) { return -1; }
bool TlsSession::inputBuffered() const { return false; }
std::string TlsSession::lastError() const { return {}; }
std::string TlsSession::describe() const { return {}; }

}  // namespace myelin::detail
