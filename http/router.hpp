// Routes on method + path template (`/api/v1/users/{id}`): a trie over path segments, so a
// match costs one hash lookup per segment whatever the number of routes. A known path with an
// unknown method is 405 with the allowed methods; anything else unmatched is 404.
#pragma once
#include "domain/user.hpp"
#include "http/audit_rule.hpp"
#include "http/exchange.hpp"

#include <array>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <stdexcept>
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
  // ...or only when `metrics_require_token` is set (/metrics, for scrapers)...
  operator_metrics,
  // ...or a page whose handler answers 401 itself (with its sign-in form) when the token is
  // missing or wrong (exchange::operator_signed_in); a foreign Host is still refused.
  operator_page,
};

// Which rate limits a route's requests count against (docs/operations.md). Set by router::add:
// bearer routes count against their user's and tenant's buckets; open routes against their
// source address's: `login` under /api/v1/auth/, `webhook` for inbound webhooks, `address`
// for the rest (health, the OpenAPI document); operator routes against none.
enum class rate_class : std::uint8_t { user, login, webhook, address, none };

// What the OpenAPI document says of a route beyond method, path, summary and tag
// (http/handlers/openapi.cpp). Schemas are JSON Schema texts or the names of component schemas
// (router::schemas), which http/openapi_schema.hpp builds from the readers' own rules.
struct query_param {
  std::string name;
  std::string schema; // JSON Schema text
  std::string description;
};
struct path_param {
  std::string name;
  std::string schema; // JSON Schema text; path parameters not named are positive int64 ids
};
struct other_answer {
  int status = 200;
  std::string schema; // a component name; empty: no body
  std::string description;
};

struct route_doc {
  route_doc(std::string request_schema = {}, std::string response_schema = {})
      : request(std::move(request_schema)), response(std::move(response_schema)) {}
  // An open route that authenticates its caller by a shared secret in one of these headers.
  route_doc& with_secret_headers(std::vector<std::string> headers) {
    secret_headers = std::move(headers);
    return *this;
  }
  route_doc& with_query(std::vector<query_param> params) {
    for (auto& p : params) query.push_back(std::move(p));
    return *this;
  }
  // Request headers the handler reads (Idempotency-Key, a signature's id and time).
  route_doc& with_headers(std::vector<query_param> params) {
    for (auto& p : params) headers.push_back(std::move(p));
    return *this;
  }
  route_doc& with_path(std::string name, std::string schema) {
    path.push_back({std::move(name), std::move(schema)});
    return *this;
  }
  route_doc& with_example(std::string request_json) {
    example = std::move(request_json);
    return *this;
  }
  // Another answer than the route's success_status (a replay, an accepted-for-later).
  route_doc& also(int status, std::string schema, std::string description) {
    others.push_back({status, std::move(schema), std::move(description)});
    return *this;
  }
  // Error answers beyond those every route of its kind lists (a 401 of sign-in, a 409 of a
  // delete refused while in use): the shared error responses of contract §2.
  route_doc& fails_with(std::initializer_list<int> statuses) {
    errors.insert(errors.end(), statuses.begin(), statuses.end());
    return *this;
  }
  // A body the client may leave out.
  route_doc& with_optional_body() {
    body_required = false;
    return *this;
  }
  // A POST that takes no body.
  route_doc& without_body() {
    request_media.clear();
    return *this;
  }
  // Bodies that are not JSON (CSV import and export, the HTML reference page, metrics).
  route_doc& with_media(std::string request_type, std::string response_type) {
    request_media = std::move(request_type);
    response_media = std::move(response_type);
    return *this;
  }

  std::string request;  // the request body's component schema
  std::string response; // the success answer's component schema
  // An open route that authenticates its caller by a shared secret in a header (inbound
  // webhooks): the headers, any one of which is accepted (OpenAPI security schemes).
  std::vector<std::string> secret_headers;
  std::vector<query_param> query;
  std::vector<query_param> headers;
  std::vector<path_param> path;
  std::string example; // a request body, JSON text
  std::vector<other_answer> others;
  std::vector<int> errors;
  bool body_required = true;
  std::string request_media = "application/json";
  std::string response_media = "application/json";
};

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
  route_doc doc{};    // for the OpenAPI document
  // The largest body the route takes, in bytes (0: the configured --body-limit); chosen by the
  // matched route when the headers are in, never by what the raw target contains.
  std::size_t body_limit = 0;
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
    r.doc = std::move(d);
    add(std::move(r));
  }

  // Component schemas of the OpenAPI document (JSON text, by name), which routes name as their
  // request_schema and response_schema (http/openapi_schema.hpp builds them).
  // A name defined twice must mean one schema: two areas that chose the same name would
  // otherwise describe one of them wrongly, silently.
  void define_schema(std::string name, std::string json) {
    auto [it, added] = schemas_.try_emplace(name, json);
    if (!added && it->second != json)
      throw std::logic_error("OpenAPI schema " + name + " defined twice, differently");
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
  // The largest route::body_limit of any route (0: none has its own).
  std::size_t largest_body_limit() const { return largest_body_limit_; }
  const std::vector<std::unique_ptr<route>>& routes() const { return routes_; }

private:
  struct node;
  std::unique_ptr<node> root_;
  std::vector<std::unique_ptr<route>> routes_;
  std::size_t largest_body_limit_ = 0;
  std::map<std::string, std::string> schemas_;
};

} // namespace crm::http
