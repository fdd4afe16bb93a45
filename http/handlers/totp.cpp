// Two-factor sign-in for staff (docs/operations.md "Two-factor sign-in"): each user sets up a
// TOTP authenticator (RFC 6238) for their own account and gets single-use recovery codes; an
// admin may require it of every user of the tenant, and reset a user's second factor. API keys
// have no user: every route here refuses them.
#include "http/totp_routes.hpp"

#include "domain/clock.hpp"
#include "domain/crypto.hpp"
#include "domain/secret_keys.hpp"
#include "domain/totp.hpp"
#include "http/api.hpp"
#include "http/api_key_auth.hpp"
#include "http/json.hpp"
#include "http/openapi_schema.hpp"
#include "http/request_input.hpp"
#include "persistence/pg_pool.hpp"
#include "persistence/revocations.hpp"
#include "persistence/sealed_columns.hpp"
#include "persistence/totp_repo.hpp"
#include "persistence/user_repo.hpp"

#include <boost/json.hpp>
#include <sodium.h>

#include <array>
#include <string_view>

namespace crm::http {

namespace {

using domain::errc;
using domain::failure;
namespace json = boost::json;
namespace totp = domain::totp;

constexpr std::string_view totp_path = "/api/v1/auth/totp";
constexpr text_rule code_rule{.min = 1, .max = 16, .trim = true};
constexpr text_rule recovery_rule{.min = 1, .max = 32, .trim = true};

bool refused_to_api_key(const exchange_ptr& ex) {
  return http::refused_to_api_key(ex, "an API key has no user: two-factor sign-in is for people");
}

// Runs `work(conn)` on the database pool and answers with `answer(result)`.
template <class T, class Work, class Answer>
void on_pool(services& s, const exchange_ptr& ex, Work work, Answer answer) {
  s.pool.run<T>(std::move(work), [ex, answer = std::move(answer)](domain::outcome<T> r) {
    if (!r) return ex->fail(r.error());
    answer(std::move(*r));
  });
}

void status(services& s, const exchange_ptr& ex) {
  if (refused_to_api_key(ex)) return;
  on_pool<persistence::totp_state>(
      s, ex,
      [tenant = ex->who.tenant_id, user = ex->who.user_id](persistence::pg_conn& c) {
        return persistence::load_totp(c, tenant, user);
      },
      [ex](persistence::totp_state st) {
        json::object o;
        o["enabled"] = st.secret.has_value();
        o["enabled_at"] = st.enabled_at ? json::value(domain::format_rfc3339(*st.enabled_at))
                                        : json::value(nullptr);
        o["recovery_codes_left"] = static_cast<std::int64_t>(st.recovery_hashes.size());
        o["required"] = st.required;
        ex->json(200, json::serialize(o));
      });
}

void setup(services& s, const exchange_ptr& ex) {
  if (refused_to_api_key(ex)) return;
  struct made {
    bool ok = false;
    std::string secret_b32, email;
  };
  on_pool<made>(
      s, ex,
      [tenant = ex->who.tenant_id, user = ex->who.user_id](persistence::pg_conn& c) {
        made m;
        std::array<unsigned char, totp::secret_bytes> raw{};
        randombytes_buf(raw.data(), raw.size());
        std::string secret(reinterpret_cast<const char*>(raw.data()), raw.size());
        sodium_memzero(raw.data(), raw.size());
        m.ok = persistence::set_pending_totp(c, tenant, user, secret);
        m.secret_b32 = totp::base32_encode(secret);
        sodium_memzero(secret.data(), secret.size());
        m.email = persistence::user_email(c, user);
        return m;
      },
      [ex](made m) {
        if (!m.ok)
          return ex->fail(
              failure::of(errc::conflict, "two-factor sign-in is on already: turn it off first"));
        json::object o;
        o["secret"] = m.secret_b32;
        o["otpauth_uri"] = totp::otpauth_uri("carecrm", m.email, m.secret_b32);
        ex->json(200, json::serialize(o));
      });
}

failure bad_code() {
  return failure::invalid({{{"body", "code"}, "the one-time code is not right", "value_error"}});
}

void enable(services& s, const exchange_ptr& ex) {
  if (refused_to_api_key(ex)) return;
  body_reader body(ex->req.body);
  auto code = body.text("code", true, code_rule);
  if (!body.finish()) return ex->fail(body.failure());
  struct enabled {
    enum class result : std::uint8_t { ok, no_pending, bad_code } r = result::ok;
    std::vector<std::string> codes;
  };
  on_pool<enabled>(
      s, ex,
      [tenant = ex->who.tenant_id, user = ex->who.user_id, code = *code](persistence::pg_conn& c) {
        enabled e;
        auto st = persistence::load_totp(c, tenant, user);
        if (!st.pending || st.secret) {
          e.r = enabled::result::no_pending;
          return e;
        }
        auto step = totp::verify(*st.pending, code, domain::now_seconds(), 0);
        if (!step) {
          e.r = enabled::result::bad_code;
          return e;
        }
        e.codes = totp::recovery_codes();
        std::vector<std::string> hashes;
        for (auto& rc : e.codes)
          hashes.push_back(c.keys().hash(persistence::sealed::user_recovery_code, tenant,
                                         totp::normalize_recovery_code(rc)));
        if (!persistence::enable_totp(c, tenant, user, *step, hashes))
          e.r = enabled::result::no_pending;
        return e;
      },
      [ex](enabled e) {
        if (e.r == enabled::result::no_pending)
          return ex->fail(failure::of(errc::conflict, "nothing to confirm: POST " +
                                                          std::string(totp_path) +
                                                          "/setup first (or it is on already)"));
        if (e.r == enabled::result::bad_code) return ex->fail(bad_code());
        json::object o;
        json::array codes;
        for (auto& c : e.codes) codes.emplace_back(c);
        o["recovery_codes"] = std::move(codes); // shown this once
        ex->json(200, json::serialize(o));
      });
}

// Wrong codes here count as failed sign-ins of the account (the login throttle): a stolen
// access token cannot try the million codes to turn the second factor off.
void disable(services& s, const exchange_ptr& ex) {
  if (refused_to_api_key(ex)) return;
  body_reader body(ex->req.body);
  auto code = body.text("code", false, code_rule);
  auto recovery = body.text("recovery_code", false, recovery_rule);
  if (!code && !recovery)
    body.add({"body", "code"}, "a one-time code or a recovery code is required", "missing");
  if (!body.finish()) return ex->fail(body.failure());
  enum class result : std::uint8_t { ok, not_on, bad_code };
  auto tenant = ex->who.tenant_id;
  auto user = ex->who.user_id;
  auto check = [&s, ex, tenant, user, code, recovery](const std::string& email) {
    s.pool.run<result>(
        [tenant, user, code, recovery](persistence::pg_conn& c) {
          auto st = persistence::load_totp(c, tenant, user);
          if (!st.secret) return result::not_on;
          auto f = judge_second_factor(c.keys(), tenant, st, code, recovery, domain::now_seconds());
          bool ok = (f.v == second_factor::verdict::code &&
                     persistence::consume_totp_step(c, user, f.step)) ||
                    (f.v == second_factor::verdict::recovery_code &&
                     persistence::consume_recovery_code(c, user, f.stored));
          if (!ok) return result::bad_code;
          persistence::disable_totp(c, tenant, user);
          return result::ok;
        },
        [&s, ex, email](domain::outcome<result> r) {
          if (!r) {
            s.throttle.finish(email, std::nullopt);
            return ex->fail(r.error());
          }
          if (*r == result::not_on) {
            s.throttle.finish(email, std::nullopt);
            return ex->fail(failure::of(errc::conflict, "two-factor sign-in is not on"));
          }
          s.throttle.finish(email, *r == result::ok);
          if (*r == result::bad_code) return ex->fail(bad_code());
          ex->no_content();
        });
  };
  on_pool<std::string>(
      s, ex, [user](persistence::pg_conn& c) { return persistence::user_email(c, user); },
      [&s, ex, check](std::string email) {
        s.throttle.admit(email, [ex, email, check](int retry_after) {
          if (retry_after > 0) {
            auto f = failure::of(errc::rate_limited, "too many wrong codes; try again later");
            f.retry_after = retry_after;
            return ex->fail(f);
          }
          check(email);
        });
      });
}

// DELETE /users/{id}/totp (admin): a user who lost their authenticator and their codes.
// Not with an API key (a leaked admin key must not strip a person's second factor), nor on the
// admin's own account (that is /disable, which asks for a code).
void reset(services& s, const exchange_ptr& ex) {
  if (refused_to_api_key(ex)) return;
  auto id = id_param(ex);
  if (!id) return;
  if (*id == ex->who.user_id)
    return ex->fail(failure::of(errc::insufficient_permissions,
                                "your own second factor is turned off with POST "
                                "/api/v1/auth/totp/disable and a code"));
  on_pool<std::optional<std::int64_t>>(
      s, ex, [id = *id](persistence::pg_conn& c) { return persistence::tenant_of_user(c, id); },
      [&s, ex, id = *id](std::optional<std::int64_t> tenant) {
        if (!tenant) return ex->fail(failure::of(errc::not_found, "user not found"));
        if (*tenant != ex->who.tenant_id)
          return ex->fail(
              failure::of(errc::insufficient_permissions, "this user belongs to another tenant"));
        on_pool<bool>(
            s, ex,
            [tenant = *tenant, id](persistence::pg_conn& c) {
              return persistence::disable_totp(c, tenant, id);
            },
            [ex](bool) { ex->no_content(); });
      });
}

void policy(services& s, const exchange_ptr& ex) {
  on_pool<bool>(
      s, ex,
      [tenant = ex->who.tenant_id](persistence::pg_conn& c) {
        return persistence::totp_required(c, tenant);
      },
      [ex](bool required) {
        ex->json(200, json::serialize(json::object{{"required", required}}));
      });
}

void set_policy(services& s, const exchange_ptr& ex) {
  if (refused_to_api_key(ex)) return;
  body_reader body(ex->req.body);
  auto required = body.boolean("required", true);
  if (!body.finish()) return ex->fail(body.failure());
  on_pool<bool>(
      s, ex,
      [tenant = ex->who.tenant_id, required = *required](persistence::pg_conn& c) {
        persistence::set_totp_required(c, tenant, required);
        return required;
      },
      [ex](bool r) {
        ex->json(200, json::serialize(json::object{{"required", r}}));
      });
}

} // namespace

bool open_to_enrollment(const route& rt) {
  static constexpr std::array<std::string_view, 5> open{
      "/api/v1/auth/me", "/api/v1/auth/logout", "/api/v1/auth/totp", "/api/v1/auth/totp/setup",
      "/api/v1/auth/totp/enable"};
  return std::find(open.begin(), open.end(), std::string_view(rt.path)) != open.end();
}

second_factor judge_second_factor(const domain::secret_keys& keys, std::int64_t tenant,
                                  const persistence::totp_state& state,
                                  const std::optional<std::string>& totp_code,
                                  const std::optional<std::string>& recovery_code,
                                  std::int64_t now_seconds) {
  second_factor f;
  if (!state.secret) {
    f.v =
        state.required ? second_factor::verdict::enroll_only : second_factor::verdict::none_needed;
    return f;
  }
  auto refuse = [&](errc e, std::string why) {
    f.v = second_factor::verdict::refused;
    f.failure = failure::of(e, std::move(why));
    return f;
  };
  if (totp_code) {
    auto step = totp::verify(*state.secret, *totp_code, now_seconds, state.last_step);
    if (!step) return refuse(errc::invalid_credentials, "incorrect or used one-time code");
    f.v = second_factor::verdict::code;
    f.step = *step;
    return f;
  }
  if (recovery_code) {
    auto presented = totp::normalize_recovery_code(*recovery_code);
    for (auto& stored : state.recovery_hashes)
      if (keys.verify(persistence::sealed::user_recovery_code, tenant, presented, stored) !=
          domain::secret_keys::match::no) {
        f.v = second_factor::verdict::recovery_code;
        f.stored = stored;
        return f;
      }
    return refuse(errc::invalid_credentials, "incorrect or used recovery code");
  }
  return refuse(errc::second_factor_required,
                "two-factor sign-in is on for this account: send totp_code (the authenticator's "
                "code) or recovery_code");
}

void add_totp_routes(router& r, services& s) {
  using domain::permission;
  const std::string base = "/api/v1/auth/totp";
  using namespace schema;
  define(r, "TotpStatus",
         object({{"enabled", boolean()},
                 {"enabled_at", nullable(timestamp())},
                 {"recovery_codes_left", integer()},
                 {"required", boolean()}}));
  define(r, "TotpSetup", object({{"secret", text({.min = 1})}, {"otpauth_uri", text({.min = 1})}}));
  define(r, "TotpCode", object({{"code", text(code_rule)}}));
  define(r, "TotpRecoveryCodes", object({{"recovery_codes", array_of(text({.min = 1}))}}));
  define(r, "TotpDisable",
         object({{"code", text(code_rule), false}, {"recovery_code", text(recovery_rule), false}}));
  define(r, "TotpPolicy", object({{"required", boolean()}}));
  r.add({verb::get, base, access::bearer, permission::read_records,
         [&s](const exchange_ptr& ex) { status(s, ex); }, "Your two-factor sign-in", "auth"},
        {"", "TotpStatus"});
  r.add({verb::post, base + "/setup", access::bearer, permission::read_records,
         [&s](const exchange_ptr& ex) { setup(s, ex); },
         "Set up an authenticator (confirm it with /enable)", "auth"},
        route_doc("", "TotpSetup").without_body().fails_with({409}));
  r.add({verb::post, base + "/enable", access::bearer, permission::read_records,
         [&s](const exchange_ptr& ex) { enable(s, ex); },
         "Turn two-factor sign-in on with a first code (recovery codes shown once)", "auth"},
        route_doc("TotpCode", "TotpRecoveryCodes").fails_with({409}));
  r.add({verb::post, base + "/disable", access::bearer, permission::read_records,
         [&s](const exchange_ptr& ex) { disable(s, ex); },
         "Turn two-factor sign-in off (with a code or a recovery code)", "auth", 204},
        route_doc("TotpDisable", "").fails_with({409, 429}));
  r.add({verb::get, base + "/policy", access::bearer, permission::read_records,
         [&s](const exchange_ptr& ex) { policy(s, ex); },
         "Whether the tenant requires two-factor sign-in", "auth"},
        {"", "TotpPolicy"});
  r.add({verb::put, base + "/policy", access::bearer, permission::administer,
         [&s](const exchange_ptr& ex) { set_policy(s, ex); },
         "Require two-factor sign-in of every user of the tenant (or not)", "auth"},
        {"TotpPolicy", "TotpPolicy"});
  r.add({verb::del, "/api/v1/users/{id}/totp", access::bearer, permission::administer,
         [&s](const exchange_ptr& ex) { reset(s, ex); },
         "Reset a user's two-factor sign-in (a lost authenticator)", "users", 204},
        route_doc());
}

} // namespace crm::http
