// The shared inbox's canned responses (contract §12, docs/channels.md "Canned responses"):
// everyone reads them and sends them (POST /conversations/{id}/messages with
// canned_response_id); managers and admins keep them.
#include "http/api.hpp"

#include "actors/inbox.hpp"
#include "domain/inbox.hpp"
#include "http/json.hpp"
#include "http/openapi_schema.hpp"
#include "http/request_input.hpp"

#include <boost/json.hpp>

namespace crm::http {
namespace {

using domain::failure;
namespace rules = domain::canned_rules;

constexpr text_rule shortcode_rule{.min = 1, .max = rules::shortcode_max};
constexpr text_rule text_rule_{.min = 1, .max = rules::text_max};

std::string placeholder_list() {
  std::string out;
  for (auto p : rules::placeholders)
    out += std::string(out.empty() ? "" : ", ") + "{{" + std::string(p) + "}}";
  return out;
}

std::optional<std::string> read_shortcode(body_reader& body, bool required) {
  auto code = body.text("shortcode", required, shortcode_rule);
  if (code && !domain::is_shortcode(*code)) {
    body.add({"body", "shortcode"}, "a shortcode is made of a-z, 0-9, '_' and '-'",
             "string_pattern_mismatch");
    return std::nullopt;
  }
  return code;
}

std::optional<std::string> read_text(body_reader& body, bool required) {
  auto text = body.text("text", required, text_rule_);
  if (!text) return text;
  if (text->find_first_not_of(" \t\r\n") == std::string::npos) {
    body.add({"body", "text"}, "String should have at least 1 character", "string_too_short");
    return std::nullopt;
  }
  auto unknown = domain::unknown_placeholders(*text);
  if (!unknown.empty()) {
    body.add({"body", "text"},
             "unknown placeholder {{" + unknown.front() + "}}: use " + placeholder_list(),
             "value_error");
    return std::nullopt;
  }
  return text;
}

void create(services& s, const exchange_ptr& ex) {
  body_reader body(ex->req.body);
  auto code = read_shortcode(body, true);
  auto text = read_text(body, true);
  if (!body.finish()) return ex->fail(body.failure());
  domain::canned_response r;
  r.shortcode = *code;
  r.text = *text;
  r.created_by = ex->who.acting_user();
  actors::create_canned(s.rt, ex->who.tenant_id, std::move(r),
                        created_reply(ex, "/api/v1/canned-responses/"));
}

void list(services& s, const exchange_ptr& ex) {
  std::vector<domain::issue> issues;
  auto page = query_int(ex->req, "page", 1, 1, paging_rules::page_max, issues);
  auto per_page = query_int(ex->req, "per_page", paging_rules::per_page_default, 1,
                            paging_rules::per_page_max, issues);
  std::string q;
  if (auto v = ex->req.query_value("q")) {
    q = std::string(*v);
    if (q.size() > rules::query_max)
      issues.push_back(
          {{"query", "q"},
           "String should have at most " + std::to_string(rules::query_max) + " characters",
           "string_too_long"});
  }
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::list_canned(s.rt, ex->who.tenant_id, std::move(q), *page, *per_page, json_reply(ex));
}

void get(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::get_canned(s.rt, ex->who.tenant_id, *id, json_reply(ex));
}

void update(services& s, const exchange_ptr& ex) {
  std::vector<domain::issue> path_issues;
  auto id = path_id(ex->param("id"), "id", path_issues);
  body_reader body(ex->req.body);
  for (auto& i : path_issues) body.issues().push_back(i);
  domain::canned_patch p;
  p.shortcode = read_shortcode(body, false);
  p.text = read_text(body, false);
  if (!body.finish()) return ex->fail(body.failure());
  actors::update_canned(s.rt, ex->who.tenant_id, *id, std::move(p), json_reply(ex));
}

void remove(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::delete_canned(s.rt, ex->who.tenant_id, *id, no_content_reply(ex));
}

constexpr const char* create_example = R"({
  "shortcode": "fasting",
  "text": "Hello {{contact.first_name}}! Please fast for 8 hours before your blood test; water is fine."
})";

void define_canned_schemas(router& r) {
  using namespace schema;
  auto code = text_matching("^[a-z0-9_-]{1," + std::to_string(rules::shortcode_max) + "}$");
  code["description"] = "what staff type after \"/\" to pick it; unique in the tenant";
  auto text = schema::text(text_rule_);
  text["description"] =
      "the message; placeholders filled for the conversation's contact: " + placeholder_list();
  define(r, "CannedResponseCreate", object({{"shortcode", code}, {"text", text}}));
  define(r, "CannedResponseUpdate", object({{"shortcode", code, false}, {"text", text, false}}));
  // domain::canned_to_json
  define(r, "CannedResponse",
         object({{"id", id()},
                 {"shortcode", schema::text({})},
                 {"text", schema::text({})},
                 {"created_by", nullable(id())},
                 {"created_at", timestamp()},
                 {"updated_at", timestamp()}}));
  define(r, "CannedResponsePage", page_of("CannedResponse"));
}

} // namespace

void add_canned_routes(router& r, services& s) {
  using domain::permission;
  using schema::query;
  define_canned_schemas(r);
  r.add({verb::get, "/api/v1/canned-responses", access::bearer, permission::read_records,
         bind(s, list), "List canned responses (q: a shortcode's start or a word of the text)",
         "inbox"},
        route_doc("", "CannedResponsePage")
            .with_query(schema::paging())
            .with_query({query("q", schema::text({.max = rules::query_max}),
                               "shortcodes starting with it, or texts holding it")}));
  // 409: the shortcode is another canned response's.
  r.add({verb::post, "/api/v1/canned-responses", access::bearer, permission::manage_automation,
         bind(s, create), "Create a canned response", "inbox", 201},
        route_doc("CannedResponseCreate", "CannedResponse")
            .with_example(create_example)
            .fails_with({409}));
  r.add({verb::get, "/api/v1/canned-responses/{id}", access::bearer, permission::read_records,
         bind(s, get), "Get a canned response", "inbox"},
        {"", "CannedResponse"});
  r.add({verb::patch, "/api/v1/canned-responses/{id}", access::bearer,
         permission::manage_automation, bind(s, update), "Update a canned response (fields sent)",
         "inbox"},
        route_doc("CannedResponseUpdate", "CannedResponse").fails_with({409}));
  r.add({verb::del, "/api/v1/canned-responses/{id}", access::bearer, permission::manage_automation,
         bind(s, remove), "Delete a canned response", "inbox", 204});
}

} // namespace crm::http
