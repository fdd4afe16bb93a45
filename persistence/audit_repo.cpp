#include "persistence/audit_repo.hpp"

#include "domain/clock.hpp"
#include "domain/csv.hpp"
#include "domain/json_parse.hpp"
#include "domain/json_writer.hpp"
#include "domain/secret_keys.hpp"
#include "persistence/log.hpp"
#include "persistence/pg_pool.hpp"
#include "persistence/tx_batch.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <pqxx/pqxx>

#include <algorithm>
#include <charconv>
#include <ctime>
#include <deque>
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
      "ids, sanitized) VALUES ";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    // Whoever made the row, its texts are made storable here: a change is never refused, nor
    // its audit row lost, for the bytes of a header or a body key.
    const domain::audit_record* row = &rows[i];
    std::optional<domain::audit_record> fixed;
    if (!domain::is_storable(*row)) {
      fixed = *row;
      domain::make_storable(*fixed);
      row = &*fixed;
    }
    const auto& r = *row;
    if (i) out += ',';
    out += '(';
    out += std::to_string(r.tenant_id) + ',' + quote(domain::format_rfc3339(r.at)) + ',' +
           quote(r.actor_type) + ',' + optional_number(r.user_id) + ',' + quote(r.role) + ',' +
           quote(r.actor_ref) + ',' + quote(r.resource) + ',' + optional_number(r.resource_id) +
           ',' + quote(r.action) + ',' + quote(fields_literal(r.fields)) + ',' + quote(r.outcome) +
           ',' + std::to_string(r.status) + ',' + quote(r.client_ip) + ',' + quote(r.user_agent) +
           ',' + quote(r.request_id) + ',' + quote(r.query) + ',' + quote(ids_literal(r.ids)) +
           (r.sanitized ? ",true" : ",false");
    out += ')';
  }
  out += ";\n";
}

// The record's columns as selected from audit_pending or the audit_log view (18 of them).
constexpr int record_column_count = 18;
constexpr const char* record_columns =
    "tenant_id, (extract(epoch from at) * 1000000)::bigint, actor_type, user_id, role, actor_ref, "
    "resource, resource_id, action, array_to_json(fields)::text, outcome, status, client_ip, "
    "user_agent, request_id, query, array_to_string(ids, ','), sanitized";

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
  auto fields = crm::domain::parse_json(row[at + 9].c_str());
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
  r.sanitized = row[at + 17].as<bool>();
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

// ---- signed heads -----------------------------------------------------------------------------

namespace {

constexpr std::string_view head_purpose = "audit.head";
constexpr std::string_view anchor_purpose = "audit.pruned";

std::string head_message(std::int64_t seq, std::string_view hash) {
  return std::to_string(seq) + ":" + std::string(hash);
}

} // namespace

std::string sign_audit_head(const domain::secret_keys& keys, std::int64_t tenant, std::int64_t seq,
                            std::string_view hash, bool anchor) {
  return keys.hash(anchor ? anchor_purpose : head_purpose, tenant, head_message(seq, hash));
}

bool audit_head_signed(const domain::secret_keys& keys, std::int64_t tenant, std::int64_t seq,
                       std::string_view hash, std::string_view signature, bool anchor) {
  // Only a keyed hash counts: verify() would take a plaintext copy of the message as "legacy".
  if (!domain::secret_keys::is_hashed(signature)) return false;
  return keys.verify(anchor ? anchor_purpose : head_purpose, tenant, head_message(seq, hash),
                     signature) != domain::secret_keys::match::no;
}

namespace {
// A head the writer may extend and verify may trust: signed by the keys, or the genesis head the
// writer inserts for a new chain (seq 0, logged_at '-infinity', `placeholder`), signed by nobody.
bool head_trusted(const domain::secret_keys& keys, std::int64_t tenant, std::int64_t seq,
                  const std::string& hash, const char* signature, bool placeholder) {
  if (seq == 0 && hash == domain::audit_genesis && placeholder) return true;
  return audit_head_signed(keys, tenant, seq, hash, signature);
}
} // namespace

void sign_audit_heads(pqxx::transaction_base& tx, const domain::secret_keys& keys) {
  for (const char* table : {"audit_heads", "audit_pruned"}) {
    bool anchor = std::string_view(table) == "audit_pruned";
    for (const auto& row : tx.exec(std::string("SELECT tenant_id, seq, hash FROM ") + table)) {
      auto tenant = row[0].as<std::int64_t>();
      auto sig = sign_audit_head(keys, tenant, row[1].as<std::int64_t>(), row[2].as<std::string>(),
                                 anchor);
      tx.exec(std::string("UPDATE ") + table + " SET signature = " + tx.quote(sig) +
              " WHERE tenant_id = " + std::to_string(tenant));
    }
  }
}

// ---- the writer ---------------------------------------------------------------------------

namespace {

// PostgreSQL refused the data itself (SQLSTATE class 22: bad encoding, a value out of range,
// text it cannot parse), not the connection or the server's state: retrying the same rows
// would fail the same way.
bool refused_for_content(const std::exception& e) {
  auto* sql = dynamic_cast<const pqxx::sql_error*>(&e);
  return sql && sql->sqlstate().substr(0, 2) == "22";
}

} // namespace

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
  domain::make_storable(r); // before the lock: the recording threads do this work
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
      auto take = take_limit_ ? std::min(take_limit_, opts_.max_rows_per_transaction)
                              : opts_.max_rows_per_transaction;
      if (buffer_.size() <= take) {
        rows.swap(spare);
        rows.swap(buffer_);
      } else {
        auto cut = buffer_.begin() + static_cast<std::ptrdiff_t>(take);
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
          maintain_audit_partitions(conn, opts_.retention_days, opts_.keys);
          last_maintenance = now;
        }
        // The pending rows are claimed in the same transaction; a writer that finds more than
        // one transaction's worth goes round again at once.
        bool more = false;
        do {
          auto tx_started = std::chrono::steady_clock::now();
          pqxx::work tx(conn.raw());
          std::uint64_t sanitized = 0;
          auto claimed = tx.exec(claim);
          more = claimed.size() >= opts_.max_rows_per_transaction;
          std::vector<std::pair<std::int64_t, domain::audit_record>> pending;
          pending.reserve(claimed.size());
          for (const auto& row : claimed)
            pending.emplace_back(row[0].as<std::int64_t>(), read_record(row, 1));
          std::sort(pending.begin(), pending.end(),
                    [](auto& a, auto& b) { return a.first < b.first; });
          if (strict_) {
            for (auto& [id, r] : pending) domain::quarantine(r);
            for (auto& r : rows) domain::quarantine(r);
          }
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
                               "greatest(logged_at, clock_timestamp())) * 1000000)::bigint, "
                               "signature, logged_at = '-infinity' FROM audit_heads WHERE "
                               "tenant_id = ANY(" +
                               tenants_q + "::bigint[]) ORDER BY tenant_id FOR UPDATE");
          std::string h_tenants = "{", h_seqs = "{", h_hashes = "{", h_logged = "{",
                      h_signatures = "{";
          std::deque<domain::audit_record> unverified; // the rows saying a head was not signed
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
              // A head this writer did not sign (rewound, replaced) is extended all the same, so
              // the trail goes on, but the chain itself records it first, for verify to report.
              if (opts_.keys &&
                  !head_trusted(*opts_.keys, tenant, seq, prev,
                                head[4].is_null() ? "" : head[4].c_str(), head[5].as<bool>())) {
                auto& r = unverified.emplace_back(domain::make_audit(
                    nullptr, tenant, "audit_log", std::nullopt, audit_head_unverified));
                r.outcome = "failure";
                r.query = "the chain's head (row " + std::to_string(seq) +
                          ") was not signed by carecrm's keys: rows may have been removed or "
                          "replaced before it";
                if (!list.empty()) r.at = std::min(r.at, list.front()->at);
                list.insert(list.begin(), &r);
                unverified_heads_.fetch_add(1, std::memory_order_relaxed);
                log_error("audit: tenant {}: {}", tenant, r.query);
              }
              // The tenant's events, chained one by one, stored as blocks of up to
              // max_events_per_block (a page of GET /audit-log expands at most one or two).
              for (auto* r : list) sanitized += r->sanitized ? 1 : 0;
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
                  domain::append_stored_audit_event(events, seq, r, hash);
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
              h_signatures +=
                  sep + std::string("\"") +
                  (opts_.keys ? sign_audit_head(*opts_.keys, tenant, seq, prev) : std::string()) +
                  "\"";
            }
            copy.complete();
          }
          tx.exec("UPDATE audit_heads h SET seq = v.seq, hash = v.hash, logged_at = "
                  "v.logged_at, signature = nullif(v.signature, '') FROM unnest(" +
                  tx.quote(h_tenants + "}") + "::bigint[], " + tx.quote(h_seqs + "}") +
                  "::bigint[], " + tx.quote(h_hashes + "}") + "::text[], " +
                  tx.quote(h_logged + "}") + "::timestamptz[], " + tx.quote(h_signatures + "}") +
                  "::text[]) AS v(tenant_id, seq, hash, logged_at, signature) "
                  "WHERE h.tenant_id = v.tenant_id");
          tx.commit();
          flush_latency_.observe(std::chrono::steady_clock::now() - tx_started);
          written_.fetch_add(rows.size() + pending.size(), std::memory_order_relaxed);
          sanitized_.fetch_add(sanitized, std::memory_order_relaxed);
          if (strict_) {
            quarantined_.fetch_add(rows.size() + pending.size(), std::memory_order_relaxed);
            log_warn("audit writer: {} row(s) stored escaped after PostgreSQL refused their "
                     "content (sanitized = true)",
                     rows.size() + pending.size());
            strict_ = false;
            take_limit_ = 0;
          } else if (take_limit_ && ++rounds_at_limit_ >= 16) {
            take_limit_ = 0; // what was refused went through meanwhile
          }
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
        if (refused_for_content(e)) {
          // The rows behind a refused one must not wait on it: halve the rounds until it is
          // alone, then store it escaped; refused even so, it is dropped (and counted).
          failures_in_row = 0; // no back-off: this is not Postgres being away
          rounds_at_limit_ = 0;
          if (strict_ && rows.size() <= 1) {
            unstorable_.fetch_add(rows.size(), std::memory_order_relaxed);
            log_error("audit writer: {} row(s) refused by PostgreSQL even escaped, dropped: {}",
                      rows.size(), e.what());
            rows.clear();
            strict_ = false;
            take_limit_ = 0;
          } else if (rows.size() > 1) {
            take_limit_ = rows.size() / 2;
          } else {
            strict_ = true;
            take_limit_ = 1;
          }
          // Whoever waits for a flush waits for the rounds that isolate the row, not a 503.
          std::lock_guard lock(mutex_);
          waiters_.insert(waiters_.begin(), std::make_move_iterator(waiters.begin()),
                          std::make_move_iterator(waiters.end()));
          waiters.clear();
        }
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

audit_partitions maintain_audit_partitions(pg_conn& c, double retention_days,
                                           const domain::secret_keys* keys) {
  audit_partitions out;
  pqxx::work tx(c.raw());
  // Under the application role of docs/operations.md "Database roles" the partitions are the
  // owner's business (`carecrm audit prune` as the owner): nothing to do here.
  if (!tx.exec1("SELECT pg_has_role(relowner, 'USAGE') FROM pg_class WHERE oid = "
                "'audit_blocks'::regclass")[0]
           .as<bool>())
    return out;
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
    // Each chain's new starting point is signed, and the prune is itself a row of the chain.
    auto anchors = tx.exec("SELECT DISTINCT ON (tenant_id) tenant_id, last_seq, last_hash FROM " +
                           name + " ORDER BY tenant_id, last_seq DESC");
    std::vector<domain::audit_record> pruned;
    for (const auto& a : anchors) {
      auto tenant = a[0].as<std::int64_t>();
      auto seq = a[1].as<std::int64_t>();
      auto hash = a[2].as<std::string>();
      auto sig = keys ? tx.quote(sign_audit_head(*keys, tenant, seq, hash, true)) : "NULL";
      tx.exec("INSERT INTO audit_pruned (tenant_id, seq, hash, signature) VALUES (" +
              std::to_string(tenant) + ", " + std::to_string(seq) + ", " + tx.quote(hash) + ", " +
              sig +
              ") ON CONFLICT (tenant_id) DO UPDATE SET seq = EXCLUDED.seq, hash = "
              "EXCLUDED.hash, signature = EXCLUDED.signature WHERE EXCLUDED.seq > "
              "audit_pruned.seq");
      auto& r = pruned.emplace_back(
          domain::make_audit(nullptr, tenant, "audit_log", std::nullopt, "prune"));
      r.query = "partition " + name + " dropped by retention (" +
                std::to_string(static_cast<std::int64_t>(retention_days)) +
                " days): the chain now starts after row " + std::to_string(seq);
    }
    insert_audit(tx, pruned);
    tx.exec("DROP TABLE " + name);
    out.dropped.push_back(name);
  }
  tx.commit();
  for (auto& n : out.dropped) log_info("audit: partition {} dropped (retention)", n);
  return out;
}

// ---- reading ----------------------------------------------------------------------------------

namespace {

constexpr const char* row_columns_suffix = ", seq, hash, readable";

std::vector<audit_row> read_rows(const pqxx::result& res) {
  std::vector<audit_row> out;
  out.reserve(res.size());
  for (const auto& row : res) {
    audit_row a;
    a.record = read_record(row, 0);
    a.seq = row[record_column_count].as<std::int64_t>();
    a.hash = row[record_column_count + 1].as<std::string>();
    a.readable = row[record_column_count + 2].as<bool>();
    if (!a.readable)
      log_error("audit: tenant {}: {}", a.record.tenant_id, a.record.query); // names the rows
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
  w.key("sanitized").value(r.sanitized);
  w.end_object();
}

const char* audit_csv_header() {
  return "seq,at,actor_type,user_id,role,actor_ref,resource,resource_id,action,fields,outcome,"
         "status,client_ip,user_agent,request_id,query,ids,hash,sanitized\r\n";
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
  field(a.hash);
  field(r.sanitized ? "true" : "false", true);
}

audit_verification verify_audit_chain(pg_conn& c, std::int64_t tenant,
                                      const domain::secret_keys& keys) {
  audit_verification v;
  // One snapshot for the rows and the head: a writer committing meanwhile changes neither.
  pqxx::transaction<pqxx::repeatable_read, pqxx::read_only> tx(c.raw());
  auto t = std::to_string(tenant);
  std::string prev = domain::audit_genesis;
  std::int64_t expected = 1;
  auto fail = [&](std::int64_t seq, std::string reason) {
    v.ok = false;
    v.broken_seq = seq;
    v.reason = std::move(reason);
    return v;
  };
  auto pruned = tx.exec("SELECT seq, hash, coalesce(signature, '') FROM audit_pruned WHERE "
                        "tenant_id = " +
                        t);
  if (!pruned.empty()) {
    v.pruned_through = pruned[0][0].as<std::int64_t>();
    expected = v.pruned_through + 1;
    prev = pruned[0][1].as<std::string>();
    // Retention's anchor says where the kept chain starts: moved forward by hand, it would
    // hide the removal of the rows before it.
    if (!audit_head_signed(keys, tenant, v.pruned_through, prev, pruned[0][2].c_str(), true))
      return fail(v.pruned_through + 1, "the retention anchor (row " +
                                            std::to_string(v.pruned_through) +
                                            ") is not signed by carecrm's keys");
  }
  std::int64_t after = v.pruned_through;
  for (;;) {
    auto rows = read_rows(tx.exec(std::string("SELECT ") + record_columns + row_columns_suffix +
                                  " FROM audit_log WHERE tenant_id = " + t + " AND last_seq > " +
                                  std::to_string(after) + " AND seq > " + std::to_string(after) +
                                  " ORDER BY first_seq, seq LIMIT 5000"));
    if (rows.empty()) break;
    for (auto& r : rows) {
      if (!r.readable)
        return fail(r.seq, r.record.query + " (the stored block is not the writer's JSON)");
      if (r.seq != expected)
        return fail(expected, "row " + std::to_string(expected) + " is missing (the next row is " +
                                  std::to_string(r.seq) + ")");
      // The hash covers the row and the one before it: an edited row, or a row whose
      // predecessor was replaced, fails here.
      if (r.record.tenant_id != tenant || domain::audit_hash(prev, r.seq, r.record) != r.hash)
        return fail(r.seq, "its contents do not match its hash (the row, or the one before it, "
                           "was edited)");
      if (r.record.resource == "audit_log" && r.record.action == audit_head_unverified)
        return fail(r.seq, r.record.query);
      if (!v.rows) v.first_seq = r.seq;
      ++v.rows;
      v.last_seq = r.seq;
      prev = r.hash;
      ++expected;
    }
    after = rows.back().seq;
  }
  auto head = tx.exec("SELECT seq, hash, coalesce(signature, ''), logged_at = '-infinity' FROM "
                      "audit_heads WHERE tenant_id = " +
                      t);
  if (head.empty()) {
    // A chain with rows always has a head; without one, nothing says where the chain ends.
    if (v.rows > 0 || v.pruned_through > 0)
      return fail(expected, "the chain has no head: its newest rows may have been removed");
    return v;
  }
  auto head_seq = head[0][0].as<std::int64_t>();
  auto head_hash = head[0][1].as<std::string>();
  if (!head_trusted(keys, tenant, head_seq, head_hash, head[0][2].c_str(), head[0][3].as<bool>()))
    return fail(head_seq, "the chain's head (row " + std::to_string(head_seq) +
                              ") is not signed by carecrm's keys: it was set by hand");
  if (head_seq != expected - 1)
    return fail(expected, "rows " + std::to_string(expected) + " to " + std::to_string(head_seq) +
                              " are missing (the chain's head is row " + std::to_string(head_seq) +
                              ")");
  if (head_seq > 0 && head_hash != prev)
    return fail(head_seq, "the last row's hash is not the one the chain's head recorded");
  return v;
}

} // namespace crm::persistence
