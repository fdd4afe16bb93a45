// A contact's export, assembled by Postgres in one snapshot.
#include "persistence/subject_repo.hpp"

#include "domain/custom_field.hpp"
#include "domain/secret_keys.hpp"
#include "persistence/audit_repo.hpp"
#include "persistence/sealed_columns.hpp"

#include <boost/json.hpp>

#include "domain/json_parse.hpp"
#include "persistence/fence.hpp"

#include <pqxx/pqxx>

namespace crm::persistence {
namespace {

// Timestamps as the API writes them (RFC 3339, UTC, microseconds): to_char(... , $3).
constexpr const char* timestamp_format = R"(YYYY-MM-DD"T"HH24:MI:SS.US"Z")";

constexpr const char* export_sql = R"SQL(
SELECT json_build_object(
  'exported_at', to_char(now() AT TIME ZONE 'UTC', $3),
  'tenant_id', c.tenant_id,
  'contact', json_build_object(
    'id', c.id, 'first_name', c.first_name, 'last_name', c.last_name, 'email', c.email,
    'phone', c.phone, 'company_id', c.company_id, 'owner_id', c.owner_id, 'status', c.status,
    'source', c.source,
    'tags', to_json(c.tags), 'custom_fields', c.custom_fields,
    'created_at', to_char(c.created_at AT TIME ZONE 'UTC', $3),
    'updated_at', to_char(c.updated_at AT TIME ZONE 'UTC', $3)),
  'company', (
    SELECT json_build_object('id', co.id, 'name', co.name, 'domain', co.domain,
                             'phone', co.phone, 'industry', co.industry, 'address', co.address)
    FROM companies co WHERE co.id = c.company_id AND co.tenant_id = c.tenant_id),
  'channel_identities', (
    SELECT coalesce(json_agg(json_build_object('channel_id', i.channel_id,
                                               'external_id', i.external_id)
                             ORDER BY i.channel_id, i.external_id), '[]')
    FROM channel_identities i WHERE i.tenant_id = c.tenant_id AND i.contact_id = c.id),
  'conversations', (
    SELECT coalesce(json_agg(json_build_object(
      'id', v.id, 'channel_id', v.channel_id, 'status', v.status, 'assignee_id', v.assignee_id,
      'handoff_reason', v.handoff_reason,
      'created_at', to_char(v.created_at AT TIME ZONE 'UTC', $3),
      'messages', (
        SELECT coalesce(json_agg(json_build_object(
          'id', m.id, 'direction', m.direction, 'text', m.text, 'status', m.status,
          'purpose', m.purpose, 'sender_user_id', m.sender_user_id,
          'sender_agent_id', m.sender_agent_id,
          'created_at', to_char(m.created_at AT TIME ZONE 'UTC', $3),
          'sent_at', to_char(m.sent_at AT TIME ZONE 'UTC', $3)) ORDER BY m.id), '[]')
        FROM messages m WHERE m.conversation_id = v.id)) ORDER BY v.id), '[]')
    FROM conversations v WHERE v.tenant_id = c.tenant_id AND v.contact_id = c.id),
  'deals', (
    SELECT coalesce(json_agg(json_build_object(
      'id', d.id, 'title', d.title, 'amount', d.amount, 'currency', d.currency,
      'pipeline_id', d.pipeline_id, 'stage_id', d.stage_id, 'status', d.status,
      'lost_reason', d.lost_reason, 'custom_fields', d.custom_fields,
      'expected_close_date', d.expected_close_date,
      'created_at', to_char(d.created_at AT TIME ZONE 'UTC', $3),
      'closed_at', to_char(d.closed_at AT TIME ZONE 'UTC', $3),
      'history', (
        SELECT coalesce(json_agg(json_build_object(
          'kind', h.kind, 'from_stage_id', h.from_stage_id, 'to_stage_id', h.to_stage_id,
          'from_amount', h.from_amount, 'to_amount', h.to_amount,
          'at', to_char(h.at AT TIME ZONE 'UTC', $3)) ORDER BY h.id), '[]')
        FROM deal_history h WHERE h.deal_id = d.id)) ORDER BY d.id), '[]')
    FROM deals d WHERE d.tenant_id = c.tenant_id AND d.contact_id = c.id),
  'consents', (
    SELECT coalesce(json_agg(json_build_object(
      'id', k.id, 'purpose', k.purpose,
      'channel', coalesce(to_json(k.channel_id), to_json('any'::text)),
      'granted', k.granted, 'source', k.source, 'evidence', k.evidence,
      'recorded_at', to_char(k.recorded_at AT TIME ZONE 'UTC', $3),
      'recorded_by', k.recorded_by) ORDER BY k.id), '[]')
    FROM consents k WHERE k.tenant_id = c.tenant_id AND k.contact_id = c.id),
  'notes', (
    SELECT coalesce(json_agg(json_build_object(
      'id', n.id, 'body', n.body, 'pinned', n.pinned, 'author_id', n.author_id,
      'created_at', to_char(n.created_at AT TIME ZONE 'UTC', $3),
      'updated_at', to_char(n.updated_at AT TIME ZONE 'UTC', $3)) ORDER BY n.id), '[]')
    FROM notes n WHERE n.tenant_id = c.tenant_id AND n.contact_id = c.id),
  'tasks', (
    SELECT coalesce(json_agg(json_build_object(
      'id', t.id, 'title', t.title, 'description', t.description, 'status', t.status,
      'priority', t.priority, 'assignee_id', t.assignee_id, 'deal_id', t.deal_id,
      'appointment_id', t.appointment_id,
      'due_at', to_char(t.due_at AT TIME ZONE 'UTC', $3),
      'completed_at', to_char(t.completed_at AT TIME ZONE 'UTC', $3),
      'created_at', to_char(t.created_at AT TIME ZONE 'UTC', $3)) ORDER BY t.id), '[]')
    FROM tasks t WHERE t.tenant_id = c.tenant_id AND t.contact_id = c.id),
  'appointments', (
    SELECT coalesce(json_agg(json_build_object(
      'id', a.id, 'service', s.name, 'calendar', k.name, 'status', a.status,
      'start', to_char(a.starts_at AT TIME ZONE 'UTC', $3),
      'end', to_char(a.ends_at AT TIME ZONE 'UTC', $3), 'notes', a.notes, 'source', a.source,
      'cancel_reason', a.cancel_reason,
      'created_at', to_char(a.created_at AT TIME ZONE 'UTC', $3)) ORDER BY a.starts_at, a.id),
      '[]')
    FROM appointments a JOIN services s ON s.id = a.service_id
    JOIN calendars k ON k.id = a.calendar_id
    WHERE a.tenant_id = c.tenant_id AND a.contact_id = c.id),
  'ai_decisions', (
    SELECT coalesce(json_agg(json_build_object(
      'id', a.id, 'agent_id', a.agent_id, 'conversation_id', a.conversation_id,
      'message_id', a.message_id, 'intent', a.intent, 'handoff', a.handoff,
      'handoff_reason', a.handoff_reason, 'provider', a.provider,
      'created_at', to_char(a.created_at AT TIME ZONE 'UTC', $3)) ORDER BY a.id), '[]')
    FROM ai_replies a JOIN conversations v ON v.id = a.conversation_id
    WHERE v.tenant_id = c.tenant_id AND v.contact_id = c.id),
  'access_log', (
    SELECT coalesce(json_agg(json_build_object(
      'at', to_char(l.at AT TIME ZONE 'UTC', $3), 'actor_type', l.actor_type,
      'user_id', l.user_id, 'role', l.role, 'actor_ref', l.actor_ref, 'action', l.action,
      'fields', to_json(l.fields), 'outcome', l.outcome, 'client_ip', l.client_ip,
      'request_id', l.request_id) ORDER BY l.seq), '[]')
    FROM audit_log l
    WHERE l.tenant_id = c.tenant_id AND l.record_ids @> ARRAY[c.id]
      AND ((l.resource = 'contact' AND l.resource_id = c.id) OR c.id = ANY(l.ids)
           OR NOT l.readable))
)::text
FROM contacts c WHERE c.tenant_id = $1 AND c.id = $2
)SQL";

} // namespace

std::optional<std::string> export_contact(pg_conn& c, std::int64_t tenant_id,
                                          std::int64_t contact_id) {
  pqxx::transaction<pqxx::repeatable_read, pqxx::read_only> tx(c.raw());
  auto r = tx.exec_params(export_sql, tenant_id, contact_id, timestamp_format);
  if (r.empty()) return std::nullopt;
  auto doc = r.front()[0].as<std::string>();
  if (!domain::may_hold_sealed(doc)) return doc;
  // The person's sensitive values, sealed at rest, are theirs to receive: opened here.
  boost::json::error_code ec;
  auto v = crm::domain::parse_json(doc, ec);
  auto* contact = !ec && v.is_object() ? v.as_object().if_contains("contact") : nullptr;
  auto* custom =
      contact && contact->is_object() ? contact->as_object().if_contains("custom_fields") : nullptr;
  if (!custom || !custom->is_object()) return doc;
  std::vector<std::string> names;
  for (auto& kv : custom->as_object()) names.emplace_back(kv.key());
  auto k = tx.exec_params("SELECT data_key FROM tenant_data_keys WHERE tenant_id = $1", tenant_id);
  if (k.empty()) return doc;
  auto key = domain::data_key::from_bytes(
      c.keys().open(sealed::tenant_data_key, tenant_id, k.front()[0].as<std::string>()));
  if (!key) return doc;
  std::vector<std::string> opened;
  auto text = domain::open_custom_values(
      boost::json::serialize(*custom), names,
      [&](std::string_view field, std::string_view sealed) {
        return key->open(sealed::contact_field(contact_id, field), sealed);
      },
      opened);
  contact->as_object()["custom_fields"] = crm::domain::parse_json(text);
  return boost::json::serialize(v);
}

erasure_state erasure_of(pg_conn& c, std::int64_t tenant_id, std::int64_t contact_id) {
  pqxx::read_transaction tx(c.raw());
  auto r = tx.exec_params("SELECT completed_at IS NOT NULL, json_build_object('contact_id', "
                          "contact_id, 'erased_at', to_char(completed_at AT TIME ZONE 'UTC', $3), "
                          "'removed', removed)::text FROM erasures "
                          "WHERE tenant_id = $1 AND contact_id = $2",
                          tenant_id, contact_id, timestamp_format);
  erasure_state out;
  if (r.empty()) return out;
  out.requested = true;
  if (r[0][0].as<bool>()) out.completed = r[0][1].as<std::string>();
  return out;
}

void begin_erasure(pg_conn& c, std::int64_t tenant_id, std::int64_t contact_id,
                   std::optional<std::int64_t> by, const std::vector<domain::audit_record>& audit) {
  pqxx::work tx(c.raw());
  fence(tx, tenant_id);
  auto r = tx.exec_params("INSERT INTO erasures (tenant_id, contact_id, requested_by) "
                          "VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
                          tenant_id, contact_id, by ? std::to_string(*by).c_str() : nullptr);
  if (r.affected_rows() > 0) insert_audit(tx, audit);
  tx.commit();
}

std::int64_t erase_messaging(pg_conn& c, std::int64_t tenant_id, std::int64_t contact_id) {
  pqxx::work tx(c.raw());
  fence(tx, tenant_id);
  // Messages, AI decisions and messages waiting for an agent go with their conversation.
  auto n = tx.exec_params("DELETE FROM conversations WHERE tenant_id = $1 AND contact_id = $2",
                          tenant_id, contact_id)
               .affected_rows();
  tx.exec_params("DELETE FROM channel_identities WHERE tenant_id = $1 AND contact_id = $2",
                 tenant_id, contact_id);
  tx.exec_params("DELETE FROM consents WHERE tenant_id = $1 AND contact_id = $2", tenant_id,
                 contact_id);
  tx.commit();
  return static_cast<std::int64_t>(n);
}

namespace {

// Anything in a JSON document that names the contact: a contact_id member, or a contact object
// with its id, at any depth (events of contacts, deals, messages; workflow steps).
constexpr const char* names_contact = "$.** ? (@.contact_id == $id || @.contact.id == $id)";

erasure_done finish(pqxx::work& tx, std::int64_t tenant_id, std::int64_t contact_id,
                    std::int64_t conversations) {
  auto vars = "{\"id\":" + std::to_string(contact_id) + "}";
  auto marker = "{\"erased\":true,\"contact_id\":" + std::to_string(contact_id) + "}";
  auto outbox = tx.exec_params("UPDATE outbox SET payload = $3::jsonb WHERE tenant_id = $1 AND "
                               "jsonb_path_exists(payload, $4::jsonpath, $2::jsonb) AND "
                               "payload <> $3::jsonb",
                               tenant_id, vars, marker, names_contact)
                    .affected_rows();
  auto deliveries =
      tx.exec_params("UPDATE webhook_deliveries SET payload = $3::jsonb, attempt_log = '[]', "
                     "last_error = NULL WHERE tenant_id = $1 AND "
                     "jsonb_path_exists(payload, $4::jsonpath, $2::jsonb) AND payload <> $3::jsonb",
                     tenant_id, vars, marker, names_contact)
          .affected_rows();
  // A run keeps its shape (the API still lists its steps) without what it read or wrote.
  auto runs = tx.exec_params(
      "UPDATE workflow_runs SET trigger_payload = $3::jsonb, error = CASE WHEN error IS NULL "
      "THEN NULL ELSE 'erased' END, steps = (SELECT coalesce(jsonb_agg(CASE WHEN "
      "jsonb_typeof(s) = 'object' THEN s || jsonb_build_object('params', '{}'::jsonb) || "
      "(CASE WHEN s ? 'error' AND s->'error' <> 'null' THEN jsonb_build_object('error', "
      "'erased') ELSE '{}' END) || (CASE WHEN s ? 'result' THEN jsonb_build_object('result', "
      "null) ELSE '{}' END) ELSE s END ORDER BY o), '[]'::jsonb) FROM "
      "jsonb_array_elements(steps) WITH ORDINALITY AS e(s, o)) WHERE tenant_id = $1 AND "
      "(jsonb_path_exists(trigger_payload, $4::jsonpath, $2::jsonb) OR "
      "jsonb_path_exists(steps, $4::jsonpath, $2::jsonb)) AND trigger_payload <> $3::jsonb "
      "RETURNING status IN ('queued', 'running', 'waiting')",
      tenant_id, vars, marker, names_contact);
  bool active = false;
  for (const auto& r : runs) active = active || r[0].as<bool>();
  // The first answer to a create, replayed for its Idempotency-Key, is the contact itself.
  auto keys = tx.exec_params("DELETE FROM idempotency_keys WHERE tenant_id = $1 AND "
                             "response LIKE '{\"id\":' || $2::text || ',%'",
                             tenant_id, std::to_string(contact_id))
                  .affected_rows();
  auto contact =
      tx.exec_params("DELETE FROM contacts WHERE tenant_id = $1 AND id = $2", tenant_id, contact_id)
          .affected_rows();
  auto removed = "{\"contact\":" + std::to_string(contact) +
                 ",\"conversations\":" + std::to_string(conversations) +
                 ",\"outbox_events\":" + std::to_string(outbox) +
                 ",\"webhook_deliveries\":" + std::to_string(deliveries) +
                 ",\"workflow_runs\":" + std::to_string(runs.size()) +
                 ",\"idempotency_keys\":" + std::to_string(keys) + "}";
  // A request completed before keeps its first document.
  tx.exec_params("UPDATE erasures SET completed_at = now(), removed = $3::jsonb WHERE tenant_id "
                 "= $1 AND contact_id = $2 AND completed_at IS NULL",
                 tenant_id, contact_id, removed);
  auto doc = tx.exec_params("SELECT json_build_object('contact_id', contact_id, 'erased_at', "
                            "to_char(completed_at AT TIME ZONE 'UTC', $3), 'removed', "
                            "removed)::text FROM erasures WHERE tenant_id = $1 AND contact_id = $2",
                            tenant_id, contact_id, timestamp_format);
  return {doc.empty() ? std::string("{}") : doc[0][0].as<std::string>(), active};
}

} // namespace

erasure_done finish_erasure(pg_conn& c, std::int64_t tenant_id, std::int64_t contact_id,
                            std::int64_t conversations,
                            const std::vector<domain::audit_record>& audit) {
  pqxx::work tx(c.raw());
  fence(tx, tenant_id);
  auto done = finish(tx, tenant_id, contact_id, conversations);
  insert_audit(tx, audit);
  tx.commit();
  return done;
}

int complete_pending_erasures(pg_conn& c) {
  std::vector<std::pair<std::int64_t, std::int64_t>> pending;
  {
    pqxx::read_transaction tx(c.raw());
    for (const auto& r :
         tx.exec("SELECT tenant_id, contact_id FROM erasures WHERE completed_at IS NULL"))
      pending.emplace_back(r[0].as<std::int64_t>(), r[1].as<std::int64_t>());
  }
  for (auto [tenant, contact] : pending) {
    auto conversations = erase_messaging(c, tenant, contact);
    auto row = domain::make_audit(nullptr, tenant, "contact", contact, "erase");
    row.actor_ref = "completed at start-up";
    row.status = 200;
    finish_erasure(c, tenant, contact, conversations, {row});
  }
  return static_cast<int>(pending.size());
}

} // namespace crm::persistence
