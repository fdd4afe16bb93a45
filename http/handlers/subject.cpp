// The patient's rights (contract §9 "Health data", docs/compliance.md "The patient's rights"):
// GET /contacts/{id}/export answers everything the tenant holds about the person as one JSON
// document (admins: it is the whole record at once).
#include "http/api.hpp"

#include "actors/channels.hpp"
#include "actors/contacts.hpp"
#include "actors/runtime.hpp"
#include "http/audit.hpp"
#include "http/openapi_schema.hpp"
#include "http/request_input.hpp"
#include "persistence/audit_repo.hpp"
#include "persistence/pg_pool.hpp"
#include "persistence/subject_repo.hpp"

#include <optional>
#include <string>

namespace crm::http {
namespace {

void export_contact(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  auto tenant = ex->who.tenant_id;
  // The contacts actor has answered every acknowledged write to the contact by then, so the
  // snapshot holds them.
  with_contact(s.rt, ex, *id, [&s, ex, tenant, id = *id] {
    // Every access recorded so far is stored before the snapshot is read.
    s.audit.writer().flush([&s, ex, tenant, id](bool) {
      s.pool.run<std::optional<std::string>>(
          [tenant, id](persistence::pg_conn& c) {
            return persistence::export_contact(c, tenant, id);
          },
          [ex, id](domain::outcome<std::optional<std::string>> doc) {
            if (!doc) return ex->fail(doc.error());
            if (!*doc)
              return ex->fail(domain::failure::of(domain::errc::not_found, "contact not found"));
            response res;
            res.body = std::move(**doc);
            res.headers.emplace_back("Content-Disposition", "attachment; filename=\"contact-" +
                                                                std::to_string(id) +
                                                                "-export.json\"");
            res.headers.emplace_back("Cache-Control", "no-store");
            ex->respond(std::move(res));
          });
    });
  });
}

domain::audit_record erase_row(const domain::audit_context* who, std::int64_t tenant,
                               std::int64_t id, const char* action) {
  auto row = domain::make_audit(who, tenant, "contact", id, action);
  row.status = 200;
  return row;
}

// The last step (persistence/subject_repo.hpp): what still names the contact is rewritten, the
// request completed; a workflow run in progress that named it is reloaded from Postgres.
void finish(services& s, const exchange_ptr& ex, std::int64_t tenant, std::int64_t id,
            std::int64_t conversations, const domain::audit_context_ptr& who) {
  auto row = erase_row(who.get(), tenant, id, "erase_completed");
  s.pool.run<persistence::erasure_done>(
      [tenant, id, conversations, rows = std::vector{row}](persistence::pg_conn& c) {
        return persistence::finish_erasure(c, tenant, id, conversations, rows);
      },
      [&s, ex, tenant](domain::outcome<persistence::erasure_done> done) {
        if (!done) return ex->fail(done.error());
        if (done->runs_active) s.rt.fail_child(tenant, "workflows");
        ex->json(200, std::move(done->document));
      });
}

// Messages first (the channels actor, after the conversation changes queued before), then the
// contact (the contacts actor, which tells the deals actor), then the rest.
void erase_steps(services& s, const exchange_ptr& ex, std::int64_t tenant, std::int64_t id,
                 const domain::audit_context_ptr& who) {
  domain::audit_scope scope(who);
  actors::erase_messaging(
      s.rt, tenant, id,
      actors::callback<std::int64_t>([&s, ex, tenant, id, who](domain::outcome<std::int64_t> n) {
        if (!n) return ex->fail(n.error());
        domain::audit_scope scope(who);
        actors::delete_contact(s.rt, tenant, id,
                               actors::callback<domain::done>([&s, ex, tenant, id, who, n = *n](
                                                                  domain::outcome<domain::done> d) {
                                 // Gone already: an erasure resumed after its contact was deleted.
                                 if (!d && d.error().code != domain::errc::not_found)
                                   return ex->fail(d.error());
                                 finish(s, ex, tenant, id, n, who);
                               }),
                               true);
      }));
}

// POST /contacts/{id}/erase (admin): idempotent; a request interrupted half-way (a crash, a
// 503) is completed by the same request again, or when carecrm starts.
void erase_contact(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  auto tenant = ex->who.tenant_id;
  auto user = ex->who.acting_user();
  auto who = domain::current_audit_context();
  actors::get_contact(
      s.rt, tenant, *id,
      actors::callback<std::string>([&s, ex, tenant, user, who,
                                     id = *id](domain::outcome<std::string> found) {
        if (!found && found.error().code != domain::errc::not_found) return ex->fail(found.error());
        bool exists = static_cast<bool>(found);
        s.pool.run<persistence::erasure_state>(
            [tenant, id](persistence::pg_conn& c) {
              return persistence::erasure_of(c, tenant, id);
            },
            [&s, ex, tenant, user, who, id,
             exists](domain::outcome<persistence::erasure_state> st) {
              if (!st) return ex->fail(st.error());
              if (st->completed) return ex->json(200, std::move(*st->completed));
              if (!exists && !st->requested)
                return ex->fail(domain::failure::of(domain::errc::not_found, "contact not found"));
              auto row = erase_row(who.get(), tenant, id, "erase_requested");
              s.pool.run<domain::done>(
                  [tenant, id, user, rows = std::vector{row}](persistence::pg_conn& c) {
                    persistence::begin_erasure(c, tenant, id, user, rows);
                    return domain::done{};
                  },
                  [&s, ex, tenant, id, who](domain::outcome<domain::done> begun) {
                    if (!begun) return ex->fail(begun.error());
                    erase_steps(s, ex, tenant, id, who);
                  });
            });
      }));
}

// The export document (persistence/subject_repo.cpp export_sql) and the erasure's.
void define_subject_schemas(router& r) {
  using namespace schema;
  auto str = text({});
  auto opt_str = nullable(str);
  auto opt_id = nullable(id());
  auto opt_time = nullable(timestamp());
  auto message = object({{"id", id()},
                         {"direction", str},
                         {"text", opt_str},
                         {"status", str},
                         {"purpose", opt_str},
                         {"sender_user_id", opt_id},
                         {"sender_agent_id", opt_id},
                         {"created_at", timestamp()},
                         {"sent_at", opt_time}});
  auto history = object({{"kind", str},
                         {"from_stage_id", opt_id},
                         {"to_stage_id", opt_id},
                         {"from_amount", nullable(number())},
                         {"to_amount", nullable(number())},
                         {"at", timestamp()}});
  define(r, "SubjectExport",
         object({{"exported_at", timestamp()},
                 {"tenant_id", id()},
                 {"contact", object({{"id", id()},
                                     {"first_name", str},
                                     {"last_name", opt_str},
                                     {"email", opt_str},
                                     {"phone", opt_str},
                                     {"company_id", opt_id},
                                     {"owner_id", opt_id},
                                     {"status", str},
                                     {"source", opt_str},
                                     {"tags", array_of(str)},
                                     {"custom_fields", any_object()},
                                     {"created_at", timestamp()},
                                     {"updated_at", timestamp()}})},
                 {"company", nullable(object({{"id", id()},
                                              {"name", str},
                                              {"domain", opt_str},
                                              {"phone", opt_str},
                                              {"industry", opt_str},
                                              {"address", opt_str}}))},
                 {"channel_identities",
                  array_of(object({{"channel_id", id()}, {"external_id", str}}))},
                 {"conversations", array_of(object({{"id", id()},
                                                    {"channel_id", opt_id},
                                                    {"status", str},
                                                    {"assignee_id", opt_id},
                                                    {"handoff_reason", opt_str},
                                                    {"created_at", timestamp()},
                                                    {"messages", array_of(message)}}))},
                 {"deals", array_of(object({{"id", id()},
                                            {"title", str},
                                            {"amount", nullable(number())},
                                            {"currency", opt_str},
                                            {"pipeline_id", id()},
                                            {"stage_id", id()},
                                            {"status", str},
                                            {"lost_reason", opt_str},
                                            {"custom_fields", nullable(any_object())},
                                            {"expected_close_date", nullable(date())},
                                            {"created_at", timestamp()},
                                            {"closed_at", opt_time},
                                            {"history", array_of(history)}}))},
                 {"consents",
                  array_of(object({{"id", id()},
                                   {"purpose", str},
                                   {"channel", object_t{{"oneOf", boost::json::array{id(), str}}}},
                                   {"granted", boolean()},
                                   {"source", opt_str},
                                   {"evidence", opt_str},
                                   {"recorded_at", timestamp()},
                                   {"recorded_by", opt_id}}))},
                 {"notes", array_of(object({{"id", id()},
                                            {"body", str},
                                            {"pinned", boolean()},
                                            {"author_id", opt_id},
                                            {"created_at", timestamp()},
                                            {"updated_at", timestamp()}}))},
                 {"tasks", array_of(object({{"id", id()},
                                            {"title", str},
                                            {"description", str},
                                            {"status", str},
                                            {"priority", str},
                                            {"assignee_id", opt_id},
                                            {"deal_id", opt_id},
                                            {"appointment_id", opt_id},
                                            {"due_at", nullable(timestamp())},
                                            {"completed_at", nullable(timestamp())},
                                            {"created_at", timestamp()}}))},
                 {"appointments", array_of(object({{"id", id()},
                                                   {"service", str},
                                                   {"calendar", str},
                                                   {"status", str},
                                                   {"start", timestamp()},
                                                   {"end", timestamp()},
                                                   {"notes", str},
                                                   {"source", str},
                                                   {"cancel_reason", opt_str},
                                                   {"created_at", timestamp()}}))},
                 {"ai_decisions", array_of(object({{"id", id()},
                                                   {"agent_id", opt_id},
                                                   {"conversation_id", id()},
                                                   {"message_id", opt_id},
                                                   {"intent", opt_str},
                                                   {"handoff", boolean()},
                                                   {"handoff_reason", opt_str},
                                                   {"provider", opt_str},
                                                   {"created_at", timestamp()}}))},
                 {"access_log", array_of(object({{"at", timestamp()},
                                                 {"actor_type", str},
                                                 {"user_id", opt_id},
                                                 {"role", str},
                                                 {"actor_ref", str},
                                                 {"action", str},
                                                 {"fields", array_of(str)},
                                                 {"outcome", str},
                                                 {"client_ip", str},
                                                 {"request_id", str}}))}}));
  define(r, "Erasure",
         object({{"contact_id", id()},
                 {"erased_at", timestamp()},
                 {"removed", object({{"contact", integer()},
                                     {"conversations", integer()},
                                     {"outbox_events", integer()},
                                     {"webhook_deliveries", integer()},
                                     {"workflow_runs", integer()},
                                     {"idempotency_keys", integer()}})}}));
}

} // namespace

void add_subject_routes(router& r, services& s) {
  define_subject_schemas(r);
  r.add({verb::get, "/api/v1/contacts/{id}/export", access::bearer, domain::permission::administer,
         bind(s, export_contact),
         "Everything held about a contact, as one JSON document (the patient's right of access)",
         "contacts"},
        {"", "SubjectExport"});
  r.add({verb::post, "/api/v1/contacts/{id}/erase", access::bearer, domain::permission::administer,
         bind(s, erase_contact),
         "Erase a contact everywhere (the patient's right to erasure); idempotent", "contacts"},
        route_doc("", "Erasure").without_body());
}

} // namespace crm::http
