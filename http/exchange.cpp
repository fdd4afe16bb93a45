#include "http/exchange.hpp"

#include "http/audit.hpp"
#include "http/error_map.hpp"
#include "http/json.hpp"

namespace crm::http {

exchange::~exchange() {
  // A handler that dropped its exchange without answering is a bug; the client still gets
  // an answer rather than a hung connection.
  if (!done_.exchange(true) && sink_)
    sink_(error_response(domain::errc::internal, "the request was not answered"));
}

std::string_view exchange::param(std::string_view name) const {
  for (auto& [k, v] : params)
    if (k == name) return v;
  return {};
}

void exchange::respond(response r) {
  if (done_.exchange(true)) return;
  if (audit && matched) audit->on_response(*this, r);
  // Read here, on the thread that answers (after the handler set it, as sign-in does on the
  // hashing thread), for the session's access line.
  r.tenant_id = who.tenant_id;
  r.user_id = who.user_id;
  auto sink = std::move(sink_);
  sink(std::move(r));
}

void exchange::json(int status, std::string body) {
  response r;
  r.status = status;
  r.body = std::move(body);
  respond(std::move(r));
}

void exchange::fail(const domain::failure& f) {
  respond(error_response(f));
}

void exchange::no_content() {
  response r;
  r.status = 204;
  r.content_type.clear();
  respond(std::move(r));
}

response error_response(const domain::failure& f) {
  auto info = describe(f.code);
  response r;
  r.status = info.status;
  if (f.code == domain::errc::validation) {
    r.body = encode_issues(f.issues);
    return r;
  }
  r.body = encode_error(f.detail, info.code);
  if (!f.extra.empty() && !r.body.empty() && r.body.back() == '}') {
    r.body.pop_back();
    r.body += f.extra;
    r.body += '}';
  }
  if (f.code == domain::errc::invalid_credentials || f.code == domain::errc::second_factor_required)
    r.headers.emplace_back("WWW-Authenticate", "Bearer");
  if (f.code == domain::errc::rate_limited && f.retry_after > 0)
    r.headers.emplace_back("Retry-After", std::to_string(f.retry_after));
  return r;
}

response error_response(domain::errc code, std::string_view detail) {
  return error_response(domain::failure::of(code, std::string(detail)));
}

} // namespace crm::http
