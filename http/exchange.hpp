// One request in flight: what the router matched, who is asking, and the way back to the
// session. `respond` may be called from any thread (an actor, a pool thread) exactly once; the
// session writes the response on its own strand.
#pragma once
#include "domain/failure.hpp"
#include "domain/user.hpp"
#include "http/message.hpp"

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace crm::http {

struct route;
class auditor;

// The authenticated caller, from a verified access token.
struct principal {
  std::int64_t user_id = 0; // 0 for an API key: it is no user
  std::int64_t tenant_id = 0;
  domain::role role = domain::role::viewer;
  std::string sid;            // the session, or "ak:<id>" for an API key
  std::int64_t token_exp = 0; // seconds; 0 for an API key that never expires
  std::int64_t api_key_id = 0;
  // A session that may only set up two-factor sign-in (its tenant requires it and the user has
  // none yet): every route but those of http/totp_routes answers 403 (docs/operations.md).
  bool enroll_only = false;
  // The user acting, for what records one (a consent's recorded_by, a message's sender, a
  // deal's history): nothing for an API key.
  std::optional<std::int64_t> acting_user() const {
    return user_id != 0 ? std::optional<std::int64_t>(user_id) : std::nullopt;
  }
};

class exchange {
public:
  using sink_fn = std::function<void(response)>;

  exchange(request r, sink_fn sink) : req(std::move(r)), sink_(std::move(sink)) {}
  ~exchange();

  request req;
  std::vector<std::pair<std::string_view, std::string>> params; // path parameters
  principal who;
  // Auditing (http/audit.hpp): the route matched, the auditor that sees the answer, and an
  // action a handler names when the route's own does not say enough (e.g. a reused refresh
  // token). Set before the handler runs.
  const route* matched = nullptr;
  http::auditor* audit = nullptr;
  std::string audit_action;
  // The patients a handler names when neither the path nor the answer's members do (a FHIR
  // Appointment): a read's record, a list's ids.
  std::vector<std::int64_t> audit_records;
  // Forwarded here by the node that received it (docs/cluster.md): never forwarded again.
  bool forwarded = false;
  // An access::operator_page route asked without the operator token (its handler answers 401).
  bool operator_signed_in = true;

  std::string_view param(std::string_view name) const;

  void respond(response r);
  void json(int status, std::string body);
  void fail(const domain::failure& f);
  void no_content();

private:
  sink_fn sink_;
  std::atomic<bool> done_{false};
};

using exchange_ptr = std::shared_ptr<exchange>;

// Error bodies of contract §2.
response error_response(const domain::failure& f);
response error_response(domain::errc code, std::string_view detail);

} // namespace crm::http
