// AI assistant endpoints (contract §8, docs/ai.md): agents (admins write, managers read),
// knowledge documents (managers), the test console, the decisions agents took, and the
// contact summary. Bodies are read here with every issue located; documents are cut into
// passages here too, off the agent actor.
#include "http/api.hpp"

#include "actors/agents.hpp"
#include "actors/channels.hpp"
#include "domain/crypto.hpp"
#include "domain/document_text.hpp"
#include "domain/validation.hpp"
#include "domain/workflow.hpp"
#include "http/json.hpp"
#include "http/openapi_schema.hpp"
#include "http/request_input.hpp"
#include "net/worker_pool.hpp"

#include <boost/json.hpp>

#include <array>
#include <set>
#include <string_view>

namespace json = boost::json;

namespace crm::http {
namespace {

using domain::failure;
using domain::issue;

// The rules of an agent's fields, of a knowledge document and of a chat message: read by the
// readers below and stated by the schemas of the OpenAPI document.
namespace ai_rules {
constexpr text_rule name{.min = 1, .max = 200, .trim = true};
constexpr text_rule instructions{.min = 0, .max = 8000};
constexpr std::array<std::string_view, 2> providers{"builtin", "openai_compatible"};
constexpr text_rule model{.min = 1, .max = 200, .trim = true};
constexpr text_rule base_url{.min = 1, .max = 2000, .trim = true};
constexpr text_rule api_key{.min = 1, .max = 500};
constexpr std::size_t channels_max = 100;
constexpr std::size_t services_max = 20;
constexpr std::size_t keywords_max = 50;
constexpr std::size_t keyword_max = 100; // characters; at least one letter or digit
constexpr std::array<std::string_view, 4> reply_languages{"auto", "en", "pt", "es"};
constexpr text_rule emergency_message{.min = 1, .max = 1000, .trim = true};
constexpr text_rule title{.min = 1, .max = 200, .trim = true};
constexpr text_rule message{.min = 1, .max = 4096};
} // namespace ai_rules

// A list of distinct ids under `key` (channel_ids, service_ids), at most `max`.
std::optional<std::vector<std::int64_t>> read_ids(body_reader& body, const char* key,
                                                  std::size_t max, const char* what) {
  auto v = body.raw(key);
  if (!v) return std::nullopt;
  auto a = v->if_array();
  if (!a) {
    body.add({"body", key}, "Input should be a valid list", "list_type");
    return std::nullopt;
  }
  if (a->size() > max) {
    body.add({"body", key}, "at most " + std::to_string(max) + " " + what + "s", "too_long");
    return std::nullopt;
  }
  std::vector<std::int64_t> out;
  std::set<std::int64_t> seen;
  bool ok = true;
  for (std::size_t i = 0; i < a->size(); ++i) {
    auto& x = (*a)[i];
    std::vector<domain::loc_part> loc{std::string("body"), std::string(key),
                                      static_cast<std::int64_t>(i)};
    if (!x.is_int64() || x.get_int64() < 1) {
      body.add(loc, "Input should be a valid integer", "int_parsing");
      ok = false;
    } else if (!seen.insert(x.get_int64()).second) {
      body.add(loc, std::string("duplicate ") + what + " id", "value_error");
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
  if (a->size() > ai_rules::keywords_max) {
    body.add({"body", "handoff_keywords"},
             "at most " + std::to_string(ai_rules::keywords_max) + " keywords", "too_long");
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
    } else if (n > ai_rules::keyword_max) {
      body.add(loc,
               "String should have at most " + std::to_string(ai_rules::keyword_max) +
                   " characters",
               "string_too_long");
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
  p.name = body.text("name", creating, ai_rules::name);
  p.instructions = body.text("instructions", false, ai_rules::instructions);
  if (auto prov = body.one_of("provider", false, ai_rules::providers))
    p.provider = domain::parse_ai_provider(*prov);
  p.model = body.nullable_text("model", ai_rules::model);
  p.base_url = body.nullable_text("base_url", ai_rules::base_url);
  if (p.base_url && *p.base_url && !domain::parse_url(**p.base_url))
    body.add({"body", "base_url"},
             "URL must be http:// or https:// with a host (no user info or fragment)",
             "value_error");
  p.api_key = body.nullable_text("api_key", ai_rules::api_key);
  p.channel_ids = read_ids(body, "channel_ids", ai_rules::channels_max, "channel");
  p.service_ids = read_ids(body, "service_ids", ai_rules::services_max, "service");
  p.auto_reply = body.boolean("auto_reply", false);
  p.handoff_keywords = read_keywords(body);
  if (auto l = body.one_of("reply_language", false, ai_rules::reply_languages))
    p.reply_language = domain::ai::language_from(*l);
  p.emergency_message = body.nullable_text("emergency_message", ai_rules::emergency_message);
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
  auto page = query_int(ex->req, "page", 1, 1, paging_rules::page_max, issues);
  auto per_page = query_int(ex->req, "per_page", paging_rules::per_page_default, 1,
                            paging_rules::per_page_max, issues);
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

// {"title"} and one of "text", "csv", "html" or "pdf" (base64): validated; text and CSV cut
// into passages at once, HTML and PDF kept as they came for extract_document.
std::optional<actors::document_input> read_document(body_reader& body) {
  actors::document_input d;
  auto title = body.text("title", true, ai_rules::title);
  constexpr std::array<std::pair<std::string_view, domain::document_kind>, 4> keys{
      {{"text", domain::document_kind::text},
       {"csv", domain::document_kind::qa},
       {"html", domain::document_kind::html},
       {"pdf", domain::document_kind::pdf}}};
  const boost::json::value* content = nullptr;
  std::string_view key;
  std::size_t sent = 0;
  for (auto [k, kind] : keys) {
    if (auto v = body.raw(k)) {
      ++sent;
      content = v;
      key = k;
      d.kind = kind;
    }
  }
  if (!body.valid_json()) return std::nullopt;
  // Base64 of a PDF of at most max_pdf_bytes.
  const std::size_t limit = d.kind == domain::document_kind::pdf
                                ? (domain::max_pdf_bytes + 2) / 3 * 4
                                : domain::ai::max_document_bytes;
  const auto* s = content ? content->if_string() : nullptr;
  if (sent > 1) {
    body.add({"body"}, "send one of text, csv, html and pdf", "value_error");
  } else if (sent == 0) {
    body.add({"body", "text"}, "Field required", "missing");
  } else if (!s) {
    body.add({"body", std::string(key)}, "Input should be a valid string", "string_type");
  } else if (s->empty()) {
    body.add({"body", std::string(key)}, "String should have at least 1 character",
             "string_too_short");
  } else if (s->size() > limit) {
    body.add({"body", std::string(key)},
             "String should have at most " + std::to_string(limit) + " bytes", "string_too_long");
  } else if (d.kind == domain::document_kind::text) {
    d.content.assign(s->c_str(), s->size());
    d.passages = domain::ai::split_passages(d.content);
    if (d.passages.empty()) body.add({"body", "text"}, "the text holds no words", "value_error");
  } else if (d.kind == domain::document_kind::qa) {
    d.content.assign(s->c_str(), s->size());
    auto pairs = domain::ai::parse_qa_csv(d.content, body.issues());
    if (pairs) {
      d.passages = std::move(*pairs);
      if (d.passages.empty())
        body.add({"body", "csv"}, "the CSV holds no question/answer pair", "value_error");
    }
  } else if (d.kind == domain::document_kind::html) {
    d.content.assign(s->c_str(), s->size());
  } else if (auto bytes = domain::base64_decode(std::string_view(s->c_str(), s->size()))) {
    d.content = std::move(*bytes);
  } else {
    body.add({"body", "pdf"}, "the PDF must be base64 (RFC 4648)", "value_error");
  }
  if (!body.finish() || !title) return std::nullopt;
  d.title = std::move(*title);
  return d;
}

// An HTML or PDF document's text, cut into passages (on a worker thread: a PDF may take a
// while); the issue at ["body", kind] when there is no text to keep.
std::optional<issue> extract_document(actors::document_input& d) {
  const char* key = domain::to_string(d.kind);
  std::string text;
  if (d.kind == domain::document_kind::html) {
    auto t = domain::text_of_html(d.content);
    if (!t)
      return issue{
          {std::string("body"), std::string(key)}, "the HTML cannot be read", "value_error"};
    text = std::move(*t);
  } else {
    auto t = domain::text_of_pdf(d.content);
    if (!t.text) return issue{{std::string("body"), std::string(key)}, t.error, "value_error"};
    text = std::move(*t.text);
  }
  if (text.size() > domain::ai::max_document_bytes)
    return issue{{std::string("body"), std::string(key)},
                 "its text is longer than " + std::to_string(domain::ai::max_document_bytes) +
                     " bytes",
                 "value_error"};
  d.passages = domain::ai::split_passages(text);
  if (d.passages.empty())
    return issue{{std::string("body"), std::string(key)}, "it holds no words", "value_error"};
  d.content = std::move(text);
  return std::nullopt;
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
  if (d->kind != domain::document_kind::html && d->kind != domain::document_kind::pdf)
    return actors::save_document(s.rt, ex->who.tenant_id, *agent, doc, std::move(*d),
                                 std::move(reply));
  auto& rt = s.rt;
  const bool queued = s.hashing.try_submit(
      [&rt, ex, agent = *agent, doc, d = std::make_shared<actors::document_input>(std::move(*d)),
       reply = std::move(reply)]() mutable {
        if (auto bad = extract_document(*d)) return ex->fail(failure::invalid({std::move(*bad)}));
        actors::save_document(rt, ex->who.tenant_id, agent, doc, std::move(*d), std::move(reply));
      });
  if (!queued)
    ex->fail(
        failure::of(domain::errc::service_unavailable, "too many documents being read at once"));
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
  auto page = query_int(ex->req, "page", 1, 1, paging_rules::page_max, issues);
  auto per_page = query_int(ex->req, "per_page", paging_rules::per_page_default, 1,
                            paging_rules::per_page_max, issues);
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
  auto page = query_int(ex->req, "page", 1, 1, paging_rules::page_max, issues);
  auto per_page = query_int(ex->req, "per_page", paging_rules::per_page_default, 1,
                            paging_rules::per_page_max, issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::list_replies(s.rt, ex->who.tenant_id, *agent, *page, *per_page, json_reply(ex));
}

void chat(services& s, const exchange_ptr& ex) {
  std::vector<issue> path_issues;
  auto id = path_id(ex->param("id"), "id", path_issues);
  body_reader body(ex->req.body);
  for (auto& i : path_issues) body.issues().push_back(i);
  auto message = body.text("message", true, ai_rules::message);
  if (!body.finish() || !id) return ex->fail(body.failure());
  actors::chat(s.rt, ex->who.tenant_id, *id, std::move(*message), json_reply(ex));
}

// POST /conversations/{id}/ai/draft: an optional body {"agent_id", "message_id"}.
void draft(services& s, const exchange_ptr& ex) {
  std::vector<issue> path_issues;
  auto id = path_id(ex->param("id"), "id", path_issues);
  const bool empty = ex->req.body.find_first_not_of(" \t\r\n") == std::string::npos;
  body_reader body(empty ? std::string_view("{}") : std::string_view(ex->req.body));
  for (auto& i : path_issues) body.issues().push_back(i);
  actors::draft_request q;
  q.agent_id = body.id("agent_id", false);
  q.message_id = body.id("message_id", false);
  if (!body.finish() || !id) return ex->fail(body.failure());
  q.conversation_id = *id;
  actors::draft_reply(s.rt, ex->who.tenant_id, q, json_reply(ex));
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

// The names the domain renders for an enum's values first..last.
template <class E, class Name>
std::vector<std::string_view> names_of(E first, E last, Name name) {
  std::vector<std::string_view> out;
  for (auto i = static_cast<int>(first); i <= static_cast<int>(last); ++i)
    out.emplace_back(name(static_cast<E>(i)));
  return out;
}

void define_ai_schemas(router& r) {
  using namespace schema;
  namespace rules = ai_rules;
  namespace ai = domain::ai;
  const auto intents = names_of(ai::intent::greeting, ai::intent::other, ai::intent_name);
  const auto languages = names_of(ai::language::en, ai::language::es, ai::language_name);
  // Never "none": no hand-off is a null reason.
  const auto handoff_reasons = names_of(
      ai::handoff_reason::urgent, ai::handoff_reason::provider_error, ai::handoff_reason_name);
  const auto kinds = names_of(domain::document_kind::text, domain::document_kind::pdf,
                              [](domain::document_kind k) { return domain::to_string(k); });
  auto described = [](object_t s, std::string_view what) {
    s["description"] = what;
    return s;
  };

  // An agent's fields as a client sends them (name required on create; null clears).
  auto input = [&](bool creating) {
    auto channels = array_of(id());
    channels["maxItems"] = rules::channels_max;
    auto services = array_of(id());
    services["maxItems"] = rules::services_max;
    channels["uniqueItems"] = true;
    auto keywords = array_of(
        described(text({.min = 1, .max = rules::keyword_max}),
                  "a word or phrase (at least one letter or digit) that hands the message to a "
                  "person"));
    keywords["maxItems"] = rules::keywords_max;
    auto url = described(text(rules::base_url),
                         "http:// or https:// with a host, no user info or fragment; required "
                         "for openai_compatible");
    url["format"] = "uri";
    return object(
        {{"name", text(rules::name), creating},
         {"instructions", text(rules::instructions), false},
         {"provider", one_of(rules::providers), false},
         {"model", nullable(described(text(rules::model), "required for openai_compatible")),
          false},
         {"base_url", nullable(url), false},
         {"api_key",
          described(nullable(text(rules::api_key)),
                    "write-only: answers tell has_api_key only; null removes it; send it again "
                    "when base_url changes"),
          false},
         {"channel_ids", channels, false},
         {"service_ids",
          described(services, "services the agent may book, move and cancel for patients "
                              "(docs/ai.md \"Booking\"; an openai_compatible agent through "
                              "tool calls); empty: it books nothing"),
          false},
         {"auto_reply", boolean(), false},
         {"handoff_keywords", keywords, false},
         {"reply_language", one_of(rules::reply_languages), false},
         {"emergency_message", nullable(text(rules::emergency_message)), false},
         {"handoff_assignee_id",
          nullable(described(id(), "an active user of the tenant, assigned on a hand-off")), false},
         {"stream", boolean(), false},
         {"is_active", boolean(), false}});
  };
  define(r, "AiAgentCreate", input(true));
  define(r, "AiAgentUpdate", input(false));
  define(r, "AiAgent",
         object({{"id", id()},
                 {"name", text({})},
                 {"instructions", text({})},
                 {"provider", one_of(rules::providers)},
                 {"model", nullable(text({}))},
                 {"base_url", nullable(text({}))},
                 {"has_api_key",
                  described(boolean(), "whether an api_key is set (the key is never shown)")},
                 {"channel_ids", array_of(id())},
                 {"service_ids", array_of(id())},
                 {"auto_reply", boolean()},
                 {"handoff_keywords", array_of(text({}))},
                 {"reply_language", one_of(rules::reply_languages)},
                 {"emergency_message", nullable(text({}))},
                 {"handoff_assignee_id", nullable(id())},
                 {"stream", boolean()},
                 {"is_active", boolean()},
                 {"document_count", integer()},
                 {"passage_count", integer()},
                 {"created_at", timestamp()},
                 {"updated_at", timestamp()}}));
  define(r, "AiAgentPage", page_of("AiAgent"));

  // A knowledge document: its title and either text (cut into passages) or a CSV of
  // question/answer pairs (one passage each).
  auto content = [&](std::string_view what) { return described(text({.min = 1}), what); };
  auto write = object(
      {{"title", text(rules::title)},
       {"text",
        content("plain text, at most " + std::to_string(ai::max_document_bytes) +
                " bytes (UTF-8), holding at least one word"),
        false},
       {"csv",
        content("question,answer rows (RFC 4180, an optional header row), at most " +
                std::to_string(ai::max_document_bytes) +
                " bytes (UTF-8), holding at least one pair"),
        false},
       {"html",
        content("an HTML page or fragment, at most " + std::to_string(ai::max_document_bytes) +
                " bytes: its text is kept (h1-h6 as headings; scripts, styles and the "
                "head left out)"),
        false},
       {"pdf",
        content("a PDF of at most " + std::to_string(domain::max_pdf_bytes) +
                " bytes, base64 (RFC 4648): the text of its pages is kept (a page's "
                "title lines as headings); encrypted PDFs and scans without text are "
                "refused"),
        false}});
  write["oneOf"] = boost::json::array{object_t{{"required", boost::json::array{"text"}}},
                                      object_t{{"required", boost::json::array{"csv"}}},
                                      object_t{{"required", boost::json::array{"html"}}},
                                      object_t{{"required", boost::json::array{"pdf"}}}};
  define(r, "AiKnowledgeWrite", write);
  auto document = [&](bool with_content) {
    auto d = object({{"id", id()},
                     {"agent_id", id()},
                     {"title", text({})},
                     {"kind", one_of(kinds)},
                     {"bytes", integer()},
                     {"passage_count", integer()},
                     {"created_at", timestamp()},
                     {"updated_at", timestamp()}});
    if (with_content) {
      // The content under the key of its kind: csv for qa, text for the others (for html and
      // pdf, the text extracted from them).
      auto& props = d["properties"].as_object();
      props["text"] = text({});
      props["csv"] = text({});
      const auto kind_is = [](boost::json::array names) {
        return object_t{{"properties", object_t{{"kind", object_t{{"enum", std::move(names)}}}}}};
      };
      object_t text_kinds = kind_is({"text", "html", "pdf"});
      text_kinds["required"] = boost::json::array{"text"};
      object_t qa_kind = kind_is({"qa"});
      qa_kind["required"] = boost::json::array{"csv"};
      boost::json::array either{text_kinds, qa_kind};
      d["oneOf"] = std::move(either);
    }
    return d;
  };
  define(r, "AiKnowledgeListItem", document(false));
  define(r, "AiKnowledgeDocument", document(true));
  define(r, "AiKnowledgePage", page_of("AiKnowledgeListItem"));

  // A decision an agent took on an inbound message. Its hand-off reason is free text: one of
  // the agent's reasons, or the consent that refused the reply (the channel actor's).
  std::string reasons_text = "a hand-off reason (";
  for (std::size_t i = 0; i < handoff_reasons.size(); ++i)
    reasons_text += (i ? ", " : "") + std::string(handoff_reasons[i]);
  reasons_text += ") or, when a withdrawn consent stopped the reply, \"consent: ...\"";
  define(r, "AiAgentReply",
         object({{"id", id()},
                 {"agent_id", id()},
                 {"conversation_id", id()},
                 {"message_id", id()},
                 {"reply_message_ids", array_of(id())},
                 {"intent", one_of(intents)},
                 {"handoff", boolean()},
                 {"handoff_reason", nullable(described(text({}), reasons_text))},
                 {"passages", array_of(id())},
                 {"provider", one_of(rules::providers)},
                 {"prompt_tokens", nullable(integer())},
                 {"completion_tokens", nullable(integer())},
                 {"latency_ms", number()},
                 {"error", nullable(text({}))},
                 {"dropped", boolean()},
                 {"created_at", timestamp()}}));
  define(r, "AiAgentReplyPage", page_of("AiAgentReply"));

  define(r, "AiChatRequest", object({{"message", text(rules::message)}}));
  define(r, "AiChatPassage",
         object({{"id", id()},
                 {"document_id", id()},
                 {"title", nullable(text({}))},
                 {"text", text({})},
                 {"score", nullable(number())}}));
  auto answer = object({{"answer", text({})},
                        {"intent", one_of(intents)},
                        {"passages", array_of(ref("AiChatPassage"))},
                        {"handoff", boolean()},
                        {"handoff_reason", nullable(one_of(handoff_reasons))},
                        {"language", one_of(languages)},
                        {"provider", one_of(rules::providers)},
                        {"usage", nullable(object({{"prompt_tokens", nullable(integer())},
                                                   {"completion_tokens", nullable(integer())}}))}});
  define(r, "AiChatAnswer",
         described(answer,
                   "the agent's decision: an answer from the knowledge, or a hand-off to a person "
                   "(handoff true, with its reason; the answer is then the hand-off phrase, after "
                   "the emergency message when urgent). A provider that fails, times out or "
                   "cannot be reached is a provider_error hand-off in a 200 answer, not an error "
                   "status."));

  define(r, "AiDraftRequest",
         described(object({{"agent_id", id(), false}, {"message_id", id(), false}}),
                   "both optional (an empty body too): the agent serving the conversation's "
                   "channel (else the tenant's only active agent), and the contact's last "
                   "message with text"));
  // The chat answer's decision, with the draft (null on a hand-off) in place of the answer.
  auto draft = answer;
  auto& draft_props = draft["properties"].as_object();
  draft_props.erase("answer");
  draft_props["draft"] = nullable(text({}));
  for (const char* k : {"conversation_id", "message_id", "agent_id"}) draft_props[k] = id();
  boost::json::array required;
  for (auto& [k, v] : draft_props) required.emplace_back(k);
  draft["required"] = std::move(required);
  define(r, "AiDraft",
         described(draft, "a suggested reply grounded in the agent's knowledge, with the passages "
                          "it quotes; never sent by carecrm. draft is null when the agent would "
                          "hand the message to a person (handoff true, with its reason: urgent, "
                          "clinical, a keyword, a complaint, no answer in the knowledge, a "
                          "provider failure)"));

  define(r, "AiContactSummary",
         object({{"contact_id", id()},
                 {"summary", text({})},
                 {"conversation_count", integer()},
                 {"message_count", integer()},
                 {"provider", object_t{{"type", "string"},
                                       {"const", domain::to_string(domain::ai_provider::builtin)}}},
                 {"generated_at", timestamp()}}));
}

// Knowledge documents hold up to 1 MiB of text, or a PDF of up to 8 MiB (docs/ai.md): their
// writes take a body of up to 12 MiB, whatever --body-limit says for the other routes.
route large_body(route rt) {
  rt.body_limit = std::size_t{12} * 1024 * 1024; // a PDF of 8 MiB is 10.7 MiB of base64
  return rt;
}

} // namespace

void add_ai_routes(router& r, services& s) {
  constexpr auto admin = domain::permission::administer;
  constexpr auto manage = domain::permission::manage_automation;
  constexpr auto write = domain::permission::write_records;
  const char* tag = "ai";
  define_ai_schemas(r);
  r.add({verb::get, "/api/v1/ai/agents", access::bearer, manage, bind(s, list_agents),
         "List AI agents (page, per_page, is_active)", tag},
        route_doc("", "AiAgentPage")
            .with_query(schema::paging())
            .with_query({schema::query("is_active", schema::boolean(),
                                       "only active (true, 1) or inactive (false, 0) agents")}));
  r.add({verb::post, "/api/v1/ai/agents", access::bearer, admin, bind(s, create_agent),
         "Create an AI agent", tag, 201},
        route_doc("AiAgentCreate", "AiAgent").with_example(R"({"name": "Front desk",
 "instructions": "You are the assistant of Clinica Sol.", "provider": "openai_compatible",
 "model": "clinic-model-1", "base_url": "https://llm.example.com/v1", "api_key": "sk-example",
 "channel_ids": [1], "auto_reply": true, "handoff_keywords": ["refund", "speak to a human"],
 "reply_language": "pt", "emergency_message": "Ligue 192 agora.", "handoff_assignee_id": 2,
 "stream": false, "is_active": true})"));
  r.add({verb::get, "/api/v1/ai/agents/{id}", access::bearer, manage, bind(s, get_agent),
         "Get an AI agent", tag},
        {"", "AiAgent"});
  r.add({verb::put, "/api/v1/ai/agents/{id}", access::bearer, admin, bind(s, update_agent),
         "Update an AI agent (fields sent)", tag},
        {"AiAgentUpdate", "AiAgent"});
  r.add({verb::patch, "/api/v1/ai/agents/{id}", access::bearer, admin, bind(s, update_agent),
         "Update an AI agent (fields sent)", tag},
        {"AiAgentUpdate", "AiAgent"});
  r.add({verb::del, "/api/v1/ai/agents/{id}", access::bearer, admin, bind(s, delete_agent),
         "Delete an AI agent with its knowledge", tag, 204});
  r.add({verb::get, "/api/v1/ai/agents/{id}/knowledge", access::bearer, manage,
         bind(s, list_documents), "List an agent's knowledge documents", tag},
        route_doc("", "AiKnowledgePage").with_query(schema::paging()));
  r.add(large_body({verb::post, "/api/v1/ai/agents/{id}/knowledge", access::bearer, manage,
                    bind(s, create_document),
                    "Add a knowledge document (text, question/answer CSV, HTML or PDF)", tag, 201}),
        route_doc("AiKnowledgeWrite", "AiKnowledgeListItem").with_example(R"({"title": "Parking",
 "text": "Patients park for free in the garage on Rua Augusta, level 2."})"));
  r.add({verb::get, "/api/v1/ai/agents/{id}/knowledge/{document_id}", access::bearer, manage,
         bind(s, get_document), "Get a knowledge document with its content", tag},
        {"", "AiKnowledgeDocument"});
  r.add(large_body({verb::put, "/api/v1/ai/agents/{id}/knowledge/{document_id}", access::bearer,
                    manage, bind(s, replace_document), "Replace a knowledge document", tag}),
        {"AiKnowledgeWrite", "AiKnowledgeListItem"});
  r.add({verb::del, "/api/v1/ai/agents/{id}/knowledge/{document_id}", access::bearer, manage,
         bind(s, delete_document), "Delete a knowledge document", tag, 204});
  r.add({verb::get, "/api/v1/ai/agents/{id}/replies", access::bearer, manage, bind(s, list_replies),
         "The agent's decisions on inbound messages, newest first", tag},
        route_doc("", "AiAgentReplyPage").with_query(schema::paging()));
  r.add({verb::post, "/api/v1/ai/agents/{id}/chat", access::bearer, manage, bind(s, chat),
         "Ask an agent (test console: nothing is sent or stored)", tag},
        route_doc("AiChatRequest", "AiChatAnswer")
            .with_example(R"({"message": "Where can patients park?"})"));
  r.add({verb::post, "/api/v1/conversations/{id}/ai/draft", access::bearer, write, bind(s, draft),
         "Draft a reply to the contact's message for a person to edit and send", tag},
        route_doc("AiDraftRequest", "AiDraft")
            .with_example(R"({"message_id": 42})")
            .fails_with({409})); // no agent, nothing to answer, no consent
  r.add({verb::post, "/api/v1/contacts/{id}/ai/summary", access::bearer, write, bind(s, summary),
         "Summarise a contact's record and conversations", tag},
        route_doc("", "AiContactSummary").without_body().fails_with({409})); // no consent
}

} // namespace crm::http
