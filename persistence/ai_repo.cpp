// SQL of agents, documents, passages and replies. Arrays travel as JSON (Boost.JSON quotes
// them) and come back through array_to_json.
#include "persistence/ai_repo.hpp"

#include "domain/clock.hpp"
#include "domain/page_json.hpp"
#include "domain/secret_keys.hpp"
#include "persistence/row_values.hpp"
#include "persistence/sealed_columns.hpp"

#include "domain/json_parse.hpp"
#include "persistence/fence.hpp"
#include <boost/json.hpp>

#include <pqxx/pqxx>

#include <map>

namespace json = boost::json;

namespace crm::persistence {
namespace {

const char* agent_columns =
    "id, tenant_id, name, instructions, provider, model, base_url, api_key,"
    " array_to_json(channel_ids)::text, auto_reply, array_to_json(handoff_keywords)::text,"
    " reply_language, emergency_message, handoff_assignee_id, stream, is_active, " CRM_MICROS(
        "created_at") ", " CRM_MICROS("updated_at") ", array_to_json(service_ids)::text";

json::array json_array(const pqxx::field& f) {
  json::error_code ec;
  auto v = crm::domain::parse_json(f.c_str(), ec);
  return !ec && v.is_array() ? v.get_array() : json::array();
}

domain::ai_agent to_agent(const pqxx::row& r, const domain::secret_keys& keys) {
  domain::ai_agent a;
  a.id = r[0].as<std::int64_t>();
  a.tenant_id = r[1].as<std::int64_t>();
  a.name = r[2].as<std::string>();
  a.instructions = r[3].as<std::string>();
  a.provider =
      domain::parse_ai_provider(r[4].as<std::string>()).value_or(domain::ai_provider::builtin);
  a.model = opt_text(r[5]);
  a.base_url = opt_text(r[6]);
  if (auto key = opt_text(r[7])) a.api_key = keys.open(sealed::agent_api_key, a.tenant_id, *key);
  for (auto& v : json_array(r[8]))
    if (v.is_int64()) a.channel_ids.push_back(v.get_int64());
  a.auto_reply = r[9].as<bool>();
  for (auto& v : json_array(r[10]))
    if (v.is_string()) a.handoff_keywords.emplace_back(v.get_string().c_str());
  a.reply_language = domain::ai::language_from(r[11].as<std::string>());
  a.emergency_message = opt_text(r[12]);
  a.handoff_assignee_id = opt_int(r[13]);
  a.stream = r[14].as<bool>();
  a.is_active = r[15].as<bool>();
  a.created_at = r[16].as<std::int64_t>();
  a.updated_at = r[17].as<std::int64_t>();
  for (auto& v : json_array(r[18]))
    if (v.is_int64()) a.service_ids.push_back(v.get_int64());
  return a;
}

std::string ids_json(const std::vector<std::int64_t>& ids) {
  json::array a;
  for (auto id : ids) a.push_back(id);
  return json::serialize(a);
}

std::string strings_json(const std::vector<std::string>& xs) {
  json::array a;
  for (auto& x : xs) a.push_back(json::string(x));
  return json::serialize(a);
}

const char* document_columns =
    "id, tenant_id, agent_id, title, kind, octet_length(content), " CRM_MICROS(
        "created_at") ", " CRM_MICROS("updated_at");

domain::ai_document to_document(const pqxx::row& r) {
  domain::ai_document d;
  d.id = r[0].as<std::int64_t>();
  d.tenant_id = r[1].as<std::int64_t>();
  d.agent_id = r[2].as<std::int64_t>();
  d.title = r[3].as<std::string>();
  d.kind = domain::document_kind_from(r[4].as<std::string>()).value_or(domain::document_kind::text);
  d.bytes = r[5].as<std::int64_t>();
  d.created_at = r[6].as<std::int64_t>();
  d.updated_at = r[7].as<std::int64_t>();
  return d;
}

std::vector<std::int64_t> insert_passages(pqxx::work& tx, std::int64_t tenant_id,
                                          std::int64_t document_id,
                                          const std::vector<domain::ai::passage>& passages) {
  std::vector<std::string> titles, texts;
  for (const auto& p : passages) {
    titles.push_back(p.title);
    texts.push_back(p.text);
  }
  auto r = tx.exec_params("INSERT INTO ai_passages (tenant_id, document_id, ord, text, title)"
                          " SELECT $1, $2, t.ord, t.text, $4::jsonb ->> (t.ord - 1)::int FROM"
                          " jsonb_array_elements_text($3::jsonb) WITH ORDINALITY AS t(text, ord)"
                          " RETURNING id, ord",
                          tenant_id, document_id, strings_json(texts), strings_json(titles));
  std::vector<std::int64_t> ids(passages.size());
  for (auto row : r) {
    auto ord = row[1].as<std::int64_t>();
    if (ord >= 1 && static_cast<std::size_t>(ord) <= ids.size())
      ids[static_cast<std::size_t>(ord - 1)] = row[0].as<std::int64_t>();
  }
  return ids;
}

std::vector<std::int64_t> passages_of(pqxx::work& tx, std::int64_t document_id) {
  return first_ids(tx.exec_params("SELECT id FROM ai_passages WHERE document_id = $1 ORDER BY ord",
                                  document_id));
}

} // namespace

ai_snapshot load_ai(pg_conn& c, std::int64_t tenant_id) {
  pqxx::read_transaction tx(c.raw());
  ai_snapshot out;
  for (auto r : tx.exec_params(std::string("SELECT ") + agent_columns +
                                   " FROM ai_agents WHERE tenant_id = $1 ORDER BY id",
                               tenant_id))
    out.agents.push_back(to_agent(r, c.keys()));
  std::map<std::int64_t, std::size_t> at;
  for (auto r : tx.exec_params(std::string("SELECT ") + document_columns +
                                   " FROM ai_documents WHERE tenant_id = $1 ORDER BY id",
                               tenant_id)) {
    at[r[0].as<std::int64_t>()] = out.documents.size();
    out.documents.push_back(to_document(r));
  }
  for (auto r : tx.exec_params("SELECT id, document_id, title, text FROM ai_passages WHERE"
                               " tenant_id = $1 ORDER BY document_id, ord",
                               tenant_id)) {
    passage_row p{r[0].as<std::int64_t>(),
                  r[1].as<std::int64_t>(),
                  {r[2].as<std::string>(), r[3].as<std::string>()}};
    if (auto it = at.find(p.document_id); it != at.end())
      out.documents[it->second].passage_ids.push_back(p.id);
    out.passages.push_back(std::move(p));
  }
  return out;
}

domain::ai_agent save_agent(pg_conn& c, const domain::ai_agent& a) {
  pqxx::work tx(c.raw());
  fence(tx, a.tenant_id);
  auto opt = [](const std::optional<std::string>& s) { return s ? s->c_str() : nullptr; };
  std::string assignee = a.handoff_assignee_id ? std::to_string(*a.handoff_assignee_id) : "";
  const char* lang = a.reply_language ? domain::ai::language_name(*a.reply_language) : "auto";
  std::optional<std::string> api_key;
  if (a.api_key) api_key = c.keys().seal(sealed::agent_api_key, a.tenant_id, *a.api_key);
  pqxx::result r;
  if (a.id == 0) {
    r = tx.exec_params(
        std::string("INSERT INTO ai_agents (tenant_id, name, instructions, provider, model,"
                    " base_url, api_key, channel_ids, auto_reply, handoff_keywords,"
                    " reply_language, emergency_message, handoff_assignee_id, stream, is_active,"
                    " created_at, updated_at, service_ids) VALUES ($1, $2, $3, $4, $5, $6, $7,"
                    " ARRAY(SELECT jsonb_array_elements_text($8::jsonb)::bigint), $9,"
                    " ARRAY(SELECT jsonb_array_elements_text($10::jsonb)), $11, $12,"
                    " NULLIF($13, '')::bigint, $14, $15, $16::timestamptz, $17::timestamptz,"
                    " ARRAY(SELECT jsonb_array_elements_text($18::jsonb)::bigint)) RETURNING ") +
            agent_columns,
        a.tenant_id, a.name, a.instructions, domain::to_string(a.provider), opt(a.model),
        opt(a.base_url), opt(api_key), ids_json(a.channel_ids), a.auto_reply,
        strings_json(a.handoff_keywords), lang, opt(a.emergency_message), assignee, a.stream,
        a.is_active, ts(a.created_at), ts(a.updated_at), ids_json(a.service_ids));
  } else {
    r = tx.exec_params(
        std::string("UPDATE ai_agents SET name = $3, instructions = $4, provider = $5, model ="
                    " $6, base_url = $7, api_key = $8, channel_ids = ARRAY(SELECT"
                    " jsonb_array_elements_text($9::jsonb)::bigint), auto_reply = $10,"
                    " handoff_keywords = ARRAY(SELECT jsonb_array_elements_text($11::jsonb)),"
                    " reply_language = $12, emergency_message = $13, handoff_assignee_id ="
                    " NULLIF($14, '')::bigint, stream = $15, is_active = $16, updated_at ="
                    " $17::timestamptz, service_ids = ARRAY(SELECT"
                    " jsonb_array_elements_text($18::jsonb)::bigint) WHERE tenant_id = $1 AND"
                    " id = $2 RETURNING ") +
            agent_columns,
        a.tenant_id, a.id, a.name, a.instructions, domain::to_string(a.provider), opt(a.model),
        opt(a.base_url), opt(api_key), ids_json(a.channel_ids), a.auto_reply,
        strings_json(a.handoff_keywords), lang, opt(a.emergency_message), assignee, a.stream,
        a.is_active, ts(a.updated_at), ids_json(a.service_ids));
  }
  if (r.empty()) throw std::runtime_error("agent vanished");
  auto saved = to_agent(r.front(), c.keys());
  tx.commit();
  return saved;
}

void delete_agent(pg_conn& c, std::int64_t tenant_id, std::int64_t id) {
  pqxx::work tx(c.raw());
  fence(tx, tenant_id);
  tx.exec_params("DELETE FROM ai_agents WHERE tenant_id = $1 AND id = $2", tenant_id, id);
  tx.commit();
}

std::optional<std::int64_t> tenant_of_agent(pg_conn& c, std::int64_t id) {
  return tenant_of_row(c.raw(), "ai_agents", id);
}

std::optional<std::int64_t> tenant_of_document(pg_conn& c, std::int64_t id) {
  return tenant_of_row(c.raw(), "ai_documents", id);
}

std::vector<std::int64_t> tenant_services(pg_conn& c, std::int64_t tenant_id,
                                          const std::vector<std::int64_t>& ids) {
  pqxx::read_transaction tx(c.raw());
  return first_ids(tx.exec_params("SELECT id FROM services WHERE tenant_id = $1 AND id IN (SELECT"
                                  " jsonb_array_elements_text($2::jsonb)::bigint)",
                                  tenant_id, ids_json(ids)));
}

std::optional<booking_offer> open_offer(pg_conn& c, std::int64_t tenant_id,
                                        std::int64_t conversation_id, std::int64_t now) {
  pqxx::read_transaction tx(c.raw());
  const auto r = tx.exec_params(
      "SELECT agent_id, contact_id, slots::text, " CRM_MICROS("created_at") ", " CRM_MICROS(
          "expires_at") ", language, kind, appointment_id FROM ai_booking_offers WHERE tenant_id = "
                        "$1 AND "
                        "conversation_id = $2"
                        " AND expires_at > $3::timestamptz",
      tenant_id, conversation_id, ts(now));
  if (r.empty()) return std::nullopt;
  booking_offer o;
  o.tenant_id = tenant_id;
  o.conversation_id = conversation_id;
  o.agent_id = r.front()[0].as<std::int64_t>();
  o.contact_id = r.front()[1].as<std::int64_t>();
  o.slots = domain::ai::slots_from_json(r.front()[2].as<std::string>());
  o.created_at = r.front()[3].as<std::int64_t>();
  o.expires_at = r.front()[4].as<std::int64_t>();
  o.lang = domain::ai::language_from(r.front()[5].as<std::string>()).value_or(o.lang);
  o.kind = domain::ai::offer_kind_from(r.front()[6].as<std::string>()).value_or(o.kind);
  if (!r.front()[7].is_null()) o.appointment_id = r.front()[7].as<std::int64_t>();
  return o;
}

void save_offer(pg_conn& c, const booking_offer& o) {
  pqxx::work tx(c.raw());
  fence(tx, o.tenant_id);
  tx.exec_params("INSERT INTO ai_booking_offers (conversation_id, tenant_id, agent_id,"
                 " contact_id, slots, created_at, expires_at, language, kind, appointment_id)"
                 " VALUES ($1, $2, $3, $4, $5::jsonb, $6::timestamptz, $7::timestamptz, $8, $9,"
                 " NULLIF($10, '')::bigint) ON CONFLICT (conversation_id) DO UPDATE SET agent_id = "
                 "EXCLUDED.agent_id,"
                 " contact_id = EXCLUDED.contact_id, slots = EXCLUDED.slots, created_at ="
                 " EXCLUDED.created_at, expires_at = EXCLUDED.expires_at, language ="
                 " EXCLUDED.language, kind = EXCLUDED.kind, appointment_id ="
                 " EXCLUDED.appointment_id",
                 o.conversation_id, o.tenant_id, o.agent_id, o.contact_id,
                 domain::ai::slots_to_json(o.slots), ts(o.created_at), ts(o.expires_at),
                 domain::ai::language_name(o.lang), domain::ai::offer_kind_name(o.kind),
                 o.appointment_id ? std::to_string(*o.appointment_id) : std::string());
  tx.commit();
}

void drop_offer(pg_conn& c, std::int64_t tenant_id, std::int64_t conversation_id) {
  pqxx::work tx(c.raw());
  tx.exec_params("DELETE FROM ai_booking_offers WHERE tenant_id = $1 AND conversation_id = $2",
                 tenant_id, conversation_id);
  tx.commit();
}

std::vector<std::int64_t> tenant_channels(pg_conn& c, std::int64_t tenant_id,
                                          const std::vector<std::int64_t>& ids) {
  pqxx::read_transaction tx(c.raw());
  return first_ids(tx.exec_params("SELECT id FROM channels WHERE tenant_id = $1 AND id IN (SELECT"
                                  " jsonb_array_elements_text($2::jsonb)::bigint)",
                                  tenant_id, ids_json(ids)));
}

document_written save_document(pg_conn& c, const document_write& w) {
  pqxx::work tx(c.raw());
  fence(tx, w.doc.tenant_id);
  document_written out;
  auto& d = w.doc;
  const char* kind = domain::to_string(d.kind);
  pqxx::result r;
  if (d.id == 0) {
    r = tx.exec_params(std::string("INSERT INTO ai_documents (tenant_id, agent_id, title, kind,"
                                   " content, created_at, updated_at) VALUES ($1, $2, $3, $4,"
                                   " $5, $6::timestamptz, $7::timestamptz) RETURNING ") +
                           document_columns,
                       d.tenant_id, d.agent_id, d.title, kind, w.content, ts(d.created_at),
                       ts(d.updated_at));
  } else {
    out.old_passages = passages_of(tx, d.id);
    tx.exec_params("DELETE FROM ai_passages WHERE document_id = $1", d.id);
    r = tx.exec_params(std::string("UPDATE ai_documents SET title = $4, kind = $5, content = $6,"
                                   " updated_at = $7::timestamptz WHERE tenant_id = $1 AND"
                                   " agent_id = $2 AND id = $3 RETURNING ") +
                           document_columns,
                       d.tenant_id, d.agent_id, d.id, d.title, kind, w.content, ts(d.updated_at));
  }
  if (r.empty()) throw std::runtime_error("document vanished");
  out.doc = to_document(r.front());
  out.doc.passage_ids = insert_passages(tx, d.tenant_id, out.doc.id, w.passages);
  tx.commit();
  return out;
}

std::vector<std::int64_t> delete_document(pg_conn& c, std::int64_t tenant_id, std::int64_t id) {
  pqxx::work tx(c.raw());
  fence(tx, tenant_id);
  auto gone = passages_of(tx, id);
  tx.exec_params("DELETE FROM ai_documents WHERE tenant_id = $1 AND id = $2", tenant_id, id);
  tx.commit();
  return gone;
}

std::optional<std::string> document_content(pg_conn& c, std::int64_t tenant_id, std::int64_t id) {
  pqxx::read_transaction tx(c.raw());
  auto r = tx.exec_params("SELECT content FROM ai_documents WHERE tenant_id = $1 AND id = $2",
                          tenant_id, id);
  if (r.empty()) return std::nullopt;
  return r.front()[0].as<std::string>();
}

std::string replies_page_json(pg_conn& c, std::int64_t tenant_id, std::int64_t agent_id, int page,
                              int per_page) {
  pqxx::read_transaction tx(c.raw());
  auto total = tx.exec_params("SELECT count(*) FROM ai_replies WHERE tenant_id = $1 AND"
                              " agent_id = $2",
                              tenant_id, agent_id)
                   .front()[0]
                   .as<std::int64_t>();
  auto rows = tx.exec_params(
      "SELECT id, agent_id, conversation_id, message_id, array_to_json(reply_message_ids)::text,"
      " intent, handoff, handoff_reason, array_to_json(passages)::text, provider, prompt_tokens,"
      " completion_tokens, latency_ms, error, dropped, " CRM_MICROS(
          "created_at") " FROM ai_replies WHERE tenant_id = $1 AND agent_id = $2 ORDER BY id DESC "
                        "LIMIT $3 OFFSET"
                        " $4",
      tenant_id, agent_id, per_page, static_cast<std::int64_t>(page - 1) * per_page);
  json::array items;
  for (auto r : rows) {
    json::object o;
    o["id"] = r[0].as<std::int64_t>();
    o["agent_id"] = r[1].as<std::int64_t>();
    o["conversation_id"] = r[2].as<std::int64_t>();
    o["message_id"] = r[3].as<std::int64_t>();
    o["reply_message_ids"] = json_array(r[4]);
    o["intent"] = r[5].as<std::string>();
    o["handoff"] = r[6].as<bool>();
    o["handoff_reason"] = r[7].is_null() ? json::value(nullptr) : json::value(r[7].c_str());
    o["passages"] = json_array(r[8]);
    o["provider"] = r[9].as<std::string>();
    o["prompt_tokens"] = r[10].is_null() ? json::value(nullptr) : json::value(r[10].as<int>());
    o["completion_tokens"] = r[11].is_null() ? json::value(nullptr) : json::value(r[11].as<int>());
    o["latency_ms"] = r[12].as<double>();
    o["error"] = r[13].is_null() ? json::value(nullptr) : json::value(r[13].c_str());
    o["dropped"] = r[14].as<bool>();
    o["created_at"] = domain::format_rfc3339(r[15].as<std::int64_t>());
    items.push_back(std::move(o));
  }
  return domain::render_page(std::move(items), total, page, per_page);
}

std::vector<domain::chat_turn> recent_turns(pg_conn& c, std::int64_t tenant_id,
                                            std::int64_t conversation_id,
                                            std::int64_t before_message_id, int limit) {
  pqxx::read_transaction tx(c.raw());
  std::vector<domain::chat_turn> out;
  auto rows = tx.exec_params("SELECT direction, text FROM (SELECT id, direction, text FROM"
                             " messages WHERE tenant_id = $1 AND conversation_id = $2 AND id < $3"
                             " ORDER BY id DESC LIMIT $4) m ORDER BY id",
                             tenant_id, conversation_id, before_message_id, limit);
  for (auto r : rows)
    out.push_back(
        {r[0].as<std::string>() == "inbound" ? "user" : "assistant", r[1].as<std::string>()});
  return out;
}

draft_target find_draft_target(pg_conn& c, std::int64_t tenant_id, std::int64_t conversation_id,
                               std::optional<std::int64_t> message_id) {
  pqxx::read_transaction tx(c.raw());
  draft_target out;
  const auto conv = tx.exec_params(
      "SELECT channel_id, contact_id FROM conversations WHERE tenant_id = $1 AND id = $2",
      tenant_id, conversation_id);
  if (conv.empty()) {
    out.state = draft_target::found::no_conversation;
    return out;
  }
  out.conversation_id = conversation_id;
  out.channel_id = conv.front()[0].as<std::int64_t>();
  out.contact_id = conv.front()[1].as<std::int64_t>();
  const auto msg =
      message_id ? tx.exec_params("SELECT id, text FROM messages WHERE tenant_id = $1 AND"
                                  " conversation_id = $2 AND id = $3 AND direction = 'inbound'",
                                  tenant_id, conversation_id, *message_id)
                 : tx.exec_params("SELECT id, text FROM messages WHERE tenant_id = $1 AND"
                                  " conversation_id = $2 AND direction = 'inbound' AND text <> ''"
                                  " ORDER BY id DESC LIMIT 1",
                                  tenant_id, conversation_id);
  if (msg.empty()) {
    out.state =
        message_id ? draft_target::found::not_its_message : draft_target::found::nothing_to_answer;
    return out;
  }
  out.message_id = msg.front()[0].as<std::int64_t>();
  out.text = msg.front()[1].as<std::string>();
  if (out.text.empty()) out.state = draft_target::found::nothing_to_answer;
  return out;
}

contact_messages messages_of_contact(pg_conn& c, std::int64_t tenant_id, std::int64_t contact_id) {
  pqxx::read_transaction tx(c.raw());
  contact_messages out;
  auto counts = tx.exec_params("SELECT count(DISTINCT c.id), count(m.id), max(" CRM_MICROS(
                                   "m.created_at") ") FROM"
                                                   " conversations c LEFT JOIN messages m ON "
                                                   "m.conversation_id = c.id WHERE c.tenant_id = $1"
                                                   " AND c.contact_id = $2",
                               tenant_id, contact_id);
  out.conversation_count = counts.front()[0].as<std::int64_t>();
  out.message_count = counts.front()[1].as<std::int64_t>();
  out.last_message_at = opt_int(counts.front()[2]);
  for (auto r : tx.exec_params("SELECT m.text FROM messages m JOIN conversations c ON c.id ="
                               " m.conversation_id WHERE c.tenant_id = $1 AND c.contact_id = $2"
                               " AND m.direction = 'inbound' ORDER BY m.id DESC LIMIT 5",
                               tenant_id, contact_id))
    out.recent_inbound.push_back(r[0].as<std::string>());
  return out;
}

} // namespace crm::persistence
