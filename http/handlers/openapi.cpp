// GET /api/v1/openapi.json: an OpenAPI 3.1 document generated from the router itself, so it
// lists exactly the routes that are served, each with how it is authenticated, its parameters
// and every error answer of contract §2 with its body. GET /api/v1/docs: the same document read
// by Redoc (its standalone bundle is part of the binary: no CDN).
#include "domain/json_parse.hpp"
#include "http/api.hpp"
#include "http/error_map.hpp"

#include <boost/json.hpp>

#include <cctype>
#include <map>
#include <set>

namespace crm::http {

namespace json = boost::json;

namespace {

json::object ref(std::string_view kind, std::string_view name) {
  return json::object{{"$ref", "#/components/" + std::string(kind) + "/" + std::string(name)}};
}

json::object header(std::string_view description, json::object schema) {
  return json::object{{"description", description}, {"schema", std::move(schema)}};
}

json::object type(std::string_view t) {
  return json::object{{"type", t}};
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// get /api/v1/contacts/{id}/consents -> getContactsByIdConsents: URL-safe and unique (a
// method and a path are one route).
std::string operation_id(const route& rt) {
  std::string id = lower(to_string(rt.method));
  std::string_view p = rt.path;
  if (p.rfind("/api/v1", 0) == 0) p.remove_prefix(7);
  bool upper = true;
  for (char c : p) {
    if (c == '{') {
      id += "By";
      upper = true;
      continue;
    }
    if (c == '}') {
      upper = true;
      continue;
    }
    if (!std::isalnum(static_cast<unsigned char>(c))) {
      upper = true;
      continue;
    }
    id += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return id;
}

// A path parameter's schema: what the route declares (route_doc::with_path), else an id.
json::object path_parameter_schema(const route& rt, std::string_view name) {
  for (auto& p : rt.doc.path)
    if (p.name == name) return crm::domain::parse_json(p.schema).as_object();
  return json::object{{"type", "integer"}, {"format", "int64"}, {"minimum", 1}};
}

bool is_json(std::string_view media) {
  return media == "application/json" ||
         (media.size() > 5 && media.substr(media.size() - 5) == "+json");
}

// The schema of a body of `media`: the named component for JSON, else text.
json::object body_schema(std::string_view media, const std::string& component) {
  // A form's fields are an object's properties in OpenAPI (Twilio's webhooks).
  const bool form = media == "application/x-www-form-urlencoded";
  if (!is_json(media) && !(form && !component.empty())) return type("string");
  return component.empty() ? type("object") : ref("schemas", component);
}

// The security schemes of the secret headers inbound webhooks use.
std::string scheme_of_header(std::string_view h) {
  std::string out;
  bool upper = false;
  for (char c : h) {
    if (!std::isalnum(static_cast<unsigned char>(c))) {
      upper = true;
      continue;
    }
    out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c)))
                 : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    upper = false;
  }
  return out + "Header";
}

const std::map<std::string, std::string>& tag_descriptions() {
  static const std::map<std::string, std::string> all = {
      {"auth", "Sign-in, token refresh with rotation, sign-out"},
      {"users", "The tenant's staff and their roles"},
      {"api-keys", "Keys for integrators: a role and an optional expiry, shown once, revocable"},
      {"contacts", "Patients and other contacts, with custom fields and tags"},
      {"companies", "Organisations contacts belong to"},
      {"tags", "Tags across the tenant's contacts"},
      {"fields", "Custom-field definitions per entity"},
      {"pipelines", "Sales pipelines and their stages"},
      {"deals", "Deals moving through a pipeline"},
      {"channels", "Messaging channels and their inbound webhooks"},
      {"conversations", "Conversations and messages with contacts"},
      {"workflows", "Automations: triggers, steps, runs"},
      {"webhooks", "Inbound workflow webhooks and outbound subscriptions"},
      {"ai", "AI agents, their knowledge and their replies"},
      {"consents", "A contact's consents and their history"},
      {"notes", "Notes colleagues leave on a contact's record"},
      {"tasks", "What someone must do and by when, about a contact, deal or appointment"},
      {"views", "Contact searches saved for a user or shared with the tenant"},
      {"inbox", "The shared inbox: teams, routing of new conversations, availability"},
      {"appointments", "Calendars, services, free slots and appointments"},
      {"fhir", "Contacts as FHIR R4 Patient resources"},
      {"audit", "The audit trail of access to health data"},
      {"operations", "Health, readiness and this document"},
  };
  return all;
}

// The `code` of every error body, from the one mapping that makes them (http/error_map.hpp).
json::array error_codes() {
  using domain::errc;
  json::array out;
  for (auto e : {errc::invalid_credentials, errc::insufficient_permissions, errc::not_found,
                 errc::method_not_allowed, errc::duplicate_email, errc::conflict,
                 errc::payload_too_large, errc::validation, errc::rate_limited,
                 errc::service_unavailable, errc::internal, errc::second_factor_required})
    if (!describe(e).code.empty()) out.emplace_back(describe(e).code);
  return out;
}

json::object error_response(std::string_view description, std::string_view schema) {
  return json::object{
      {"description", description},
      {"headers", json::object{{"X-Request-Id", ref("headers", "X-Request-Id")}}},
      {"content",
       json::object{{"application/json", json::object{{"schema", ref("schemas", schema)}}}}}};
}

json::object components(const std::set<std::string>& secret_headers) {
  json::object schemes{
      {"bearerAuth",
       json::object{{"type", "http"},
                    {"scheme", "bearer"},
                    {"bearerFormat", "JWT"},
                    {"description", "An access token from POST /api/v1/auth/login or /refresh"}}}};
  for (auto& h : secret_headers)
    schemes[scheme_of_header(h)] = json::object{
        {"type", "apiKey"},
        {"in", "header"},
        {"name", h},
        {"description", "The shared secret (or signature) configured for this webhook"}};

  json::object schemas{
      {"Error",
       json::object{
           {"type", "object"},
           {"required", json::array{"detail", "code"}},
           {"properties",
            json::object{
                {"detail", json::object{{"type", "string"}, {"description", "For people"}}},
                {"code", json::object{{"type", "string"}, {"enum", error_codes()}}},
                {"merged_into",
                 json::object{{"type", "integer"},
                              {"format", "int64"},
                              {"description", "A contact's 404 after it was merged: the contact "
                                              "it was merged into"}}},
                {"contact_ids",
                 json::object{{"type", "array"},
                              {"items", json::object{{"type", "integer"}, {"format", "int64"}}},
                              {"description", "An inbound message's 409 when its phone and its "
                                              "e-mail belong to two contacts: the two (the "
                                              "phone's first), to merge"}}}}},
           {"description", "Every error answer but 422 (contract §2)"}}},
      {"ValidationIssue",
       json::object{
           {"type", "object"},
           {"required", json::array{"loc", "msg", "type"}},
           {"properties",
            json::object{
                {"loc",
                 json::object{
                     {"type", "array"},
                     {"minItems", 1},
                     {"items",
                      json::object{{"oneOf", json::array{type("string"), type("integer")}}}},
                     {"description", "path, query, header or body, then the field (and index)"}}},
                {"msg", type("string")},
                {"type", json::object{{"type", "string"},
                                      {"examples", json::array{"missing", "string_too_long",
                                                               "value_error.email"}}}}}}}},
      {"ValidationError",
       json::object{
           {"type", "object"},
           {"required", json::array{"detail"}},
           {"properties",
            json::object{{"detail", json::object{{"type", "array"},
                                                 {"minItems", 1},
                                                 {"items", ref("schemas", "ValidationIssue")}}}}},
           {"description", "422: every failing field (FastAPI's HTTPValidationError)"}}},
  };

  auto with_limits = [](json::object headers) {
    headers["RateLimit-Policy"] = ref("headers", "RateLimit-Policy");
    headers["RateLimit"] = ref("headers", "RateLimit");
    headers["X-Request-Id"] = ref("headers", "X-Request-Id");
    return headers;
  };
  json::object responses{
      {"Unauthorized", error_response("INVALID_CREDENTIALS: no valid token (or secret); at "
                                      "sign-in, TOTP_REQUIRED: the password was right and the "
                                      "account's one-time code is needed",
                                      "Error")},
      {"Forbidden",
       error_response("INSUFFICIENT_PERMISSIONS: the role does not allow it", "Error")},
      {"NotFound", error_response("NOT_FOUND: no such resource", "Error")},
      {"Conflict",
       error_response("DUPLICATE_EMAIL or CONFLICT: the state does not allow it", "Error")},
      {"PayloadTooLarge", error_response("PAYLOAD_TOO_LARGE: the body is over the limit", "Error")},
      {"ValidationFailed",
       error_response("A path, query, header or body field is invalid", "ValidationError")},
      {"InternalError",
       error_response("INTERNAL_ERROR: a bug; the body never leaks internals", "Error")},
  };
  auto limited = error_response("RATE_LIMITED: a rate limit is reached; retry after Retry-After "
                                "seconds",
                                "Error");
  limited["headers"] = with_limits(json::object{{"Retry-After", ref("headers", "Retry-After")}});
  responses["RateLimited"] = std::move(limited);
  responses["Unavailable"] = error_response(
      "SERVICE_UNAVAILABLE: a part the request needs is unavailable or busy; safe to retry",
      "Error");

  json::object headers{
      {"RateLimit-Policy",
       header("the policies this request counted against, e.g. \"user\";q=6000;w=60"
              " (draft-ietf-httpapi-ratelimit-headers)",
              type("string"))},
      {"RateLimit", header("the policy closest to running out: r requests left, t seconds"
                           " until it is full again",
                           type("string"))},
      {"Retry-After", header("seconds until one request is allowed", type("integer"))},
      {"Location", header("the created resource",
                          json::object{{"type", "string"}, {"format", "uri-reference"}})},
      {"X-Request-Id",
       header("the request's id: the client's X-Request-Id when acceptable", type("string"))},
  };
  return json::object{{"securitySchemes", std::move(schemes)},
                      {"schemas", std::move(schemas)},
                      {"responses", std::move(responses)},
                      {"headers", std::move(headers)}};
}

// The shared response (components/responses) of an error status.
std::string_view error_response_name(int status) {
  switch (status) {
  case 401: return "Unauthorized";
  case 403: return "Forbidden";
  case 404: return "NotFound";
  case 409: return "Conflict";
  case 413: return "PayloadTooLarge";
  case 429: return "RateLimited";
  case 503: return "Unavailable";
  default: return "InternalError";
  }
}

bool has_body(verb v) {
  return v == verb::post || v == verb::put || v == verb::patch;
}

} // namespace

std::string openapi_document(const router& r, std::string_view server_url) {
  json::object paths;
  std::set<std::string> tags;
  std::set<std::string> secret_headers;
  for (auto& rt : r.routes()) {
    json::object op;
    op["operationId"] = operation_id(*rt);
    op["summary"] = rt->summary;
    if (!rt->tag.empty()) {
      op["tags"] = json::array{json::string(rt->tag)};
      tags.insert(rt->tag);
    }
    auto& doc = rt->doc;
    json::array params;
    std::string_view p = rt->path;
    for (std::size_t i = p.find('{'); i != std::string_view::npos; i = p.find('{', i + 1)) {
      auto j = p.find('}', i);
      auto name = p.substr(i + 1, j - i - 1);
      params.emplace_back(json::object{{"name", name},
                                       {"in", "path"},
                                       {"required", true},
                                       {"schema", path_parameter_schema(*rt, name)}});
    }
    bool has_path_params = !params.empty();
    for (auto& q : doc.query) {
      json::object param{
          {"name", q.name}, {"in", "query"}, {"schema", crm::domain::parse_json(q.schema)}};
      if (!q.description.empty()) param["description"] = q.description;
      params.emplace_back(std::move(param));
    }
    for (auto& h : doc.headers) {
      json::object param{
          {"name", h.name}, {"in", "header"}, {"schema", crm::domain::parse_json(h.schema)}};
      if (!h.description.empty()) param["description"] = h.description;
      params.emplace_back(std::move(param));
    }
    if (!params.empty()) op["parameters"] = std::move(params);

    json::array security;
    if (rt->auth == access::bearer) {
      security.emplace_back(json::object{{"bearerAuth", json::array{}}});
    } else {
      for (auto& h : doc.secret_headers) {
        secret_headers.insert(h);
        security.emplace_back(json::object{{scheme_of_header(h), json::array{}}});
      }
    }
    op["security"] = std::move(security); // empty: none (sign-in, health, this document)

    bool body = has_body(rt->method) && !doc.request_media.empty();
    if (body) {
      json::object media{{"schema", body_schema(doc.request_media, doc.request)}};
      if (!doc.example.empty()) media["example"] = crm::domain::parse_json(doc.example);
      op["requestBody"] =
          json::object{{"required", doc.body_required},
                       {"content", json::object{{doc.request_media, std::move(media)}}}};
    }

    json::object responses;
    auto answer = [&](int status, const std::string& schema, std::string_view media,
                      std::string_view description) {
      json::object headers{{"RateLimit-Policy", ref("headers", "RateLimit-Policy")},
                           {"RateLimit", ref("headers", "RateLimit")},
                           {"X-Request-Id", ref("headers", "X-Request-Id")}};
      if (status == 201) headers["Location"] = ref("headers", "Location");
      json::object out{{"description", description}, {"headers", std::move(headers)}};
      if (status != 204 && (!schema.empty() || media != "application/json"))
        out["content"] =
            json::object{{media, json::object{{"schema", body_schema(media, schema)}}}};
      responses[std::to_string(status)] = std::move(out);
    };
    answer(rt->success_status, doc.response, doc.response_media,
           rt->success_status == 204 ? "done (no body)" : "success");
    for (auto& o : doc.others) answer(o.status, o.schema, "application/json", o.description);
    bool authenticated = rt->auth == access::bearer || !doc.secret_headers.empty();
    if (authenticated) responses["401"] = ref("responses", "Unauthorized");
    if (rt->auth == access::bearer) responses["403"] = ref("responses", "Forbidden");
    if (has_path_params) responses["404"] = ref("responses", "NotFound");
    if (body && rt->auth == access::bearer) responses["409"] = ref("responses", "Conflict");
    if (body) responses["413"] = ref("responses", "PayloadTooLarge");
    responses["422"] = ref("responses", "ValidationFailed");
    for (int e : doc.errors)
      responses[std::to_string(e)] = ref("responses", error_response_name(e));
    responses["429"] = ref("responses", "RateLimited");
    responses["500"] = ref("responses", "InternalError");
    responses["503"] = ref("responses", "Unavailable");
    op["responses"] = std::move(responses);

    auto& item = paths[rt->path];
    if (!item.is_object()) item = json::object{};
    item.as_object()[lower(to_string(rt->method))] = std::move(op);
  }

  json::array tag_list;
  for (auto& t : tags) {
    auto it = tag_descriptions().find(t);
    json::object tag{{"name", t}};
    if (it != tag_descriptions().end()) tag["description"] = it->second;
    tag_list.emplace_back(std::move(tag));
  }

  json::object doc;
  doc["openapi"] = "3.1.0";
  doc["info"] = json::object{
      {"title", "carecrm API"},
      {"version", "1.0.0"},
      {"description", "Multi-tenant healthcare CRM: contacts, a sales pipeline, conversations "
                      "from messaging channels, workflows and webhooks, AI assistants. Errors "
                      "follow one shape (contract §2); every answer carries the IETF RateLimit "
                      "headers."},
      {"license", json::object{{"name", "Proprietary"}, {"url", "https://carecrm.org/license"}}}};
  doc["servers"] =
      json::array{json::object{{"url", server_url.empty() ? std::string_view("/") : server_url},
                               {"description", "this carecrm"}}};
  doc["security"] = json::array{json::object{{"bearerAuth", json::array{}}}};
  doc["tags"] = std::move(tag_list);
  doc["paths"] = std::move(paths);
  auto parts = components(secret_headers);
  auto& schemas = parts["schemas"].as_object();
  for (auto& [name, text] : r.schemas()) schemas[name] = crm::domain::parse_json(text);
  schemas["OpenApiDocument"] = json::object{
      {"type", "object"},
      {"required", json::array{"openapi", "info", "paths"}},
      {"properties", json::object{{"openapi", json::object{{"const", "3.1.0"}}},
                                  {"info", type("object")},
                                  {"paths", type("object")}}},
      {"externalDocs", json::object{{"url", "https://spec.openapis.org/oas/v3.1.0"},
                                    {"description", "OpenAPI 3.1"}}},
      {"description",
       "An OpenAPI 3.1 document (its schema: https://spec.openapis.org/oas/3.1/schema)"}};
  doc["components"] = std::move(parts);
  return json::serialize(doc);
}

void add_openapi_route(router& r, const router& documented, std::string_view server_url) {
  // Built at start-up after every route is added; the document itself is listed too.
  auto doc = std::make_shared<std::string>();
  r.add({verb::get,
         "/api/v1/openapi.json",
         access::open,
         {},
         [doc](const exchange_ptr& ex) { ex->json(200, *doc); },
         "This OpenAPI document",
         "operations"},
        {"", "OpenApiDocument"});
  *doc = openapi_document(documented, server_url);
}

} // namespace crm::http
