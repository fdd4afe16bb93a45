// GET /api/v1/openapi.json: an OpenAPI 3.1 document generated from the router itself, so it
// lists exactly the routes that are served.
#include "http/api.hpp"

#include <boost/json.hpp>

#include <map>

namespace crm::http {

namespace json = boost::json;

namespace {
json::object ref(std::string_view kind, std::string_view name) {
  return json::object{{"$ref", "#/components/" + std::string(kind) + "/" + std::string(name)}};
}

json::object header(std::string_view description, std::string_view type) {
  return json::object{{"description", description}, {"schema", json::object{{"type", type}}}};
}
} // namespace

std::string openapi_document(const router& r) {
  json::object paths;
  for (auto& rt : r.routes()) {
    json::object op;
    op["summary"] = rt->summary;
    if (!rt->tag.empty()) op["tags"] = json::array{json::string(rt->tag)};
    op["operationId"] = std::string(to_string(rt->method)) + " " + rt->path;
    json::array params;
    std::string_view p = rt->path;
    for (std::size_t i = p.find('{'); i != std::string_view::npos; i = p.find('{', i + 1)) {
      auto j = p.find('}', i);
      json::object param;
      param["name"] = p.substr(i + 1, j - i - 1);
      param["in"] = "path";
      param["required"] = true;
      param["schema"] = json::object{{"type", "integer"}};
      params.emplace_back(std::move(param));
    }
    if (!params.empty()) op["parameters"] = std::move(params);
    json::object responses;
    // Every answer of the API listener carries the IETF rate-limit fields (docs/operations.md).
    auto rate_headers = [] {
      return json::object{{"RateLimit-Policy", ref("headers", "RateLimit-Policy")},
                          {"RateLimit", ref("headers", "RateLimit")}};
    };
    responses[std::to_string(rt->success_status)] =
        json::object{{"description", "success"}, {"headers", rate_headers()}};
    if (rt->auth == access::bearer) {
      responses["401"] = json::object{{"description", "INVALID_CREDENTIALS"}};
      responses["403"] = json::object{{"description", "INSUFFICIENT_PERMISSIONS"}};
      op["security"] = json::array{json::object{{"bearerAuth", json::array{}}}};
    }
    responses["422"] = json::object{{"description", "validation error (HTTPValidationError)"}};
    auto limited = rate_headers();
    limited["Retry-After"] = ref("headers", "Retry-After");
    responses["429"] = json::object{
        {"description", "RATE_LIMITED: a rate limit is reached; retry after Retry-After"
                        " seconds"},
        {"headers", std::move(limited)}};
    responses["503"] = json::object{
        {"description", "SERVICE_UNAVAILABLE: a part the request needs is unavailable or busy;"
                        " safe to retry"}};
    op["responses"] = std::move(responses);
    std::string method(to_string(rt->method));
    for (auto& c : method) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    auto& item = paths[rt->path];
    if (!item.is_object()) item = json::object{};
    item.as_object()[method] = std::move(op);
  }
  json::object doc;
  doc["openapi"] = "3.1.0";
  doc["info"] = json::object{{"title", "carecrm API"},
                             {"version", "1.0.0"},
                             {"description", "Multi-tenant healthcare CRM"}};
  doc["paths"] = std::move(paths);
  doc["components"] = json::object{
      {"securitySchemes", json::object{{"bearerAuth", json::object{{"type", "http"},
                                                                   {"scheme", "bearer"},
                                                                   {"bearerFormat", "JWT"}}}}},
      {"headers",
       json::object{
           {"RateLimit-Policy",
            header("the policies this request counted against, e.g. \"user\";q=6000;w=60"
                   " (draft-ietf-httpapi-ratelimit-headers)",
                   "string")},
           {"RateLimit", header("the policy closest to running out: r requests left, t seconds"
                                " until it is full again",
                                "string")},
           {"Retry-After", header("seconds until one request is allowed", "integer")}}}};
  return json::serialize(doc);
}

void add_openapi_route(router& r, const router& documented) {
  // Built at start-up after every route is added; the document itself is listed too.
  auto doc = std::make_shared<std::string>();
  r.add({verb::get,
         "/api/v1/openapi.json",
         access::open,
         {},
         [doc](const exchange_ptr& ex) { ex->json(200, *doc); },
         "This OpenAPI document",
         "operations"});
  *doc = openapi_document(documented);
}

} // namespace crm::http
