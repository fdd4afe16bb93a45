#include "persistence/deal_repo.hpp"

#include "domain/clock.hpp"
#include "domain/json_writer.hpp"
#include "domain/page_json.hpp"
#include "persistence/row_values.hpp"

#include "persistence/fence.hpp"
#include "persistence/record_rows.hpp"
#include <boost/json.hpp>

#include <pqxx/pqxx>

#include <algorithm>
#include <unordered_map>

namespace crm::persistence {

namespace rows {

const char* const deal_columns =
    "id, title, (amount * 100)::bigint, currency, contact_id, company_id, owner_id,"
    " pipeline_id, stage_id, (expected_close_date - date '1970-01-01'), status, lost_reason,"
    " custom_fields::text, rank, " CRM_MICROS("created_at") ", " CRM_MICROS(
        "updated_at") ","
                      " " CRM_MICROS("closed_at") ", tenant_id";

domain::deal to_deal(const pqxx::row& r) {
  domain::deal d;
  d.id = r[0].as<std::int64_t>();
  d.tenant_id = r[17].as<std::int64_t>();
  d.title = r[1].as<std::string>();
  d.amount = opt_int(r[2]);
  d.currency = r[3].as<std::string>();
  d.contact_id = opt_int(r[4]);
  d.company_id = opt_int(r[5]);
  d.owner_id = opt_int(r[6]);
  d.pipeline_id = r[7].as<std::int64_t>();
  d.stage_id = r[8].as<std::int64_t>();
  if (!r[9].is_null()) d.expected_close = r[9].as<std::int32_t>();
  d.status = domain::parse_stage_kind(r[10].as<std::string>()).value_or(domain::stage_kind::open);
  d.lost_reason = opt_text(r[11]);
  d.custom_fields = compact_json(r[12].as<std::string>());
  d.rank = r[13].as<std::int64_t>();
  d.created_at = r[14].as<std::int64_t>();
  d.updated_at = r[15].as<std::int64_t>();
  d.closed_at = opt_int(r[16]);
  return d;
}

const char* const deal_history_columns =
    "h.id, h.kind, h.from_stage_id, h.to_stage_id, (h.from_amount * 100)::bigint,"
    " (h.to_amount * 100)::bigint, h.currency, h.user_id, h.workflow_run_id, " CRM_MICROS(
        "h.at") ", h.deal_id";

boost::json::object deal_history_json(const pqxx::row& r) {
  auto opt = [](const pqxx::field& f) -> boost::json::value {
    if (f.is_null()) return nullptr;
    return f.as<std::int64_t>();
  };
  auto money = [](const pqxx::field& f) -> boost::json::value {
    if (f.is_null()) return nullptr;
    return boost::json::string(domain::format_cents(f.as<std::int64_t>()));
  };
  return boost::json::object{{"id", r[0].as<std::int64_t>()},
                             {"deal_id", r[10].as<std::int64_t>()},
                             {"kind", r[1].as<std::string>()},
                             {"from_stage_id", opt(r[2])},
                             {"to_stage_id", opt(r[3])},
                             {"from_amount", money(r[4])},
                             {"to_amount", money(r[5])},
                             {"currency", r[6].as<std::string>()},
                             {"user_id", opt(r[7])},
                             {"workflow_run_id", opt(r[8])},
                             {"at", ts(r[9].as<std::int64_t>())}};
}

} // namespace rows

namespace {

void add_optional_number(array_literal& a, const std::optional<std::int64_t>& v) {
  if (v)
    a.add_number(*v);
  else
    a.add_null();
}

constexpr const char* deal_upsert_name = "crm_deals_upsert";
// Contact and company ids are re-read inside the statement: a contact deleted after the deal
// was validated is written as null (the deals actor hears of the delete and nulls it too).
constexpr const char* deal_prepare_upsert =
    "PREPARE crm_deals_upsert (bigint, bigint[], text[], numeric[], text[], bigint[], bigint[],"
    " bigint[], bigint[], bigint[], date[], text[], text[], jsonb[], bigint[], timestamptz[],"
    " timestamptz[], timestamptz[]) AS"
    " INSERT INTO deals (id, tenant_id, title, amount, currency, contact_id, company_id,"
    " owner_id, pipeline_id, stage_id, expected_close_date, status, lost_reason, custom_fields,"
    " rank, created_at, updated_at, closed_at)"
    " SELECT u.id, $1, u.title, u.amount, u.currency,"
    " (SELECT c.id FROM contacts c WHERE c.id = u.contact_id AND c.tenant_id = $1),"
    " (SELECT co.id FROM companies co WHERE co.id = u.company_id AND co.tenant_id = $1),"
    " u.owner_id, u.pipeline_id, u.stage_id, u.close_date, u.status, u.lost_reason,"
    " u.custom_fields, u.rank, u.created_at, u.updated_at, u.closed_at"
    " FROM unnest($2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)"
    " AS u(id, title, amount, currency, contact_id, company_id, owner_id, pipeline_id, stage_id,"
    " close_date, status, lost_reason, custom_fields, rank, created_at, updated_at, closed_at)"
    " ON CONFLICT (id) DO UPDATE SET title = EXCLUDED.title, amount = EXCLUDED.amount,"
    " currency = EXCLUDED.currency, contact_id = EXCLUDED.contact_id,"
    " company_id = EXCLUDED.company_id, owner_id = EXCLUDED.owner_id,"
    " pipeline_id = EXCLUDED.pipeline_id, stage_id = EXCLUDED.stage_id,"
    " expected_close_date = EXCLUDED.expected_close_date, status = EXCLUDED.status,"
    " lost_reason = EXCLUDED.lost_reason, custom_fields = EXCLUDED.custom_fields,"
    " rank = EXCLUDED.rank, updated_at = EXCLUDED.updated_at, closed_at = EXCLUDED.closed_at"
    " WHERE deals.tenant_id = $1;\n";

// History rows of a batch: $1 the tenant, then one array per column.
constexpr const char* history_name = "crm_deal_history_insert";
constexpr const char* prepare_history =
    "PREPARE crm_deal_history_insert (bigint, bigint[], text[], bigint[], bigint[], numeric[],"
    " numeric[], text[], bigint[], bigint[], timestamptz[]) AS"
    " INSERT INTO deal_history (tenant_id, deal_id, kind, from_stage_id, to_stage_id,"
    " from_amount, to_amount, currency, user_id, workflow_run_id, at)"
    " SELECT $1, u.* FROM unnest($2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
    " AS u(deal_id, kind, from_stage_id, to_stage_id, from_amount, to_amount, currency, user_id,"
    " workflow_run_id, at);\n";

std::string id_list(const std::vector<std::int64_t>& ids) {
  std::string l;
  for (std::size_t i = 0; i < ids.size(); ++i) l += (i ? "," : "") + std::to_string(ids[i]);
  return l;
}

} // namespace

deals_snapshot load_deals(pg_conn& c, std::int64_t tenant_id) {
  {
    pqxx::work tx(c.raw());
    auto none = tx.exec_params("SELECT NOT EXISTS (SELECT 1 FROM pipelines WHERE tenant_id = $1)",
                               tenant_id)
                    .front()[0]
                    .as<bool>();
    if (none) tx.exec_params("SELECT crm_create_default_pipeline($1)", tenant_id);
    tx.commit();
  }
  deals_snapshot snap;
  pqxx::read_transaction tx(c.raw());
  snap.currency = tx.exec_params("SELECT currency FROM tenants WHERE id = $1", tenant_id)
                      .front()[0]
                      .as<std::string>();
  auto pipelines = tx.exec_params(
      "SELECT id, name, is_default, (extract(epoch from created_at) * 1000000)::bigint,"
      " (extract(epoch from updated_at) * 1000000)::bigint FROM pipelines WHERE tenant_id = $1"
      " ORDER BY id",
      tenant_id);
  std::unordered_map<std::int64_t, std::size_t> at;
  for (const auto& r : pipelines) {
    domain::pipeline p;
    p.id = r[0].as<std::int64_t>();
    p.tenant_id = tenant_id;
    p.name = r[1].as<std::string>();
    p.is_default = r[2].as<bool>();
    p.created_at = r[3].as<std::int64_t>();
    p.updated_at = r[4].as<std::int64_t>();
    at[p.id] = snap.pipelines.size();
    snap.pipelines.push_back(std::move(p));
  }
  auto stages = tx.exec_params("SELECT id, pipeline_id, name, position, probability, kind"
                               " FROM pipeline_stages WHERE tenant_id = $1"
                               " ORDER BY pipeline_id, position, id",
                               tenant_id);
  for (const auto& r : stages) {
    domain::stage s;
    s.id = r[0].as<std::int64_t>();
    s.pipeline_id = r[1].as<std::int64_t>();
    s.name = r[2].as<std::string>();
    s.position = r[3].as<int>();
    s.probability = r[4].as<int>();
    s.kind = domain::parse_stage_kind(r[5].as<std::string>()).value_or(domain::stage_kind::open);
    if (auto it = at.find(s.pipeline_id); it != at.end())
      snap.pipelines[it->second].stages.push_back(std::move(s));
  }
  for (auto& p : snap.pipelines) domain::renumber(p.stages);
  auto deals = tx.exec_params(std::string("SELECT ") + rows::deal_columns +
                                  " FROM deals WHERE tenant_id = $1 ORDER BY id",
                              tenant_id);
  snap.deals.reserve(deals.size());
  for (const auto& r : deals) snap.deals.push_back(rows::to_deal(r));
  snap.keys = recent_keys(tx, tenant_id, "deals:");
  snap.event_listeners = has_event_listeners(tx, tenant_id);
  return snap;
}

std::vector<std::int64_t> reserve_deal_ids(pg_conn& c, int n) {
  pqxx::nontransaction tx(c.raw());
  auto r = tx.exec_params("SELECT nextval('deals_id_seq') FROM generate_series(1, $1)", n);
  std::vector<std::int64_t> ids;
  ids.reserve(r.size());
  for (const auto& row : r) ids.push_back(row[0].as<std::int64_t>());
  return ids;
}

void deal_batch::append_sql(sql_text& out) const {
  auto& s = out.body();
  auto tid = std::to_string(tenant_id);
  if (!deletes.empty())
    s += "DELETE FROM deals WHERE tenant_id = " + tid + " AND id IN (" + id_list(deletes) + ");\n";
  // One statement per group (a group holds each deal at most once). An UPDATE ... FROM unnest
  // for rows already committed measured slower than this upsert (benchmarks/RESULTS.md).
  auto upsert_group = [&](std::size_t from, std::size_t to) {
    array_literal id, title, amount, currency, contact, company, owner, pipeline, stage, close,
        status, lost, custom, rank, created, updated, closed;
    for (auto i = from; i < to; ++i) {
      auto& d = upserts[i];
      if (std::find(deletes.begin(), deletes.end(), d.id) != deletes.end()) continue;
      id.add_number(d.id);
      title.add(d.title);
      if (d.amount)
        amount.add(domain::format_cents(*d.amount));
      else
        amount.add_null();
      currency.add(d.currency);
      add_optional_number(contact, d.contact_id);
      add_optional_number(company, d.company_id);
      add_optional_number(owner, d.owner_id);
      pipeline.add_number(d.pipeline_id);
      stage.add_number(d.stage_id);
      if (d.expected_close)
        close.add(domain::format_date(*d.expected_close));
      else
        close.add_null();
      status.add(domain::to_string(d.status));
      lost.add_optional(d.lost_reason);
      custom.add(d.custom_fields);
      rank.add_number(d.rank);
      created.add(ts(d.created_at));
      updated.add(ts(d.updated_at));
      if (d.closed_at)
        closed.add(ts(*d.closed_at));
      else
        closed.add_null();
    }
    if (id.empty()) return;
    out.need_prepared(deal_upsert_name, deal_prepare_upsert);
    s += "EXECUTE crm_deals_upsert(" + tid;
    for (auto* a : {&id, &title, &amount, &currency, &contact, &company, &owner, &pipeline, &stage,
                    &close, &status, &lost, &custom, &rank, &created, &updated, &closed})
      s += "," + out.quote(a->text());
    s += ");\n";
  };
  std::size_t from = 0;
  for (auto start : group_starts) {
    upsert_group(from, start);
    from = start;
  }
  upsert_group(from, upserts.size());
  std::vector<const deal_history_row*> rows;
  for (auto& h : history) // a deal created and deleted in one batch leaves no history
    if (std::find(deletes.begin(), deletes.end(), h.deal_id) == deletes.end()) rows.push_back(&h);
  if (!rows.empty()) {
    array_literal deal, kind, from_stage, to_stage, from_amount, to_amount, currency, user, run, at;
    auto money = [](array_literal& a, const std::optional<std::int64_t>& v) {
      if (v)
        a.add(domain::format_cents(*v));
      else
        a.add_null();
    };
    for (auto h : rows) {
      deal.add_number(h->deal_id);
      kind.add(h->kind);
      add_optional_number(from_stage, h->from_stage_id);
      add_optional_number(to_stage, h->to_stage_id);
      money(from_amount, h->from_amount);
      money(to_amount, h->to_amount);
      currency.add(h->currency);
      add_optional_number(user, h->user_id);
      add_optional_number(run, h->workflow_run_id);
      at.add(ts(h->at));
    }
    out.need_prepared(history_name, prepare_history);
    s += "EXECUTE crm_deal_history_insert(" + tid;
    for (auto* a : {&deal, &kind, &from_stage, &to_stage, &from_amount, &to_amount, &currency,
                    &user, &run, &at})
      s += "," + out.quote(a->text());
    s += ");\n";
  }
  append_events_sql(out, tenant_id, events);
  append_keys_sql(out, tenant_id, keys);
}

std::vector<domain::pipeline> commit_pipeline_change(pg_conn& c, const pipeline_change& ch) {
  pqxx::work tx(c.raw());
  fence(tx, ch.tenant_id);
  auto tid = ch.tenant_id;
  std::vector<domain::pipeline> saved = ch.saves;
  // A pipeline losing the default is written before the one gaining it (one default at a time);
  // the result keeps the order of `saves`.
  std::vector<std::size_t> order(saved.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return !saved[a].is_default && saved[b].is_default;
  });
  for (auto i : order) {
    auto& p = saved[i];
    if (p.id == 0) {
      p.id = tx.exec_params("INSERT INTO pipelines (tenant_id, name, is_default, created_at,"
                            " updated_at) VALUES ($1, $2, $3, $4, $5) RETURNING id",
                            tid, p.name, p.is_default, ts(p.created_at), ts(p.updated_at))
                 .front()[0]
                 .as<std::int64_t>();
    } else {
      tx.exec_params("UPDATE pipelines SET name = $3, is_default = $4, updated_at = $5"
                     " WHERE id = $1 AND tenant_id = $2",
                     p.id, tid, p.name, p.is_default, ts(p.updated_at));
    }
    for (auto& s : p.stages) {
      s.pipeline_id = p.id;
      if (s.id == 0) {
        s.id = tx.exec_params("INSERT INTO pipeline_stages (tenant_id, pipeline_id, name, position,"
                              " probability, kind) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
                              tid, p.id, s.name, s.position, s.probability,
                              std::string(domain::to_string(s.kind)))
                   .front()[0]
                   .as<std::int64_t>();
      } else {
        tx.exec_params("UPDATE pipeline_stages SET name = $3, position = $4, probability = $5,"
                       " kind = $6 WHERE id = $1 AND tenant_id = $2",
                       s.id, tid, s.name, s.position, s.probability,
                       std::string(domain::to_string(s.kind)));
      }
    }
  }
  // The deal changes (moves out of a deleted stage) go before the stages are deleted. Their
  // upsert is prepared inside this transaction when the connection lacks it; a failure drops
  // the connection (pg_pool::run), so nothing half-prepared survives.
  std::optional<sql_text> text;
  if (!ch.deals.empty()) {
    text.emplace(tx, c);
    ch.deals.append_sql(*text);
    if (!text->prelude().empty()) tx.exec(text->prelude());
    tx.exec(text->body());
  }
  for (auto id : ch.deleted_stages)
    tx.exec_params("DELETE FROM pipeline_stages WHERE id = $1 AND tenant_id = $2", id, tid);
  for (auto id : ch.deleted_pipelines)
    tx.exec_params("DELETE FROM pipelines WHERE id = $1 AND tenant_id = $2", id, tid);
  tx.commit();
  if (text) text->committed();
  return saved;
}

std::string deal_history_page(pg_conn& c, std::int64_t tenant_id, std::int64_t deal_id, int page,
                              int per_page) {
  pqxx::read_transaction tx(c.raw());
  auto total = tx.exec_params("SELECT count(*) FROM deal_history WHERE tenant_id = $1"
                              " AND deal_id = $2",
                              tenant_id, deal_id)
                   .front()[0]
                   .as<std::int64_t>();
  auto found =
      tx.exec_params(std::string("SELECT ") + rows::deal_history_columns +
                         " FROM deal_history h WHERE h.tenant_id = $1 AND h.deal_id = $2"
                         " ORDER BY h.id LIMIT $3 OFFSET $4",
                     tenant_id, deal_id, per_page, static_cast<std::int64_t>(page - 1) * per_page);
  boost::json::array items;
  for (const auto& r : found) items.push_back(rows::deal_history_json(r));
  return domain::render_page(std::move(items), total, page, per_page);
}

deal_refs existing_refs(pg_conn& c, std::int64_t tenant_id, const deal_refs& wanted) {
  auto array = [](const std::vector<std::int64_t>& ids) { return "{" + id_list(ids) + "}"; };
  pqxx::read_transaction tx(c.raw());
  auto r = tx.exec_params(
      "SELECT 0, id FROM contacts WHERE tenant_id = $1 AND id = ANY($2::bigint[])"
      " UNION ALL SELECT 1, id FROM companies WHERE tenant_id = $1 AND id = ANY($3::bigint[])"
      " UNION ALL SELECT 2, id FROM users WHERE tenant_id = $1 AND is_active"
      " AND id = ANY($4::bigint[])",
      tenant_id, array(wanted.contacts), array(wanted.companies), array(wanted.users));
  deal_refs found;
  for (const auto& row : r) {
    auto kind = row[0].as<int>();
    auto id = row[1].as<std::int64_t>();
    (kind == 0 ? found.contacts : kind == 1 ? found.companies : found.users).push_back(id);
  }
  return found;
}

std::optional<std::int64_t> tenant_of(pg_conn& c, pipeline_record kind, std::int64_t id) {
  pqxx::read_transaction tx(c.raw());
  auto table = kind == pipeline_record::deal       ? "deals"
               : kind == pipeline_record::pipeline ? "pipelines"
                                                   : "pipeline_stages";
  auto r = tx.exec_params(std::string("SELECT tenant_id FROM ") + table + " WHERE id = $1", id);
  if (r.empty()) return std::nullopt;
  return r.front()[0].as<std::int64_t>();
}

} // namespace crm::persistence
