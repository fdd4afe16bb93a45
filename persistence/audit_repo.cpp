#include "persistence/audit_repo.hpp"

#include "domain/clock.hpp"
#include "domain/csv.hpp"
#include "domain/json_writer.hpp"
#include "persistence/log.hpp"
#include "persistence/pg_pool.hpp"
#include "persistence/tx_batch.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <pqxx/pqxx>

#include <algorithm>
#include <charconv>
#include <ctime>
#include <map>

namespace crm::persistence {

namespace {

// Events per row of audit_blocks.
constexpr std::size_t max_events_per_block = 1024;

std::string ids_literal(const std::vector<std::int64_t>& ids) {
  std::string out = "{";
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(ids[i]);
  }
  out += '}';
  return out;
}

std::string fields_literal(const std::vector<std::string>& fields) {
  array_literal a;
  for (auto& f : fields) a.add(f);
  return a.text();
}

std::string optional_number(const std::optional<std::int64_t>& v) {
  return v ? std::to_string(*v) : std::string("NULL");
}

template <class Quote>
void append_insert(std::string& out, const std::vector<domain::audit_record>& rows, Quote quote) {
  if (rows.empty()) return;
  out +=
      "INSERT INTO audit_pending (tenant_id, at, actor_type, user_id, role, actor_ref, resource, "
      "resource_id, action, fields, outcome, status, client_ip, user_agent, request_id, query, "
      "ids) VALUES ";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    if (i) out += ',';
    out += '(';
    out += std::to_string(r.tenant_id) + ',' + quote(domain::format_rfc3339(r.at)) + ',' +
           quote(r.actor_type) + ',' + optional_number(r.user_id) + ',' + quote(r.role) + ',' +
           quote(r.actor_ref) + ',' + quote(r.resource) + ',' + optional_number(r.resource_id) +
           ',' + quote(r.action) + ',' + quote(fields_literal(r.fields)) + ',' + quote(r.outcome) +
           ',' + std::to_string(r.status) + ',' + quote(r.client_ip) + ',' + quote(r.user_agent) +
           ',' + quote(r.request_id) + ',' + quote(r.query) + ',' + quote(ids_literal(r.ids));
    out += ')';
  }
  out += ";\n";
}

// The record's columns as selected from audit_pending or the audit_log view (17 of them).
constexpr const char* record_columns =
    "tenant_id, (extract(epoch from at) * 1000000)::bigint, actor_type, user_id, role, actor_ref, "
    "resource, resource_id, action, array_to_json(fields)::text, outcome, status, client_ip, "
    "user_agent, request_id, query, array_to_string(ids, ',')";

// One element of audit_blocks.events: the event as a JSON array, its facts by position
// (migration 013 names them: the view audit_log), about half the bytes of the object GET
// /audit-log shows, which is what Postgres parses, compresses and logs.
void append_stored_event(std::string& out, std::int64_t seq, const domain::audit_record& r,
                         std::string_view hash) {
  domain::json_writer w(out);
  auto optional = [&](const std::optional<std::int64_t>& v) {
    if (v)
      w.value(*v);
    else
      w.null();
  };
  w.begin_array();
  w.value(seq).value(r.at).value(r.actor_type);
  optional(r.user_id);
  w.value(r.role).value(r.actor_ref).value(r.resource);
  optional(r.resource_id);
  w.value(r.action);
  w.begin_array();
  for (auto& f : r.fields) w.value(f);
  w.end_array();
  w.value(r.outcome).value(static_cast<std::int64_t>(r.status)).value(r.client_ip);
  w.value(r.user_agent).value(r.request_id).value(r.query);
  w.begin_array();
  for (auto id : r.ids) w.value(id);
  w.end_array();
  w.value(hash);
  w.end_array();
}

std::optional<std::int64_t> optional_int(const pqxx::field& f) {
  if (f.is_null()) return std::nullopt;
  return f.as<std::int64_t>();
}

domain::audit_record read_record(const pqxx::row& row, int at) {
  domain::audit_record r;
  r.tenant_id = row[at].as<std::int64_t>();
  r.at = row[at + 1].as<std::int64_t>();
  r.actor_type = row[at + 2].as<std::string>();
  r.user_id = optional_int(row[at + 3]);
  r.role = row[at + 4].as<std::string>();
  r.actor_ref = row[at + 5].as<std::string>();
  r.resource = row[at + 6].as<std::string>();
  r.resource_id = optional_int(row[at + 7]);
  r.action = row[at + 8].as<std::string>();
  auto fields = boost::json::parse(row[at + 9].c_str());
  if (fields.is_array())
    for (auto& f : fields.as_array())
      if (f.is_string()) r.fields.emplace_back(f.as_string());
  r.outcome = row[at + 10].as<std::string>();
  r.status = row[at + 11].as<int>();
  r.client_ip = row[at + 12].as<std::string>();
  r.user_agent = row[at + 13].as<std::string>();
  r.request_id = row[at + 14].as<std::string>();
  r.query = row[at + 15].as<std::string>();
  std::string_view ids = row[at + 16].c_str();
  while (!ids.empty()) {
    auto comma = ids.find(',');
    auto part = ids.substr(0, comma);
    std::int64_t v = 0;
    std::from_chars(part.data(), part.data() + part.size(), v);
    r.ids.push_back(v);
    if (comma == std::string_view::npos) break;
    ids.remove_prefix(comma + 1);
  }
  return r;
}

// The month partitions: name and bounds, as "YYYY-MM-01".
struct month {
  int year;
  int mon; // 1..12
  month next() const { return mon == 12 ? month{year + 1, 1} : month{year, mon + 1}; }
  month previous() const { return mon == 1 ? month{year - 1, 12} : month{year, mon - 1}; }
  std::string name() const {
    char buf[64];
    std::snprintf(buf, sizeof buf, "audit_blocks_y%04dm%02d", year, mon);
    return buf;
  }
  std::string first_day() const {
    char buf[48];
    std::snprintf(buf, sizeof buf, "%04d-%02d-01", year, mon);
    return buf;
  }
};

month month_of(std::int64_t micros) {
  std::time_t t = micros / 1'000'000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  return {tm.tm_year + 1900, tm.tm_mon + 1};
}

std::optional<month> month_of_name(std::string_view name) {
  // audit_blocks_yYYYYmMM
  constexpr std::string_view prefix = "audit_blocks_y";
  if (name.size() != prefix.size() + 7 || name.substr(0, prefix.size()) != prefix ||
      name[prefix.size() + 4] != 'm')
    return std::nullopt;
  month m{};
  auto y = name.substr(prefix.size(), 4);
  auto mo = name.substr(prefix.size() + 5, 2);
  if (std::from_chars(y.data(), y.data() + 4, m.year).ec != std::errc() ||
      std::from_chars(mo.data(), mo.data() + 2, m.mon).ec != std::errc() || m.mon < 1 || m.mon > 12)
    return std::nullopt;
  return m;
}

} // namespace

void append_audit_sql(sql_text& out, const std::vector<domain::audit_record>& rows) {
  append_insert(out.body(), rows, [&](std::string_view s) { return out.quote(s); });
}

void insert_audit(pqxx::transaction_base& tx, const std::vector<domain::audit_record>& rows) {
  if (rows.empty()) return;
  std::string sql;
  append_insert(sql, rows, [&](std::string_view s) { return tx.quote(std::string(s)); });
  tx.exec(sql);
}

void record_audit(pg_conn& c, const std::vector<domain::audit_record>& rows) {
  pqxx::work tx(c.raw());
  insert_audit(tx, rows);
  tx.commit();
}

// ---- the writer ---------------------------------------------------------------------------

audit_writer::audit_writer(std::string database_url, audit_writer_options o)
    : url_(std::move(database_url)), opts_(o) {
  thread_ = std::thread([this] {
    name_this_thread("crm.audit");
    loop();
  });
}

audit_writer::~audit_writer() {
  stop();
}

bool audit_writer::record(domain::audit_record r) {
  {
    std::lock_guard lock(mutex_);
    if (buffer_.size() >= opts_.capacity || stopping_) {
      refused_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    buffer_.push_back(std::move(r));
    // Enough waits for a transaction of its own: the writer goes now, not at its next tick.
    if (buffer_.size() == std::clamp<std::size_t>(opts_.capacity / 4, 1, 4096)) cv_.notify_one();
  }
  recorded_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void audit_writer::flush(std::function<void(bool)> done) {
  {
    std::lock_guard lock(mutex_);
    if (!stopping_) {
      waiters_.push_back(std::move(done));
      cv_.notify_one();
      return;
    }
  }
  done(false);
}

std::size_t audit_writer::buffered() {
  std::lock_guard lock(mutex_);
  return buffer_.size();
}

void audit_writer::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
    cv_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
}

void audit_writer::loop() {
  pg_conn conn(url_);
  auto last_pending_look = std::chrono::steady_clock::time_point{}; // the first round looks
  auto last_maintenance = std::chrono::steady_clock::time_point{};
  int failures_in_row = 0;
  std::vector<domain::audit_record> rows, spare;
  for (;;) {
    rows.clear();
    std::vector<std::function<void(bool)>> waiters;
    bool stopping = false;
    {
      std::unique_lock lock(mutex_);
      cv_.wait_for(lock, opts_.flush_interval, [&] {
        // A busy writer goes round at once: fewer rows wait in memory for a crash to lose.
        return stopping_ || !waiters_.empty() ||
               buffer_.size() >= std::clamp<std::size_t>(opts_.capacity / 4, 1, 4096);
      });
      stopping = stopping_;
      // The recording threads wait on this lock: the buffer is swapped whole (the previous
      // round's vector, emptied with its capacity kept, takes its place), not moved row by row.
      if (buffer_.size() <= opts_.max_rows_per_transaction) {
        rows.swap(spare);
        rows.swap(buffer_);
      } else {
        auto cut = buffer_.begin() + static_cast<std::ptrdiff_t>(opts_.max_rows_per_transaction);
        rows.assign(std::make_move_iterator(buffer_.begin()), std::make_move_iterator(cut));
        buffer_.erase(buffer_.begin(), cut);
      }
      if (buffer_.empty()) waiters.swap(waiters_);
    }
    auto now = std::chrono::steady_clock::now();
    // Change rows are durable in audit_pending already. A round with reads claims the pending
    // rows of the tenants it writes to, so that each chain keeps the order things happened in;
    // every compact_interval (at once for a flush, and once more when stopping) a round claims
    // every tenant's, for the tenants with no reads here. On several nodes a node's reads are of
    // its own tenants, so the rounds with reads of different nodes claim different rows and lock
    // different chains' heads; only the sweeps meet.
    //
    // A sweep skips rows another node's writer is claiming, except for a flush: its waiters are
    // promised every change committed before it. A claim of the tenants read here waits too, to
    // chain their changes before the reads that followed them. A claim waited for ends with the
    // rows it took gone; all lock in id order, then the heads in tenant order: no deadlock.
    bool look_pending =
        stopping || !waiters.empty() || now - last_pending_look >= opts_.compact_interval;
    std::string which;
    if (!look_pending) {
      std::vector<std::int64_t> read_tenants;
      for (auto& r : rows) read_tenants.push_back(r.tenant_id);
      std::sort(read_tenants.begin(), read_tenants.end());
      read_tenants.erase(std::unique(read_tenants.begin(), read_tenants.end()), read_tenants.end());
      which = "WHERE tenant_id = ANY('" + ids_literal(read_tenants) + "'::bigint[]) ";
    }
    const auto claim =
        "DELETE FROM audit_pending WHERE id IN (SELECT id FROM audit_pending " + which +
        "ORDER BY id LIMIT " + std::to_string(opts_.max_rows_per_transaction) +
        (look_pending && waiters.empty() ? " FOR UPDATE SKIP LOCKED" : " FOR UPDATE") +
        ") RETURNING id, " + record_columns;
    bool ok = true;
    if (!rows.empty() || look_pending) {
      try {
        if (now - last_maintenance >= std::chrono::hours(1)) {
          maintain_audit_partitions(conn, opts_.retention_days);
          last_maintenance = now;
        }
        // The pending rows are claimed in the same transaction; a writer that finds more than
        // one transaction's worth goes round again at once.
        bool more = false;
        do {
          pqxx::work tx(conn.raw());
          auto claimed = tx.exec(claim);
          more = claimed.size() >= opts_.max_rows_per_transaction;
          std::vector<std::pair<std::int64_t, domain::audit_record>> pending;
          pending.reserve(claimed.size());
          for (const auto& row : claimed)
            pending.emplace_back(row[0].as<std::int64_t>(), read_record(row, 1));
          std::sort(pending.begin(), pending.end(),
                    [](auto& a, auto& b) { return a.first < b.first; });
          // Each tenant's rows in the order they happened (changes, then reads, when equal).
          std::map<std::int64_t, std::vector<const domain::audit_record*>> by_tenant;
          for (auto& [id, r] : pending) by_tenant[r.tenant_id].push_back(&r);
          for (auto& r : rows) by_tenant[r.tenant_id].push_back(&r);
          if (by_tenant.empty()) {
            tx.commit();
            break;
          }
          std::string tenants = "{";
          for (auto& [t, _] : by_tenant)
            tenants += (tenants.size() > 1 ? "," : "") + std::to_string(t);
          tenants += '}';
          auto tenants_q = tx.quote(tenants);
          tx.exec("INSERT INTO audit_heads (tenant_id, seq, hash, logged_at) SELECT t, 0, " +
                  tx.quote(domain::audit_genesis) + ", '-infinity' FROM unnest(" + tenants_q +
                  "::bigint[]) t ON CONFLICT DO NOTHING");
          auto heads = tx.exec("SELECT tenant_id, seq, hash, (extract(epoch from "
                               "greatest(logged_at, clock_timestamp())) * 1000000)::bigint FROM "
                               "audit_heads WHERE tenant_id = ANY(" +
                               tenants_q + "::bigint[]) ORDER BY tenant_id FOR UPDATE");
          std::string h_tenants = "{", h_seqs = "{", h_hashes = "{", h_logged = "{";
          {
            static const std::vector<std::string> columns{"tenant_id",  "first_seq", "last_seq",
                                                          "logged_at",  "first_at",  "last_at",
                                                          "record_ids", "events",    "last_hash"};
            pqxx::stream_to copy(tx, "audit_blocks", columns);
            std::string events;
            std::vector<std::int64_t> record_ids;
            for (const auto& head : heads) {
              auto tenant = head[0].as<std::int64_t>();
              auto seq = head[1].as<std::int64_t>();
              auto prev = head[2].as<std::string>();
              auto logged_at = domain::format_rfc3339(head[3].as<std::int64_t>());
              auto& list = by_tenant[tenant];
              std::stable_sort(list.begin(), list.end(),
                               [](auto* a, auto* b) { return a->at < b->at; });
              // The tenant's events, chained one by one, stored as blocks of up to
              // max_events_per_block (a page of GET /audit-log expands at most one or two).
              for (std::size_t start = 0; start < list.size(); start += max_events_per_block) {
                auto end = std::min(list.size(), start + max_events_per_block);
                auto first_seq = seq + 1;
                auto first_at = list[start]->at, last_at = list[start]->at;
                events.assign(1, '[');
                record_ids.clear();
                for (auto i = start; i < end; ++i) {
                  const auto& r = *list[i];
                  ++seq;
                  auto hash = domain::audit_hash(prev, seq, r);
                  if (i > start) events += ',';
                  append_stored_event(events, seq, r, hash);
                  if (r.resource_id) record_ids.push_back(*r.resource_id);
                  record_ids.insert(record_ids.end(), r.ids.begin(), r.ids.end());
                  first_at = std::min(first_at, r.at);
                  last_at = std::max(last_at, r.at);
                  prev = std::move(hash);
                }
                events += ']';
                std::sort(record_ids.begin(), record_ids.end());
                record_ids.erase(std::unique(record_ids.begin(), record_ids.end()),
                                 record_ids.end());
                copy << std::make_tuple(
                    tenant, first_seq, seq, logged_at, domain::format_rfc3339(first_at),
                    domain::format_rfc3339(last_at), ids_literal(record_ids), events, prev);
              }
              auto sep = h_tenants.size() > 1 ? "," : "";
              h_tenants += sep + std::to_string(tenant);
              h_seqs += sep + std::to_string(seq);
              h_hashes += sep + prev;
              h_logged += sep + std::string("\"") + logged_at + "\"";
            }
            copy.complete();
          }
          tx.exec("UPDATE audit_heads h SET seq = v.seq, hash = v.hash, logged_at = v.logged_at "
                  "FROM unnest(" +
                  tx.quote(h_tenants + "}") + "::bigint[], " + tx.quote(h_seqs + "}") +
                  "::bigint[], " + tx.quote(h_hashes + "}") + "::text[], " +
                  tx.quote(h_logged + "}") +
                  "::timestamptz[]) AS v(tenant_id, seq, hash, logged_at) "
                  "WHERE h.tenant_id = v.tenant_id");
          tx.commit();
          written_.fetch_add(rows.size() + pending.size(), std::memory_order_relaxed);
          rows.clear();
        } while (more);
        // Also after a claim that found nothing: the next is an interval away.
        if (look_pending) last_pending_look = now;
        failures_in_row = 0;
      } catch (const std::exception& e) {
        ok = false;
        conn.reset();
        failures_.fetch_add(1, std::memory_order_relaxed);
        if (failures_in_row++ == 0) log_warn("audit writer: {} (retrying)", e.what());
        // A missing partition (the clock moved on) is made before the next try.
        last_maintenance = {};
        // Nothing of the failed transaction is stored: its rows go back to the front, in order.
        std::lock_guard lock(mutex_);
        buffer_.insert(buffer_.begin(), std::make_move_iterator(rows.begin()),
                       std::make_move_iterator(rows.end()));
      }
    }
    for (auto& w : waiters) w(ok);
    rows.clear();
    rows.swap(spare);
    if (stopping) {
      std::lock_guard lock(mutex_);
      if (buffer_.empty() || !ok) {
        for (auto& w : waiters_) w(false);
        waiters_.clear();
        return;
      }
    }
    if (!ok)
      std::this_thread::sleep_for(
          std::min(opts_.flush_interval * 2 * failures_in_row, std::chrono::milliseconds(2000)));
  }
}

// ---- partitions -----------------------------------------------------------------------------

audit_partitions maintain_audit_partitions(pg_conn& c, double retention_days) {
  audit_partitions out;
  pqxx::work tx(c.raw());
  // One maintainer at a time across nodes.
  tx.exec("SELECT pg_advisory_xact_lock(7263010)");
  auto now = domain::now_micros();
  auto m = month_of(now).previous();
  for (int i = 0; i < 4; ++i, m = m.next()) {
    auto exists = tx.exec("SELECT 1 FROM pg_class WHERE relname = " + tx.quote(m.name()));
    if (!exists.empty()) continue;
    tx.exec("CREATE TABLE " + m.name() + " PARTITION OF audit_blocks FOR VALUES FROM (" +
            tx.quote(m.first_day()) + ") TO (" + tx.quote(m.next().first_day()) + ")");
    out.created.push_back(m.name());
  }
  auto cutoff = now - static_cast<std::int64_t>(retention_days * 86400.0 * 1e6);
  auto parts = tx.exec("SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                       "WHERE i.inhparent = 'audit_blocks'::regclass ORDER BY c.relname");
  for (const auto& p : parts) {
    auto name = p[0].as<std::string>();
    auto pm = month_of_name(name);
    if (!pm) continue;
    auto end = domain::parse_rfc3339(pm->next().first_day());
    if (!end || *end > cutoff) continue;
    tx.exec("INSERT INTO audit_pruned (tenant_id, seq, hash) SELECT DISTINCT ON (tenant_id) "
            "tenant_id, last_seq, last_hash FROM " +
            name +
            " ORDER BY tenant_id, last_seq DESC ON CONFLICT (tenant_id) DO UPDATE SET seq = "
            "EXCLUDED.seq, hash = EXCLUDED.hash WHERE EXCLUDED.seq > audit_pruned.seq");
    tx.exec("DROP TABLE " + name);
    out.dropped.push_back(name);
  }
  tx.commit();
  for (auto& n : out.dropped) log_info("audit: partition {} dropped (retention)", n);
  return out;
}

// ---- reading ----------------------------------------------------------------------------------

namespace {

constexpr const char* row_columns_suffix = ", seq, hash";

std::vector<audit_row> read_rows(const pqxx::result& res) {
  std::vector<audit_row> out;
  out.reserve(res.size());
  for (const auto& row : res) {
    audit_row a;
    a.record = read_record(row, 0);
    a.seq = row[17].as<std::int64_t>();
    a.hash = row[18].as<std::string>();
    out.push_back(std::move(a));
  }
  return out;
}

} // namespace

std::vector<audit_row> query_audit(pg_conn& c, const audit_filter& f) {
  pqxx::read_transaction tx(c.raw());
  std::string sql = std::string("SELECT ") + record_columns + row_columns_suffix +
                    " FROM audit_log WHERE tenant_id = " + std::to_string(f.tenant_id);
  if (f.user_id) sql += " AND user_id = " + std::to_string(*f.user_id);
  if (f.resource) sql += " AND resource = " + tx.quote(*f.resource);
  // Each condition on an event is also put on its block where it can be (audit_blocks first).
  if (f.resource_id) {
    auto id = std::to_string(*f.resource_id);
    sql += " AND record_ids @> ARRAY[" + id + "]::bigint[] AND resource_id = " + id;
  }
  if (f.action) sql += " AND action = " + tx.quote(*f.action);
  if (f.outcome) sql += " AND outcome = " + tx.quote(*f.outcome);
  if (f.from) {
    auto at = tx.quote(domain::format_rfc3339(*f.from));
    sql += " AND last_at >= " + at + " AND at >= " + at;
  }
  if (f.until) {
    auto at = tx.quote(domain::format_rfc3339(*f.until));
    sql += " AND first_at < " + at + " AND at < " + at;
  }
  if (f.before_seq) {
    auto seq = std::to_string(*f.before_seq);
    sql += " AND first_seq < " + seq + " AND seq < " + seq;
  }
  if (f.after_seq) {
    auto seq = std::to_string(*f.after_seq);
    sql += " AND last_seq > " + seq + " AND seq > " + seq;
  }
  sql += f.oldest_first ? " ORDER BY first_seq, seq" : " ORDER BY first_seq DESC, seq DESC";
  sql += " LIMIT " + std::to_string(f.limit);
  return read_rows(tx.exec(sql));
}

void append_audit_json(std::string& out, const audit_row& a) {
  const auto& r = a.record;
  domain::json_writer w(out);
  auto optional = [&](const char* k, const std::optional<std::int64_t>& v) {
    w.key(k);
    if (v)
      w.value(*v);
    else
      w.null();
  };
  w.begin_object();
  w.key("seq").value(a.seq);
  w.key("at").value(domain::rfc3339(r.at).view());
  w.key("actor_type").value(r.actor_type);
  optional("user_id", r.user_id);
  w.key("role").value(r.role);
  w.key("actor_ref").value(r.actor_ref);
  w.key("resource").value(r.resource);
  optional("resource_id", r.resource_id);
  w.key("action").value(r.action);
  w.key("fields").begin_array();
  for (auto& f : r.fields) w.value(f);
  w.end_array();
  w.key("outcome").value(r.outcome);
  w.key("status").value(static_cast<std::int64_t>(r.status));
  w.key("client_ip").value(r.client_ip);
  w.key("user_agent").value(r.user_agent);
  w.key("request_id").value(r.request_id);
  w.key("query").value(r.query);
  w.key("ids").begin_array();
  for (auto id : r.ids) w.value(id);
  w.end_array();
  w.key("hash").value(a.hash);
  w.end_object();
}

const char* audit_csv_header() {
  return "seq,at,actor_type,user_id,role,actor_ref,resource,resource_id,action,fields,outcome,"
         "status,client_ip,user_agent,request_id,query,ids,hash\r\n";
}

void append_audit_csv(std::string& out, const audit_row& a) {
  const auto& r = a.record;
  auto field = [&](std::string_view v, bool last = false) {
    domain::append_csv_field(out, v);
    out += last ? "\r\n" : ",";
  };
  auto joined = [](const auto& xs) {
    std::string s;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      if (i) s += ' ';
      if constexpr (std::is_same_v<std::decay_t<decltype(xs[i])>, std::string>)
        s += xs[i];
      else
        s += std::to_string(xs[i]);
    }
    return s;
  };
  field(std::to_string(a.seq));
  field(domain::format_rfc3339(r.at));
  field(r.actor_type);
  field(r.user_id ? std::to_string(*r.user_id) : "");
  field(r.role);
  field(r.actor_ref);
  field(r.resource);
  field(r.resource_id ? std::to_string(*r.resource_id) : "");
  field(r.action);
  field(joined(r.fields));
  field(r.outcome);
  field(std::to_string(r.status));
  field(r.client_ip);
  field(r.user_agent);
  field(r.request_id);
  field(r.query);
  field(joined(r.ids));
  field(a.hash, true);
}

audit_verification verify_audit_chain(pg_conn& c, std::int64_t tenant) {
  audit_verification v;
  // One snapshot for the rows and the head: a writer committing meanwhile changes neither.
  pqxx::transaction<pqxx::repeatable_read, pqxx::read_only> tx(c.raw());
  auto t = std::to_string(tenant);
  std::string prev = domain::audit_genesis;
  std::int64_t expected = 1;
  auto pruned = tx.exec("SELECT seq, hash FROM audit_pruned WHERE tenant_id = " + t);
  if (!pruned.empty()) {
    v.pruned_through = pruned[0][0].as<std::int64_t>();
    expected = v.pruned_through + 1;
    prev = pruned[0][1].as<std::string>();
  }
  auto fail = [&](std::int64_t seq, std::string reason) {
    v.ok = false;
    v.broken_seq = seq;
    v.reason = std::move(reason);
    return v;
  };
  std::int64_t after = v.pruned_through;
  for (;;) {
    auto rows = read_rows(tx.exec(std::string("SELECT ") + record_columns + row_columns_suffix +
                                  " FROM audit_log WHERE tenant_id = " + t + " AND last_seq > " +
                                  std::to_string(after) + " AND seq > " + std::to_string(after) +
                                  " ORDER BY first_seq, seq LIMIT 5000"));
    if (rows.empty()) break;
    for (auto& r : rows) {
      if (r.seq != expected)
        return fail(expected, "row " + std::to_string(expected) + " is missing (the next row is " +
                                  std::to_string(r.seq) + ")");
      // The hash covers the row and the one before it: an edited row, or a row whose
      // predecessor was replaced, fails here.
      if (r.record.tenant_id != tenant || domain::audit_hash(prev, r.seq, r.record) != r.hash)
        return fail(r.seq, "its contents do not match its hash (the row, or the one before it, "
                           "was edited)");
      if (!v.rows) v.first_seq = r.seq;
      ++v.rows;
      v.last_seq = r.seq;
      prev = r.hash;
      ++expected;
    }
    after = rows.back().seq;
  }
  auto head = tx.exec("SELECT seq, hash FROM audit_heads WHERE tenant_id = " + t);
  if (!head.empty()) {
    auto head_seq = head[0][0].as<std::int64_t>();
    if (head_seq != expected - 1)
      return fail(expected, "rows " + std::to_string(expected) + " to " + std::to_string(head_seq) +
                                " are missing (the chain's head is row " +
                                std::to_string(head_seq) + ")");
    if (head_seq > 0 && head[0][1].as<std::string>() != prev)
      return fail(head_seq, "the last row's hash is not the one the chain's head recorded");
  }
  return v;
}

} // namespace crm::persistence
