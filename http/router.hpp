// Routes on method + path template (`/api/v1/users/{id}`): a trie over path segments, so a
// match costs one hash lookup per segment whatever the number of routes. A known path with an
// unknown method is 405 with the allowed methods; anything else unmatched is 404.
#pragma once
#include "domain/user.hpp"
#include "http/audit_rule.hpp"
#include "http/exchange.hpp"

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace crm::http {

using handler_fn = std::function<void(const exchange_ptr&)>;

enum class access : std::uint8_t {
  open,   // no token (login, refresh, health, webhooks with their own secret)
  bearer, // a valid access token with `perm`
  // The operations listener: a Host that is an IP literal, localhost or configured (against DNS
  // rebinding), and the operator token (refused when none is configured)...
  operator_token,
  // ...or only when `metrics_require_token` is set (/metrics, for scrapers).
  operator_metrics,
};

// Which rate limits a route's requests count against (docs/operations.md). Set by router::add:
// bearer routes count against their user's and tenant's buckets; open routes against their
// source address's: `login` under /api/v1/auth/, `webhook` for inbound webhooks, `address`
// for the rest (health, the OpenAPI document); operator routes against none.
enum class rate_class : std::uint8_t { user, login, webhook, address, none };

struct route {
  verb method = verb::get;
  std::string path;
  access auth = access::bearer;
  domain::permission perm = domain::permission::read_records;
  handler_fn handler;
  std::string summary; // for the OpenAPI document
  std::string tag;     // OpenAPI tag
  int success_status = 200;
  std::size_t index = 0; // position in the router, for per-route metrics
  rate_class limit = rate_class::user;
  audit_rule audit{}; // set by classify_audit (http/audit.cpp)
  // An open route that authenticates its caller by a shared secret in a header (inbound
  // webhooks): the headers, any one of which is accepted (OpenAPI security schemes).
  std::vector<std::string> secret_headers{};
  // The component schemas (router::schemas) of the request body and of the success answer's
  // body; empty: not described.
  std::string request_schema{};
  std::string response_schema{};
};

// What router::add(route, route_doc) adds to a route for the OpenAPI document.
struct route_doc {
  route_doc(std::string request_schema = {}, std::string response_schema = {})
      : request(std::move(request_schema)), response(std::move(response_schema)) {}
  static route_doc secrets(std::vector<std::string> headers) {
    route_doc d;
    d.secret_headers = std::move(headers);
    return d;
  }
  std::string request;
  std::string response;
  std::vector<std::string> secret_headers;
};

class router {
public:
  router();
  ~router();
  router(router&&) noexcept;
  router& operator=(router&&) noexcept;

  void add(route r);
  // With what the OpenAPI document says of it beyond method and path.
  void add(route r, route_doc d) {
    r.request_schema = std::move(d.request);
    r.response_schema = std::move(d.response);
    r.secret_headers = std::move(d.secret_headers);
    add(std::move(r));
  }

  // Component schemas of the OpenAPI document (JSON text, by name), which routes name as their
  // request_schema and response_schema (http/openapi_schema.hpp builds them).
  void define_schema(std::string name, std::string json) {
    schemas_[std::move(name)] = std::move(json);
  }
  const std::map<std::string, std::string>& schemas() const { return schemas_; }

  enum class outcome : std::uint8_t { found, not_found, method_not_allowed };
  struct match_result {
    outcome result = outcome::not_found;
    const route* matched = nullptr;
    std::vector<std::pair<std::string_view, std::string>> params;
    std::string allow; // for 405: "GET, POST"
  };

  match_result match(verb method, std::string_view path) const;
  const std::vector<std::unique_ptr<route>>& routes() const { return routes_; }

private:
  struct node;
  std::unique_ptr<node> root_;
  std::vector<std::unique_ptr<route>> routes_;
  std::map<std::string, std::string> schemas_;
};

} // namespace crm::http
