// OpenSSL requires the calling thread's error queue to be empty before each TLS I/O call:
// SSL_get_error reports SSL_ERROR_SSL whenever the queue holds an entry, whatever that entry is
// about. CAF 0.17.6's OpenSSL module (libcaf_openssl, the cluster's node-to-node TLS) never
// empties it: it reads the queue only inside logging compiled out of Debian's build. One
// connection's failure (a peer refused for its certificate, a peer gone without a TLS
// close_notify) then leaves an entry on the middleman's thread, and the next "would block" of
// any other connection on that thread reads as a failure: CAF drops a healthy connection between
// two nodes, and the requests in flight on it are answered 503.
//
// These definitions, exported by the executable (app/CMakeLists.txt), come before libssl's in
// symbol lookup: each empties the queue, then calls libssl's own function. Every other user of
// TLS in the process (Asio's streams, libpq) empties the queue itself before these calls, so for
// them nothing changes. tests/integration/test_cluster_tls.py shows the connection surviving a
// refused peer.
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

namespace {

template <class Fn>
Fn libssl(const char* name) {
  auto* f = dlsym(RTLD_NEXT, name);
  if (f == nullptr) {
    std::fprintf(stderr, "carecrm: libssl has no %s\n", name);
    std::abort();
  }
  return reinterpret_cast<Fn>(f);
}

} // namespace

extern "C" {

int SSL_read(SSL* ssl, void* buf, int num) {
  static const auto next = libssl<int (*)(SSL*, void*, int)>("SSL_read");
  ERR_clear_error();
  return next(ssl, buf, num);
}

int SSL_write(SSL* ssl, const void* buf, int num) {
  static const auto next = libssl<int (*)(SSL*, const void*, int)>("SSL_write");
  ERR_clear_error();
  return next(ssl, buf, num);
}

int SSL_connect(SSL* ssl) {
  static const auto next = libssl<int (*)(SSL*)>("SSL_connect");
  ERR_clear_error();
  return next(ssl);
}

int SSL_accept(SSL* ssl) {
  static const auto next = libssl<int (*)(SSL*)>("SSL_accept");
  ERR_clear_error();
  return next(ssl);
}

} // extern "C"
