#include "http/api_key_auth.hpp"

#include "domain/clock.hpp"
#include "domain/revocation_list.hpp"
#include "domain/secret_keys.hpp"
#include "domain/user.hpp"
#include "http/secret_gate.hpp"
#include "persistence/api_key_repo.hpp"
#include "persistence/pg_pool.hpp"
#include "persistence/sealed_columns.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <memory>
#include <unordered_map>

namespace crm::http {

namespace {

domain::failure invalid(const char* why) {
  return domain::failure::of(domain::errc::invalid_credentials, why);
}

bool base64url_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

} // namespace

secret_gate& api_key_gate() {
  // A match is trusted 5 s here and 5 s more in a thread's memory (recall_api_key): a key
  // revoked on another node while Redis is down is refused here within 10 s.
  static secret_gate gate("api_key", &persistence::secret_owner_of_api_key,
                          std::chrono::seconds(5));
  return gate;
}

std::string api_key_sid(std::int64_t id) {
  return "ak:" + std::to_string(id);
}

bool is_api_key(std::string_view token) {
  return token.substr(0, api_key_scheme.size()) == api_key_scheme;
}

bool refused_to_api_key(const exchange_ptr& ex, std::string_view why) {
  if (ex->who.api_key_id == 0) return false;
  ex->fail(domain::failure::of(domain::errc::insufficient_permissions, std::string(why)));
  return true;
}

void authenticate_api_key(persistence::pg_pool& pool, const domain::revocation_list& revoked,
                          std::string_view token, api_key_done done) {
  // ck_<id>_<secret>
  auto rest = token.substr(api_key_scheme.size());
  auto sep = rest.find('_');
  std::int64_t id = 0;
  if (sep == std::string_view::npos || sep == 0 || sep > 18)
    return done(invalid("invalid API key"), {});
  auto [end, ec] = std::from_chars(rest.data(), rest.data() + sep, id);
  auto secret = rest.substr(sep + 1);
  if (ec != std::errc() || end != rest.data() + sep || id <= 0 ||
      secret.size() != api_key_secret_chars ||
      !std::all_of(secret.begin(), secret.end(), base64url_char))
    return done(invalid("invalid API key"), {});
  auto rehash = std::make_shared<std::atomic<bool>>(false);
  const auto& keys = pool.keys();
  api_key_gate().admit(
      pool, id,
      [&keys, rehash, presented = std::string(secret)](const persistence::secret_owner& o) {
        auto m =
            keys.verify(persistence::sealed::api_key_secret, o.tenant_id, presented, *o.secret);
        if (m == domain::secret_keys::match::yes_rehash) rehash->store(true);
        return m != domain::secret_keys::match::no;
      },
      [&pool, &revoked, id, rehash, presented = std::string(secret),
       done = std::move(done)](domain::outcome<secret_gate::admission> a) {
        if (!a) return done(a.error(), {});
        if (a->v != secret_gate::verdict::admitted) return done(invalid("invalid API key"), {});
        auto sid = api_key_sid(id);
        if (revoked.is_revoked(sid)) return done(invalid("API key revoked"), {});
        auto& o = a->who;
        if (o.expires_at != 0 && o.expires_at <= domain::now_seconds())
          return done(invalid("API key expired"), {});
        auto role = domain::parse_role(o.role);
        if (!role) return done(invalid("invalid API key"), {});
        if (rehash->exchange(false))
          pool.submit([id, presented](persistence::pg_conn& c) {
            try {
              persistence::rehash_api_key(c, id, presented);
            } catch (const std::exception&) {
              c.reset(); // moved on its next use
            }
          });
        principal who;
        who.tenant_id = o.tenant_id;
        who.role = *role;
        who.sid = std::move(sid);
        who.token_exp = o.expires_at;
        who.api_key_id = id;
        done(std::nullopt, std::move(who));
      });
}

namespace {

struct remembered {
  principal who;
  std::chrono::steady_clock::time_point at;
};
struct key_memory {
  std::unordered_map<std::string, remembered> keys;
};
constexpr auto remember_for = std::chrono::seconds(5);
constexpr std::size_t remember_at_most = 1024;

key_memory& memory() {
  thread_local key_memory m;
  return m;
}

} // namespace

bool recall_api_key(const domain::revocation_list& revoked, std::string_view token,
                    principal& who) {
  auto& m = memory();
  auto it = m.keys.find(std::string(token));
  if (it == m.keys.end()) return false;
  auto& r = it->second;
  if (std::chrono::steady_clock::now() - r.at >= remember_for ||
      (r.who.token_exp != 0 && r.who.token_exp <= domain::now_seconds()) ||
      revoked.is_revoked(r.who.sid)) {
    m.keys.erase(it); // the gate answers, with the reason
    return false;
  }
  who = r.who;
  return true;
}

void remember_api_key(std::string_view token, const principal& who) {
  auto& m = memory();
  if (m.keys.size() >= remember_at_most) m.keys.clear();
  m.keys.insert_or_assign(std::string(token), remembered{who, std::chrono::steady_clock::now()});
}

} // namespace crm::http
