// The audit path (issue 31): whatever bytes a request carries in its headers, path, query and
// body keys, the row made of them is storable text, its stored event is JSON that PostgreSQL's
// jsonb takes (no \u0000, valid UTF-8), every fact reads back from that JSON as it is hashed,
// and the hash covers the sanitized flag. So no request can stop the writer (COPY refusing the
// row) or make the log unreadable (the audit_log view's cast failing).
//
// The input is cut at 0x1f bytes into: user agent, request id, client address, path, query,
// then a request body whose top-level keys are taken as the field names a change records (as
// http/audit.cpp does), or, when it is not a JSON object, more field names cut at 0x1e.
#include "domain/audit.hpp"
#include "domain/json_parse.hpp"
#include "domain/validation.hpp"

#include <boost/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace {

std::vector<std::string_view> cut(std::string_view in, char sep, std::size_t max) {
  std::vector<std::string_view> out;
  while (out.size() + 1 < max) {
    auto at = in.find(sep);
    if (at == std::string_view::npos) break;
    out.push_back(in.substr(0, at));
    in.remove_prefix(at + 1);
  }
  out.push_back(in);
  return out;
}

void check(bool ok) {
  if (!ok) __builtin_trap();
}

bool holds_nul(const boost::json::value& v) {
  if (auto* s = v.if_string()) return std::string_view(*s).find('\0') != std::string_view::npos;
  if (auto* a = v.if_array())
    for (auto& x : *a)
      if (holds_nul(x)) return true;
  return false;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace crm::domain;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto parts = cut(in, '\x1f', 6);
  parts.resize(6);
  audit_record r;
  r.tenant_id = 7;
  r.at = 1'780'000'000'000'000;
  r.actor_type = "anonymous";
  r.resource = "contact";
  r.action = "update";
  r.outcome = "denied";
  r.status = 403;
  r.user_agent = parts[0];
  r.request_id = parts[1];
  r.client_ip = parts[2];
  r.actor_ref = "PATCH " + std::string(parts[3]);
  r.query = parts[4];
  boost::json::error_code ec;
  auto body = boost::json::parse(parts[5], ec); // Boost's parser, as any JSON a body may hold
  if (!ec && body.is_object())
    for (auto& kv : body.as_object()) r.fields.emplace_back(kv.key());
  else
    for (auto f : cut(parts[5], '\x1e', 200)) r.fields.emplace_back(f);
  r.ids = {1, 2};

  make_storable(r);
  for (const auto* s : {&r.user_agent, &r.request_id, &r.client_ip, &r.actor_ref, &r.query})
    check(is_text(*s) && s->find('\0') == std::string::npos);
  for (auto& f : r.fields) check(is_text(f));
  check(r.fields.size() <= audit_fields_max);

  auto hash = audit_hash(audit_genesis, 1, r);
  std::string event;
  append_stored_audit_event(event, 1, r, hash);
  // jsonb refuses text that is not UTF-8, and a string holding U+0000 (written \u0000): the
  // stored event is UTF-8 text, and no string of it holds a NUL once decoded.
  check(is_text(event));
  auto v = parse_json(event, ec);
  check(!ec && v.is_array());
  check(!holds_nul(v));
  auto& a = v.as_array();
  check(a.size() == (r.sanitized ? 19u : 18u));
  auto text_at = [&](std::size_t i) { return std::string(a[i].as_string()); };
  check(text_at(5) == r.actor_ref && text_at(12) == r.client_ip && text_at(13) == r.user_agent &&
        text_at(14) == r.request_id && text_at(15) == r.query && text_at(17) == hash);
  auto& fields = a[9].as_array();
  check(fields.size() == r.fields.size());
  for (std::size_t i = 0; i < fields.size(); ++i)
    check(std::string(fields[i].as_string()) == r.fields[i]);
  // What reads back hashes as it was hashed: the chain verifies.
  audit_record back = r;
  back.user_agent = text_at(13);
  back.sanitized = a.size() == 19 && a[18].as_bool();
  check(audit_hash(audit_genesis, 1, back) == hash);
  return 0;
}
