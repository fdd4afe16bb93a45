// AI assistant endpoints (contract §8, docs/ai.md): agents (admins write, managers read),
// knowledge documents (managers), the test console, the decisions agents took, and the
// contact summary. Bodies are read here with every issue located; documents are cut into
// passages here too, off the agent actor.
#include "http/api.hpp"

#include "actors/agents.hpp"
#include "actors/channels.hpp"
#include "domain/validation.hpp"
#include "domain/workflow.hpp"
#include "http/json.hpp"
#include "http/request_input.hpp"

#include <boost/json.hpp>

#include <set>

namespace json = boost::json;

namespace crm::http {
namespace {

using domain::failure;
using domain::issue;

constexpr std::size_t max_channels = 100;
constexpr std::size_t max_keywords = 50;

std::optional<std::vector<std::int64_t>> read_channel_ids(body_reader& body) {
  auto v = body.raw("channel_ids");
  if (!v) return std::nullopt;
  auto a = v->if_array();
  if (!a) {
    body.add({"body", "channel_ids"}, "Input should be a valid list", "list_type");
    return std::nullopt;
  }
  if (a->size() > max_channels) {
    body.add({"body", "channel_ids"}, "at most 100 channels", "too_long");
    return std::nullopt;
  }
  std::vector<std::int64_t> out;
  std::set<std::int64_t> seen;
  bool ok = true;
  for (std::size_t i = 0; i < a->size(); ++i) {
    auto& x = (*a)[i];
    std::vector<domain::loc_part> loc{std::string("body"), std::string("channel_ids"),
                                      static_cast<std::int64_t>(i)};
    if (!x.is_int64() || x.get_int64() < 1) {
      body.add(loc, "Input should be a valid integer", "int_parsing");
      ok = false;
    } else if (!seen.insert(x.get_int64()).second) {
      body.add(loc, "duplicate channel id", "value_error");
      ok = false;
    } else {
      out.push_back(x.get_int64());
    }
  }
  if (!ok) return std::nullopt;
  return out;
}

std::optional<std::vector<std::string>> read_keywords(body_reader& body) {
  auto v = body.raw("handoff_keywords");
  if (!v) return std::nullopt;
  auto a = v->if_array();
  if (!a) {
    body.add({"body", "handoff_keywords"}, "Input should be a valid list", "list_type");
    return std::nullopt;
  }
  if (a->size() > max_keywords) {
    body.add({"body", "handoff_keywords"}, "at most 50 keywords", "too_long");
    return std::nullopt;
  }
  std::vector<std::string> out;
  bool ok = true;
  for (std::size_t i = 0; i < a->size(); ++i) {
    std::vector<domain::loc_part> loc{std::string("body"), std::string("handoff_keywords"),
                                      static_cast<std::int64_t>(i)};
    auto s = (*a)[i].if_string();
    if (!s) {
      body.add(loc, "Input should be a valid string", "string_type");
      ok = false;
      continue;
    }
    std::string k(s->c_str(), s->size());
    auto n = domain::utf8_length(k);
    if (domain::ai::fold(k).empty()) {
      body.add(loc, "String should have at least 1 letter or digit", "string_too_short");
      ok = false;
    } else if (n > 100) {
      body.add(loc, "String should have at most 100 characters", "string_too_long");
      ok = false;
    } else {
      out.push_back(std::move(k));
    }
  }
  if (!ok) return std::nullopt;
  return out;
}

std::optional<std::optional<std::int64_t>> read_nullable_id(body_reader& body,
                                                            std::string_view key) {
  auto v = body.raw(key);
  if (!v) return std::nullopt;
  if (v->is_null()) return std::optional<std::int64_t>();
  if (!v->is_int64() || v->get_int64() < 1) {
    body.add({"body", std::string(key)}, "Input should be a valid integer", "int_parsing");
    return std::nullopt;
  }
  return std::optional<std::int64_t>(v->get_int64());
}

// The fields of an agent (create: name required).
std::optional<actors::agent_patch> read_agent(body_reader& body, bool creating) {
  actors::agent_patch p;
  p.name = body.text("name", creating, {.min = 1, .max = 200, .trim = true});
  p.instructions = body.text("instructions", false, {.min = 0, .max = 8000});
  if (auto prov = body.one_of("provider", false, {"builtin", "openai_compatible"}))
    p.provider = domain::parse_ai_provider(*prov);
  p.model = body.nullable_text("model", {.min = 1, .max = 200, .trim = true});
  p.base_url = body.nullable_text("base_url", {.min = 1, .max = 2000, .trim = true});
  if (p.base_url && *p.base_url && !domain::parse_url(**p.base_url))
    body.add({"body", "base_url"},
             "URL must be http:// or https:// with a host (no user info or fragment)",
             "value_error");
  p.api_key = body.nullable_text("api_key", {.min = 1, .max = 500});
  p.channel_ids = read_channel_ids(body);
  p.auto_reply = body.boolean("auto_reply", false);
  p.handoff_keywords = read_keywords(body);
  if (auto l = body.one_of("reply_language", false, {"auto", "en", "pt", "es"}))
    p.reply_language = domain::ai::language_from(*l);
  p.emergency_message =
      body.nullable_text("emergency_message", {.min = 1, .max = 1000, .trim = true});
  p.handoff_assignee_id = read_nullable_id(body, "handoff_assignee_id");
  p.stream = body.boolean("stream", false);
  p.is_active = body.boolean("is_active", false);
  if (!body.finish()) return std::nullopt;
  return p;
}

void create_agent(services& s, const exchange_ptr& ex) {
  body_reader body(ex->req.body);
  auto p = read_agent(body, true);
  if (!p) return ex->fail(body.failure());
  actors::create_agent(s.rt, ex->who.tenant_id, std::move(*p),
                       created_reply(ex, "/api/v1/ai/agents/"));
}

void list_agents(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  auto page = query_int(ex->req, "page", 1, 1, 1'000'000, issues);
  auto per_page = query_int(ex->req, "per_page", 20, 1, 100, issues);
  auto active = query_bool(ex->req, "is_active", std::nullopt, issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::list_agents(s.rt, ex->who.tenant_id, active, *page, *per_page, json_reply(ex));
}

void get_agent(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::get_agent(s.rt, ex->who.tenant_id, *id, json_reply(ex));
}

void update_agent(services& s, const exchange_ptr& ex) {
  std::vector<issue> path_issues;
  auto id = path_id(ex->param("id"), "id", path_issues);
  body_reader body(ex->req.body);
  for (auto& i : path_issues) body.issues().push_back(i);
  auto p = read_agent(body, false);
  if (!p || !id) return ex->fail(body.failure());
  actors::update_agent(s.rt, ex->who.tenant_id, *id, std::move(*p), json_reply(ex));
}

void delete_agent(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::delete_agent(s.rt, ex->who.tenant_id, *id, no_content_reply(ex));
}

// {"title", "text"} or {"title", "csv"}: validated and cut into passages.
std::optional<actors::document_input> read_document(body_reader& body) {
  actors::document_input d;
  auto title = body.text("title", true, {.min = 1, .max = 200, .trim = true});
  auto text = body.raw("text");
  auto csv = body.raw("csv");
  if (!body.valid_json()) return std::nullopt;
  if (text && csv) {
    body.add({"body"}, "send either text or csv, not both", "value_error");
  } else if (!text && !csv) {
    body.add({"body", "text"}, "Field required", "missing");
  } else {
    const char* key = text ? "text" : "csv";
    auto s = (text ? text : csv)->if_string();
    if (!s) {
      body.add({"body", key}, "Input should be a valid string", "string_type");
    } else if (s->empty()) {
      body.add({"body", key}, "String should have at least 1 character", "string_too_short");
    } else if (s->size() > domain::ai::max_document_bytes) {
      body.add({"body", key}, "String should have at most 1048576 bytes", "string_too_long");
    } else if (text) {
      d.kind = domain::document_kind::text;
      d.content.assign(s->c_str(), s->size());
      d.passages = domain::ai::split_passages(d.content);
      if (d.passages.empty()) body.add({"body", "text"}, "the text holds no words", "value_error");
    } else {
      d.kind = domain::document_kind::qa;
      d.content.assign(s->c_str(), s->size());
      auto pairs = domain::ai::parse_qa_csv(d.content, body.issues());
      if (pairs) {
        d.passages = std::move(*pairs);
        if (d.passages.empty())
          body.add({"body", "csv"}, "the CSV holds no question/answer pair", "value_error");
      }
    }
  }
  if (!body.finish() || !title) return std::nullopt;
  d.title = std::move(*title);
  return d;
}

void save_document(services& s, const exchange_ptr& ex, bool creating) {
  std::vector<issue> path_issues;
  auto agent = path_id(ex->param("id"), "id", path_issues);
  std::optional<std::int64_t> doc;
  if (!creating) doc = path_id(ex->param("document_id"), "document_id", path_issues);
  body_reader body(ex->req.body);
  for (auto& i : path_issues) body.issues().push_back(i);
  auto d = read_document(body);
  if (!d || !agent || (!creating && !doc)) return ex->fail(body.failure());
  auto reply =
      creating ? created_reply(ex, "/api/v1/ai/agents/" + std::to_string(*agent) + "/knowledge/")
               : json_reply(ex);
  actors::save_document(s.rt, ex->who.tenant_id, *agent, doc, std::move(*d), std::move(reply));
}

void create_document(services& s, const exchange_ptr& ex) {
  save_document(s, ex, true);
}
void replace_document(services& s, const exchange_ptr& ex) {
  save_document(s, ex, false);
}

// Both path ids, or the 422 with every issue (already sent).
std::optional<std::pair<std::int64_t, std::int64_t>> document_ids(const exchange_ptr& ex) {
  std::vector<issue> issues;
  auto agent = path_id(ex->param("id"), "id", issues);
  auto doc = path_id(ex->param("document_id"), "document_id", issues);
  if (!agent || !doc) {
    ex->fail(failure::invalid(std::move(issues)));
    return std::nullopt;
  }
  return std::make_pair(*agent, *doc);
}

void list_documents(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  auto agent = path_id(ex->param("id"), "id", issues);
  auto page = query_int(ex->req, "page", 1, 1, 1'000'000, issues);
  auto per_page = query_int(ex->req, "per_page", 20, 1, 100, issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::list_documents(s.rt, ex->who.tenant_id, *agent, *page, *per_page, json_reply(ex));
}

void get_document(services& s, const exchange_ptr& ex) {
  auto ids = document_ids(ex);
  if (!ids) return;
  actors::get_document(s.rt, ex->who.tenant_id, ids->first, ids->second, json_reply(ex));
}

void delete_document(services& s, const exchange_ptr& ex) {
  auto ids = document_ids(ex);
  if (!ids) return;
  actors::delete_document(s.rt, ex->who.tenant_id, ids->first, ids->second, no_content_reply(ex));
}

void list_replies(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  auto agent = path_id(ex->param("id"), "id", issues);
  auto page = query_int(ex->req, "page", 1, 1, 1'000'000, issues);
  auto per_page = query_int(ex->req, "per_page", 20, 1, 100, issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::list_replies(s.rt, ex->who.tenant_id, *agent, *page, *per_page, json_reply(ex));
}

void chat(services& s, const exchange_ptr& ex) {
  std::vector<issue> path_issues;
  auto id = path_id(ex->param("id"), "id", path_issues);
  body_reader body(ex->req.body);
  for (auto& i : path_issues) body.issues().push_back(i);
  auto message = body.text("message", true, {.min = 1, .max = 4096});
  if (!body.finish() || !id) return ex->fail(body.failure());
  actors::chat(s.rt, ex->who.tenant_id, *id, std::move(*message), json_reply(ex));
}

void summary(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  // A contact who withdrew ai_processing is not summarised (docs/compliance.md "Consent").
  auto& rt = s.rt;
  auto tenant = ex->who.tenant_id;
  actors::require_consent(
      rt, tenant, *id, domain::consent_purpose::ai_processing,
      actors::callback<domain::done>([&rt, tenant, ex, id = *id](domain::outcome<domain::done> r) {
        if (!r) return ex->fail(r.error());
        actors::contact_summary(rt, tenant, id, json_reply(ex));
      }));
}

} // namespace

void add_ai_routes(router& r, services& s) {
  constexpr auto admin = domain::permission::administer;
  constexpr auto manage = domain::permission::manage_automation;
  constexpr auto write = domain::permission::write_records;
  const char* tag = "ai";
  r.add({verb::get, "/api/v1/ai/agents", access::bearer, manage, bind(s, list_agents),
         "List AI agents (page, per_page, is_active)", tag});
  r.add({verb::post, "/api/v1/ai/agents", access::bearer, admin, bind(s, create_agent),
         "Create an AI agent", tag, 201});
  r.add({verb::get, "/api/v1/ai/agents/{id}", access::bearer, manage, bind(s, get_agent),
         "Get an AI agent", tag});
  r.add({verb::put, "/api/v1/ai/agents/{id}", access::bearer, admin, bind(s, update_agent),
         "Update an AI agent (fields sent)", tag});
  r.add({verb::patch, "/api/v1/ai/agents/{id}", access::bearer, admin, bind(s, update_agent),
         "Update an AI agent (fields sent)", tag});
  r.add({verb::del, "/api/v1/ai/agents/{id}", access::bearer, admin, bind(s, delete_agent),
         "Delete an AI agent with its knowledge", tag, 204});
  r.add({verb::get, "/api/v1/ai/agents/{id}/knowledge", access::bearer, manage,
         bind(s, list_documents), "List an agent's knowledge documents", tag});
  r.add({verb::post, "/api/v1/ai/agents/{id}/knowledge", access::bearer, manage,
         bind(s, create_document), "Add a knowledge document (text or question/answer CSV)", tag,
         201});
  r.add({verb::get, "/api/v1/ai/agents/{id}/knowledge/{document_id}", access::bearer, manage,
         bind(s, get_document), "Get a knowledge document with its content", tag});
  r.add({verb::put, "/api/v1/ai/agents/{id}/knowledge/{document_id}", access::bearer, manage,
         bind(s, replace_document), "Replace a knowledge document", tag});
  r.add({verb::del, "/api/v1/ai/agents/{id}/knowledge/{document_id}", access::bearer, manage,
         bind(s, delete_document), "Delete a knowledge document", tag, 204});
  r.add({verb::get, "/api/v1/ai/agents/{id}/replies", access::bearer, manage, bind(s, list_replies),
         "The agent's decisions on inbound messages, newest first", tag});
  r.add({verb::post, "/api/v1/ai/agents/{id}/chat", access::bearer, manage, bind(s, chat),
         "Ask an agent (test console: nothing is sent or stored)", tag});
  r.add({verb::post, "/api/v1/contacts/{id}/ai/summary", access::bearer, write, bind(s, summary),
         "Summarise a contact's record and conversations", tag});
}

} // namespace crm::http
