// Authentication endpoints (contract §3): login, refresh with rotation and reuse detection,
// me, logout. Password checks run on the hashing pool; database and Redis work on their own
// threads; the asio thread only parses, validates and hands on.
#include "http/api.hpp"
#include "http/api_key_auth.hpp"

#include "actors/users.hpp"
#include "config/settings.hpp"
#include "domain/clock.hpp"
#include "domain/crypto.hpp"
#include "domain/jwt.hpp"
#include "http/json.hpp"
#include "http/openapi_schema.hpp"
#include "http/placement.hpp"
#include "http/totp_routes.hpp"
#include "net/worker_pool.hpp"
#include "persistence/log.hpp"
#include "persistence/pg_pool.hpp"
#include "persistence/revocations.hpp"
#include "persistence/totp_repo.hpp"
#include "persistence/user_repo.hpp"

#include <boost/json.hpp>

namespace crm::http {
namespace {

using domain::errc;
using domain::failure;

failure invalid_credentials(const char* why = "incorrect e-mail or password") {
  return failure::of(errc::invalid_credentials, why);
}

std::string token_pair(const services& s, const domain::user& u, const std::string& sid,
                       const std::string& scope = {}) {
  auto now = domain::now_seconds();
  domain::token_claims c;
  c.user_id = u.id;
  c.tenant_id = u.tenant_id;
  c.role = std::string(domain::to_string(u.user_role));
  c.sid = sid;
  c.iat = now;
  c.typ = domain::token_type::access;
  c.jti = domain::random_token(12);
  c.exp = now + domain::access_token_seconds;
  c.scope = scope;
  auto access = domain::sign_jwt(c, s.cfg.jwt_secret);
  c.typ = domain::token_type::refresh;
  c.jti = domain::random_token(12);
  c.exp = now + domain::refresh_token_seconds;
  auto refresh = domain::sign_jwt(c, s.cfg.jwt_secret);
  boost::json::object o;
  o["access_token"] = access;
  o["refresh_token"] = refresh;
  o["token_type"] = "bearer";
  o["expires_in"] = domain::access_token_seconds;
  return boost::json::serialize(o);
}

// A hash of nothing in particular: unknown e-mails cost the same time as wrong passwords,
// so response times do not reveal which e-mails have accounts.
const std::string& decoy_hash() {
  static const std::string h = domain::hash_password(domain::random_token(16));
  return h;
}

void start_session(services& s, const exchange_ptr& ex, domain::user u, std::string scope = {}) {
  auto sid = domain::random_token(16);
  s.pool.run<domain::done>(
      [sid, uid = u.id, tid = u.tenant_id](persistence::pg_conn& c) {
        persistence::insert_session(c, sid, uid, tid);
        return domain::done{};
      },
      [&s, ex, u = std::move(u), sid, scope](domain::outcome<domain::done> r) {
        if (!r) return ex->fail(r.error());
        ex->json(200, token_pair(s, u, sid, scope));
      });
}

// RFC 5321 bounds an address at 254 characters in practice (320 by its parts): a longer one is
// no e-mail, and is not sent to Redis as a key. Also the OpenAPI schemas (add_auth_routes).
constexpr text_rule login_email_rule{.min = 1, .max = 320};
constexpr text_rule login_password_rule{.min = 0, .max = 1024};
constexpr text_rule login_code_rule{.min = 1, .max = 32, .trim = true};

// The second step of a sign-in whose password was right (http/totp_routes.hpp): a code or a
// recovery code is consumed (good once, whatever runs at the same time) before the session
// starts; a wrong one counts as a failed login for the throttle.
void second_step(services& s, const exchange_ptr& ex, const std::string& email, domain::user u,
                 const persistence::totp_state& state, const std::optional<std::string>& code,
                 const std::optional<std::string>& recovery) {
  auto f =
      judge_second_factor(s.pool.keys(), u.tenant_id, state, code, recovery, domain::now_seconds());
  using verdict = second_factor::verdict;
  switch (f.v) {
  case verdict::none_needed:
    s.throttle.finish(email, true);
    return start_session(s, ex, std::move(u));
  case verdict::enroll_only:
    s.throttle.finish(email, true);
    return start_session(s, ex, std::move(u), std::string(domain::enroll_scope));
  case verdict::refused:
    s.throttle.finish(email, f.failure.code == errc::second_factor_required
                                 ? std::nullopt
                                 : std::optional<bool>(false));
    return ex->fail(f.failure);
  case verdict::code:
  case verdict::recovery_code: break;
  }
  if (f.v == verdict::recovery_code) ex->audit_action = "login_recovery_code";
  s.pool.run<bool>(
      [f, user = u.id](persistence::pg_conn& c) {
        return f.v == verdict::code ? persistence::consume_totp_step(c, user, f.step)
                                    : persistence::consume_recovery_code(c, user, f.stored);
      },
      [&s, ex, email, u = std::move(u)](domain::outcome<bool> used) mutable {
        if (!used) {
          s.throttle.finish(email, std::nullopt);
          return ex->fail(used.error());
        }
        if (!*used) {
          s.throttle.finish(email, false);
          return ex->fail(invalid_credentials("incorrect or used one-time code"));
        }
        s.throttle.finish(email, true);
        start_session(s, ex, std::move(u));
      });
}

void login(services& s, const exchange_ptr& ex) {
  body_reader body(ex->req.body);
  auto email = body.text("email", true, login_email_rule);
  auto password = body.text("password", true, login_password_rule);
  auto code = body.text("totp_code", false, login_code_rule);
  auto recovery = body.text("recovery_code", false, login_code_rule);
  if (!body.finish()) return ex->fail(body.failure());

  s.throttle.admit(*email, [&s, ex, email = *email, password = *password, code,
                            recovery](int retry_after) {
    if (retry_after > 0) {
      auto f = failure::of(errc::rate_limited, "too many failed logins; try again later");
      f.retry_after = retry_after;
      return ex->fail(f);
    }
    struct account {
      std::optional<domain::user> user;
      persistence::totp_state totp;
    };
    s.pool.run<account>(
        [email](persistence::pg_conn& c) {
          account a;
          a.user = persistence::find_user_by_email(c, email);
          if (a.user) a.totp = persistence::load_totp(c, a.user->tenant_id, a.user->id);
          return a;
        },
        [&s, ex, email, password, code, recovery](domain::outcome<account> found) {
          if (!found) {
            s.throttle.finish(email, std::nullopt);
            return ex->fail(found.error());
          }
          auto user = std::move(found->user);
          bool queued = s.hashing.try_submit([&s, ex, email, password, user, code, recovery,
                                              totp = std::move(found->totp)]() mutable {
            bool ok = domain::verify_password(user ? user->password_hash : decoy_hash(), password);
            if (user) {
              // The audit row of the attempt goes to the account's tenant (http/audit.hpp).
              ex->who.user_id = user->id;
              ex->who.tenant_id = user->tenant_id;
              ex->who.role = user->user_role;
            }
            if (!ok || !user || !user->is_active) {
              s.throttle.finish(email, false);
              return ex->fail(invalid_credentials());
            }
            second_step(s, ex, email, std::move(*user), totp, code, recovery);
          });
          if (!queued) {
            s.throttle.finish(email, std::nullopt);
            ex->fail(failure::of(errc::service_unavailable, "too many logins at once; retry"));
          }
        });
  });
}

void rotate_and_issue(services& s, const exchange_ptr& ex, const domain::token_claims& claims);

void refresh(services& s, const exchange_ptr& ex) {
  body_reader body(ex->req.body);
  auto token = body.text("refresh_token", true);
  if (!body.finish()) return ex->fail(body.failure());

  auto now = domain::now_seconds();
  auto v = domain::verify_jwt(*token, s.cfg.jwt_secret, now);
  if (!v.claims) return ex->fail(invalid_credentials("invalid refresh token"));
  auto claims = *v.claims;
  if (claims.typ != domain::token_type::refresh)
    return ex->fail(invalid_credentials("not a refresh token"));
  ex->who.user_id = claims.user_id;
  ex->who.tenant_id = claims.tenant_id;
  if (auto role = domain::parse_role(claims.role)) ex->who.role = *role;
  if (s.revocations.list().is_revoked(claims.sid))
    return ex->fail(invalid_credentials("session revoked"));
  // The user is read from the tenant's actors: on the node that holds the tenant.
  within_tenant(s, ex, claims.tenant_id, [&s, ex, claims] { rotate_and_issue(s, ex, claims); });
}

void rotate_and_issue(services& s, const exchange_ptr& ex, const domain::token_claims& claims) {
  auto now = domain::now_seconds();
  s.revocations.rotate(
      claims.sid, claims.jti, claims.exp - now,
      [&s, ex, claims](persistence::revocation_store::rotation r) {
        using rotation = persistence::revocation_store::rotation;
        if (r == rotation::unavailable)
          return ex->fail(failure::of(errc::service_unavailable,
                                      "token revocation store unavailable; try again"));
        if (r == rotation::reused) {
          // Reuse of a rotated token: the session is compromised. Record it durably too.
          s.pool.submit([sid = claims.sid](persistence::pg_conn& c) {
            try {
              persistence::revoke_session(c, sid);
            } catch (const std::exception& e) {
              c.reset();
              log_warn("postgres: revoking reused session failed: {}", e.what());
            }
          });
          ex->audit_action = "refresh_reuse";
          return ex->fail(invalid_credentials("refresh token reused; session revoked"));
        }
        if (r == rotation::revoked) return ex->fail(invalid_credentials("session revoked"));

        // The tenant's two-factor requirement holds at each refresh: a session of a user without
        // a second factor becomes one that may only enroll (one open when the requirement was
        // switched on, or after an admin reset the user's factor); one that may only enroll
        // stays one while the requirement holds (signing in again with a code makes a full one).
        struct refreshed {
          bool live = false;
          bool enroll_only = false;
        };
        s.pool.run<refreshed>(
            [sid = claims.sid, tenant = claims.tenant_id, user = claims.user_id,
             was_enroll = claims.scope == domain::enroll_scope](persistence::pg_conn& c) {
              refreshed r;
              r.live = persistence::touch_session(c, sid);
              if (r.live) {
                auto t = persistence::load_totp(c, tenant, user);
                r.enroll_only = t.required && (was_enroll || !t.secret);
              }
              return r;
            },
            [&s, ex, claims](domain::outcome<refreshed> live) {
              // No new pair was issued: the same refresh token may be presented again.
              if (!live)
                return s.revocations.unrotate(claims.jti, [ex, f = live.error()] { ex->fail(f); });
              if (!live->live) return ex->fail(invalid_credentials("session revoked"));
              auto scope = live->enroll_only ? std::string(domain::enroll_scope) : std::string();
              actors::get_user(
                  s.rt, claims.tenant_id, claims.user_id,
                  actors::callback<domain::user>([&s, ex, sid = claims.sid, jti = claims.jti,
                                                  scope](domain::outcome<domain::user> u) {
                    if (!u && u.error().code == errc::service_unavailable)
                      return s.revocations.unrotate(jti, [ex, f = u.error()] { ex->fail(f); });
                    if (!u || !u->is_active) return ex->fail(invalid_credentials("user inactive"));
                    ex->json(200, token_pair(s, *u, sid, scope));
                  }));
            });
      });
}

// /auth/me and /auth/logout are about a person's session: an API key has neither (it is
// described by GET /api-keys/{id} and revoked by DELETE /api-keys/{id}).
bool refused_to_api_key(const exchange_ptr& ex) {
  return http::refused_to_api_key(ex, "an API key has no user session: see /api/v1/api-keys/" +
                                          std::to_string(ex->who.api_key_id));
}

void me(services& s, const exchange_ptr& ex) {
  if (refused_to_api_key(ex)) return;
  actors::get_user(s.rt, ex->who.tenant_id, ex->who.user_id,
                   actors::callback<domain::user>([ex](domain::outcome<domain::user> u) {
                     if (!u) return ex->fail(u.error());
                     if (!u->is_active) return ex->fail(invalid_credentials("user inactive"));
                     ex->json(200, encode_user(*u));
                   }));
}

void logout(services& s, const exchange_ptr& ex) {
  if (refused_to_api_key(ex)) return;
  s.pool.run<bool>(
      [sid = ex->who.sid](persistence::pg_conn& c) { return persistence::revoke_session(c, sid); },
      [&s, ex](domain::outcome<bool> r) {
        if (!r) return ex->fail(r.error());
        // Refused on this node from now on; other nodes hear it through Redis.
        s.revocations.revoke({ex->who.sid}, [](bool) {});
        ex->no_content();
      });
}

} // namespace

void add_auth_routes(router& r, services& s) {
  using namespace schema;
  define(r, "LoginRequest",
         object({{"email", text(login_email_rule)},
                 {"password", text(login_password_rule)},
                 {"totp_code", text(login_code_rule), false},
                 {"recovery_code", text(login_code_rule), false}}));
  define(r, "RefreshRequest", object({{"refresh_token", text({})}}));
  define(r, "TokenPair",
         object({{"access_token", text({.min = 1})},
                 {"refresh_token", text({.min = 1})},
                 {"token_type", constant("bearer")},
                 {"expires_in", integer()}}));
  r.add({verb::post,
         "/api/v1/auth/login",
         access::open,
         {},
         [&s](const exchange_ptr& ex) { login(s, ex); },
         "Log in with e-mail and password",
         "auth"},
        route_doc("LoginRequest", "TokenPair")
            .fails_with({401})
            .with_example(R"({"email": "admin@clinic.example", "password": "a long passphrase"})"));
  r.add({verb::post,
         "/api/v1/auth/refresh",
         access::open,
         {},
         [&s](const exchange_ptr& ex) { refresh(s, ex); },
         "Exchange a refresh token for a new token pair (rotation)",
         "auth"},
        route_doc("RefreshRequest", "TokenPair").fails_with({401}));
  r.add({verb::get, "/api/v1/auth/me", access::bearer, domain::permission::read_records,
         [&s](const exchange_ptr& ex) { me(s, ex); }, "The authenticated user", "auth"},
        {"", "User"});
  r.add({verb::post, "/api/v1/auth/logout", access::bearer, domain::permission::read_records,
         [&s](const exchange_ptr& ex) { logout(s, ex); }, "Revoke the current session", "auth",
         204},
        route_doc().without_body());
}

} // namespace crm::http
