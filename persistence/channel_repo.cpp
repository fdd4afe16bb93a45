// SQL of channels, identities, conversations and messages. Timestamps travel as RFC 3339 text
// and come back as microseconds.
#include "persistence/channel_repo.hpp"

#include "persistence/audit_repo.hpp"

#include "domain/clock.hpp"
#include "domain/crypto.hpp"
#include "domain/page_json.hpp"
#include "domain/secret_keys.hpp"
#include "persistence/row_values.hpp"
#include "persistence/sealed_columns.hpp"

#include "domain/json_parse.hpp"
#include "domain/media.hpp"
#include "persistence/fence.hpp"
#include "persistence/record_rows.hpp"
#include <boost/json.hpp>

#include <pqxx/pqxx>

#include <cmath>

namespace json = boost::json;

namespace crm::persistence {
namespace {

const char* channel_columns =
    "id, tenant_id, name, type, config::text, webhook_secret, is_active, " CRM_MICROS(
        "created_at") ", " CRM_MICROS("updated_at") ", business_hours, time_zone,"
                                                    " after_hours_reply";

// Provider secrets in the config are sealed; the inbound webhook secret arrives hashed already
// (the actor hashes it).
json::object sealed_config(const domain::channel& ch, const domain::secret_keys& keys) {
  auto out = ch.config;
  sealed::map_config_secrets(ch.type, out, [&](std::string_view key, std::string_view v) {
    return keys.seal(sealed::channel_config(key), ch.tenant_id, v);
  });
  return out;
}

domain::channel to_channel(const pqxx::row& r, const domain::secret_keys& keys) {
  domain::channel ch;
  ch.id = r[0].as<std::int64_t>();
  ch.tenant_id = r[1].as<std::int64_t>();
  ch.name = r[2].as<std::string>();
  ch.type = domain::parse_channel_type(r[3].as<std::string>()).value_or(domain::channel_type::api);
  json::error_code ec;
  auto cfg = crm::domain::parse_json(r[4].c_str(), ec);
  if (!ec && cfg.is_object()) ch.config = cfg.as_object();
  sealed::map_config_secrets(ch.type, ch.config, [&](std::string_view key, std::string_view v) {
    return keys.open(sealed::channel_config(key), ch.tenant_id, v);
  });
  if (!r[5].is_null()) ch.webhook_secret = r[5].as<std::string>();
  ch.is_active = r[6].as<bool>();
  ch.created_at = r[7].as<std::int64_t>();
  ch.updated_at = r[8].as<std::int64_t>();
  if (!r[9].is_null()) ch.business_hours = domain::parse_working_hours_text(r[9].c_str());
  ch.time_zone = r[10].as<std::string>();
  ch.after_hours_reply = opt_text(r[11]);
  return ch;
}

const char* conversation_columns =
    "id, tenant_id, channel_id, contact_id, status, assignee_id, "
    "unread_count, " CRM_MICROS("last_message_at") ", " CRM_MICROS("created_at") ", " CRM_MICROS(
        "updated_at") ", ai_paused,"
                      " handoff_reason, " CRM_MICROS("last_inbound_at") ", team_id, " CRM_MICROS(
                          "first_response_at") ", " CRM_MICROS("resolved_at") ","
                                                                              " array_to_json("
                                                                              "labels)::text, "
                                                                              "priority,"
                                                                              " " CRM_MICROS(
                                                                                  "after_hours_"
                                                                                  "for");

domain::conversation to_conversation(const pqxx::row& r) {
  domain::conversation c;
  c.id = r[0].as<std::int64_t>();
  c.tenant_id = r[1].as<std::int64_t>();
  c.channel_id = r[2].as<std::int64_t>();
  c.contact_id = r[3].as<std::int64_t>();
  c.status = domain::parse_conversation_status(r[4].as<std::string>())
                 .value_or(domain::conversation_status::open);
  if (!r[5].is_null()) c.assignee_id = r[5].as<std::int64_t>();
  c.unread_count = r[6].as<std::int64_t>();
  c.last_message_at = r[7].as<std::int64_t>();
  c.created_at = r[8].as<std::int64_t>();
  c.updated_at = r[9].as<std::int64_t>();
  c.ai_paused = r[10].as<bool>();
  if (!r[11].is_null()) c.handoff_reason = r[11].as<std::string>();
  c.last_inbound_at = micros_or_zero(r[12]);
  c.team_id = opt_int(r[13]);
  c.first_response_at = micros_or_zero(r[14]);
  c.resolved_at = micros_or_zero(r[15]);
  json::error_code ec;
  auto labels = crm::domain::parse_json(r[16].c_str(), ec);
  if (!ec && labels.is_array())
    for (auto& l : labels.get_array())
      if (l.is_string()) c.labels.emplace_back(l.get_string());
  if (!r[17].is_null()) c.priority = domain::parse_conversation_priority(r[17].as<std::string>());
  c.after_hours_for = opt_int(r[18]);
  return c;
}

// A conversation is written as one row of values in the order of conversation_write_columns
// (each typed, so the row also reads as a VALUES list of an UPDATE); the first five never change
// once it is stored.
constexpr std::array<const char*, 19> conversation_write_columns = {
    "id",          "tenant_id",      "channel_id",      "contact_id",      "created_at",
    "status",      "assignee_id",    "unread_count",    "last_message_at", "updated_at",
    "ai_paused",   "handoff_reason", "last_inbound_at", "team_id",         "first_response_at",
    "resolved_at", "labels",         "priority",        "after_hours_for"};
constexpr std::size_t conversation_fixed_columns = 5;

template <class Quote>
std::string conversation_values(const domain::conversation& c, Quote quote) {
  auto at = [&](std::int64_t us) { return quote(domain::format_rfc3339(us)) + "::timestamptz"; };
  auto at_or_null = [&](std::int64_t us) { return us ? at(us) : std::string("NULL::timestamptz"); };
  auto id_or_null = [](const std::optional<std::int64_t>& v) {
    return v ? std::to_string(*v) + "::bigint" : std::string("NULL::bigint");
  };
  array_literal labels;
  for (auto& l : c.labels) labels.add(l);
  std::string s = "(";
  s += std::to_string(c.id) + "::bigint," + std::to_string(c.tenant_id) + "::bigint," +
       std::to_string(c.channel_id) + "::bigint," + std::to_string(c.contact_id) + "::bigint," +
       at(c.created_at) + "," + quote(domain::to_string(c.status)) + "::text," +
       id_or_null(c.assignee_id) + "," + std::to_string(c.unread_count) + "::bigint," +
       at(c.last_message_at) + "," + at(c.updated_at) + "," + (c.ai_paused ? "true" : "false") +
       "," + (c.handoff_reason ? quote(*c.handoff_reason) : std::string("NULL")) + "::text," +
       at_or_null(c.last_inbound_at) + "," + id_or_null(c.team_id) + "," +
       at_or_null(c.first_response_at) + "," + at_or_null(c.resolved_at) + "," +
       quote(labels.text()) + "::text[]," +
       (c.priority ? quote(domain::to_string(*c.priority)) : std::string("NULL")) + "::text," +
       (c.after_hours_for ? at(*c.after_hours_for) : std::string("NULL::timestamptz")) + ")";
  return s;
}

std::string joined_columns(std::size_t from, const char* prefix = "") {
  std::string s;
  for (auto i = from; i < conversation_write_columns.size(); ++i)
    s += std::string(i > from ? ", " : "") + prefix + conversation_write_columns[i];
  return s;
}

// INSERT of the conversations (new ones, or ones changed: ON CONFLICT updates the row of the
// tenant), as one statement.
template <class Quote>
std::string upsert_conversations(const std::vector<domain::conversation>& convs, Quote quote) {
  static const std::string head = "INSERT INTO conversations (" + joined_columns(0) + ") VALUES ";
  static const std::string tail = [] {
    std::string t = " ON CONFLICT (id) DO UPDATE SET ";
    for (auto i = conversation_fixed_columns; i < conversation_write_columns.size(); ++i)
      t += std::string(i > conversation_fixed_columns ? ", " : "") + conversation_write_columns[i] +
           " = EXCLUDED." + conversation_write_columns[i];
    return t + " WHERE conversations.tenant_id = EXCLUDED.tenant_id";
  }();
  std::string s = head;
  for (std::size_t i = 0; i < convs.size(); ++i)
    s += (i ? "," : "") + conversation_values(convs[i], quote);
  return s + tail;
}

} // namespace

namespace rows {

const char* const message_columns =
    "m.id, m.conversation_id, m.direction, m.text, m.external_message_id, m.status, m.error,"
    " m.attempts, m.sender_user_id, " CRM_MICROS("m.created_at") ", " CRM_MICROS(
        "m.sent_at") ","
                     " m.sender_agent_id, m.segments, m.subject,"
                     " (SELECT coalesce(json_agg(json_build_object('n', a.n, 'content_type',"
                     " a.content_type, 'filename', a.filename, 'size', a.size, 'status', a.status,"
                     " 'error', a.error) ORDER BY a.n), '[]')::text FROM message_attachments a"
                     " WHERE a.message_id = m.id)";

json::object message_json(const pqxx::row& r) {
  json::object o;
  auto text_or_null = [](const pqxx::field& f) -> json::value {
    if (f.is_null()) return nullptr;
    return json::value(f.as<std::string>());
  };
  o["id"] = r[0].as<std::int64_t>();
  o["conversation_id"] = r[1].as<std::int64_t>();
  o["direction"] = r[2].as<std::string>();
  o["text"] = r[3].as<std::string>();
  o["external_message_id"] = text_or_null(r[4]);
  o["status"] = r[5].as<std::string>();
  o["error"] = text_or_null(r[6]);
  o["attempts"] = r[7].as<int>();
  o["sender_user_id"] =
      r[8].is_null() ? json::value(nullptr) : json::value(r[8].as<std::int64_t>());
  o["sender_agent_id"] =
      r[11].is_null() ? json::value(nullptr) : json::value(r[11].as<std::int64_t>());
  o["segments"] = r[12].is_null() ? json::value(nullptr) : json::value(r[12].as<int>());
  o["subject"] = text_or_null(r[13]);
  json::error_code ec;
  auto files = crm::domain::parse_json(r[14].c_str(), ec);
  o["attachments"] = !ec && files.is_array() ? files : json::value(json::array());
  o["created_at"] = domain::format_rfc3339(r[9].as<std::int64_t>());
  o["sent_at"] = r[10].is_null() ? json::value(nullptr)
                                 : json::value(domain::format_rfc3339(r[10].as<std::int64_t>()));
  return o;
}

} // namespace rows
using rows::message_columns;
using rows::message_json;

namespace {

// The attachment rows of message `message_id` (docs/channels.md "Media"): a file that came with
// it is kept or refused now; one named by the provider is pending until fetched.
template <class Quote>
std::string attachment_rows(std::int64_t tenant_id, std::int64_t message_id,
                            const std::vector<domain::media_ref>& media, Quote quote) {
  if (media.empty()) return {};
  std::string s = "INSERT INTO message_attachments (message_id, n, tenant_id, source,"
                  " content_type, filename, size, status, error, data) VALUES ";
  for (std::size_t i = 0; i < media.size(); ++i) {
    auto& m = media[i];
    std::string status = "pending", error = "NULL", size = "NULL", data = "NULL";
    if (m.data) {
      size = std::to_string(m.data->size());
      if (auto no = domain::media::refusal(m.content_type, m.data->size())) {
        status = "refused";
        error = quote(*no);
      } else {
        status = "stored";
        data = "decode(" + quote(domain::hex_encode(*m.data)) + ", 'hex')";
      }
    }
    s += std::string(i ? "," : "") + "(" + std::to_string(message_id) + "," + std::to_string(i) +
         "," + std::to_string(tenant_id) + "," +
         (m.source.empty() ? std::string("NULL") : quote(m.source)) + "," +
         quote(m.data ? domain::media::base_type(m.content_type) : m.content_type) + "," +
         quote(m.filename) + "," + size + "," + quote(status) + "," + error + "," + data + ")";
  }
  return s + ";\n";
}

// `insert`: a new conversation, under the id the channels actor reserved; else an update of the
// tenant's row (none left, after an erasure: nothing written).
void write_conversation(pqxx::work& tx, const domain::conversation& conv, bool insert = false) {
  auto quote = [&tx](std::string_view v) { return tx.quote(std::string(v)); };
  if (insert) {
    tx.exec(upsert_conversations({conv}, quote));
    return;
  }
  static const std::string update = [] {
    std::string u = "UPDATE conversations AS c SET (" + joined_columns(conversation_fixed_columns) +
                    ") = (" + joined_columns(conversation_fixed_columns, "v.") + ") FROM (VALUES ";
    return u;
  }();
  static const std::string where =
      ") AS v (" + joined_columns(0) + ") WHERE c.tenant_id = v.tenant_id AND c.id = v.id";
  tx.exec(update + conversation_values(conv, quote) + where);
}

} // namespace

namespace rows {

const char* const consent_columns =
    "id, tenant_id, contact_id, purpose, channel_id, granted, source,"
    " evidence, " CRM_MICROS("recorded_at") ", recorded_by";

domain::consent to_consent(const pqxx::row& r) {
  domain::consent c;
  c.id = r[0].as<std::int64_t>();
  c.tenant_id = r[1].as<std::int64_t>();
  c.contact_id = r[2].as<std::int64_t>();
  c.purpose = domain::parse_consent_purpose(r[3].as<std::string>())
                  .value_or(domain::consent_purpose::treatment_communication);
  c.channel_id = opt_int(r[4]);
  c.granted = r[5].as<bool>();
  c.source = r[6].as<std::string>();
  c.evidence = opt_text(r[7]);
  c.recorded_at = r[8].as<std::int64_t>();
  c.recorded_by = opt_int(r[9]);
  return c;
}

} // namespace rows
using rows::consent_columns;
using rows::to_consent;

namespace {

domain::consent insert_consent(pqxx::work& tx, const domain::consent& c) {
  auto channel =
      c.channel_id ? std::optional<std::string>(std::to_string(*c.channel_id)) : std::nullopt;
  auto by =
      c.recorded_by ? std::optional<std::string>(std::to_string(*c.recorded_by)) : std::nullopt;
  auto r = tx.exec_params(
      std::string("INSERT INTO consents (tenant_id, contact_id, purpose, channel_id, granted,"
                  " source, evidence, recorded_at, recorded_by) VALUES ($1, $2, $3, $4::bigint,"
                  " $5, $6, $7, $8::timestamptz, $9::bigint) RETURNING ") +
          consent_columns,
      c.tenant_id, c.contact_id, std::string(domain::to_string(c.purpose)),
      channel ? channel->c_str() : nullptr, c.granted, c.source,
      c.evidence ? c.evidence->c_str() : nullptr, ts(c.recorded_at), by ? by->c_str() : nullptr);
  return to_consent(r.front());
}

} // namespace

domain::consent insert_consent(pg_conn& c, domain::consent record,
                               const std::vector<domain::audit_record>& audit) {
  pqxx::work tx(c.raw());
  fence(tx, record.tenant_id);
  auto saved = insert_consent(tx, record);
  insert_audit(tx, audit);
  tx.commit();
  return saved;
}

messaging_snapshot load_messaging(pg_conn& c, std::int64_t tenant_id) {
  pqxx::read_transaction tx(c.raw());
  messaging_snapshot out;
  for (auto r : tx.exec_params(std::string("SELECT ") + channel_columns +
                                   " FROM channels WHERE tenant_id = $1 ORDER BY id",
                               tenant_id))
    out.channels.push_back(to_channel(r, c.keys()));
  for (auto r : tx.exec_params(std::string("SELECT ") + conversation_columns +
                                   " FROM conversations WHERE tenant_id = $1 ORDER BY id",
                               tenant_id))
    out.conversations.push_back(to_conversation(r));
  for (auto r : tx.exec_params("SELECT channel_id, external_id, contact_id FROM"
                               " channel_identities WHERE tenant_id = $1",
                               tenant_id))
    out.identities.push_back(
        {r[0].as<std::int64_t>(), r[1].as<std::string>(), r[2].as<std::int64_t>()});
  for (auto r : tx.exec_params(
           "SELECT m.id, m.conversation_id, m.channel_id, c.contact_id, "
           "m.text, m.attempts, " CRM_MICROS("m.next_attempt_at") ", " CRM_MICROS(
               "m.created_at") ", m.purpose, m.sender_agent_id IS NOT NULL, m.template,"
                               " (SELECT count(*) FROM message_attachments a WHERE"
                               " a.message_id = m.id), " CRM_MICROS(
                                   "m.send_started_at") " FROM messages m JOIN"
                                                        " conversations c ON c.id ="
                                                        " m.conversation_id WHERE"
                                                        " m.tenant_id = $1 AND m.status ="
                                                        " 'queued' ORDER BY m.id",
           tenant_id)) {
    queued_message q;
    q.id = r[0].as<std::int64_t>();
    q.conversation_id = r[1].as<std::int64_t>();
    q.channel_id = r[2].as<std::int64_t>();
    q.contact_id = r[3].as<std::int64_t>();
    q.text = r[4].as<std::string>();
    q.attempts = r[5].as<int>();
    q.next_attempt_at = micros_or_zero(r[6]);
    q.created_at = r[7].as<std::int64_t>();
    q.purpose = domain::parse_consent_purpose(r[8].as<std::string>())
                    .value_or(domain::consent_purpose::treatment_communication);
    q.from_agent = r[9].as<bool>();
    if (!r[10].is_null()) q.template_json = r[10].as<std::string>();
    q.files = r[11].as<int>();
    q.unknown_since = micros_or_zero(r[12]);
    out.queued.push_back(std::move(q));
  }
  for (auto r : tx.exec_params(std::string("SELECT ") + consent_columns +
                                   " FROM consents WHERE tenant_id = $1 ORDER BY id",
                               tenant_id))
    out.consents.push_back(to_consent(r));
  for (auto r : tx.exec_params("SELECT a.message_id, a.n, m.channel_id, a.source, a.attempts FROM"
                               " message_attachments a JOIN messages m ON m.id = a.message_id"
                               " WHERE a.tenant_id = $1 AND a.status = 'pending' ORDER BY"
                               " a.message_id, a.n",
                               tenant_id))
    out.media.push_back({r[0].as<std::int64_t>(), r[1].as<int>(), r[2].as<std::int64_t>(),
                         r[3].is_null() ? std::string() : r[3].as<std::string>(), r[4].as<int>()});
  for (auto r : tx.exec_params("SELECT DISTINCT unnest(channel_ids) FROM ai_agents WHERE"
                               " tenant_id = $1 AND is_active AND auto_reply",
                               tenant_id))
    out.ai_channels.push_back(r[0].as<std::int64_t>());
  for (auto r : tx.exec_params(
           "SELECT r.conversation_id, max(" CRM_MICROS(
               "a.starts_at") ") FROM"
                              " appointment_reminders r JOIN appointments a ON a.id = "
                              "r.appointment_id"
                              " WHERE r.tenant_id = $1 AND r.status = 'sent' AND r.conversation_id "
                              "IS NOT NULL"
                              " AND a.status IN ('booked', 'confirmed') AND a.starts_at > now()"
                              // an assistant's offer made since supersedes the reminder's answer
                              " AND NOT EXISTS (SELECT 1 FROM ai_booking_offers o WHERE"
                              " o.conversation_id = r.conversation_id AND o.created_at >"
                              " r.created_at AND o.expires_at > now())"
                              " GROUP BY r.conversation_id",
           tenant_id))
    out.reminded.emplace_back(r[0].as<std::int64_t>(), r[1].as<std::int64_t>());
  out.event_listeners = has_event_listeners(tx, tenant_id);
  return out;
}

domain::channel save_channel(pg_conn& c, domain::channel ch) {
  pqxx::work tx(c.raw());
  fence(tx, ch.tenant_id);
  auto cfg = json::serialize(sealed_config(ch, c.keys()));
  auto type = std::string(domain::to_string(ch.type));
  const char* secret = ch.webhook_secret ? ch.webhook_secret->c_str() : nullptr;
  std::optional<std::string> hours;
  if (ch.business_hours) hours = domain::working_hours_text(*ch.business_hours);
  pqxx::result r;
  if (ch.id == 0) {
    r = tx.exec_params(std::string("INSERT INTO channels (tenant_id, name, type, config,"
                                   " webhook_secret, is_active, created_at, updated_at,"
                                   " business_hours, time_zone, after_hours_reply) VALUES"
                                   " ($1, $2, $3, $4::jsonb, $5, $6, $7::timestamptz,"
                                   " $8::timestamptz, $9, $10, $11) RETURNING ") +
                           channel_columns,
                       ch.tenant_id, ch.name, type, cfg, secret, ch.is_active, ts(ch.created_at),
                       ts(ch.updated_at), hours, ch.time_zone, ch.after_hours_reply);
  } else {
    r = tx.exec_params(std::string("UPDATE channels SET name = $3, config = $4::jsonb,"
                                   " webhook_secret = $5, is_active = $6, updated_at ="
                                   " $7::timestamptz, business_hours = $8, time_zone = $9,"
                                   " after_hours_reply = $10 WHERE tenant_id = $1 AND id = $2"
                                   " RETURNING ") +
                           channel_columns,
                       ch.tenant_id, ch.id, ch.name, cfg, secret, ch.is_active, ts(ch.updated_at),
                       hours, ch.time_zone, ch.after_hours_reply);
  }
  if (r.empty()) throw std::runtime_error("channel vanished");
  auto saved = to_channel(r.front(), c.keys());
  tx.commit();
  return saved;
}

bool replace_channel_secret(pg_conn& c, std::int64_t tenant_id, std::int64_t id,
                            const std::string& old_hash, const std::string& new_hash) {
  pqxx::work tx(c.raw());
  fence(tx, tenant_id);
  auto r = tx.exec_params("UPDATE channels SET webhook_secret = $4 WHERE tenant_id = $1 AND"
                          " id = $2 AND webhook_secret = $3",
                          tenant_id, id, old_hash, new_hash);
  tx.commit();
  return r.affected_rows() == 1;
}

void delete_channel(pg_conn& c, std::int64_t tenant_id, std::int64_t id) {
  pqxx::work tx(c.raw());
  fence(tx, tenant_id);
  tx.exec_params("DELETE FROM channels WHERE tenant_id = $1 AND id = $2", tenant_id, id);
  tx.commit();
}

std::optional<std::int64_t> tenant_of_channel(pg_conn& c, std::int64_t id) {
  return tenant_of_row(c.raw(), "channels", id);
}
std::optional<std::int64_t> tenant_of_conversation(pg_conn& c, std::int64_t id) {
  return tenant_of_row(c.raw(), "conversations", id);
}

namespace {
// Every inbound message asks this first: parsed and planned once per connection.
const prepared_statement find_inbound_statement{
    "crm_find_inbound",
    "SELECT m.id, m.conversation_id, c.contact_id FROM messages m JOIN conversations c ON c.id ="
    " m.conversation_id WHERE m.channel_id = $1 AND m.external_message_id = $2 AND"
    " m.direction = 'inbound'"};
} // namespace

std::optional<stored_inbound> find_inbound(pg_conn& c, std::int64_t channel_id,
                                           const std::string& external_message_id) {
  // One statement, no BEGIN and COMMIT around it.
  c.prepare_once(find_inbound_statement); // before the statement: it may (re)connect
  pqxx::nontransaction tx(c.raw());
  auto r = tx.exec_prepared(find_inbound_statement.name, channel_id, external_message_id);
  if (r.empty()) return std::nullopt;
  return stored_inbound{r.front()[0].as<std::int64_t>(), r.front()[1].as<std::int64_t>(),
                        r.front()[2].as<std::int64_t>()};
}

inbound_written store_inbound(pg_conn& c, const inbound_write& w) {
  pqxx::work tx(c.raw());
  fence(tx, w.tenant_id);
  inbound_written out;
  out.conversation = w.conversation;
  write_conversation(tx, out.conversation, w.new_conversation);
  auto r = tx.exec_params(
      "INSERT INTO messages (id, tenant_id, conversation_id, channel_id, direction, text,"
      " external_message_id, status, created_at, subject) VALUES ($7, $1, $2, $3, 'inbound', $4,"
      " $5, 'received', $6::timestamptz, $8) ON CONFLICT (channel_id, external_message_id)"
      " WHERE direction = 'inbound' DO NOTHING RETURNING id",
      w.tenant_id, out.conversation.id, w.channel_id, w.text, w.external_message_id,
      ts(w.received_at), w.message_id, w.subject.empty() ? nullptr : w.subject.c_str());
  if (r.empty()) {
    // Stored meanwhile (another node, or a retry racing this one): nothing else is written.
    tx.abort();
    out.duplicate = true;
    if (auto found = find_inbound(c, w.channel_id, w.external_message_id)) out.ids = *found;
    return out;
  }
  out.ids = {r.front()[0].as<std::int64_t>(), out.conversation.id, w.contact_id};
  if (w.external_id)
    tx.exec_params("INSERT INTO channel_identities (channel_id, external_id, tenant_id,"
                   " contact_id) VALUES ($1, $2, $3, $4) ON CONFLICT (channel_id, external_id)"
                   " DO UPDATE SET contact_id = EXCLUDED.contact_id",
                   w.channel_id, *w.external_id, w.tenant_id, w.contact_id);
  if (!w.event_payload.empty())
    tx.exec_params("INSERT INTO outbox (tenant_id, event, payload, depth) VALUES ($1,"
                   " 'message.received', $2::jsonb, $3)",
                   w.tenant_id, w.event_payload, w.depth);
  if (!w.media.empty())
    tx.exec(attachment_rows(w.tenant_id, out.ids.message_id, w.media,
                            [&tx](std::string_view v) { return tx.quote(std::string(v)); }));
  if (w.ai_pending)
    tx.exec_params("INSERT INTO ai_pending (message_id, tenant_id, conversation_id, channel_id)"
                   " VALUES ($1, $2, $3, $4)",
                   out.ids.message_id, w.tenant_id, out.conversation.id, w.channel_id);
  for (auto consent : w.consents) {
    consent.evidence = "message " + std::to_string(out.ids.message_id);
    out.consents.push_back(insert_consent(tx, consent));
  }
  auto audit = w.audit;
  for (auto& r : audit)
    if (r.resource == "conversation" && !r.resource_id) r.resource_id = out.conversation.id;
  insert_audit(tx, audit);
  tx.commit();
  return out;
}

void inbound_batch::append_sql(sql_text& out) const {
  auto& s = out.body();
  auto tid = std::to_string(tenant_id);
  auto ts = [&](std::int64_t micros) {
    return out.quote(domain::format_rfc3339(micros)) + "::timestamptz";
  };
  auto rows = [&](const auto& items, auto row) {
    for (std::size_t i = 0; i < items.size(); ++i) {
      s += i ? ",(" : "(";
      row(items[i]);
      s += ')';
    }
  };
  if (!conversations.empty())
    s += upsert_conversations(conversations, [&](std::string_view v) { return out.quote(v); }) +
         ";\n";
  if (!messages.empty()) {
    s += "INSERT INTO messages (id, tenant_id, conversation_id, channel_id, direction, text,"
         " external_message_id, status, created_at, subject) VALUES ";
    rows(messages, [&](const inbound_row& m) {
      s += std::to_string(m.message_id) + "," + tid + "," + std::to_string(m.conversation_id) +
           "," + std::to_string(m.channel_id) + ",'inbound'," + out.quote(m.text) + "," +
           out.quote(m.external_message_id) + ",'received'," + ts(m.received_at) + "," +
           (m.subject.empty() ? std::string("NULL") : out.quote(m.subject));
    });
    s += ";\n";
  }
  if (!replies.empty()) {
    s += "INSERT INTO messages (id, tenant_id, conversation_id, channel_id, direction, text,"
         " status, next_attempt_at, created_at, purpose, segments) VALUES ";
    rows(replies, [&](const reply_row& r) {
      auto& m = r.message;
      s += std::to_string(m.id) + "," + tid + "," + std::to_string(m.conversation_id) + "," +
           std::to_string(m.channel_id) + ",'outbound'," + out.quote(m.text) + ",'queued'," +
           ts(m.next_attempt_at) + "," + ts(m.created_at) + "," +
           out.quote(domain::to_string(m.purpose)) + "," +
           (r.segments > 0 ? std::to_string(r.segments) : std::string("NULL"));
    });
    s += ";\n";
  }
  for (auto& m : messages)
    s += attachment_rows(tenant_id, m.message_id, m.media,
                         [&](std::string_view v) { return out.quote(v); });
  if (!identities.empty()) {
    s += "INSERT INTO channel_identities (channel_id, external_id, tenant_id, contact_id) VALUES ";
    rows(identities, [&](const identity& i) {
      s += std::to_string(i.channel_id) + "," + out.quote(i.external_id) + "," + tid + "," +
           std::to_string(i.contact_id);
    });
    s += " ON CONFLICT (channel_id, external_id) DO UPDATE SET contact_id = EXCLUDED.contact_id;\n";
  }
  // One multi-row INSERT of the messages `marked` picks, if any.
  auto insert_marked = [&](auto marked, const char* head, auto row) {
    bool any = false;
    for (auto& m : messages) {
      if (!marked(m)) continue;
      s += any ? ",(" : head;
      row(m);
      s += ')';
      any = true;
    }
    if (any) s += ";\n";
  };
  insert_marked([](const inbound_row& m) { return m.ai_pending; },
                "INSERT INTO ai_pending (message_id, tenant_id, conversation_id, channel_id)"
                " VALUES (",
                [&](const inbound_row& m) {
                  s += std::to_string(m.message_id) + "," + tid + "," +
                       std::to_string(m.conversation_id) + "," + std::to_string(m.channel_id);
                });
  insert_marked([](const inbound_row& m) { return m.reminder_answer; },
                "INSERT INTO reminder_answers (message_id, tenant_id, contact_id, conversation_id,"
                " channel_id) VALUES (",
                [&](const inbound_row& m) {
                  s += std::to_string(m.message_id) + "," + tid + "," +
                       std::to_string(m.contact_id) + "," + std::to_string(m.conversation_id) +
                       "," + std::to_string(m.channel_id);
                });
  append_events_sql(out, tenant_id, events);
}

messaging_ids reserve_messaging_ids(pg_conn& c, int n) {
  pqxx::nontransaction tx(c.raw());
  messaging_ids out;
  for (auto r : tx.exec_params("SELECT nextval('messages_id_seq'), nextval('conversations_id_seq')"
                               " FROM generate_series(1, $1)",
                               n)) {
    out.messages.push_back(r[0].as<std::int64_t>());
    out.conversations.push_back(r[1].as<std::int64_t>());
  }
  return out;
}

namespace {
std::optional<std::string> id_text(const std::optional<std::int64_t>& id) {
  if (!id) return std::nullopt;
  return std::to_string(*id);
}

pqxx::result insert_outbound(pqxx::work& tx, std::int64_t tenant_id,
                             const domain::conversation& conv, const std::string& text,
                             const std::optional<std::int64_t>& user,
                             const std::optional<std::int64_t>& agent, std::int64_t created_at,
                             domain::consent_purpose purpose, std::int64_t id,
                             const std::string& template_json = {}, int segments = 0) {
  auto u = id_text(user);
  auto a = id_text(agent);
  return tx.exec_params(
      std::string(
          "INSERT INTO messages AS m (id, tenant_id, conversation_id, channel_id,"
          " direction, text, status, sender_user_id, sender_agent_id, next_attempt_at,"
          " created_at, purpose, template, segments) VALUES ($9, $1, $2, $3, 'outbound', $4,"
          " 'queued', $5::bigint, $6::bigint, $7::timestamptz, $7::timestamptz, $8, $10::jsonb,"
          " $11::integer)"
          " RETURNING ") +
          message_columns,
      tenant_id, conv.id, conv.channel_id, text, u ? u->c_str() : nullptr, a ? a->c_str() : nullptr,
      ts(created_at), std::string(domain::to_string(purpose)), id,
      template_json.empty() ? nullptr : template_json.c_str(),
      segments > 0 ? std::optional<int>(segments) : std::nullopt);
}

std::string id_array(const std::vector<std::int64_t>& ids) {
  array_literal a;
  for (auto id : ids) a.add_number(id);
  return a.text();
}
} // namespace

agent_reply_written store_agent_reply(pg_conn& c, const agent_reply_write& w) {
  pqxx::work tx(c.raw());
  fence(tx, w.tenant_id);
  agent_reply_written out;
  tx.exec_params("DELETE FROM ai_pending WHERE message_id = $1", w.message_id);
  if (w.auto_reply &&
      !tx.exec_params("SELECT 1 FROM ai_replies WHERE message_id = $1 AND agent_id = $2 LIMIT 1",
                      w.message_id, w.agent_id)
           .empty()) {
    tx.commit();
    out.duplicate = true;
    return out;
  }
  std::vector<std::int64_t> sent;
  auto conv = w.conversation;
  if (!w.dropped) {
    write_conversation(tx, conv);
    for (std::size_t i = 0; i < w.texts.size(); ++i) {
      auto& text = w.texts[i];
      auto r =
          insert_outbound(tx, w.tenant_id, conv, text, std::nullopt, w.agent_id, w.created_at,
                          domain::consent_purpose::treatment_communication, w.message_ids.at(i));
      queued_message q;
      q.id = r.front()[0].as<std::int64_t>();
      q.conversation_id = conv.id;
      q.channel_id = conv.channel_id;
      q.contact_id = conv.contact_id;
      q.text = text;
      q.next_attempt_at = w.created_at;
      q.created_at = w.created_at;
      q.from_agent = true;
      sent.push_back(q.id);
      out.messages.push_back(std::move(q));
    }
  }
  auto opt_int = [](const std::optional<int>& v) {
    return id_text(v ? std::optional<std::int64_t>(*v) : std::nullopt);
  };
  auto pt = opt_int(w.prompt_tokens);
  auto ct = opt_int(w.completion_tokens);
  auto r = tx.exec_params(
      "INSERT INTO ai_replies (tenant_id, agent_id, conversation_id, message_id,"
      " reply_message_ids, intent, handoff, handoff_reason, passages, provider, prompt_tokens,"
      " completion_tokens, latency_ms, error, dropped, created_at) VALUES ($1, $2, $3, $4,"
      " $5::bigint[], $6, $7, $8, $9::bigint[], $10, $11::integer, $12::integer, $13, $14, $15,"
      " $16::timestamptz) RETURNING id",
      w.tenant_id, w.agent_id, conv.id, w.message_id, id_array(sent), w.intent, w.handoff,
      w.handoff_reason ? w.handoff_reason->c_str() : nullptr, id_array(w.passages), w.provider,
      pt ? pt->c_str() : nullptr, ct ? ct->c_str() : nullptr, w.latency_ms,
      w.error ? w.error->c_str() : nullptr, w.dropped, ts(w.created_at));
  out.reply_id = r.front()[0].as<std::int64_t>();
  if (!w.dropped) {
    std::string ids = "[";
    for (std::size_t i = 0; i < sent.size(); ++i) ids += (i ? "," : "") + std::to_string(sent[i]);
    ids += "]";
    std::string payload = "{\"reply_id\":" + std::to_string(out.reply_id) +
                          ",\"reply_message_ids\":" + ids + "," + w.event_payload.substr(1);
    tx.exec_params("INSERT INTO outbox (tenant_id, event, payload, depth) VALUES ($1, $2,"
                   " $3::jsonb, $4)",
                   w.tenant_id, w.handoff ? "ai.handoff" : "ai.replied", payload, w.depth);
  }
  insert_audit(tx, w.audit);
  tx.commit();
  return out;
}

std::vector<pending_inbound> pending_ai(pg_conn& c, std::int64_t tenant_id) {
  pqxx::read_transaction tx(c.raw());
  std::vector<pending_inbound> out;
  for (auto r : tx.exec_params("SELECT p.message_id, p.conversation_id, p.channel_id,"
                               " c.contact_id, m.text FROM ai_pending p JOIN messages m ON m.id ="
                               " p.message_id JOIN conversations c ON c.id = p.conversation_id"
                               " WHERE p.tenant_id = $1 ORDER BY p.message_id",
                               tenant_id))
    out.push_back({r[0].as<std::int64_t>(), r[1].as<std::int64_t>(), r[2].as<std::int64_t>(),
                   r[3].as<std::int64_t>(), r[4].as<std::string>()});
  return out;
}

void forget_pending_ai(pg_conn& c, std::int64_t tenant_id, std::int64_t message_id) {
  pqxx::work tx(c.raw());
  fence(tx, tenant_id);
  tx.exec_params("DELETE FROM ai_pending WHERE tenant_id = $1 AND message_id = $2", tenant_id,
                 message_id);
  tx.commit();
}

std::vector<std::int64_t> tenants_with_pending_ai(pg_conn& c, double seconds) {
  pqxx::read_transaction tx(c.raw());
  return first_ids(tx.exec_params("SELECT DISTINCT tenant_id FROM ai_pending WHERE created_at <"
                                  " now() - $1 * interval '1 second'",
                                  seconds));
}

outbound_written store_outbound(pg_conn& c, const outbound_write& w) {
  pqxx::work tx(c.raw());
  fence(tx, w.tenant_id);
  auto conv = w.conversation;
  write_conversation(tx, conv, w.new_conversation);
  auto r = insert_outbound(tx, w.tenant_id, conv, w.text, w.sender_user_id, w.sender_agent_id,
                           w.created_at, w.purpose, w.message_id, w.template_json, w.segments);
  if (!w.media.empty()) {
    tx.exec(attachment_rows(w.tenant_id, w.message_id, w.media,
                            [&tx](std::string_view v) { return tx.quote(std::string(v)); }));
    // Read again: the answer lists the files.
    r = tx.exec_params(std::string("SELECT ") + message_columns +
                           " FROM messages m WHERE m.id = $1",
                       w.message_id);
  }
  outbound_written out;
  if (w.reminder) {
    // Sent once: a row already there (another attempt, another node) leaves nothing written; so
    // does an appointment cancelled or moved since the reminder was planned.
    auto& k = *w.reminder;
    auto mark = tx.exec_params(
        "INSERT INTO appointment_reminders (appointment_id, before_minutes, starts_at, tenant_id,"
        " status, message_id, conversation_id) SELECT $1, $2, $3::timestamptz, $4, 'sent', $5,"
        " $6 WHERE EXISTS (SELECT 1 FROM appointments WHERE tenant_id = $4 AND id = $1 AND"
        " status IN ('booked', 'confirmed') AND starts_at = $3::timestamptz)"
        " ON CONFLICT DO NOTHING RETURNING 1",
        k.appointment_id, k.before_minutes, ts(k.start), w.tenant_id,
        r.front()[0].as<std::int64_t>(), conv.id);
    if (mark.empty()) {
      tx.abort();
      out.duplicate = true;
      return out;
    }
  }
  insert_audit(tx, w.audit);
  tx.commit();
  out.json = json::serialize(message_json(r.front()));
  out.message.id = r.front()[0].as<std::int64_t>();
  out.message.conversation_id = conv.id;
  out.message.channel_id = conv.channel_id;
  out.message.contact_id = conv.contact_id;
  out.message.text = w.text;
  out.message.next_attempt_at = w.created_at;
  out.message.created_at = w.created_at;
  out.message.purpose = w.purpose;
  out.message.from_agent = w.sender_agent_id.has_value();
  out.message.template_json = w.template_json;
  out.message.files = static_cast<int>(w.media.size());
  return out;
}

void record_send(pg_conn& c, std::int64_t tenant_id, const send_outcome& o) {
  pqxx::work tx(c.raw());
  fence(tx, tenant_id);
  const char* error = o.error ? o.error->c_str() : nullptr;
  const char* provider = o.provider_message_id ? o.provider_message_id->c_str() : nullptr;
  std::string next = o.next_attempt_at ? ts(o.next_attempt_at) : std::string();
  // A provider's report that came first (it names carecrm's id, so it can beat the answer)
  // keeps its status: `delivered` is not put back to `sent`, nor `sent` to `queued` by an
  // attempt whose answer was lost (and the retry then finds nothing queued to claim).
  tx.exec_params("UPDATE messages SET attempts = $4,"
                 " status = CASE WHEN status = 'queued' THEN $3 ELSE status END,"
                 " error = CASE WHEN status = 'queued' THEN $5 ELSE error END,"
                 " external_message_id = COALESCE($6, external_message_id),"
                 " next_attempt_at = CASE WHEN status = 'queued' THEN $7::timestamptz END,"
                 " sent_at = CASE WHEN status = 'queued' AND $3 = 'sent' THEN now()"
                 "           ELSE sent_at END,"
                 " send_started_at = NULL"
                 " WHERE tenant_id = $1 AND id = $2",
                 tenant_id, o.message_id, o.status, o.attempts, error, provider,
                 next.empty() ? nullptr : next.c_str());
  tx.commit();
}

bool claim_send(pg_conn& c, std::int64_t tenant_id, std::int64_t message_id, std::int64_t wake_at) {
  pqxx::work tx(c.raw());
  fence(tx, tenant_id);
  std::string wake = wake_at ? ts(wake_at) : std::string();
  auto r = tx.exec_params("UPDATE messages SET send_started_at = now(),"
                          " next_attempt_at = coalesce($3::timestamptz, next_attempt_at)"
                          " WHERE tenant_id = $1 AND id = $2 AND status = 'queued'"
                          " RETURNING id",
                          tenant_id, message_id, wake_at ? wake.c_str() : nullptr);
  tx.commit();
  return !r.empty();
}

std::pair<std::string, std::string> last_inbound_of(pg_conn& c, std::int64_t tenant_id,
                                                    std::int64_t conversation_id) {
  pqxx::read_transaction tx(c.raw());
  auto r = tx.exec_params("SELECT external_message_id, coalesce(subject, '') FROM messages WHERE"
                          " tenant_id = $1 AND conversation_id = $2 AND direction = 'inbound'"
                          " ORDER BY id DESC LIMIT 1",
                          tenant_id, conversation_id);
  if (r.empty() || r.front()[0].is_null()) return {};
  return {r.front()[0].as<std::string>(), r.front()[1].as<std::string>()};
}

delivery_applied apply_delivery(pg_conn& c, std::int64_t tenant_id, const delivery_update& u) {
  pqxx::work tx(c.raw());
  fence(tx, tenant_id);
  array_literal from;
  for (auto s : u.from) from.add(s);
  const char* error = u.error ? u.error->c_str() : nullptr;
  // By carecrm's id when the report carries it (the provider's id may never have been stored:
  // a send whose outcome was lost), else by the provider's: one indexed column either way (the
  // primary key, or messages_provider_idx). A report for a message still queued settles its
  // send: the provider has it, so it is never sent again.
  const bool ours = u.message_id.has_value();
  const std::string key = ours ? std::to_string(*u.message_id) : u.provider_message_id;
  auto by = [ours](const char* n) {
    return ours ? std::string("id = $") + n + "::bigint"
                : std::string("external_message_id = $") + n;
  };
  auto r = tx.exec_params(
      "UPDATE messages SET status = $4, error = COALESCE($6, error),"
      " sent_at = COALESCE(sent_at, now()),"
      " external_message_id = COALESCE(external_message_id, $3),"
      " send_started_at = NULL, next_attempt_at = NULL"
      " WHERE tenant_id = $1 AND channel_id = $2 AND " +
          by("7") + " AND direction = 'outbound' AND status = ANY($5::text[]) RETURNING id",
      tenant_id, u.channel_id, u.provider_message_id, u.status, from.text(), error, key);
  delivery_applied out = delivery_applied::moved;
  if (r.empty())
    out = tx.exec_params("SELECT 1 FROM messages WHERE tenant_id = $1 AND channel_id = $2 AND " +
                             by("3") + " AND direction = 'outbound'",
                         tenant_id, u.channel_id, key)
                  .empty()
              ? delivery_applied::unknown
              : delivery_applied::behind;
  tx.commit();
  return out;
}

std::string conversation_report(pg_conn& c, std::int64_t tenant_id,
                                const conversation_report_query& q) {
  // The column is one of three names, never the caller's text.
  const char* key = q.group_by == "assignee" ? "assignee_id"
                    : q.group_by == "team"   ? "team_id"
                                             : "channel_id";
  auto seconds = [](const char* end) {
    return std::string("extract(epoch FROM ") + end + " - created_at)";
  };
  auto pct = [&](const char* p, const char* end) {
    return std::string("percentile_cont(") + p + ") WITHIN GROUP (ORDER BY " + seconds(end) +
           ") FILTER (WHERE " + end + " IS NOT NULL)";
  };
  pqxx::read_transaction tx(c.raw());
  auto rows = tx.exec_params(
      std::string("SELECT GROUPING(") + key + "), " + key +
          ", count(*), count(first_response_at), count(resolved_at), " +
          pct("0.5", "first_response_at") + ", " + pct("0.9", "first_response_at") + ", " +
          pct("0.5", "resolved_at") + ", " + pct("0.9", "resolved_at") +
          " FROM conversations WHERE tenant_id = $1 AND created_at >= $2::timestamptz AND"
          " created_at < $3::timestamptz GROUP BY GROUPING SETS ((" +
          key + "), ()) ORDER BY 1, 2 NULLS LAST",
      tenant_id, ts(q.from), ts(q.to));
  auto figure = [](const pqxx::field& f) -> json::value {
    if (f.is_null()) return nullptr;
    return std::round(f.as<double>() * 10) / 10;
  };
  auto figures = [&](const pqxx::row& r) {
    json::object o;
    o["conversations"] = r[2].as<std::int64_t>();
    o["responded"] = r[3].as<std::int64_t>();
    o["resolved"] = r[4].as<std::int64_t>();
    o["first_response_seconds"] = json::object{{"median", figure(r[5])}, {"p90", figure(r[6])}};
    o["resolution_seconds"] = json::object{{"median", figure(r[7])}, {"p90", figure(r[8])}};
    return o;
  };
  json::array groups;
  // The empty grouping set gives the total's row, also when no conversation matched.
  json::object total;
  for (auto r : rows) {
    if (r[0].as<int>() == 1) {
      total = figures(r);
      continue;
    }
    auto g = figures(r);
    g["key"] = r[1].is_null() ? json::value(nullptr) : json::value(r[1].as<std::int64_t>());
    groups.push_back(std::move(g));
  }
  json::object out{{"from", domain::format_rfc3339(q.from)},
                   {"to", domain::format_rfc3339(q.to)},
                   {"group_by", q.group_by},
                   {"groups", std::move(groups)},
                   {"total", std::move(total)}};
  return json::serialize(out);
}

void save_conversation(pg_conn& c, const domain::conversation& conv,
                       const std::vector<domain::audit_record>& audit) {
  pqxx::work tx(c.raw());
  fence(tx, conv.tenant_id);
  auto copy = conv;
  write_conversation(tx, copy);
  insert_audit(tx, audit);
  tx.commit();
}

bool active_user_of(pg_conn& c, std::int64_t tenant_id, std::int64_t user_id) {
  pqxx::read_transaction tx(c.raw());
  auto r = tx.exec_params("SELECT 1 FROM users WHERE tenant_id = $1 AND id = $2 AND is_active",
                          tenant_id, user_id);
  return !r.empty();
}

std::string messages_page_json(pg_conn& c, std::int64_t tenant_id, std::int64_t conversation_id,
                               int page, int per_page) {
  pqxx::read_transaction tx(c.raw());
  auto total = tx.exec_params("SELECT count(*) FROM messages WHERE tenant_id = $1 AND"
                              " conversation_id = $2",
                              tenant_id, conversation_id)
                   .front()[0]
                   .as<std::int64_t>();
  auto rows = tx.exec_params(std::string("SELECT ") + message_columns +
                                 " FROM messages m WHERE m.tenant_id = $1 AND m.conversation_id ="
                                 " $2 ORDER BY m.id LIMIT $3 OFFSET $4",
                             tenant_id, conversation_id, per_page,
                             static_cast<std::int64_t>(page - 1) * per_page);
  json::array items;
  for (auto r : rows) items.push_back(message_json(r));
  return domain::render_page(std::move(items), total, page, per_page);
}

std::vector<std::int64_t> tenants_with_queued_messages(pg_conn& c) {
  pqxx::read_transaction tx(c.raw());
  return first_ids(tx.exec("SELECT DISTINCT tenant_id FROM messages WHERE status = 'queued' AND"
                           " next_attempt_at <= now()"));
}

void save_media(pg_conn& c, std::int64_t tenant_id, const media_outcome& o) {
  pqxx::work tx(c.raw());
  fence(tx, tenant_id);
  const char* error = o.error ? o.error->c_str() : nullptr;
  const bool stored = o.status == "stored";
  tx.exec_params("UPDATE message_attachments SET status = $4, attempts = $5, error = $6,"
                 " content_type = CASE WHEN $7 = '' THEN content_type ELSE $7 END,"
                 " size = CASE WHEN $8 THEN octet_length(decode($9, 'hex')) ELSE size END,"
                 " data = CASE WHEN $8 THEN decode($9, 'hex') ELSE NULL END"
                 " WHERE tenant_id = $1 AND message_id = $2 AND n = $3 AND status = 'pending'",
                 tenant_id, o.message_id, o.n, o.status, o.attempts, error, o.content_type, stored,
                 stored ? domain::hex_encode(o.data) : std::string());
  tx.commit();
}

std::optional<attachment_file> read_attachment(pg_conn& c, std::int64_t tenant_id,
                                               std::int64_t message_id, int n) {
  pqxx::read_transaction tx(c.raw());
  auto r = tx.exec_params("SELECT a.status, a.content_type, a.filename, encode(a.data, 'hex'),"
                          " a.error FROM message_attachments a WHERE a.tenant_id = $1 AND"
                          " a.message_id = $2 AND a.n = $3",
                          tenant_id, message_id, n);
  if (r.empty()) return std::nullopt;
  attachment_file f;
  f.status = r[0][0].as<std::string>();
  f.content_type = r[0][1].as<std::string>();
  f.filename = r[0][2].as<std::string>();
  if (!r[0][3].is_null())
    f.data = domain::hex_decode(r[0][3].as<std::string>()).value_or(std::string());
  f.error = opt_text(r[0][4]);
  return f;
}

std::optional<std::int64_t> tenant_of_message(pg_conn& c, std::int64_t id) {
  return tenant_of_row(c.raw(), "messages", id);
}

std::vector<outbound_file> outbound_files(pg_conn& c, std::int64_t tenant_id,
                                          std::int64_t message_id, bool with_data) {
  pqxx::read_transaction tx(c.raw());
  std::vector<outbound_file> out;
  for (auto r : tx.exec_params("SELECT n, content_type, filename, CASE WHEN $3 THEN"
                               " encode(data, 'hex') END FROM message_attachments WHERE"
                               " tenant_id = $1 AND message_id = $2 AND status = 'stored'"
                               " ORDER BY n",
                               tenant_id, message_id, with_data)) {
    outbound_file f;
    f.n = r[0].as<int>();
    f.content_type = r[1].as<std::string>();
    f.filename = r[2].as<std::string>();
    if (!r[3].is_null())
      f.data = domain::hex_decode(r[3].as<std::string>()).value_or(std::string());
    out.push_back(std::move(f));
  }
  return out;
}

} // namespace crm::persistence
