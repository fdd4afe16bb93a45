// API keys for integrators (docs/operations.md "API keys"), admin only: named keys with a role
// and an optional expiry, shown once, stored as a keyed hash, revocable. A request made with an
// API key cannot manage API keys (a key must not mint or extend keys of its own).
#include "http/api.hpp"

#include "domain/clock.hpp"
#include "domain/crypto.hpp"
#include "domain/user.hpp"
#include "http/api_key_auth.hpp"
#include "http/json.hpp"
#include "http/openapi_schema.hpp"
#include "http/request_input.hpp"
#include "http/secret_gate.hpp"
#include "persistence/api_key_repo.hpp"
#include "persistence/pg_pool.hpp"
#include "persistence/revocations.hpp"

#include <boost/json.hpp>

namespace crm::http {
namespace {

using domain::errc;
using domain::failure;
namespace json = boost::json;

constexpr std::array<std::string_view, 4> roles{"viewer", "agent", "manager", "admin"};
constexpr text_rule name_rule{.min = 1, .max = 100, .trim = true};
constexpr std::int64_t max_active_keys = 100; // per tenant, neither revoked nor expired
constexpr std::int64_t max_lifetime_days = 3660;

json::value micros_or_null(const std::optional<std::int64_t>& v) {
  return v ? json::value(domain::format_rfc3339(*v)) : json::value(nullptr);
}

json::object key_object(const persistence::api_key_row& k) {
  json::object o;
  o["id"] = k.id;
  o["name"] = k.name;
  o["role"] = k.role;
  o["prefix"] = k.prefix;
  o["created_by"] = k.created_by ? json::value(*k.created_by) : json::value(nullptr);
  o["created_at"] = domain::format_rfc3339(k.created_at);
  o["expires_at"] = micros_or_null(k.expires_at);
  o["revoked_at"] = micros_or_null(k.revoked_at);
  return o;
}

bool refused_to_api_key(const exchange_ptr& ex) {
  return http::refused_to_api_key(ex,
                                  "API keys are managed by a signed-in admin, not with an API key");
}

void create(services& s, const exchange_ptr& ex) {
  if (refused_to_api_key(ex)) return;
  body_reader body(ex->req.body);
  auto name = body.text("name", true, name_rule);
  auto role = body.one_of("role", true, roles);
  std::optional<std::int64_t> expires;
  if (body.has("expires_at") && !body.is_null("expires_at")) {
    auto text = body.text("expires_at", true, {.min = 1, .max = 64});
    if (text) {
      auto t = domain::parse_rfc3339(*text);
      auto now = domain::now_micros();
      if (!t)
        body.add({"body", "expires_at"}, "Input should be a valid RFC 3339 datetime",
                 "value_error");
      else if (*t <= now)
        body.add({"body", "expires_at"}, "expires_at must be in the future", "value_error");
      else if (*t > now + max_lifetime_days * 86400LL * 1000000LL)
        body.add({"body", "expires_at"}, "expires_at must be within 10 years", "value_error");
      else
        expires = t;
    }
  }
  if (!body.finish()) return ex->fail(body.failure());
  persistence::new_api_key k;
  k.tenant_id = ex->who.tenant_id;
  k.name = *name;
  k.role = *role;
  k.created_by = ex->who.acting_user();
  k.expires_at = expires;
  k.secret = domain::random_token(32);
  s.pool.run<std::optional<persistence::api_key_row>>(
      [k](persistence::pg_conn& c) { return persistence::insert_api_key(c, k, max_active_keys); },
      [ex, secret = k.secret](domain::outcome<std::optional<persistence::api_key_row>> r) {
        if (!r) return ex->fail(r.error());
        if (!*r)
          return ex->fail(failure::of(errc::conflict, "the tenant has " +
                                                          std::to_string(max_active_keys) +
                                                          " API keys in force: revoke one first"));
        auto o = key_object(**r);
        // Shown once: only its keyed hash is kept.
        o["key"] = std::string(api_key_scheme) + std::to_string((*r)->id) + "_" + secret;
        response res;
        res.status = 201;
        res.body = json::serialize(o);
        res.headers.emplace_back("Location", "/api/v1/api-keys/" + std::to_string((*r)->id));
        ex->respond(std::move(res));
      });
}

void list(services& s, const exchange_ptr& ex) {
  if (refused_to_api_key(ex)) return;
  std::vector<domain::issue> issues;
  auto page = query_int(ex->req, "page", 1, 1, paging_rules::page_max, issues);
  auto per_page = query_int(ex->req, "per_page", paging_rules::per_page_default, 1,
                            paging_rules::per_page_max, issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  struct listed {
    std::vector<persistence::api_key_row> rows;
    std::int64_t total = 0;
  };
  s.pool.run<listed>(
      [tenant = ex->who.tenant_id, page = *page, per_page = *per_page](persistence::pg_conn& c) {
        listed l;
        l.rows = persistence::list_api_keys(c, tenant, page, per_page, l.total);
        return l;
      },
      [ex, page = *page, per_page = *per_page](domain::outcome<listed> r) {
        if (!r) return ex->fail(r.error());
        json::array items;
        for (auto& k : r->rows) items.emplace_back(key_object(k));
        json::object o;
        o["items"] = std::move(items);
        o["total"] = r->total;
        o["page"] = page;
        o["per_page"] = per_page;
        o["pages"] = (r->total + per_page - 1) / per_page;
        ex->json(200, json::serialize(o));
      });
}

// The key `id` of the caller's tenant: 404 when it exists nowhere, 403 when another tenant's.
template <class Next>
void with_key(services& s, const exchange_ptr& ex, Next next) {
  if (refused_to_api_key(ex)) return;
  auto id = id_param(ex);
  if (!id) return;
  s.pool.run<std::optional<persistence::api_key_row>>(
      [id = *id](persistence::pg_conn& c) { return persistence::find_api_key(c, id); },
      [ex, next = std::move(next)](domain::outcome<std::optional<persistence::api_key_row>> r) {
        if (!r) return ex->fail(r.error());
        if (!*r) return ex->fail(failure::of(errc::not_found, "API key not found"));
        if ((*r)->tenant_id != ex->who.tenant_id)
          return ex->fail(failure::of(errc::insufficient_permissions,
                                      "this API key belongs to another tenant"));
        next(**r);
      });
}

void get(services& s, const exchange_ptr& ex) {
  with_key(s, ex, [ex](const persistence::api_key_row& k) {
    ex->json(200, json::serialize(key_object(k)));
  });
}

// Revoked at once on this node (the revocation list and the gate), on every other within a
// second (the revocation feed), and for good in Postgres. Revoking a revoked key is a no-op.
void revoke(services& s, const exchange_ptr& ex) {
  with_key(s, ex, [&s, ex](const persistence::api_key_row& k) {
    s.pool.run<std::optional<persistence::api_key_row>>(
        [tenant = k.tenant_id, id = k.id, by = ex->who.acting_user()](persistence::pg_conn& c) {
          return persistence::revoke_api_key(c, tenant, id, by);
        },
        [&s, ex, id = k.id](domain::outcome<std::optional<persistence::api_key_row>> r) {
          if (!r) return ex->fail(r.error());
          api_key_gate().forget(id);
          s.revocations.revoke({api_key_sid(id)}, [](bool) {});
          ex->no_content();
        });
  });
}

} // namespace

void add_api_key_routes(router& r, services& s) {
  using domain::permission;
  using namespace schema;
  auto key = object({{"id", id()},
                     {"name", text(name_rule)},
                     {"role", one_of(roles)},
                     {"prefix", text({.min = 1})},
                     {"created_by", nullable(id())},
                     {"created_at", timestamp()},
                     {"expires_at", nullable(timestamp())},
                     {"revoked_at", nullable(timestamp())}});
  // The answer to a creation: the same, and the key, shown this once.
  auto created = key;
  created["properties"].as_object()["key"] = text({.min = 1});
  created["required"].as_array().emplace_back("key");
  define(r, "ApiKey", std::move(key));
  define(r, "ApiKeyCreated", std::move(created));
  define(r, "ApiKeyPage", page_of("ApiKey"));
  define(r, "ApiKeyCreate",
         object({{"name", text(name_rule)},
                 {"role", one_of(roles)},
                 {"expires_at", nullable(timestamp()), false}}));
  r.add({verb::get, "/api/v1/api-keys", access::bearer, permission::administer,
         [&s](const exchange_ptr& ex) { list(s, ex); }, "List the tenant's API keys", "api-keys"},
        route_doc("", "ApiKeyPage").with_query(schema::paging()));
  r.add({verb::post, "/api/v1/api-keys", access::bearer, permission::administer,
         [&s](const exchange_ptr& ex) { create(s, ex); },
         "Create an API key (the key is shown once)", "api-keys", 201},
        route_doc("ApiKeyCreate", "ApiKeyCreated").fails_with({409}));
  r.add({verb::get, "/api/v1/api-keys/{id}", access::bearer, permission::administer,
         [&s](const exchange_ptr& ex) { get(s, ex); }, "Get an API key", "api-keys"},
        {"", "ApiKey"});
  r.add({verb::del, "/api/v1/api-keys/{id}", access::bearer, permission::administer,
         [&s](const exchange_ptr& ex) { revoke(s, ex); }, "Revoke an API key", "api-keys", 204},
        route_doc());
}

} // namespace crm::http
