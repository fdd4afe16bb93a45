// The audit trail for the tenant's admins (contract §9, docs/compliance.md "Audit trail"):
// GET /audit-log (filters, newest first, cursor paging) and GET /audit-log/export (every
// matching row, oldest first, streamed as NDJSON or CSV). Both first have the writer store what
// it buffered, so a read made a moment ago is in the answer.
#include "http/api.hpp"

#include "domain/clock.hpp"
#include "http/audit.hpp"
#include "http/json.hpp"
#include "http/openapi_schema.hpp"
#include "persistence/audit_repo.hpp"
#include "persistence/pg_pool.hpp"

#include <charconv>

namespace crm::http {
namespace {

using domain::issue;

constexpr std::size_t export_chunk = 1000;
constexpr std::size_t word_max = 64; // resource, action, outcome filters
constexpr int limit_max = 200;
constexpr std::array<std::string_view, 2> export_formats{"ndjson", "csv"};

std::optional<persistence::audit_filter> read_filter(const exchange_ptr& ex, bool exporting,
                                                     std::vector<issue>& issues) {
  persistence::audit_filter f;
  f.tenant_id = ex->who.tenant_id;
  auto at = [](std::string_view name) {
    return std::vector<domain::loc_part>{std::string("query"), std::string(name)};
  };
  auto number = [&](std::string_view name, const std::string& v) -> std::optional<std::int64_t> {
    std::int64_t n = 0;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc() || end != v.data() + v.size() || n < 1) {
      issues.push_back({at(name), "Input should be a positive integer", "int_parsing"});
      return std::nullopt;
    }
    return n;
  };
  auto word = [&](std::string_view name, const std::string& v) -> std::optional<std::string> {
    if (v.empty() || v.size() > word_max) {
      issues.push_back({at(name), "1 to 64 characters", "string_too_long"});
      return std::nullopt;
    }
    return v;
  };
  auto time = [&](std::string_view name, const std::string& v) -> std::optional<std::int64_t> {
    auto t = domain::parse_rfc3339(v);
    if (!t) issues.push_back({at(name), "Input should be a valid datetime", "datetime_parsing"});
    return t;
  };
  for (auto& [name, v] : ex->req.query) {
    if (name == "user_id")
      f.user_id = number(name, v);
    else if (name == "resource")
      f.resource = word(name, v);
    else if (name == "resource_id")
      f.resource_id = number(name, v);
    else if (name == "action")
      f.action = word(name, v);
    else if (name == "outcome")
      f.outcome = word(name, v);
    else if (name == "from")
      f.from = time(name, v);
    else if (name == "until")
      f.until = time(name, v);
    else if (name == "cursor" && !exporting)
      f.before_seq = number(name, v);
    else if (name == "limit" && !exporting) {
      auto n = number(name, v);
      if (n && *n > limit_max)
        issues.push_back(
            {at(name), "Input should be less than or equal to 200", "less_than_equal"});
      else if (n)
        f.limit = static_cast<int>(*n);
    } else if (name == "format" && exporting) {
      if (std::find(export_formats.begin(), export_formats.end(), v) == export_formats.end())
        issues.push_back({at(name), "Input should be 'ndjson' or 'csv'", "enum"});
    } else {
      // A misspelt filter must not silently widen what an auditor is shown.
      issues.push_back({at(name), "unknown parameter", "extra_forbidden"});
    }
  }
  if (!issues.empty()) return std::nullopt;
  return f;
}

// Runs `then` once the writer stored every row recorded so far (503 when it could not).
void after_flush(services& s, const exchange_ptr& ex, std::function<void()> then) {
  s.audit.writer().flush([ex, then = std::move(then)](bool ok) {
    if (!ok)
      return ex->fail(domain::failure::of(domain::errc::service_unavailable,
                                          "the audit trail cannot be read now; retry"));
    then();
  });
}

void list(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  auto f = read_filter(ex, false, issues);
  if (!f) return ex->fail(domain::failure::invalid(std::move(issues)));
  after_flush(s, ex, [&s, ex, f = *f] {
    s.pool.run<std::string>(
        [f](persistence::pg_conn& c) {
          auto query = f;
          query.limit = f.limit + 1;
          auto rows = persistence::query_audit(c, query);
          bool more = rows.size() > static_cast<std::size_t>(f.limit);
          if (more) rows.pop_back();
          std::string out = "{\"items\":[";
          for (std::size_t i = 0; i < rows.size(); ++i) {
            if (i) out += ',';
            persistence::append_audit_json(out, rows[i]);
          }
          out += "],\"next_cursor\":";
          out += more ? "\"" + std::to_string(rows.back().seq) + "\"" : "null";
          out += '}';
          return out;
        },
        [ex](domain::outcome<std::string> r) {
          if (!r) return ex->fail(r.error());
          ex->json(200, std::move(*r));
        });
  });
}

void export_rows(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  auto f = read_filter(ex, true, issues);
  if (!f) return ex->fail(domain::failure::invalid(std::move(issues)));
  bool csv = ex->req.query_value("format") == std::optional<std::string_view>("csv");
  after_flush(s, ex, [&s, ex, f = *f, csv] {
    struct cursor {
      persistence::audit_filter filter;
      bool header_sent = false;
      bool done = false;
    };
    auto cur = std::make_shared<cursor>();
    cur->filter = f;
    cur->filter.oldest_first = true;
    cur->filter.after_seq = 0;
    cur->filter.limit = static_cast<int>(export_chunk);
    response res;
    res.content_type = csv ? "text/csv; charset=utf-8" : "application/x-ndjson";
    res.headers.emplace_back("Content-Disposition",
                             std::string("attachment; filename=\"audit-log.") +
                                 (csv ? "csv" : "ndjson") + "\"");
    res.headers.emplace_back("Cache-Control", "no-store");
    res.stream = [&s, cur, csv](chunk_sink sink) {
      if (csv && !cur->header_sent) {
        cur->header_sent = true;
        return sink(std::string(persistence::audit_csv_header()));
      }
      if (cur->done) return sink(stream_end::complete);
      auto filter = cur->filter;
      s.pool.run<std::vector<persistence::audit_row>>(
          [filter](persistence::pg_conn& c) { return persistence::query_audit(c, filter); },
          [cur, sink, csv](domain::outcome<std::vector<persistence::audit_row>> rows) {
            // The status is already sent: a failure breaks the body.
            if (!rows) return sink(stream_end::broken);
            if (rows->empty()) return sink(stream_end::complete);
            std::string out;
            for (auto& r : *rows) {
              if (csv) {
                persistence::append_audit_csv(out, r);
              } else {
                persistence::append_audit_json(out, r);
                out += '\n';
              }
            }
            cur->filter.after_seq = rows->back().seq;
            if (rows->size() < export_chunk) cur->done = true;
            sink(std::move(out));
          });
    };
    ex->respond(std::move(res));
  });
}

void define_audit_schemas(router& r) {
  using namespace schema;
  auto text_ = text({});
  define(
      r, "AuditEvent",
      object({{"seq", id()},
              {"at", timestamp()},
              {"actor_type", text_},
              {"user_id", nullable(id())},
              {"role", text_},
              {"actor_ref", text_},
              {"resource", text_},
              {"resource_id", nullable(integer())},
              {"action", text_},
              {"fields", array_of(text_)},
              {"outcome", one_of(std::array<std::string_view, 3>{"success", "failure", "denied"})},
              {"status", integer()},
              {"client_ip", text_},
              {"user_agent", text_},
              {"request_id", text_},
              {"query", text_},
              {"ids", array_of(integer())},
              {"hash", text_matching("^[0-9a-f]{64}$")},
              {"sanitized", boolean()}}));
  define(r, "AuditEvents",
         object({{"items", array_of(ref("AuditEvent"))},
                 {"next_cursor", nullable(text_matching("^[0-9]+$"))}}));
}

std::vector<query_param> audit_filters() {
  using namespace schema;
  auto word = text({.min = 1, .max = word_max});
  return {query("user_id", id(), "who acted"),
          query("resource", word, "contact, company, deal, conversation, consent, user, ..."),
          query("resource_id", id(), "the record"),
          query("action", word, "read, list, create, update, delete, export, login, ..."),
          query("outcome", word, "success, failure or denied"),
          query("from", timestamp(), "at or after (RFC 3339)"),
          query("until", timestamp(), "before (RFC 3339)")};
}

} // namespace

void add_audit_routes(router& r, services& s) {
  using domain::permission;
  using schema::query;
  define_audit_schemas(r);
  r.add({verb::get, "/api/v1/audit-log", access::bearer, permission::administer, bind(s, list),
         "The audit trail: who read or changed which record, when, from where (newest first)",
         "audit"},
        route_doc("", "AuditEvents")
            .with_query(audit_filters())
            .with_query({query("cursor", schema::text_matching("^[0-9]+$"),
                               "next_cursor of the page before"),
                         query("limit", schema::integer(1, limit_max), "events a page")}));
  r.add({verb::get, "/api/v1/audit-log/export", access::bearer, permission::administer,
         bind(s, export_rows), "The matching audit rows, oldest first, as NDJSON or CSV (streamed)",
         "audit"},
        route_doc()
            .with_media("", "application/x-ndjson")
            .with_query(audit_filters())
            .with_query({query("format", schema::one_of(export_formats), "ndjson by default")}));
}

} // namespace crm::http
