#include "persistence/timeline_repo.hpp"

#include "domain/clock.hpp"
#include "persistence/pg_pool.hpp"
#include "persistence/record_rows.hpp"
#include "persistence/row_values.hpp"

#include <boost/json.hpp>
#include <pqxx/pqxx>

#include <map>
#include <vector>

namespace crm::persistence {
namespace timeline_detail {

namespace json = boost::json;

// One source of the feed: its newest `limit` rows after the cursor, by (time, id), read from
// the (contact, time, id) index it has. $1 tenant, $2 contact, $3 cursor time (NULL: first
// page), $4 cursor type, $5 cursor id, $6 limit. `from` names the row `x`; `where` ties it to
// the contact.
std::string branch(std::string_view type, std::string_view from, std::string_view at,
                   std::string_view where) {
  auto t = "'" + std::string(type) + "'";
  auto x_at = "x." + std::string(at);
  return "(SELECT " + t + "::text AS type, " + x_at + " AS at, x.id FROM " + std::string(from) +
         " WHERE " + std::string(where) + " AND ($3::timestamptz IS NULL OR (" + x_at +
         " <= $3 AND (" + x_at + " < $3 OR " + t + " > $4 OR (" + t + " = $4 AND x.id < $5))))" +
         " ORDER BY " + x_at + " DESC, x.id DESC LIMIT $6)";
}

// Rows reached through another table (messages through the contact's conversations, stage
// moves through its deals): the newest `limit` of each parent, then of them all.
std::string nested_branch(std::string_view type, std::string_view parents, std::string_view child,
                          std::string_view link, std::string_view at, std::string_view extra) {
  auto inner = branch(type, child, at, std::string(link) + std::string(extra));
  return "(SELECT y.* FROM " + std::string(parents) + " CROSS JOIN LATERAL " + inner +
         " y WHERE p.tenant_id = $1 AND p.contact_id = $2 ORDER BY y.at DESC, y.id DESC LIMIT $6)";
}

const std::string& keys_sql() {
  static const std::string sql = [] {
    const char* mine = "x.tenant_id = $1 AND x.contact_id = $2";
    std::string s = "SELECT type, " CRM_MICROS("at") ", id FROM (";
    s += branch("appointment", "appointments x", "created_at", mine);
    s += " UNION ALL " + branch("consent", "consents x", "recorded_at", mine);
    s += " UNION ALL " + branch("deal", "deals x", "created_at", mine);
    s += " UNION ALL " + nested_branch("deal_move", "deals p", "deal_history x", "x.deal_id = p.id",
                                       "at", " AND x.kind = 'stage_changed'");
    s += " UNION ALL " + branch("merge", "contact_merges x", "merged_at",
                                "x.tenant_id = $1 AND x.survivor_id = $2");
    s += " UNION ALL " + nested_branch("message", "conversations p", "messages x",
                                       "x.conversation_id = p.id", "created_at", "");
    s += " UNION ALL " + branch("note", "notes x", "created_at", mine);
    s += " UNION ALL " + branch("task", "tasks x", "created_at", mine);
    s += ") t ORDER BY at DESC, type, id DESC LIMIT $6";
    return s;
  }();
  return sql;
}

std::string id_array(const std::vector<std::int64_t>& ids) {
  std::string s = "{";
  for (std::size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s + "}";
}

struct key {
  std::string type;
  std::int64_t at = 0;
  std::int64_t id = 0;
};

struct rendered {
  std::string summary;
  std::string body; // the resource's JSON object
};

using by_id = std::map<std::int64_t, rendered>;

json::value stored_object(const char* text) {
  json::error_code ec;
  auto v = domain::parse_json(text, ec);
  return ec ? json::value(json::object()) : v;
}

std::string object_text(json::object o) {
  return json::serialize(o);
}

std::string consent_summary(const domain::consent& k) {
  std::string s(domain::to_string(k.purpose));
  s += k.granted ? " granted" : " withdrawn";
  s += k.channel_id ? " on channel " + std::to_string(*k.channel_id) : " on every channel";
  return s;
}

// Each type's rows of the page, rendered as their resources.
by_id render(pqxx::transaction_base& tx, std::string_view type, std::int64_t tenant,
             const std::vector<std::int64_t>& ids) {
  by_id out;
  auto fetch = [&](const char* columns, const char* from) {
    return tx.exec_params(std::string("SELECT ") + columns + " FROM " + from +
                              " WHERE x.tenant_id = $1 AND x.id = ANY($2::bigint[])",
                          tenant, id_array(ids));
  };
  if (type == "note") {
    for (auto r : fetch(rows::note_columns, "notes x")) {
      auto n = rows::to_note(r);
      out[n.id] = {domain::timeline_summary(n.body), object_text(domain::note_to_json(n))};
    }
  } else if (type == "task") {
    auto now = domain::now_micros();
    for (auto r : fetch(rows::task_columns, "tasks x")) {
      auto t = rows::to_task(r);
      out[t.id] = {t.title, object_text(domain::task_to_json(t, now))};
    }
  } else if (type == "appointment") {
    for (auto r : fetch(rows::appointment_columns, "appointments x")) {
      auto a = rows::to_appointment(r);
      auto summary = std::string(domain::to_string(a.status)) + " appointment at " +
                     domain::format_rfc3339(a.start);
      out[a.id] = {std::move(summary), object_text(domain::appointment_to_json(a))};
    }
  } else if (type == "consent") {
    for (auto r : fetch(rows::consent_columns, "consents x")) {
      auto k = rows::to_consent(r);
      out[k.id] = {consent_summary(k), object_text(domain::consent_to_json(k))};
    }
  } else if (type == "message") {
    for (auto r : tx.exec_params(std::string("SELECT ") + rows::message_columns +
                                     " FROM messages m WHERE m.tenant_id = $1 AND"
                                     " m.id = ANY($2::bigint[])",
                                 tenant, id_array(ids))) {
      auto o = rows::message_json(r);
      auto id = o.at("id").as_int64();
      auto summary = domain::timeline_summary(o.at("text").as_string());
      out[id] = {std::move(summary), object_text(std::move(o))};
    }
  } else if (type == "deal") {
    for (auto r : fetch(rows::deal_columns, "deals x")) {
      auto d = rows::to_deal(r);
      out[d.id] = {d.title, domain::encode_deal(d)};
    }
  } else if (type == "deal_move") {
    for (auto r : tx.exec_params(
             std::string("SELECT ") + rows::deal_history_columns +
                 ", d.title, coalesce(f.name, ''), coalesce(s.name, '') FROM deal_history h"
                 " JOIN deals d ON d.id = h.deal_id"
                 " LEFT JOIN pipeline_stages f ON f.id = h.from_stage_id"
                 " LEFT JOIN pipeline_stages s ON s.id = h.to_stage_id"
                 " WHERE h.tenant_id = $1 AND h.id = ANY($2::bigint[])",
             tenant, id_array(ids))) {
      auto o = rows::deal_history_json(r);
      o.erase("at"); // the item's own
      auto id = o.at("id").as_int64();
      auto n = static_cast<int>(r.size());
      auto summary = r[n - 3].as<std::string>() + ": " + r[n - 2].as<std::string>() + " \u2192 " +
                     r[n - 1].as<std::string>();
      out[id] = {std::move(summary), object_text(std::move(o))};
    }
  } else if (type == "merge") {
    for (auto r :
         tx.exec_params("SELECT id, survivor_id, duplicate_id, merged_by, moved::text, " CRM_MICROS(
                            "merged_at") " FROM contact_merges WHERE tenant_id = $1 AND"
                                         " id = ANY($2::bigint[])",
                        tenant, id_array(ids))) {
      auto id = r[0].as<std::int64_t>();
      auto duplicate = r[2].as<std::int64_t>();
      json::object o{{"id", id},
                     {"survivor_id", r[1].as<std::int64_t>()},
                     {"duplicate_id", duplicate},
                     {"merged_by",
                      r[3].is_null() ? json::value(nullptr) : json::value(r[3].as<std::int64_t>())},
                     {"moved", stored_object(r[4].c_str())},
                     {"merged_at", domain::format_rfc3339(r[5].as<std::int64_t>())}};
      out[id] = {"contact " + std::to_string(duplicate) + " merged into this record",
                 object_text(std::move(o))};
    }
  }
  return out;
}

} // namespace timeline_detail

std::string contact_timeline(pg_conn& c, std::int64_t tenant_id, std::int64_t contact_id,
                             const std::optional<domain::timeline_position>& after, int limit) {
  using namespace timeline_detail;
  pqxx::transaction<pqxx::repeatable_read, pqxx::read_only> tx(c.raw());
  std::optional<std::string> at;
  if (after) at = domain::format_rfc3339(after->at);
  auto found =
      tx.exec_params(keys_sql(), tenant_id, contact_id, at, after ? after->type : std::string(),
                     after ? after->id : 0, limit + 1);
  std::vector<key> keys;
  std::map<std::string, std::vector<std::int64_t>, std::less<>> ids;
  for (auto r : found) {
    keys.push_back({r[0].as<std::string>(), r[1].as<std::int64_t>(), r[2].as<std::int64_t>()});
    if (keys.size() <= static_cast<std::size_t>(limit))
      ids[keys.back().type].push_back(keys.back().id);
  }
  bool more = keys.size() > static_cast<std::size_t>(limit);
  if (more) keys.resize(static_cast<std::size_t>(limit));
  std::map<std::string, by_id, std::less<>> items;
  for (auto& [type, list] : ids) items[type] = render(tx, type, tenant_id, list);
  std::string out = "{\"items\":[";
  bool first = true;
  for (auto& k : keys) {
    auto& of_type = items[k.type];
    auto it = of_type.find(k.id);
    if (it == of_type.end()) continue; // cannot happen in one snapshot
    if (!first) out += ',';
    first = false;
    out += "{\"type\":\"" + k.type + "\",\"at\":\"" + domain::format_rfc3339(k.at) +
           "\",\"summary\":" + json::serialize(json::value(it->second.summary));
    auto& body = it->second.body;
    if (body.size() > 2)
      out += ',' + body.substr(1);
    else
      out += '}';
  }
  out += "],\"next_cursor\":";
  if (more)
    out += "\"" +
           domain::timeline_cursor(contact_id, {keys.back().at, keys.back().type, keys.back().id}) +
           "\"";
  else
    out += "null";
  out += '}';
  return out;
}

} // namespace crm::persistence
