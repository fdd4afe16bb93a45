#include "domain/audit.hpp"

#include "domain/clock.hpp"
#include "domain/contact.hpp"
#include "domain/crypto.hpp"
#include "domain/json_parse.hpp"
#include "domain/json_writer.hpp"
#include "domain/validation.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <openssl/evp.h>

#include <array>
#include <charconv>
#include <stdexcept>

namespace crm::domain {

std::string_view to_string(audit_actor a) {
  switch (a) {
  case audit_actor::user: return "user";
  case audit_actor::webhook: return "webhook";
  case audit_actor::workflow: return "workflow";
  case audit_actor::agent: return "agent";
  case audit_actor::system: return "system";
  case audit_actor::anonymous: return "anonymous";
  case audit_actor::api_key: return "api_key";
  }
  return "system";
}

namespace {
thread_local audit_context_ptr current_context;
} // namespace

const audit_context_ptr& current_audit_context() {
  return current_context;
}

audit_scope::audit_scope(audit_context_ptr ctx) : previous_(std::move(current_context)) {
  current_context = std::move(ctx);
}

audit_scope::~audit_scope() {
  current_context = std::move(previous_);
}

audit_record make_audit(const audit_context* who, std::int64_t tenant, std::string_view resource,
                        std::optional<std::int64_t> id, std::string_view action) {
  audit_record r;
  r.tenant_id = tenant;
  r.at = now_micros();
  r.resource = resource;
  r.resource_id = id;
  r.action = action;
  r.outcome = "success";
  if (!who) {
    r.actor_type = to_string(audit_actor::system);
    return r;
  }
  r.actor_type = to_string(who->actor);
  r.user_id = who->user_id;
  r.role = who->role;
  r.actor_ref = who->actor_ref;
  r.client_ip = who->client_ip;
  r.user_agent = who->user_agent;
  r.request_id = who->request_id;
  return r;
}

std::string_view audit_outcome(int status) {
  if (status == 401 || status == 403) return "denied";
  if (status >= 200 && status < 400) return "success";
  return "failure";
}

const std::string audit_genesis(64, '0');

namespace {

// See make_storable. Returns whether a byte was replaced.
bool make_text(std::string& s, std::size_t max) {
  constexpr std::string_view replacement = "\xEF\xBF\xBD"; // U+FFFD
  bool replaced = false;
  if (!is_text(s)) {
    std::string out;
    out.reserve(s.size() + 8);
    for (std::size_t i = 0; i < s.size();) {
      auto n = s[i] == '\0' ? 0 : utf8_sequence(s, i);
      if (n == 0) {
        out += replacement;
        replaced = true;
        ++i;
      } else {
        out.append(s, i, n);
        i += n;
      }
    }
    s = std::move(out);
  }
  if (s.size() > max) {
    auto cut = max;
    // Back to the start of the character the cut falls in (continuation bytes are 10xxxxxx).
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
    s.resize(cut);
  }
  return replaced;
}

void escape_text(std::string& s) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  s = std::move(out);
}

template <class Record, class F>
void each_text(Record& r, F f) {
  f(r.actor_type, audit_text_max);
  f(r.role, audit_text_max);
  f(r.actor_ref, audit_text_max);
  f(r.resource, audit_text_max);
  f(r.action, audit_text_max);
  for (auto& name : r.fields) f(name, audit_field_name_max);
  f(r.outcome, audit_text_max);
  f(r.client_ip, audit_text_max);
  f(r.user_agent, audit_text_max);
  f(r.request_id, audit_text_max);
  f(r.query, audit_query_max);
}

} // namespace

bool is_storable(const audit_record& r) {
  if (r.fields.size() > audit_fields_max) return false;
  bool ok = true;
  each_text(
      r, [&](const std::string& s, std::size_t max) { ok = ok && s.size() <= max && is_text(s); });
  return ok;
}

void make_storable(audit_record& r) {
  if (r.fields.size() > audit_fields_max) r.fields.resize(audit_fields_max);
  bool replaced = false;
  each_text(r, [&](std::string& s, std::size_t max) { replaced |= make_text(s, max); });
  if (replaced) r.sanitized = true;
}

void quarantine(audit_record& r) {
  make_storable(r);
  each_text(r, [](std::string& s, std::size_t) { escape_text(s); });
  r.sanitized = true;
}

namespace {

// Length-prefixed, so no two different rows hash the same text ("ab","c" vs "a","bc").
class hash_text {
public:
  void add(std::string_view v) {
    out_ += std::to_string(v.size());
    out_ += ':';
    out_ += v;
    out_ += ',';
  }
  void add(std::int64_t v) { add(std::to_string(v)); }
  void add(const std::optional<std::int64_t>& v) { add(v ? std::to_string(*v) : std::string("-")); }
  const std::string& text() const { return out_; }

private:
  std::string out_;
};

} // namespace

std::string audit_hash(std::string_view previous_hash, std::int64_t seq, const audit_record& r) {
  hash_text t;
  t.add(previous_hash);
  t.add(seq);
  t.add(r.tenant_id);
  t.add(r.at);
  t.add(r.actor_type);
  t.add(r.user_id);
  t.add(r.role);
  t.add(r.actor_ref);
  t.add(r.resource);
  t.add(r.resource_id);
  t.add(r.action);
  t.add(static_cast<std::int64_t>(r.fields.size()));
  for (auto& f : r.fields) t.add(f);
  t.add(r.outcome);
  t.add(static_cast<std::int64_t>(r.status));
  t.add(r.client_ip);
  t.add(r.user_agent);
  t.add(r.request_id);
  t.add(r.query);
  t.add(static_cast<std::int64_t>(r.ids.size()));
  for (auto id : r.ids) t.add(id);
  // Added only when set, so the hashes of rows stored before the flag existed still hold.
  if (r.sanitized) t.add(std::string_view("sanitized"));
  // OpenSSL's SHA-256 (it uses the CPU's SHA extensions where there are some: a tenant's
  // chain is hashed by one thread, event after event), one context per thread.
  struct digest_context {
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    ~digest_context() { EVP_MD_CTX_free(ctx); }
  };
  thread_local digest_context d;
  std::array<unsigned char, 32> digest{};
  unsigned int size = 0;
  if (!d.ctx || EVP_DigestInit_ex(d.ctx, EVP_sha256(), nullptr) != 1 ||
      EVP_DigestUpdate(d.ctx, t.text().data(), t.text().size()) != 1 ||
      EVP_DigestFinal_ex(d.ctx, digest.data(), &size) != 1 || size != digest.size())
    throw std::runtime_error("SHA-256 failed");
  return hex_encode({reinterpret_cast<const char*>(digest.data()), digest.size()});
}

// One element of audit_blocks.events: the event as a JSON array, its facts by position
// (migration 013 names them: the view audit_log), about half the bytes of the object GET
// /audit-log shows, which is what Postgres parses, compresses and logs.
void append_stored_audit_event(std::string& out, std::int64_t seq, const audit_record& r,
                               std::string_view hash) {
  json_writer w(out);
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
  if (r.sanitized) w.value(true); // position 18, absent (false) on nearly every row
  w.end_array();
}

std::vector<std::string> changed_custom_fields(std::string_view before, std::string_view after) {
  std::vector<std::string> out;
  if (before == after) return out;
  boost::json::error_code ec1, ec2;
  auto b = crm::domain::parse_json(before, ec1);
  auto a = crm::domain::parse_json(after, ec2);
  if (ec1 || ec2 || !b.is_object() || !a.is_object()) {
    out.emplace_back("custom_fields");
    return out;
  }
  for (auto& kv : a.as_object()) {
    auto* old = b.as_object().if_contains(kv.key());
    if (!old || *old != kv.value()) out.push_back("custom_fields." + std::string(kv.key()));
  }
  for (auto& kv : b.as_object())
    if (!a.as_object().contains(kv.key())) out.push_back("custom_fields." + std::string(kv.key()));
  return out;
}

std::vector<std::string> changed_fields(const contact& before, const contact& after) {
  std::vector<std::string> out;
  if (before.first_name != after.first_name) out.emplace_back("first_name");
  if (before.last_name != after.last_name) out.emplace_back("last_name");
  if (before.email != after.email) out.emplace_back("email");
  if (before.phone != after.phone) out.emplace_back("phone");
  if (before.company_id != after.company_id) out.emplace_back("company_id");
  if (before.owner_id != after.owner_id) out.emplace_back("owner_id");
  if (before.status != after.status) out.emplace_back("status");
  if (before.source != after.source) out.emplace_back("source");
  if (before.tags != after.tags) out.emplace_back("tags");
  for (auto& f : changed_custom_fields(before.custom_fields, after.custom_fields))
    out.push_back(std::move(f));
  return out;
}

std::vector<std::string> changed_fields(const company& before, const company& after) {
  std::vector<std::string> out;
  if (before.name != after.name) out.emplace_back("name");
  if (before.domain != after.domain) out.emplace_back("domain");
  if (before.phone != after.phone) out.emplace_back("phone");
  if (before.industry != after.industry) out.emplace_back("industry");
  if (before.address != after.address) out.emplace_back("address");
  for (auto& f : changed_custom_fields(before.custom_fields, after.custom_fields))
    out.push_back(std::move(f));
  return out;
}

std::vector<std::string> contact_field_names(const contact& c) {
  std::vector<std::string> out{"first_name"};
  if (c.last_name) out.emplace_back("last_name");
  if (c.email) out.emplace_back("email");
  if (c.phone) out.emplace_back("phone");
  if (c.company_id) out.emplace_back("company_id");
  if (c.owner_id) out.emplace_back("owner_id");
  out.emplace_back("status");
  if (c.source) out.emplace_back("source");
  if (!c.tags.empty()) out.emplace_back("tags");
  for (auto& f : changed_custom_fields("{}", c.custom_fields)) out.push_back(std::move(f));
  return out;
}

namespace {

// A forward-only reader over JSON text that carecrm rendered itself. Any surprise ends the
// scan (what was collected so far is kept): it never reads past the end.
class scanner {
public:
  explicit scanner(std::string_view s) : s_(s) {}

  void ws() {
    while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\n' || s_[p_] == '\t' || s_[p_] == '\r'))
      ++p_;
  }
  bool eat(char c) {
    ws();
    if (p_ < s_.size() && s_[p_] == c) {
      ++p_;
      return true;
    }
    return false;
  }
  char peek() {
    ws();
    return p_ < s_.size() ? s_[p_] : '\0';
  }
  // A string's raw text (escapes left as they are); nullopt when none starts here.
  std::optional<std::string_view> string() {
    ws();
    if (p_ >= s_.size() || s_[p_] != '"') return std::nullopt;
    auto start = ++p_;
    while (p_ < s_.size() && s_[p_] != '"') p_ += s_[p_] == '\\' ? 2 : 1;
    if (p_ >= s_.size()) return std::nullopt;
    return s_.substr(start, p_++ - start);
  }
  // Skips one value of any kind.
  bool skip() {
    ws();
    if (p_ >= s_.size()) return false;
    if (s_[p_] == '"') return string().has_value();
    if (s_[p_] != '{' && s_[p_] != '[') {
      while (p_ < s_.size() && s_[p_] != ',' && s_[p_] != '}' && s_[p_] != ']') ++p_;
      return p_ < s_.size();
    }
    int depth = 0;
    while (p_ < s_.size()) {
      char c = s_[p_];
      if (c == '"') {
        if (!string()) return false;
        continue;
      }
      if (c == '{' || c == '[') ++depth;
      if (c == '}' || c == ']') --depth;
      ++p_;
      if (depth == 0) return true;
    }
    return false;
  }
  // An id value: a number or a string of digits.
  std::optional<std::int64_t> id() {
    ws();
    std::string_view text;
    if (peek() == '"') {
      auto s = string();
      if (!s) return std::nullopt;
      text = *s;
    } else {
      auto start = p_;
      if (!skip()) return std::nullopt;
      text = s_.substr(start, p_ - start);
      while (!text.empty() && (text.back() == ' ' || text.back() == '\n')) text.remove_suffix(1);
    }
    std::int64_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return v;
  }

private:
  std::string_view s_;
  std::size_t p_ = 0;
};

// The "id" member of the object starting here (the scanner ends after the object).
bool object_id(scanner& s, std::string_view nested, std::vector<std::int64_t>& out,
               std::string_view member = "id") {
  if (!s.eat('{')) return s.skip();
  if (s.eat('}')) return true;
  do {
    auto key = s.string();
    if (!key || !s.eat(':')) return false;
    if (nested.empty() && *key == member) {
      if (auto v = s.id())
        out.push_back(*v);
      else if (!s.skip())
        return false;
    } else if (!nested.empty() && *key == nested && s.peek() == '{') {
      if (!object_id(s, {}, out)) return false;
    } else if (!s.skip()) {
      return false;
    }
  } while (s.eat(','));
  return s.eat('}');
}

} // namespace

std::optional<std::int64_t> member_id(std::string_view body, std::string_view member) {
  std::vector<std::int64_t> out;
  scanner s(body);
  if (!object_id(s, {}, out, member) || out.empty()) return std::nullopt;
  return out.front();
}

std::vector<std::int64_t> list_ids(std::string_view body, std::string_view array_key,
                                   std::string_view nested, std::string_view member) {
  std::vector<std::int64_t> out;
  scanner s(body);
  if (!s.eat('{') || s.eat('}')) return out;
  do {
    auto key = s.string();
    if (!key || !s.eat(':')) return out;
    if (*key == array_key && s.peek() == '[') {
      s.eat('[');
      if (s.eat(']')) return out;
      do {
        if (!object_id(s, nested, out, member)) return out;
      } while (s.eat(','));
      return out;
    }
    if (!s.skip()) return out;
  } while (s.eat(','));
  return out;
}

} // namespace crm::domain
