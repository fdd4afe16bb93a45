// The audit trail (docs/compliance.md "Audit trail"): who read or changed which record, when,
// from where, with what outcome; field names, never values. Each tenant's rows form a hash
// chain: a row's hash covers every fact of it and the previous row's hash, so an edited,
// removed or inserted row breaks the chain at that row.
//
// Who and where travel with the request as an ambient context: the HTTP layer installs it
// (audit_scope) while a handler runs, and every actor callback made meanwhile keeps a copy, so
// an actor staging a change knows whose request it is without every API carrying it.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace crm::domain {

struct contact;
struct company;

// Who acted: a signed-in user, an integrator's API key, or carecrm on someone's behalf (an inbound
// webhook of a channel or workflow, a workflow run, an AI agent), or carecrm itself (`system`).
enum class audit_actor : std::uint8_t {
  user,
  webhook,
  workflow,
  agent,
  system,
  anonymous,
  api_key
};
std::string_view to_string(audit_actor a);

struct audit_context {
  audit_actor actor = audit_actor::system;
  std::optional<std::int64_t> user_id;
  std::string role;      // the user's role when it acted
  std::string actor_ref; // what acted for a non-user: "workflow:12", "POST /webhooks/..."
  std::string client_ip;
  std::string user_agent;
  std::string request_id;
};
using audit_context_ptr = std::shared_ptr<const audit_context>;

// The context installed on this thread (null outside a request).
const audit_context_ptr& current_audit_context();

// Installs `ctx` on this thread for the scope's lifetime (restores the previous one after).
class audit_scope {
public:
  explicit audit_scope(audit_context_ptr ctx);
  ~audit_scope();
  audit_scope(const audit_scope&) = delete;
  audit_scope& operator=(const audit_scope&) = delete;

private:
  audit_context_ptr previous_;
};

// One event, as it is stored and hashed.
struct audit_record {
  std::int64_t tenant_id = 0;
  std::int64_t at = 0; // microseconds since the epoch
  std::string actor_type;
  std::optional<std::int64_t> user_id;
  std::string role;
  std::string actor_ref;
  std::string resource; // contact, company, deal, conversation, consent, user, session, ...
  std::optional<std::int64_t> resource_id;
  std::string action;              // read, list, create, update, delete, export, login, ...
  std::vector<std::string> fields; // names of the fields changed (never values)
  std::string outcome;             // success, failure, denied
  int status = 0;                  // the HTTP status answered (0: not an HTTP request)
  std::string client_ip;
  std::string user_agent;
  std::string request_id;
  std::string query;             // a list or search: the query as sent
  std::vector<std::int64_t> ids; // a list or search: the ids returned, in order
  // Some text of the row held bytes PostgreSQL text cannot (a NUL, or bytes that are not
  // UTF-8): they were replaced (make_storable, quarantine). Hashed and stored with the row.
  bool sanitized = false;
};

// Bounds of an audit row's texts (bytes); longer texts are cut at a character boundary.
inline constexpr std::size_t audit_text_max = 512;
inline constexpr std::size_t audit_query_max = 2048;
inline constexpr std::size_t audit_fields_max = 100; // field names a row names
inline constexpr std::size_t audit_field_name_max = 128;

// Makes every text of `r` storable, whoever filled it and from what (headers, paths, body keys):
// each byte sequence that is not well-formed UTF-8, and each NUL, becomes U+FFFD, and each
// text is cut to its bound. Sets `r.sanitized` when a byte was replaced. Run on every row
// before it is buffered or staged, so no request can make the writer's COPY or the audit_log
// view's jsonb cast fail.
void make_storable(audit_record& r);
// Whether make_storable would leave `r` as it is (no copy needed to store it).
bool is_storable(const audit_record& r);
// The last resort for a row PostgreSQL refused all the same: every byte outside printable
// ASCII becomes \xNN. Sets `r.sanitized`.
void quarantine(audit_record& r);

// A record for `who` (null: carecrm itself) at the current time, outcome success.
audit_record make_audit(const audit_context* who, std::int64_t tenant, std::string_view resource,
                        std::optional<std::int64_t> id, std::string_view action);
// The outcome word of an HTTP status: success (2xx, 3xx), denied (401, 403), failure.
std::string_view audit_outcome(int status);

// The first hash of every tenant's chain.
extern const std::string audit_genesis;
// SHA-256 (hex) of row `seq` of its tenant's chain: every field, each length-prefixed, after
// the previous row's hash. The time at which the row was chained (a storage detail) is left out.
std::string audit_hash(std::string_view previous_hash, std::int64_t seq, const audit_record& r);

// One element of audit_blocks.events (migration 013): the event as a JSON array of its facts by
// position, its hash last, then `true` for a sanitized row (migration 015).
void append_stored_audit_event(std::string& out, std::int64_t seq, const audit_record& r,
                               std::string_view hash);

// The names of the fields a change altered: standard fields by name, custom fields as
// "custom_fields.<key>".
std::vector<std::string> changed_fields(const contact& before, const contact& after);
std::vector<std::string> changed_fields(const company& before, const company& after);
std::vector<std::string> changed_custom_fields(std::string_view before, std::string_view after);
// Every field a record has (a create or a delete names them all).
std::vector<std::string> contact_field_names(const contact& c);

// The ids of a list response body: the `member` ("id") of each object in the top-level array
// member `array_key`, or of its `nested` member's object when `nested` is given (FHIR bundles:
// entry[].resource.id). Numbers and digit strings are taken; anything else is skipped. A scan,
// not a parse: it runs on every audited list.
std::vector<std::int64_t> list_ids(std::string_view body, std::string_view array_key,
                                   std::string_view nested = {}, std::string_view member = "id");
// The top-level member `member` of an object body, when it is an id (a number or digits).
std::optional<std::int64_t> member_id(std::string_view body, std::string_view member);

} // namespace crm::domain
