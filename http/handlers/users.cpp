// Users of the caller's tenant (contract §3), admin only. The tenant comes from the token,
// never from the request; ids of other tenants' users are 403, unknown ids 404.
#include "http/api.hpp"

#include "actors/inbox.hpp"
#include "http/api_key_auth.hpp"

#include "actors/users.hpp"
#include "domain/crypto.hpp"
#include "domain/validation.hpp"
#include "http/json.hpp"
#include "http/openapi_schema.hpp"
#include "http/request_input.hpp"
#include "net/worker_pool.hpp"
#include "persistence/revocations.hpp"

namespace crm::http {
namespace {

using domain::errc;
using domain::failure;

constexpr std::size_t min_password = 10;
constexpr std::size_t max_password = 256;

// The rules of the bodies below, also the schemas of the OpenAPI document (add_user_routes).
constexpr std::array<std::string_view, 4> roles{"viewer", "agent", "manager", "admin"};
constexpr text_rule full_name_rule{.min = 1, .max = 200, .trim = true};
constexpr text_rule password_rule{.min = min_password, .max = max_password};

std::optional<domain::role> read_role(body_reader& body, bool required) {
  auto r = body.one_of("role", required, roles);
  return r ? domain::parse_role(*r) : std::nullopt;
}

std::optional<std::string> read_email(body_reader& body) {
  auto e = body.text("email", true, {.min = 0, .max = 0, .trim = true});
  if (e && !domain::is_valid_email(*e)) {
    body.add({"body", "email"}, "value is not a valid email address", "value_error.email");
    return std::nullopt;
  }
  return e;
}

// Hashes on the hashing pool, then continues there with the encoded hash.
void with_hash(services& s, const exchange_ptr& ex, std::string password,
               std::function<void(std::string)> next) {
  bool queued = s.hashing.try_submit([password = std::move(password), next = std::move(next)] {
    next(domain::hash_password(password));
  });
  if (!queued)
    ex->fail(failure::of(errc::service_unavailable, "too many password changes at once"));
}

// A person's credentials are set by a person: an admin API key may not create a user (with a
// password) nor set one's password, or a leaked key would sign in as anyone and mint keys.
bool refused_credentials_to_api_key(const exchange_ptr& ex) {
  return refused_to_api_key(ex, "an API key may not set a person's password: sign in as an admin");
}

void list(services& s, const exchange_ptr& ex) {
  std::vector<domain::issue> issues;
  auto page = query_int(ex->req, "page", 1, 1, paging_rules::page_max, issues);
  auto per_page = query_int(ex->req, "per_page", paging_rules::per_page_default, 1,
                            paging_rules::per_page_max, issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::list_users(s.rt, ex->who.tenant_id, *page, *per_page,
                     actors::callback<domain::page<domain::user>>(
                         [ex](domain::outcome<domain::page<domain::user>> p) {
                           if (!p) return ex->fail(p.error());
                           ex->json(200, encode_user_page(*p));
                         }));
}

void create(services& s, const exchange_ptr& ex) {
  if (refused_credentials_to_api_key(ex)) return;
  body_reader body(ex->req.body);
  auto email = read_email(body);
  auto full_name = body.text("full_name", true, full_name_rule);
  auto password = body.text("password", true, password_rule);
  auto role = read_role(body, true);
  if (!body.finish()) return ex->fail(body.failure());

  domain::user u;
  u.email = *email;
  u.full_name = *full_name;
  u.user_role = *role;
  u.is_active = true;
  with_hash(s, ex, *password, [&s, ex, u](std::string hash) mutable {
    u.password_hash = std::move(hash);
    actors::create_user(s.rt, ex->who.tenant_id, std::move(u),
                        actors::callback<domain::user>([ex](domain::outcome<domain::user> r) {
                          if (!r) return ex->fail(r.error());
                          response res;
                          res.status = 201;
                          res.body = encode_user(*r);
                          res.headers.emplace_back("Location",
                                                   "/api/v1/users/" + std::to_string(r->id));
                          ex->respond(std::move(res));
                        }));
  });
}

void get(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::get_user(s.rt, ex->who.tenant_id, *id,
                   actors::callback<domain::user>([ex](domain::outcome<domain::user> r) {
                     if (!r) return ex->fail(r.error());
                     ex->json(200, encode_user(*r));
                   }));
}

// Sends the patch; revokes what the change revoked before answering, so the very next request
// with an old token is refused.
void apply_patch(services& s, const exchange_ptr& ex, std::int64_t id, actors::user_patch patch,
                 bool no_content) {
  const bool activity = patch.is_active.has_value();
  actors::update_user(
      s.rt, ex->who.tenant_id, id, std::move(patch),
      actors::callback<actors::user_change>([&s, ex, no_content,
                                             activity](domain::outcome<actors::user_change> r) {
        if (!r) return ex->fail(r.error());
        s.revocations.revoke(r->revoked_sessions, [](bool) {});
        auto answer = [ex, no_content, user = r->user] {
          if (no_content) return ex->no_content();
          ex->json(200, encode_user(user));
        };
        if (!activity) return answer();
        // The shared inbox routes no new conversation to a deactivated user, from the
        // answer on (the change is committed either way).
        actors::user_changed(
            s.rt, ex->who.tenant_id, r->user.id,
            actors::callback<domain::done>([answer](domain::outcome<domain::done>) { answer(); }));
      }));
}

void update(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  body_reader body(ex->req.body);
  actors::user_patch patch;
  patch.full_name = body.text("full_name", false, full_name_rule);
  patch.role = read_role(body, false);
  patch.is_active = body.boolean("is_active", false);
  auto password = body.text("password", false, password_rule);
  if (!body.finish()) return ex->fail(body.failure());
  if (!password) return apply_patch(s, ex, *id, std::move(patch), false);
  if (refused_credentials_to_api_key(ex)) return;
  with_hash(s, ex, *password, [&s, ex, id = *id, patch](std::string hash) mutable {
    patch.password_hash = std::move(hash);
    apply_patch(s, ex, id, std::move(patch), false);
  });
}

void deactivate(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::user_patch patch;
  patch.is_active = false;
  apply_patch(s, ex, *id, std::move(patch), true);
}

} // namespace

void add_user_routes(router& r, services& s) {
  using domain::permission;
  using namespace schema;
  define(r, "User",
         object({{"id", id()},
                 {"email", email()},
                 {"full_name", text(full_name_rule)},
                 {"tenant_id", id()},
                 {"role", one_of(roles)},
                 {"is_active", boolean()},
                 {"created_at", timestamp()}}));
  define(r, "UserPage", page_of("User"));
  define(r, "UserCreate",
         object({{"email", email()},
                 {"full_name", text(full_name_rule)},
                 {"password", text(password_rule)},
                 {"role", one_of(roles)}}));
  define(r, "UserUpdate",
         object({{"full_name", text(full_name_rule), false},
                 {"role", one_of(roles), false},
                 {"is_active", boolean(), false},
                 {"password", text(password_rule), false}}));
  r.add({verb::get, "/api/v1/users", access::bearer, permission::administer,
         [&s](const exchange_ptr& ex) { list(s, ex); }, "List the tenant's users", "users"},
        route_doc("", "UserPage").with_query(schema::paging()));
  r.add({verb::post, "/api/v1/users", access::bearer, permission::administer,
         [&s](const exchange_ptr& ex) { create(s, ex); }, "Create a user", "users", 201},
        {"UserCreate", "User"});
  r.add({verb::get, "/api/v1/users/{id}", access::bearer, permission::administer,
         [&s](const exchange_ptr& ex) { get(s, ex); }, "Get a user", "users"},
        {"", "User"});
  r.add({verb::put, "/api/v1/users/{id}", access::bearer, permission::administer,
         [&s](const exchange_ptr& ex) { update(s, ex); }, "Update a user", "users"},
        {"UserUpdate", "User"});
  r.add({verb::patch, "/api/v1/users/{id}", access::bearer, permission::administer,
         [&s](const exchange_ptr& ex) { update(s, ex); }, "Update a user (same as PUT)", "users"},
        {"UserUpdate", "User"});
  r.add({verb::del, "/api/v1/users/{id}", access::bearer, permission::administer,
         [&s](const exchange_ptr& ex) { deactivate(s, ex); }, "Deactivate a user", "users", 204},
        route_doc().fails_with({409})); // the last active admin
}

} // namespace crm::http
