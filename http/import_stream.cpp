#include "http/import_stream.hpp"

#include "domain/audit.hpp"
#include "domain/csv.hpp"
#include "net/worker_pool.hpp"

#include <memory>
#include <utility>

namespace crm::http {

namespace {

// The items of a bulk answer, {"results":[<items>]}, for splicing the parts into one array.
std::string_view results_items(const std::string& body) {
  constexpr std::string_view open = "{\"results\":[", close = "]}";
  std::string_view v(body);
  if (v.size() < open.size() + close.size() || v.substr(0, open.size()) != open ||
      v.substr(v.size() - close.size()) != close)
    return {};
  return v.substr(open.size(), v.size() - open.size() - close.size());
}

struct import_run : std::enable_shared_from_this<import_run> {
  import_run(exchange_ptr e, csv_file f, import_part p)
      : ex(std::move(e)), file(std::move(f)), part(std::move(p)),
        reader(std::string_view(ex->req.body).substr(file.rows_at)), key(idempotency_of(ex)),
        who(domain::current_audit_context()) {}

  exchange_ptr ex; // keeps the body the reader reads
  csv_file file;
  import_part part;
  domain::csv_reader reader;
  actors::idempotency key;
  domain::audit_context_ptr who;
  std::size_t sent = 0; // rows handed to `part`
  std::string opening;  // the first part's results, not yet streamed
  bool closed = false;  // the array's "]}" streamed

  // The next part's rows (the file was checked whole: every row reads).
  std::vector<std::vector<std::string>> read_part() {
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> row;
    while (rows.size() < import_part_rows && reader.next(&row) == domain::csv_reader::result::row)
      rows.push_back(std::move(row));
    sent += rows.size();
    return rows;
  }

  // A part's own key: the first part's is the client's, so that a file of one part is stored
  // as a bulk create's; a later part's adds its number after a space (a client's key has none).
  actors::idempotency key_of(std::size_t index) const {
    auto k = key;
    if (!k.key.empty() && index > 0) k.key += " " + std::to_string(index);
    return k;
  }

  void start() {
    auto rows = read_part();
    part(file.header, std::move(rows), 0, key_of(0),
         actors::callback<actors::stored_response>(
             [self = shared_from_this()](domain::outcome<actors::stored_response> r) {
               self->opened(std::move(r));
             }));
  }

  void opened(domain::outcome<actors::stored_response> r) {
    if (!r || sent >= file.rows) return reply_stored(ex, std::move(r), "");
    opening = "{\"results\":[" + std::string(results_items(r->body));
    response res;
    res.stream = [self = shared_from_this()](chunk_sink sink) { self->pull(std::move(sink)); };
    ex->respond(std::move(res));
  }

  void pull(chunk_sink sink) {
    if (!opening.empty()) return sink(std::exchange(opening, {}));
    if (sent < file.rows) {
      domain::audit_scope scope(who); // the parts are audited as the request's
      auto first = static_cast<std::int64_t>(sent);
      auto rows = read_part();
      return part(file.header, std::move(rows), first,
                  key_of(static_cast<std::size_t>(first) / import_part_rows),
                  actors::callback<actors::stored_response>(
                      [sink](domain::outcome<actors::stored_response> r) {
                        if (!r) return sink(stream_end::broken);
                        sink("," + std::string(results_items(r->body)));
                      }));
    }
    if (!closed) {
      closed = true;
      return sink(std::string("]}"));
    }
    sink(stream_end::complete);
  }
};

} // namespace

void import_csv(services& s, const exchange_ptr& ex, std::function<bool(std::string_view)> known,
                std::string_view required, import_part part) {
  const bool queued = s.hashing.try_submit(
      [ex, known = std::move(known), required = std::string(required), part = std::move(part),
       who = domain::current_audit_context()]() mutable {
        domain::audit_scope scope(who);
        auto file = csv_body(ex, import_rows_max, known, required);
        if (!file) return;
        std::make_shared<import_run>(ex, std::move(*file), std::move(part))->start();
      });
  if (!queued)
    ex->fail(domain::failure::of(domain::errc::service_unavailable,
                                 "too many imports being read at once; retry"));
}

} // namespace crm::http
