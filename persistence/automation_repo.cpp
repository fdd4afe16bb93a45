// SQL of the automation area. Timestamps travel as RFC 3339 text and come back as
// microseconds; JSON columns as text.
#include "persistence/automation_repo.hpp"

#include "domain/clock.hpp"
#include "domain/page_json.hpp"
#include "domain/secret_keys.hpp"
#include "persistence/row_values.hpp"
#include "persistence/sealed_columns.hpp"

#include "domain/json_parse.hpp"
#include "persistence/fence.hpp"
#include <boost/json.hpp>

#include <pqxx/pqxx>

#include <algorithm>

namespace json = boost::json;

namespace crm::persistence {
namespace {

// A timestamp parameter: NULL for 0.
struct ts_param {
  std::string text;
  explicit ts_param(std::int64_t micros)
      : text(micros ? domain::format_rfc3339(micros) : std::string()) {}
  const char* get() const { return text.empty() ? nullptr : text.c_str(); }
};

const char* opt(const std::optional<std::string>& s) {
  return s ? s->c_str() : nullptr;
}

json::value parse_json(const pqxx::field& f) {
  if (f.is_null()) return nullptr;
  json::error_code ec;
  auto v = crm::domain::parse_json(f.c_str(), ec);
  return ec ? json::value(nullptr) : v;
}

const char* workflow_columns =
    "id, tenant_id, name, description, trigger_type, trigger_config::text, conditions::text,"
    " actions::text, is_active, webhook_secret, " CRM_MICROS("next_run_at") ", " CRM_MICROS(
        "created_at") ", " CRM_MICROS("updated_at");

// Secrets at rest (persistence/sealed_columns.hpp): the workflow's webhook secret, the header
// values of its http_request actions (in the workflow and in each run's copy of its actions) and
// a subscription's signing secret.
json::array sealed_actions(json::array actions, std::int64_t tenant,
                           const domain::secret_keys& keys) {
  domain::map_header_values(
      actions, [&](std::string_view v) { return keys.seal(sealed::http_header, tenant, v); });
  return actions;
}

json::array opened_actions(json::array actions, std::int64_t tenant,
                           const domain::secret_keys& keys) {
  domain::map_header_values(
      actions, [&](std::string_view v) { return keys.open(sealed::http_header, tenant, v); });
  return actions;
}

std::optional<std::string> sealed_text(const std::optional<std::string>& plain,
                                       std::string_view purpose, std::int64_t tenant,
                                       const domain::secret_keys& keys) {
  if (!plain) return std::nullopt;
  return keys.seal(purpose, tenant, *plain);
}

domain::workflow to_workflow(const pqxx::row& r, const domain::secret_keys& keys) {
  domain::workflow w;
  w.id = r[0].as<std::int64_t>();
  w.tenant_id = r[1].as<std::int64_t>();
  w.name = r[2].as<std::string>();
  w.description = opt_text(r[3]);
  w.trigger =
      domain::parse_trigger_type(r[4].as<std::string>()).value_or(domain::trigger_type::manual);
  auto cfg = parse_json(r[5]);
  if (cfg.is_object()) w.trigger_config = cfg.as_object();
  w.conditions = domain::conditions_from_json(parse_json(r[6]));
  if (auto a = parse_json(r[7]); a.is_array())
    w.actions =
        domain::actions_from_json(opened_actions(std::move(a.as_array()), w.tenant_id, keys));
  w.is_active = r[8].as<bool>();
  if (auto secret = opt_text(r[9]))
    w.webhook_secret = keys.open(sealed::workflow_webhook_secret, w.tenant_id, *secret);
  w.next_run_at = micros_or_zero(r[10]);
  w.created_at = r[11].as<std::int64_t>();
  w.updated_at = r[12].as<std::int64_t>();
  return w;
}

const char*
    run_columns =
        "id, tenant_id, workflow_id, status, trigger_type, trigger_payload::text, depth,"
        " conditions_met, actions::text, next_step, steps::text, error, " CRM_MICROS("resume_at") ", " CRM_MICROS(
            "created_at") ", " CRM_MICROS("started_at") ", " CRM_MICROS("finished_"
                                                                        "at") ","
                                                                              " " CRM_MICROS("upd"
                                                                                             "ate"
                                                                                             "d_"
                                                                                             "a"
                                                                                             "t");

// `keys` null: the run is only shown, and its actions (never shown) are left out unopened.
domain::workflow_run to_run(const pqxx::row& r, const domain::secret_keys* keys) {
  domain::workflow_run x;
  x.id = r[0].as<std::int64_t>();
  x.tenant_id = r[1].as<std::int64_t>();
  x.workflow_id = r[2].as<std::int64_t>();
  x.status = domain::parse_run_status(r[3].as<std::string>()).value_or(domain::run_status::failed);
  x.trigger = r[4].as<std::string>();
  x.payload = parse_json(r[5]);
  x.depth = r[6].as<int>();
  x.conditions_met = r[7].as<bool>();
  if (keys)
    if (auto a = parse_json(r[8]); a.is_array())
      x.actions = opened_actions(std::move(a.as_array()), x.tenant_id, *keys);
  x.next_step = r[9].as<int>();
  if (auto s = parse_json(r[10]); s.is_array()) x.steps = s.as_array();
  x.error = opt_text(r[11]);
  x.resume_at = micros_or_zero(r[12]);
  x.created_at = r[13].as<std::int64_t>();
  x.started_at = micros_or_zero(r[14]);
  x.finished_at = micros_or_zero(r[15]);
  x.updated_at = r[16].as<std::int64_t>();
  return x;
}

const char* subscription_columns =
    "id, tenant_id, url, events::text, description, secret, is_active, "
    "disabled_reason, " CRM_MICROS("created_at") ", " CRM_MICROS("updated_at");

domain::webhook_subscription to_subscription(const pqxx::row& r, const domain::secret_keys& keys) {
  domain::webhook_subscription s;
  s.id = r[0].as<std::int64_t>();
  s.tenant_id = r[1].as<std::int64_t>();
  s.url = r[2].as<std::string>();
  if (auto e = parse_json(r[3]); e.is_array())
    for (auto& x : e.as_array())
      if (x.is_string()) s.events.emplace_back(x.as_string().c_str());
  s.description = opt_text(r[4]);
  s.secret = keys.open(sealed::subscription_secret, s.tenant_id, r[5].as<std::string>());
  s.is_active = r[6].as<bool>();
  s.disabled_reason = opt_text(r[7]);
  s.created_at = r[8].as<std::int64_t>();
  s.updated_at = r[9].as<std::int64_t>();
  return s;
}

std::string events_json(const std::vector<std::string>& events) {
  json::array a;
  for (auto& e : events) a.emplace_back(e);
  return json::serialize(a);
}

std::vector<std::int64_t> next_ids(pqxx::work& tx, const char* sequence, std::size_t n) {
  std::vector<std::int64_t> ids;
  if (n == 0) return ids;
  auto r =
      tx.exec_params(std::string("SELECT nextval('") + sequence + "') FROM generate_series(1, $1)",
                     static_cast<std::int64_t>(n));
  for (auto row : r) ids.push_back(row[0].as<std::int64_t>());
  return ids;
}

void insert_run_rows(pqxx::work& tx, std::vector<domain::workflow_run>& runs,
                     const domain::secret_keys& keys) {
  if (runs.empty()) return;
  auto ids = next_ids(tx, "workflow_runs_id_seq", runs.size());
  std::string s = "INSERT INTO workflow_runs (id, tenant_id, workflow_id, status, trigger_type,"
                  " trigger_payload, depth, conditions_met, actions, next_step, steps, error,"
                  " resume_at, created_at, started_at, finished_at, updated_at) VALUES ";
  for (std::size_t i = 0; i < runs.size(); ++i) {
    auto& r = runs[i];
    r.id = ids[i];
    auto ts = [&](std::int64_t m) {
      return m ? tx.quote(domain::format_rfc3339(m)) + "::timestamptz" : std::string("NULL");
    };
    s += (i ? "," : "") + std::string("(") + std::to_string(r.id) + "," +
         std::to_string(r.tenant_id) + "," + std::to_string(r.workflow_id) + "," +
         tx.quote(std::string(domain::to_string(r.status))) + "," + tx.quote(r.trigger) + "," +
         tx.quote(json::serialize(r.payload)) + "::jsonb," + std::to_string(r.depth) + "," +
         (r.conditions_met ? "true" : "false") + "," +
         tx.quote(json::serialize(sealed_actions(r.actions, r.tenant_id, keys))) + "::jsonb," +
         std::to_string(r.next_step) + "," + tx.quote(json::serialize(r.steps)) + "::jsonb," +
         (r.error ? tx.quote(*r.error) : std::string("NULL")) + "," + ts(r.resume_at) + "," +
         ts(r.created_at) + "," + ts(r.started_at) + "," + ts(r.finished_at) + "," +
         ts(r.updated_at) + ")";
  }
  tx.exec(s);
}

} // namespace

automation_snapshot load_automation(pg_conn& c, std::int64_t tenant_id) {
  pqxx::read_transaction tx(c.raw());
  automation_snapshot out;
  for (auto r : tx.exec_params(std::string("SELECT ") + workflow_columns +
                                   " FROM workflows WHERE tenant_id = $1 ORDER BY id",
                               tenant_id))
    out.workflows.push_back(to_workflow(r, c.keys()));
  for (auto r : tx.exec_params(std::string("SELECT ") + subscription_columns +
                                   " FROM webhook_subscriptions WHERE tenant_id = $1 ORDER BY id",
                               tenant_id))
    out.subscriptions.push_back(to_subscription(r, c.keys()));
  for (auto r : tx.exec_params(std::string("SELECT ") + run_columns +
                                   " FROM workflow_runs WHERE tenant_id = $1 AND status IN"
                                   " ('queued', 'running', 'waiting') ORDER BY id",
                               tenant_id))
    out.open_runs.push_back(to_run(r, &c.keys()));
  return out;
}

domain::workflow save_workflow(pg_conn& c, domain::workflow w, bool write_schedule) {
  pqxx::work tx(c.raw());
  fence(tx, w.tenant_id);
  auto cfg = json::serialize(w.trigger_config);
  auto conds = json::serialize(domain::conditions_to_json(w.conditions));
  auto acts =
      json::serialize(sealed_actions(domain::actions_to_json(w.actions), w.tenant_id, c.keys()));
  auto secret =
      sealed_text(w.webhook_secret, sealed::workflow_webhook_secret, w.tenant_id, c.keys());
  ts_param next(w.next_run_at), created(w.created_at), updated(w.updated_at);
  auto trigger = std::string(domain::to_string(w.trigger));
  pqxx::result r;
  if (w.id == 0) {
    r = tx.exec_params(
        std::string("INSERT INTO workflows (tenant_id, name, description, trigger_type,"
                    " trigger_config, conditions, actions, is_active, webhook_secret, next_run_at,"
                    " created_at, updated_at) VALUES ($1, $2, $3, $4, $5::jsonb, $6::jsonb,"
                    " $7::jsonb, $8, $9, $10::timestamptz, $11::timestamptz, $12::timestamptz)"
                    " RETURNING ") +
            workflow_columns,
        w.tenant_id, w.name, opt(w.description), trigger, cfg, conds, acts, w.is_active,
        opt(secret), next.get(), created.get(), updated.get());
  } else {
    r = tx.exec_params(
        std::string("UPDATE workflows SET name = $3, description = $4, trigger_type = $5,"
                    " trigger_config = $6::jsonb, conditions = $7::jsonb, actions = $8::jsonb,"
                    " is_active = $9, webhook_secret = $10, next_run_at = CASE WHEN $13 THEN"
                    " $11::timestamptz ELSE next_run_at END, updated_at = $12::timestamptz"
                    " WHERE tenant_id = $1 AND id = $2 RETURNING ") +
            workflow_columns,
        w.tenant_id, w.id, w.name, opt(w.description), trigger, cfg, conds, acts, w.is_active,
        opt(secret), next.get(), updated.get(), write_schedule);
  }
  if (r.empty()) throw std::runtime_error("workflow vanished");
  auto saved = to_workflow(r.front(), c.keys());
  tx.commit();
  return saved;
}

void delete_workflow(pg_conn& c, std::int64_t tenant_id, std::int64_t id) {
  pqxx::work tx(c.raw());
  fence(tx, tenant_id);
  tx.exec_params("DELETE FROM workflows WHERE tenant_id = $1 AND id = $2", tenant_id, id);
  tx.commit();
}

namespace {
std::optional<std::int64_t> tenant_of(pg_conn& c, const char* table, std::int64_t id) {
  pqxx::read_transaction tx(c.raw());
  auto r = tx.exec_params(std::string("SELECT tenant_id FROM ") + table + " WHERE id = $1", id);
  if (r.empty()) return std::nullopt;
  return r.front()[0].as<std::int64_t>();
}
} // namespace

std::optional<std::int64_t> tenant_of_workflow(pg_conn& c, std::int64_t id) {
  return tenant_of(c, "workflows", id);
}
std::optional<std::int64_t> tenant_of_run(pg_conn& c, std::int64_t id) {
  return tenant_of(c, "workflow_runs", id);
}
std::optional<std::int64_t> tenant_of_subscription(pg_conn& c, std::int64_t id) {
  return tenant_of(c, "webhook_subscriptions", id);
}

dispatch_result dispatch_outbox(pg_conn& c, std::int64_t tenant_id, const event_consumers& to,
                                std::size_t limit) {
  pqxx::work tx(c.raw());
  fence(tx, tenant_id);
  auto rows = tx.exec_params(
      "UPDATE outbox SET dispatched_at = now() WHERE id IN (SELECT id FROM outbox WHERE"
      " tenant_id = $1 AND dispatched_at IS NULL ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED)"
      " RETURNING id, event, payload::text, depth, " CRM_MICROS("created_at"),
      tenant_id, static_cast<std::int64_t>(limit));
  struct event_row {
    std::int64_t id;
    std::string event;
    std::string payload;
    int depth;
    std::int64_t at;
  };
  std::vector<event_row> events;
  events.reserve(rows.size());
  for (auto r : rows)
    events.push_back({r[0].as<std::int64_t>(), r[1].as<std::string>(), r[2].as<std::string>(),
                      r[3].as<int>(), r[4].as<std::int64_t>()});
  std::sort(events.begin(), events.end(), [](auto& a, auto& b) { return a.id < b.id; });

  dispatch_result out;
  out.events = events.size();
  auto now = domain::now_micros();
  struct delivery_row {
    std::int64_t subscription;
    const event_row* e;
  };
  std::vector<delivery_row> deliveries;
  for (auto& e : events) {
    auto trigger = domain::parse_trigger_type(e.event);
    std::optional<json::value> payload;
    if (trigger)
      for (auto& w : to.workflows) {
        if (w.trigger != *trigger || !w.is_active) continue;
        if (!payload) {
          json::error_code ec;
          payload = crm::domain::parse_json(e.payload, ec);
          if (ec) payload = json::object();
        }
        if (!domain::trigger_config_matches(w.trigger, w.trigger_config, *payload) ||
            !domain::conditions_hold(w.conditions, *payload))
          continue;
        domain::workflow_run run;
        run.tenant_id = tenant_id;
        run.workflow_id = w.id;
        run.trigger = e.event;
        run.payload = *payload;
        run.depth = e.depth;
        run.actions = domain::actions_to_json(w.actions);
        run.created_at = run.updated_at = now;
        if (run.depth >= domain::max_chain_depth) {
          run.status = domain::run_status::failed;
          run.error = "workflow chain depth limit (" + std::to_string(domain::max_chain_depth) +
                      ") reached: this run was triggered by a change that workflows made " +
                      std::to_string(run.depth) + " times in a row";
          run.finished_at = now;
        }
        out.runs.push_back(std::move(run));
      }
    for (auto& s : to.subscriptions)
      if (s.is_active && s.wants(e.event)) deliveries.push_back({s.id, &e});
  }
  insert_run_rows(tx, out.runs, c.keys());
  if (!deliveries.empty()) {
    auto ids = next_ids(tx, "webhook_deliveries_id_seq", deliveries.size());
    auto nowq = tx.quote(domain::format_rfc3339(now)) + "::timestamptz";
    // A 410 may have switched a subscription off after the actor's copy was read: its
    // deliveries are written failed, as the 410 failed those already pending (else they
    // would wait as pending for ever). FOR SHARE orders this against a 410 being recorded.
    std::string s = "INSERT INTO webhook_deliveries (id, tenant_id, subscription_id, event,"
                    " payload, status, next_attempt_at, retry_from, created_at, updated_at,"
                    " last_error) SELECT v.id, v.tenant_id, v.subscription_id, v.event,"
                    " v.payload, CASE WHEN w.is_active THEN v.status ELSE 'failed' END,"
                    " CASE WHEN w.is_active THEN v.next_attempt_at END, v.retry_from,"
                    " v.created_at, v.updated_at, CASE WHEN w.is_active THEN NULL ELSE"
                    " 'subscription disabled before this delivery was attempted' END FROM"
                    " (VALUES ";
    for (std::size_t i = 0; i < deliveries.size(); ++i) {
      auto& d = deliveries[i];
      s += (i ? "," : "") + std::string("(") + std::to_string(ids[i]) + "," +
           std::to_string(tenant_id) + "," + std::to_string(d.subscription) + "," +
           tx.quote(d.e->event) + "," + tx.quote(d.e->payload) + "::jsonb,'pending'," + nowq + "," +
           nowq + "," + tx.quote(domain::format_rfc3339(d.e->at)) + "::timestamptz," + nowq + ")";
    }
    s += ") AS v(id, tenant_id, subscription_id, event, payload, status, next_attempt_at,"
         " retry_from, created_at, updated_at) JOIN webhook_subscriptions w ON w.id ="
         " v.subscription_id FOR SHARE OF w";
    out.deliveries = static_cast<std::size_t>(tx.exec(s).affected_rows());
  }
  tx.commit();
  return out;
}

domain::workflow_run insert_run(pg_conn& c, domain::workflow_run r,
                                std::optional<std::int64_t> schedule_next_run_at) {
  pqxx::work tx(c.raw());
  fence(tx, r.tenant_id);
  std::vector<domain::workflow_run> one{std::move(r)};
  insert_run_rows(tx, one, c.keys());
  if (schedule_next_run_at) {
    ts_param next(*schedule_next_run_at);
    tx.exec_params("UPDATE workflows SET next_run_at = $3::timestamptz WHERE tenant_id = $1 AND"
                   " id = $2 AND is_active",
                   one[0].tenant_id, one[0].workflow_id, next.get());
  }
  tx.commit();
  return std::move(one[0]);
}

namespace {
void update_run(pqxx::work& tx, const domain::workflow_run& r) {
  ts_param resume(r.resume_at), started(r.started_at), finished(r.finished_at),
      updated(r.updated_at);
  tx.exec_params("UPDATE workflow_runs SET status = $3, next_step = $4, steps = $5::jsonb,"
                 " error = $6, resume_at = $7::timestamptz, started_at = $8::timestamptz,"
                 " finished_at = $9::timestamptz, updated_at = $10::timestamptz"
                 " WHERE tenant_id = $1 AND id = $2",
                 r.tenant_id, r.id, std::string(domain::to_string(r.status)), r.next_step,
                 json::serialize(r.steps), opt(r.error), resume.get(), started.get(),
                 finished.get(), updated.get());
}
} // namespace

void save_run(pg_conn& c, const domain::workflow_run& r) {
  pqxx::work tx(c.raw());
  fence(tx, r.tenant_id);
  update_run(tx, r);
  tx.commit();
}

void save_runs(pg_conn& c, const std::vector<domain::workflow_run>& runs) {
  pqxx::work tx(c.raw());
  for (auto& r : runs) fence(tx, r.tenant_id);
  for (auto& r : runs) update_run(tx, r);
  tx.commit();
}

std::string runs_page_json(pg_conn& c, std::int64_t tenant_id, std::int64_t workflow_id,
                           std::optional<domain::run_status> status, int page, int per_page) {
  pqxx::read_transaction tx(c.raw());
  std::string filter = " WHERE tenant_id = $1 AND workflow_id = $2";
  std::string st = status ? std::string(domain::to_string(*status)) : std::string();
  if (status) filter += " AND status = $3";
  auto total_q = "SELECT count(*) FROM workflow_runs" + filter;
  auto rows_q = std::string("SELECT ") + run_columns + " FROM workflow_runs" + filter +
                " ORDER BY id DESC LIMIT " + std::to_string(per_page) + " OFFSET " +
                std::to_string(static_cast<std::int64_t>(page - 1) * per_page);
  pqxx::result total, rows;
  if (status) {
    total = tx.exec_params(total_q, tenant_id, workflow_id, st);
    rows = tx.exec_params(rows_q, tenant_id, workflow_id, st);
  } else {
    total = tx.exec_params(total_q, tenant_id, workflow_id);
    rows = tx.exec_params(rows_q, tenant_id, workflow_id);
  }
  json::array items;
  for (auto r : rows) items.push_back(domain::run_to_json(to_run(r, nullptr)));
  return domain::render_page(std::move(items), total.front()[0].as<std::int64_t>(), page, per_page);
}

std::optional<std::string> run_json(pg_conn& c, std::int64_t tenant_id, std::int64_t run_id) {
  pqxx::read_transaction tx(c.raw());
  auto r = tx.exec_params(std::string("SELECT ") + run_columns +
                              " FROM workflow_runs WHERE tenant_id = $1 AND id = $2",
                          tenant_id, run_id);
  if (r.empty()) return std::nullopt;
  return json::serialize(domain::run_to_json(to_run(r.front(), nullptr)));
}

domain::webhook_subscription save_subscription(pg_conn& c, domain::webhook_subscription s) {
  pqxx::work tx(c.raw());
  fence(tx, s.tenant_id);
  auto events = events_json(s.events);
  auto secret = c.keys().seal(sealed::subscription_secret, s.tenant_id, s.secret);
  ts_param created(s.created_at), updated(s.updated_at);
  pqxx::result r;
  if (s.id == 0) {
    r = tx.exec_params(std::string("INSERT INTO webhook_subscriptions (tenant_id, url, events,"
                                   " description, secret, is_active, disabled_reason, created_at,"
                                   " updated_at) VALUES ($1, $2, $3::jsonb, $4, $5, $6, $7,"
                                   " $8::timestamptz, $9::timestamptz) RETURNING ") +
                           subscription_columns,
                       s.tenant_id, s.url, events, opt(s.description), secret, s.is_active,
                       opt(s.disabled_reason), created.get(), updated.get());
  } else {
    r = tx.exec_params(std::string("UPDATE webhook_subscriptions SET url = $3, events = $4::jsonb,"
                                   " description = $5, secret = $6, is_active = $7,"
                                   " disabled_reason = $8, updated_at = $9::timestamptz"
                                   " WHERE tenant_id = $1 AND id = $2 RETURNING ") +
                           subscription_columns,
                       s.tenant_id, s.id, s.url, events, opt(s.description), secret, s.is_active,
                       opt(s.disabled_reason), updated.get());
    // Deliveries waiting for a subscription that was switched off will not be attempted.
    if (!s.is_active)
      tx.exec_params("UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL,"
                     " last_error = 'subscription deactivated', updated_at = now()"
                     " WHERE tenant_id = $1 AND subscription_id = $2 AND status = 'pending'",
                     s.tenant_id, s.id);
  }
  if (r.empty()) throw std::runtime_error("subscription vanished");
  auto saved = to_subscription(r.front(), c.keys());
  tx.commit();
  return saved;
}

void delete_subscription(pg_conn& c, std::int64_t tenant_id, std::int64_t id) {
  pqxx::work tx(c.raw());
  fence(tx, tenant_id);
  tx.exec_params("DELETE FROM webhook_subscriptions WHERE tenant_id = $1 AND id = $2", tenant_id,
                 id);
  tx.commit();
}

std::vector<domain::webhook_delivery> due_deliveries(pg_conn& c, std::int64_t tenant_id,
                                                     const std::vector<std::int64_t>& busy,
                                                     std::size_t limit) {
  pqxx::read_transaction tx(c.raw());
  std::string except = "{";
  for (std::size_t i = 0; i < busy.size(); ++i) except += (i ? "," : "") + std::to_string(busy[i]);
  except += "}";
  auto rows = tx.exec_params("SELECT d.id, d.subscription_id, d.event, d.payload::text, "
                             "d.attempts, " CRM_MICROS("d.retry_from") ", " CRM_MICROS(
                                 "d.created_at") " FROM webhook_deliveries d JOIN"
                                                 " webhook_subscriptions s ON s.id ="
                                                 " d.subscription_id AND s.is_active"
                                                 " WHERE d.tenant_id = $1 AND d.status ="
                                                 " 'pending' AND d.next_attempt_at <= now()"
                                                 " AND NOT (d.id = ANY($2::bigint[]))"
                                                 " ORDER BY d.next_attempt_at, d.id LIMIT $3",
                             tenant_id, except, static_cast<std::int64_t>(limit));
  std::vector<domain::webhook_delivery> out;
  for (auto r : rows) {
    domain::webhook_delivery d;
    d.id = r[0].as<std::int64_t>();
    d.subscription_id = r[1].as<std::int64_t>();
    d.event = r[2].as<std::string>();
    d.payload = r[3].as<std::string>();
    d.attempts = r[4].as<int>();
    d.retry_from = r[5].as<std::int64_t>();
    d.created_at = r[6].as<std::int64_t>();
    out.push_back(std::move(d));
  }
  return out;
}

std::int64_t next_delivery_due(pg_conn& c, std::int64_t tenant_id) {
  pqxx::read_transaction tx(c.raw());
  auto r = tx.exec_params(
      "SELECT " CRM_MICROS("min(d.next_attempt_at)") " FROM webhook_deliveries d JOIN"
                                                     " webhook_subscriptions s ON s.id ="
                                                     " d.subscription_id AND s.is_active WHERE"
                                                     " d.tenant_id = $1 AND d.status = 'pending'",
      tenant_id);
  return micros_or_zero(r.front()[0]);
}

namespace {

void record_one(pqxx::work& tx, std::int64_t tenant_id, const domain::delivery_attempt& a) {
  json::object entry{{"attempt", a.attempt},
                     {"at", domain::format_rfc3339(a.at)},
                     {"status_code", a.status_code ? json::value(a.status_code) : nullptr},
                     {"error", a.error.empty() ? json::value(nullptr) : json::value(a.error)},
                     {"duration_ms", a.duration_ms}};
  json::array one{entry};
  const char* status = a.delivered ? "succeeded" : (a.next_attempt_at ? "pending" : "failed");
  ts_param next(a.next_attempt_at);
  std::optional<std::string> error, code;
  if (!a.error.empty()) error = a.error;
  if (a.status_code) code = std::to_string(a.status_code);
  tx.exec_params("UPDATE webhook_deliveries SET status = $3, attempts = $4,"
                 " attempt_log = attempt_log || $5::jsonb, next_attempt_at = $6::timestamptz,"
                 " last_status_code = $7::integer, last_error = $8,"
                 " delivered_at = CASE WHEN $9 THEN now() ELSE delivered_at END, updated_at = now()"
                 " WHERE tenant_id = $1 AND id = $2 AND status = 'pending'",
                 tenant_id, a.delivery_id, status, a.attempt, json::serialize(one), next.get(),
                 code ? code->c_str() : nullptr, opt(error), a.delivered);
  if (a.gone) {
    tx.exec_params("UPDATE webhook_subscriptions SET is_active = false, disabled_reason = $3,"
                   " updated_at = now() WHERE tenant_id = $1 AND id = $2",
                   tenant_id, a.subscription_id,
                   "the receiver answered 410 Gone on " + domain::format_rfc3339(a.at));
    tx.exec_params("UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL,"
                   " last_error = 'subscription disabled: the receiver answered 410 Gone',"
                   " updated_at = now() WHERE tenant_id = $1 AND subscription_id = $2 AND"
                   " status = 'pending'",
                   tenant_id, a.subscription_id);
  }
}

} // namespace

void record_attempts(pg_conn& c, std::int64_t tenant_id,
                     const std::vector<domain::delivery_attempt>& attempts) {
  pqxx::work tx(c.raw());
  fence(tx, tenant_id);
  for (auto& a : attempts) record_one(tx, tenant_id, a);
  tx.commit();
}

std::string deliveries_page_json(pg_conn& c, std::int64_t tenant_id, std::int64_t subscription_id,
                                 std::optional<std::string> status, int page, int per_page) {
  pqxx::read_transaction tx(c.raw());
  std::string filter = " WHERE tenant_id = $1 AND subscription_id = $2";
  if (status) filter += " AND status = $3";
  auto total_q = "SELECT count(*) FROM webhook_deliveries" + filter;
  auto rows_q = std::string("SELECT id, subscription_id, event, status, attempts, " CRM_MICROS(
                    "next_attempt_at") ", last_status_code, last_error, "
                                       "payload::text, " CRM_MICROS("created_at") ", " CRM_MICROS(
                                           "d"
                                           "e"
                                           "l"
                                           "i"
                                           "v"
                                           "e"
                                           "r"
                                           "e"
                                           "d"
                                           "_"
                                           "a"
                                           "t") ", attempt_log::text FROM"
                                                " webhook_deliveries") +
                filter + " ORDER BY id DESC LIMIT " + std::to_string(per_page) + " OFFSET " +
                std::to_string(static_cast<std::int64_t>(page - 1) * per_page);
  pqxx::result total, rows;
  if (status) {
    total = tx.exec_params(total_q, tenant_id, subscription_id, *status);
    rows = tx.exec_params(rows_q, tenant_id, subscription_id, *status);
  } else {
    total = tx.exec_params(total_q, tenant_id, subscription_id);
    rows = tx.exec_params(rows_q, tenant_id, subscription_id);
  }
  json::array items;
  auto ts = [](const pqxx::field& f) -> json::value {
    if (f.is_null()) return nullptr;
    return json::value(domain::format_rfc3339(f.as<std::int64_t>()));
  };
  for (auto r : rows) {
    json::object o;
    auto id = r[0].as<std::int64_t>();
    o["id"] = id;
    o["subscription_id"] = r[1].as<std::int64_t>();
    o["event"] = r[2].as<std::string>();
    o["webhook_id"] = "msg_" + std::to_string(id);
    o["status"] = r[3].as<std::string>();
    o["attempts"] = r[4].as<int>();
    o["next_attempt_at"] = ts(r[5]);
    o["last_status_code"] = r[6].is_null() ? json::value(nullptr) : json::value(r[6].as<int>());
    o["last_error"] = r[7].is_null() ? json::value(nullptr) : json::value(r[7].as<std::string>());
    o["payload"] = parse_json(r[8]);
    o["created_at"] = ts(r[9]);
    o["delivered_at"] = ts(r[10]);
    auto log = parse_json(r[11]);
    o["attempt_log"] = log.is_array() ? log : json::array();
    items.push_back(std::move(o));
  }
  return domain::render_page(std::move(items), total.front()[0].as<std::int64_t>(), page, per_page);
}

redelivery redeliver(pg_conn& c, std::int64_t tenant_id, std::int64_t subscription_id,
                     std::int64_t delivery_id, bool subscription_active) {
  pqxx::work tx(c.raw());
  fence(tx, tenant_id);
  if (!subscription_active) {
    auto r = tx.exec_params("SELECT 1 FROM webhook_deliveries WHERE tenant_id = $1 AND"
                            " subscription_id = $2 AND id = $3",
                            tenant_id, subscription_id, delivery_id);
    return r.empty() ? redelivery::not_found : redelivery::inactive;
  }
  auto r = tx.exec_params("UPDATE webhook_deliveries SET status = 'pending', next_attempt_at ="
                          " now(), retry_from = now(), updated_at = now() WHERE tenant_id = $1"
                          " AND subscription_id = $2 AND id = $3 RETURNING id",
                          tenant_id, subscription_id, delivery_id);
  tx.commit();
  return r.empty() ? redelivery::not_found : redelivery::pending;
}

std::vector<std::int64_t> tenants_with_due_work(pg_conn& c) {
  pqxx::read_transaction tx(c.raw());
  auto rows =
      tx.exec("SELECT tenant_id FROM outbox WHERE dispatched_at IS NULL GROUP BY tenant_id"
              " UNION SELECT tenant_id FROM workflow_runs WHERE status IN ('queued', 'running')"
              "   OR (status = 'waiting' AND resume_at <= now())"
              " UNION SELECT d.tenant_id FROM webhook_deliveries d JOIN webhook_subscriptions"
              "   s ON s.id = d.subscription_id AND s.is_active WHERE d.status = 'pending'"
              "   AND d.next_attempt_at <= now()"
              " UNION SELECT tenant_id FROM workflows WHERE next_run_at <= now() AND is_active");
  return first_ids(rows);
}

std::int64_t prune_outbox(pg_conn& c, double keep_seconds) {
  pqxx::work tx(c.raw());
  auto r = tx.exec_params(
      "DELETE FROM outbox WHERE dispatched_at < now() - $1 * interval '1 second'", keep_seconds);
  tx.commit();
  return static_cast<std::int64_t>(r.affected_rows());
}

} // namespace crm::persistence
