// Request parsing as the session does it after Beast: the target split into a percent-decoded
// path and query, the text checks run before every handler, and the router's match on the
// API's route templates. Input: "<method> <target>\n<header lines>".
#include "http/message.hpp"
#include "http/router.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace {

const crm::http::router& api_routes() {
  static const crm::http::router r = [] {
    using namespace crm::http;
    router out;
    auto add = [&](verb v, const char* path, crm::http::access a = crm::http::access::bearer) {
      route rt;
      rt.method = v;
      rt.path = path;
      rt.auth = a;
      rt.handler = [](const exchange_ptr&) {};
      out.add(std::move(rt));
    };
    add(verb::post, "/api/v1/auth/login", crm::http::access::open);
    add(verb::get, "/api/v1/contacts");
    add(verb::post, "/api/v1/contacts");
    add(verb::get, "/api/v1/contacts/{id}");
    add(verb::patch, "/api/v1/contacts/{id}");
    add(verb::del, "/api/v1/contacts/{id}");
    add(verb::post, "/api/v1/contacts/{id}/tags");
    add(verb::del, "/api/v1/contacts/{id}/tags/{tag}");
    add(verb::put, "/api/v1/tags/{name}");
    add(verb::post, "/api/v1/channels/{id}/api/webhook", crm::http::access::open);
    add(verb::post, "/api/v1/channels/{id}/telegram/webhook", crm::http::access::open);
    add(verb::post, "/api/v1/webhooks/{workflow_id}", crm::http::access::open);
    add(verb::get, "/api/v1/webhooks/info/{workflow_id}");
    add(verb::get, "/api/v1/pipelines/{id}/board");
    add(verb::post, "/api/v1/deals/{id}/move");
    add(verb::get, "/api/v1/ai/agents/{id}/knowledge");
    add(verb::get, "/healthz", crm::http::access::open);
    return out;
  }();
  return r;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace crm::http;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto line_end = in.find('\n');
  auto first = in.substr(0, line_end);
  auto space = first.find(' ');
  request req;
  req.method = parse_verb(first.substr(0, space));
  set_target(req, space == std::string_view::npos ? first : first.substr(space + 1));
  for (auto rest = line_end == std::string_view::npos ? std::string_view{}
                                                      : in.substr(line_end + 1);
       !rest.empty();) {
    auto end = rest.find('\n');
    auto line = rest.substr(0, end);
    if (auto colon = line.find(':'); colon != std::string_view::npos)
      req.headers.emplace_back(std::string(line.substr(0, colon)),
                               std::string(line.substr(colon + 1)));
    rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
  }
  (void)non_text_input(req);
  (void)req.query_value("page");
  auto m = api_routes().match(req.method, req.path);
  if (m.result == router::outcome::found && !m.matched) __builtin_trap();
  return 0;
}
