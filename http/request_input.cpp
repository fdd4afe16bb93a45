#include "http/request_input.hpp"

#include "domain/crypto.hpp"
#include "domain/csv.hpp"
#include "domain/json_nul.hpp"
#include "domain/validation.hpp"

#include "domain/json_parse.hpp"
#include "http/json.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

namespace json = boost::json;

namespace crm::http {

std::optional<std::int64_t> id_param(const exchange_ptr& ex, std::string_view name) {
  std::vector<domain::issue> issues;
  auto id = path_id(ex->param(name), name, issues);
  if (!id) ex->fail(domain::failure::invalid(std::move(issues)));
  return id;
}

void with_contact(actors::runtime& rt, const exchange_ptr& ex, std::int64_t id,
                  std::function<void()> then) {
  // `then` runs on another thread: it gets the request's audit context back (who and where),
  // so the changes it starts are audited as the request's.
  actors::get_contact(rt, ex->who.tenant_id, id,
                      actors::callback<std::string>(
                          [ex, then = std::move(then),
                           who = domain::current_audit_context()](domain::outcome<std::string> r) {
                            if (!r) return ex->fail(r.error());
                            domain::audit_scope scope(who);
                            then();
                          }));
}

std::optional<csv_file> csv_body(const exchange_ptr& ex, std::size_t rows_max,
                                 const std::function<bool(std::string_view)>& known,
                                 std::string_view required) {
  using domain::failure;
  auto ct = ex->req.header("content-type");
  if (!ct || domain::ascii_lower(domain::trim(ct->substr(0, ct->find(';')))) != "text/csv") {
    ex->fail(failure::invalid(
        {{{"header", "content-type"}, "Content-Type must be text/csv", "value_error"}}));
    return std::nullopt;
  }
  const auto& text = ex->req.body;
  auto line_of = [&](std::size_t at) {
    return std::to_string(1 + std::count(text.begin(), text.begin() + static_cast<long>(at), '\n'));
  };
  // PostgreSQL text holds neither a NUL byte nor anything but UTF-8.
  if (auto at = domain::first_non_text(text); at != std::string::npos) {
    ex->fail(failure::invalid(
        {{{"body"},
          "the CSV must be UTF-8 text without NUL characters (line " + line_of(at) + ")",
          "value_error"}}));
    return std::nullopt;
  }
  domain::csv_reader reader(text);
  csv_file out;
  using result = domain::csv_reader::result;
  auto first = reader.next(&out.header);
  out.rows_at = reader.offset();
  auto r = first;
  // Every row checked (not stored) before any is used: a file that is malformed at its end is
  // refused whole, not imported up to the fault.
  while (r == result::row && (r = reader.next(nullptr)) == result::row) ++out.rows;
  if (r == result::malformed) {
    ex->fail(failure::invalid(
        {{{"body"},
          "malformed CSV (unbalanced quotes, line " + line_of(reader.offset()) + ")",
          "value_error"}}));
    return std::nullopt;
  }
  if (first != result::row) {
    ex->fail(failure::invalid({{{"body"}, "the CSV has no header row", "value_error"}}));
    return std::nullopt;
  }
  std::vector<domain::issue> issues;
  for (auto& h : out.header) {
    h = std::string(domain::trim(h));
    if (!known(h))
      issues.push_back(
          {{"body", "header", h}, "Extra inputs are not permitted", "extra_forbidden"});
  }
  if (std::find(out.header.begin(), out.header.end(), required) == out.header.end())
    issues.push_back({{"body", "header", std::string(required)}, "Field required", "missing"});
  if (out.rows > rows_max)
    issues.push_back({{"body", "rows"},
                      "at most " + std::to_string(rows_max) + " rows per import",
                      "value_error"});
  if (!issues.empty()) {
    ex->fail(failure::invalid(std::move(issues)));
    return std::nullopt;
  }
  return out;
}

std::optional<boost::json::object> object_body(const exchange_ptr& ex) {
  boost::json::error_code ec;
  auto v = crm::domain::parse_json(ex->req.body, ec);
  if (ec) {
    ex->fail(domain::failure::invalid({{{"body"}, "JSON decode error", "json_invalid"}}));
    return std::nullopt;
  }
  if (!v.is_object()) {
    ex->fail(domain::failure::invalid(
        {{{"body"}, "Input should be a valid dictionary", "json_invalid"}}));
    return std::nullopt;
  }
  if (auto at = domain::nul_location(ex->req.body, v)) {
    ex->fail(domain::failure::invalid({domain::nul_issue(std::move(*at))}));
    return std::nullopt;
  }
  return std::move(v.as_object());
}

actors::callback<domain::done> no_content_reply(const exchange_ptr& ex) {
  return actors::callback<domain::done>([ex](domain::outcome<domain::done> r) {
    if (!r) return ex->fail(r.error());
    ex->no_content();
  });
}

actors::callback<std::string> json_reply(const exchange_ptr& ex) {
  return actors::callback<std::string>([ex](domain::outcome<std::string> r) {
    if (!r) return ex->fail(r.error());
    ex->json(200, std::move(*r));
  });
}

actors::callback<std::string> created_reply(const exchange_ptr& ex, std::string location_prefix) {
  return actors::callback<std::string>(
      [ex, prefix = std::move(location_prefix)](domain::outcome<std::string> r) {
        if (!r) return ex->fail(r.error());
        response res;
        res.status = 201;
        boost::json::error_code ec;
        auto v = crm::domain::parse_json(*r, ec);
        if (!ec && v.is_object())
          if (auto id = v.as_object().if_contains("id"))
            res.headers.emplace_back("Location", prefix + boost::json::serialize(*id));
        res.body = std::move(*r);
        ex->respond(std::move(res));
      });
}

actors::idempotency idempotency_of(const exchange_ptr& ex) {
  actors::idempotency key;
  if (auto k = ex->req.header("idempotency-key"); k && !k->empty()) { // checked by the server
    key.key = std::string(*k);
    key.request_hash = domain::hex_encode(domain::as_bytes(
        domain::hmac_sha256("idempotency", std::string(to_string(ex->req.method)) + " " +
                                               ex->req.path + "\n" + ex->req.body)));
  }
  return key;
}

void reply_stored(const exchange_ptr& ex, domain::outcome<actors::stored_response> r,
                  const char* location_prefix) {
  if (!r) return ex->fail(r.error());
  response res;
  res.status = r->status;
  res.body = std::move(r->body);
  if (r->status == 201) {
    // The id is in the body for replays too.
    std::int64_t id = r->id.value_or(0);
    if (!r->id) {
      json::error_code ec;
      auto v = crm::domain::parse_json(res.body, ec);
      if (!ec && v.is_object() && v.as_object().contains("id"))
        id = v.at("id").to_number<std::int64_t>();
    }
    res.headers.emplace_back("Location", location_prefix + std::to_string(id));
  }
  ex->respond(std::move(res));
}

} // namespace crm::http
