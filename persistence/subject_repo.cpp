// A contact's export, assembled by Postgres in one snapshot.
#include "persistence/subject_repo.hpp"

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
    'phone', c.phone, 'company_id', c.company_id, 'status', c.status, 'source', c.source,
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
    WHERE l.tenant_id = c.tenant_id
      AND ((l.resource = 'contact' AND l.resource_id = c.id) OR c.id = ANY(l.ids)))
)::text
FROM contacts c WHERE c.tenant_id = $1 AND c.id = $2
)SQL";

} // namespace

std::optional<std::string> export_contact(pg_conn& c, std::int64_t tenant_id,
                                          std::int64_t contact_id) {
  pqxx::transaction<pqxx::repeatable_read, pqxx::read_only> tx(c.raw());
  auto r = tx.exec_params(export_sql, tenant_id, contact_id, timestamp_format);
  if (r.empty()) return std::nullopt;
  return r.front()[0].as<std::string>();
}

} // namespace crm::persistence
