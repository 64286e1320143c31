// Throwaway certificates for the TLS tests, made with OpenSSL's API at test
// time: CAs, service and client certificates (valid, expired, for another
// host), written as PEM files into a fresh temporary directory.
#pragma once

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace myelin_test {

/// A key and its certificate, owned; `issue` signs certificates with them.
class TestCert {
 public:
  TestCert() = default;
  TestCert(TestCert&& o) noexcept : key_(o.key_), cert_(o.cert_) { o.key_ = nullptr, o.cert_ = nullptr; }
  TestCert(const TestCert&) = delete;
  TestCert& operator=(const TestCert&) = delete;
  ~TestCert() {
    X509_free(cert_);
    EVP_PKEY_free(key_);
  }

  /// A self-signed CA named `cn`.
  static TestCert ca(const std::string& cn) { return make(cn, nullptr, true, "", 0, 365); }
  /// A certificate for `cn` signed by `issuer`, carrying `san` ("DNS:x,IP:y")
  /// and valid from `fromDays` to `toDays` days after now.
  static TestCert leaf(const TestCert& issuer, const std::string& cn, const std::string& san, long fromDays = 0,
                       long toDays = 30) {
    return make(cn, &issuer, false, san, fromDays, toDays);
  }

  /// Writes the certificate and key as `<dir>/<name>.pem` and `.key`.
  void write(const std::filesystem::path& dir, const std::string& name) const {
    writePem(dir / (name + ".pem"), [&](FILE* f) { return PEM_write_X509(f, cert_); });
    writePem(dir / (name + ".key"), [&](FILE* f) {
      return PEM_write_PrivateKey(f, key_, nullptr, nullptr, 0, nullptr, nullptr);
    });
  }

 private:
  template <class F>
  static void writePem(const std::filesystem::path& p, F&& write) {
    FILE* f = std::fopen(p.c_str(), "w");
    if (!f || write(f) != 1) throw std::runtime_error("cannot write " + p.string());
    std::fclose(f);
  }

  static TestCert make(const std::string& cn, const TestCert* issuer, bool isCa, const std::string& san,
                       long fromDays, long toDays) {
    TestCert c;
    c.key_ = EVP_EC_gen("P-256");
    c.cert_ = X509_new();
    if (!c.key_ || !c.cert_) throw std::runtime_error("cannot make a key");
    static long serial = 1;
    X509_set_version(c.cert_, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(c.cert_), ++serial);
    X509_gmtime_adj(X509_getm_notBefore(c.cert_), fromDays * 86400L - 60);
    X509_gmtime_adj(X509_getm_notAfter(c.cert_), toDays * 86400L);
    X509_set_pubkey(c.cert_, c.key_);
    X509_NAME* name = X509_get_subject_name(c.cert_);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                               0);
    X509* issuerCert = issuer ? issuer->cert_ : c.cert_;
    X509_set_issuer_name(c.cert_, X509_get_subject_name(issuerCert));
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuerCert, c.cert_, nullptr, nullptr, 0);
    auto ext = [&](int nid, const std::string& value) {
      X509_EXTENSION* e = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
      if (!e) throw std::runtime_error("bad extension " + value);
      X509_add_ext(c.cert_, e, -1);
      X509_EXTENSION_free(e);
    };
    if (isCa) {
      ext(NID_basic_constraints, "critical,CA:TRUE");
      ext(NID_key_usage, "critical,keyCertSign,cRLSign");
    } else {
      ext(NID_basic_constraints, "CA:FALSE");
      ext(NID_key_usage, "critical,digitalSignature");
      ext(NID_ext_key_usage, "serverAuth,clientAuth");
      if (!san.empty()) ext(NID_subject_alt_name, san);
    }
    if (X509_sign(c.cert_, issuer ? issuer->key_ : c.key_, EVP_sha256()) == 0) {
      throw std::runtime_error("cannot sign " + cn);
    }
    return c;
  }

  EVP_PKEY* key_ = nullptr;
  X509* cert_ = nullptr;
};

/// A temporary directory with every certificate the tests use, removed at
/// the end: ca, other-ca, service (localhost and 127.0.0.1), service-other
/// (signed by other-ca), service-expired, service-elsewhere (another host),
/// client and client-other (signed by other-ca).
class TestPki {
 public:
  TestPki() {
    char tmpl[] = "/tmp/myelin-tls-XXXXXX";
    if (!::mkdtemp(tmpl)) throw std::runtime_error("cannot make a temporary directory");
    dir_ = tmpl;
    TestCert ca = TestCert::ca("Myelin Test CA");
    TestCert other = TestCert::ca("Another CA");
    ca.write(dir_, "ca");
    other.write(dir_, "other-ca");
    const std::string local = "DNS:localhost,IP:127.0.0.1";
    TestCert::leaf(ca, "localhost", local).write(dir_, "service");
    TestCert::leaf(other, "localhost", local).write(dir_, "service-other");
    TestCert::leaf(ca, "localhost", local, -30, -1).write(dir_, "service-expired");
    TestCert::leaf(ca, "elsewhere.example", "DNS:elsewhere.example").write(dir_, "service-elsewhere");
    TestCert::leaf(ca, "test client", "").write(dir_, "client");
    TestCert::leaf(other, "stranger", "").write(dir_, "client-other");
  }
  ~TestPki() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string pem(const std::string& name) const { return (dir_ / (name + ".pem")).string(); }
  std::string key(const std::string& name) const { return (dir_ / (name + ".key")).string(); }

 private:
  std::filesystem::path dir_;
};

}  // namespace myelin_test
