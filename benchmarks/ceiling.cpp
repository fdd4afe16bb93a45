// The HTTP ceiling for benchmarks/run: a bare Boost.Beast server on the same asio thread count,
// answering every request with a fixed 60-byte JSON body over keep-alive. carecrm's scenarios
// are reported as a share of what this reaches on the same machine in the same run.
//   crm_ceiling PORT THREADS [BYTES]: BYTES pads the body to that size (benchmarks/profile list:
//   the ceiling for an answer as large as a list page).
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <thread>
#include <vector>

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

std::string body = R"({"id":1,"first_name":"Ada","status":"active","ok":true,"x":12})";

class session : public std::enable_shared_from_this<session> {
public:
  explicit session(tcp::socket s) : stream_(std::move(s)) {}
  void run() { read(); }

private:
  void read() {
    req_ = {};
    http::async_read(stream_, buffer_, req_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) {
                       if (ec) return;
                       self->write();
                     });
  }
  void write() {
    auto res = std::make_shared<http::response<http::string_body>>(http::status::ok, 11);
    res->set(http::field::content_type, "application/json");
    res->keep_alive(req_.keep_alive());
    res->body() = body;
    res->prepare_payload();
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res](beast::error_code ec, std::size_t) {
                        if (ec || !res->keep_alive()) return;
                        self->read();
                      });
  }
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> req_;
};

void accept(net::io_context& ioc, tcp::acceptor& acceptor) {
  acceptor.async_accept(net::make_strand(ioc), [&](beast::error_code ec, tcp::socket s) {
    if (!ec) {
      s.set_option(tcp::no_delay(true));
      std::make_shared<session>(std::move(s))->run();
    }
    accept(ioc, acceptor);
  });
}

} // namespace

int main(int argc, char** argv) {
  unsigned short port = argc > 1 ? static_cast<unsigned short>(std::atoi(argv[1])) : 18090;
  int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  if (argc > 3) {
    auto size = static_cast<std::size_t>(std::atol(argv[3]));
    if (size > body.size() + 8) body = R"({"pad":")" + std::string(size - 10, 'x') + "\"}";
  }
  net::io_context ioc(threads);
  tcp::acceptor acceptor(ioc, {net::ip::make_address("127.0.0.1"), port});
  accept(ioc, acceptor);
  std::cout << "ceiling listening on 127.0.0.1:" << port << std::endl;
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back([&] { ioc.run(); });
  ioc.run();
}
