// Conversations and messages (contract §8, docs/channels.md): everyone reads; agents and above
// change a conversation and send messages.
#include "http/api.hpp"

#include "domain/clock.hpp"
#include "domain/crypto.hpp"
#include "domain/media.hpp"
#include "domain/validation.hpp"
#include "domain/whatsapp.hpp"

#include "actors/channels.hpp"
#include "actors/inbox.hpp"
#include "http/json.hpp"
#include "http/openapi_schema.hpp"
#include "http/request_input.hpp"

#include <boost/json.hpp>

#include <array>
#include <cctype>
#include <charconv>

namespace json = boost::json;

namespace crm::http {
namespace {

using domain::failure;
using domain::issue;

namespace rules = domain::channel_rules;

constexpr std::size_t send_body_limit = std::size_t{24} * 1024 * 1024;
// The paging of a conversation's messages.
constexpr int messages_per_page_default = 50;
constexpr int messages_per_page_max = 200;
// What a message's text may not be made of alone.
constexpr std::string_view blank = " \t\r\n";

constexpr text_rule label_rule{.min = 1, .max = rules::label_max, .trim = true};

// A conversation's labels as sent: a list of at most labels_max texts, each trimmed to 1 to
// label_max characters.
std::optional<std::vector<std::string>> read_labels(body_reader& body) {
  auto v = body.raw("labels");
  if (!v) return std::nullopt;
  auto a = v->if_array();
  if (!a) {
    body.add({"body", "labels"}, "Input should be a valid list", "list_type");
    return std::nullopt;
  }
  if (a->size() > rules::labels_max) {
    body.add({"body", "labels"},
             "List should have at most " + std::to_string(rules::labels_max) +
                 " items after validation, not " + std::to_string(a->size()),
             "too_long");
    return std::nullopt;
  }
  std::vector<std::string> out;
  bool ok = true;
  for (std::size_t i = 0; i < a->size(); ++i) {
    auto str = (*a)[i].if_string();
    std::string_view t = str ? std::string_view(*str) : std::string_view();
    auto b = t.find_first_not_of(blank);
    t = b == std::string_view::npos ? std::string_view()
                                    : t.substr(b, t.find_last_not_of(blank) - b + 1);
    if (!str || t.empty() || domain::utf8_length(t) > rules::label_max) {
      body.add({"body", "labels", static_cast<std::int64_t>(i)},
               "Input should be a text of 1 to " + std::to_string(rules::label_max) + " characters",
               "string_type");
      ok = false;
      continue;
    }
    out.emplace_back(t);
  }
  if (!ok) return std::nullopt;
  return out;
}

void list(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  actors::conversation_filter f;
  auto page = query_int(ex->req, "page", 1, 1, paging_rules::page_max, issues);
  auto per_page = query_int(ex->req, "per_page", paging_rules::per_page_default, 1,
                            paging_rules::per_page_max, issues);
  if (auto v = ex->req.query_value("status")) {
    f.status = domain::parse_conversation_status(*v);
    if (!f.status)
      issues.push_back({{"query", "status"}, domain::conversation_status_choices(), "enum"});
  }
  f.channel_id = query_id(ex->req, "channel_id", issues);
  f.contact_id = query_id(ex->req, "contact_id", issues);
  f.assignee_id = query_id(ex->req, "assignee_id", issues);
  f.team_id = query_id(ex->req, "team_id", issues);
  if (auto v = ex->req.query_value("label")) f.label = std::string(*v);
  if (auto v = ex->req.query_value("priority")) {
    f.priority = domain::parse_conversation_priority(*v);
    if (!f.priority)
      issues.push_back({{"query", "priority"}, domain::conversation_priority_choices(), "enum"});
  }
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  f.page = *page;
  f.per_page = *per_page;
  actors::list_conversations(s.rt, ex->who.tenant_id, f, json_reply(ex));
}

void get(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::get_conversation(s.rt, ex->who.tenant_id, *id, json_reply(ex));
}

void update(services& s, const exchange_ptr& ex) {
  std::vector<issue> path_issues;
  auto id = path_id(ex->param("id"), "id", path_issues);
  body_reader body(ex->req.body);
  for (auto& i : path_issues) body.issues().push_back(i);
  actors::conversation_patch p;
  if (auto st = body.text("status", false)) {
    p.status = domain::parse_conversation_status(*st);
    if (!p.status) body.add({"body", "status"}, domain::conversation_status_choices(), "enum");
  }
  if (body.is_null("assignee_id")) {
    body.raw("assignee_id");
    p.assignee_id = std::optional<std::int64_t>();
  } else if (auto a = body.integer("assignee_id", false)) {
    if (*a < 1)
      body.add({"body", "assignee_id"}, "Input should be greater than or equal to 1",
               "greater_than_equal");
    else
      p.assignee_id = std::optional<std::int64_t>(*a);
  }
  // false gives the conversation back to the AI agents after a hand-off (docs/ai.md).
  p.ai_paused = body.boolean("ai_paused", false);
  p.labels = read_labels(body);
  if (body.is_null("priority")) {
    body.raw("priority");
    p.priority = std::optional<domain::conversation_priority>();
  } else if (auto pr = body.one_of("priority", false, rules::conversation_priorities)) {
    p.priority = domain::parse_conversation_priority(*pr);
  }
  if (!body.finish()) return ex->fail(body.failure());
  actors::update_conversation(s.rt, ex->who.tenant_id, *id, p, json_reply(ex));
}

void read(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::mark_read(s.rt, ex->who.tenant_id, *id, json_reply(ex));
}

void messages(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  auto id = path_id(ex->param("id"), "id", issues);
  auto page = query_int(ex->req, "page", 1, 1, paging_rules::page_max, issues);
  auto per_page =
      query_int(ex->req, "per_page", messages_per_page_default, 1, messages_per_page_max, issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::list_messages(s.rt, ex->who.tenant_id, *id, *page, *per_page, json_reply(ex));
}

// `attachments`: at most 10 files, each {"filename", "content_type", "data": base64}, an image,
// PDF or audio of at most 16 MiB (docs/channels.md "Media").
std::optional<std::vector<domain::media_ref>> read_files(body_reader& body) {
  auto v = body.raw("attachments");
  if (!v) return std::nullopt;
  auto a = v->if_array();
  if (!a || a->empty() || a->size() > domain::media_per_message_max) {
    body.add({"body", "attachments"},
             "Input should be a list of 1 to " + std::to_string(domain::media_per_message_max) +
                 " files",
             "list_type");
    return std::nullopt;
  }
  std::vector<domain::media_ref> out;
  bool ok = true;
  for (std::size_t i = 0; i < a->size(); ++i) {
    auto at = [&](const char* key) -> std::vector<domain::loc_part> {
      std::vector<domain::loc_part> loc{std::string("body"), std::string("attachments"),
                                        static_cast<std::int64_t>(i)};
      if (*key) loc.emplace_back(std::string(key));
      return loc;
    };
    auto o = (*a)[i].if_object();
    if (!o) {
      body.add(at(""), "Input should be an object {filename, content_type, data}", "dict_type");
      ok = false;
      continue;
    }
    auto str = [&](const char* key, std::size_t max) -> std::optional<std::string> {
      auto f = o->if_contains(key);
      auto sv = f ? f->if_string() : nullptr;
      if (!sv || sv->empty() || sv->size() > max) {
        body.add(at(key), "Field required: a text of 1 to " + std::to_string(max) + " characters",
                 "missing");
        return std::nullopt;
      }
      return std::string(*sv);
    };
    for (auto& [k, _] : *o)
      if (k != "filename" && k != "content_type" && k != "data") {
        body.add(at(std::string(k).c_str()), "Extra inputs are not permitted", "extra_forbidden");
        ok = false;
      }
    auto name = str("filename", 200);
    auto type = str("content_type", 100);
    auto data = str("data", (domain::media::max_bytes / 3 + 1) * 4 + 4);
    if (!name || !type || !data) {
      ok = false;
      continue;
    }
    auto bytes = domain::base64_decode(*data);
    if (!bytes) {
      body.add(at("data"), "Input should be base64 (the standard alphabet)", "value_error");
      ok = false;
      continue;
    }
    if (auto no = domain::media::refusal(*type, bytes->size())) {
      body.add(at(""), *no, "value_error");
      ok = false;
      continue;
    }
    out.push_back({"", domain::media::base_type(*type), std::move(*name), std::move(*bytes)});
  }
  if (!ok) return std::nullopt;
  return out;
}

void post_message(services& s, const exchange_ptr& ex) {
  std::vector<issue> path_issues;
  auto id = path_id(ex->param("id"), "id", path_issues);
  body_reader body(ex->req.body);
  for (auto& i : path_issues) body.issues().push_back(i);
  // A WhatsApp template may stand in for the text (outside the 24-hour window it must), and so
  // may a canned response.
  std::optional<domain::whatsapp::template_message> tpl;
  if (auto t = body.raw("template"); t && !t->is_null())
    tpl = domain::whatsapp::parse_template(*t, {std::string("body"), std::string("template")},
                                           body.issues());
  auto canned = body.id("canned_response_id", false);
  const bool template_sent = body.raw("template") && !body.raw("template")->is_null();
  auto files = read_files(body);
  auto text = body.text(
      "text", !template_sent && !body.has("canned_response_id") && !body.has("attachments"),
      {.min = 1, .max = rules::text_max});
  if (text && text->find_first_not_of(blank) == std::string::npos) {
    body.add({"body", "text"}, "String should have at least 1 character", "string_too_short");
    text.reset();
  }
  if (canned && (text || template_sent))
    body.add({"body", "canned_response_id"},
             "a canned response is the message's text: send it without text or template",
             "value_error");
  auto purpose = body.one_of("purpose", false, domain::consent_rules::purposes);
  if (!body.finish()) return ex->fail(body.failure());
  actors::outbound_request req;
  req.conversation_id = *id;
  if (tpl) {
    req.template_json = domain::whatsapp::template_to_json(*tpl);
    req.text = text ? *text : domain::whatsapp::template_text(*tpl);
  } else if (text) {
    req.text = *text;
  }
  if (purpose) req.purpose = domain::parse_consent_purpose(*purpose).value_or(req.purpose);
  if (files) req.media = std::move(*files);
  req.sender_user_id = ex->who.acting_user();
  auto reply = created_reply(ex, "/api/v1/conversations/" + std::to_string(*id) + "/messages/");
  if (!canned) return actors::send_message(s.rt, ex->who.tenant_id, std::move(req), reply);
  // The canned response's text, then its placeholders filled for the conversation's contact.
  actors::canned_text(
      s.rt, ex->who.tenant_id, *canned,
      actors::callback<std::string>(
          [&s, ex, req = std::move(req), reply](domain::outcome<std::string> r) mutable {
            if (!r) {
              if (r.error().code != domain::errc::not_found &&
                  r.error().code != domain::errc::insufficient_permissions)
                return ex->fail(r.error());
              return ex->fail(failure::invalid({{{"body", "canned_response_id"},
                                                 "no canned response of the tenant has this id",
                                                 "value_error"}}));
            }
            req.text = std::move(*r);
            req.fill_for_contact = true;
            actors::send_message(s.rt, ex->who.tenant_id, std::move(req), reply);
          }));
}

// GET /messages/{id}/attachments/{n}: the file as it came, never rendered by the browser.
void attachment(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  auto id = path_id(ex->param("id"), "id", issues);
  std::optional<int> n;
  auto text = ex->param("n");
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc{} && end == text.data() + text.size() && value >= 0 &&
      value < static_cast<int>(domain::media_per_message_max))
    n = value;
  else
    issues.push_back({{"path", "n"},
                      "Input should be an integer from 0 to " +
                          std::to_string(domain::media_per_message_max - 1),
                      "int_parsing"});
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::read_attachment(
      s.rt, ex->who.tenant_id, *id, *n,
      actors::callback<actors::attachment>([ex](domain::outcome<actors::attachment> r) {
        if (!r) return ex->fail(r.error());
        std::string name;
        for (char c : r->filename)
          name += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_')
                      ? c
                      : '_';
        response res;
        res.body = std::move(r->data);
        res.content_type =
            r->content_type.empty() ? std::string("application/octet-stream") : r->content_type;
        res.headers.emplace_back("Content-Disposition",
                                 "attachment; filename=\"" +
                                     (name.empty() ? std::string("attachment") : name) + "\"");
        res.headers.emplace_back("X-Content-Type-Options", "nosniff");
        res.headers.emplace_back("Cache-Control", "private, no-store");
        ex->respond(std::move(res));
      }));
}

// GET /reports/conversations?from=&to=&group_by=: `to` defaults to now, `from` to 30 days
// before it; the span is at most a year.
void report(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  auto instant = [&](const char* name) -> std::optional<std::int64_t> {
    auto v = ex->req.query_value(name);
    if (!v) return std::nullopt;
    auto t = domain::parse_rfc3339(*v);
    if (!t)
      issues.push_back(
          {{"query", name}, "Input should be an RFC 3339 date-time", "datetime_parsing"});
    return t;
  };
  auto to = instant("to");
  auto from = instant("from");
  std::string group_by = "channel";
  if (auto g = ex->req.query_value("group_by")) {
    if (*g != "channel" && *g != "assignee" && *g != "team")
      issues.push_back(
          {{"query", "group_by"}, "Input should be 'channel', 'assignee' or 'team'", "enum"});
    group_by = std::string(*g);
  }
  constexpr std::int64_t day = 86'400'000'000;
  auto end = to.value_or(domain::now_micros());
  auto start = from.value_or(end - 30 * day);
  if (issues.empty() && (start >= end || end - start > 366 * day))
    issues.push_back(
        {{"query", "from"}, "from must be before to, at most a year before", "value_error"});
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::conversation_report(s.rt, ex->who.tenant_id, start, end, std::move(group_by),
                              json_reply(ex));
}

// ---- OpenAPI schemas -------------------------------------------------------------------------

// A message's direction and status as stored (persistence/migrations/005_channels.sql).
constexpr std::array<std::string_view, 2> message_directions{"inbound", "outbound"};
constexpr std::array<std::string_view, 6> message_statuses{"received",  "queued", "sent",
                                                           "delivered", "read",   "failed"};

constexpr const char* send_example = R"({
  "text": "Your appointment is confirmed for Tuesday at 10:00.",
  "purpose": "appointment_reminders"
})";

constexpr std::array<std::string_view, 4> attachment_statuses{"pending", "stored", "refused",
                                                              "failed"};

// A message's send takes a body of up to 24 MiB (a file of 16 MiB in base64 with its text),
// whatever --body-limit says for the other routes.
route with_files(route rt) {
  rt.body_limit = send_body_limit;
  return rt;
}

void define_conversation_schemas(router& r) {
  using namespace schema;
  // domain::conversation_to_json
  define(r, "Conversation",
         object({{"id", id()},
                 {"channel_id", id()},
                 {"contact_id", id()},
                 {"status", one_of(rules::conversation_statuses)},
                 {"assignee_id", nullable(id())},
                 {"team_id", nullable(id())},
                 {"unread_count", integer()},
                 {"ai_paused", boolean()},
                 {"handoff_reason", nullable(text({}))},
                 {"last_message_at", timestamp()},
                 {"last_inbound_at", nullable(timestamp())},
                 {"first_response_at", nullable(timestamp())},
                 {"resolved_at", nullable(timestamp())},
                 {"labels", array_of(text({}))},
                 {"priority", nullable(one_of(rules::conversation_priorities))},
                 {"created_at", timestamp()},
                 {"updated_at", timestamp()}}));
  define(r, "ConversationPage", page_of("Conversation"));
  auto labels = array_of(text(label_rule));
  labels["maxItems"] = static_cast<std::int64_t>(rules::labels_max);
  labels["description"] = "the whole set (kept sorted, without repeats)";
  // null assignee_id: unassigned; ai_paused false gives the conversation back to the agents.
  define(r, "ConversationUpdate",
         object({{"status", one_of(rules::conversation_statuses), false},
                 {"assignee_id", nullable(id()), false},
                 {"ai_paused", boolean(), false},
                 {"labels", labels, false},
                 {"priority", nullable(one_of(rules::conversation_priorities)), false}}));
  // persistence::message_json
  define(r, "ConversationMessage",
         object({{"id", id()},
                 {"conversation_id", id()},
                 {"direction", one_of(message_directions)},
                 {"text", text({})},
                 {"external_message_id", nullable(text({}))},
                 {"status", one_of(message_statuses)},
                 {"error", nullable(text({}))},
                 {"attempts", integer()},
                 {"sender_user_id", nullable(id())},
                 {"sender_agent_id", nullable(id())},
                 {"segments", nullable(integer())},
                 {"subject", nullable(text({}))},
                 {"attachments", array_of(object({{"n", integer()},
                                                  {"content_type", text({})},
                                                  {"filename", text({})},
                                                  {"size", nullable(integer())},
                                                  {"status", one_of(attachment_statuses)},
                                                  {"error", nullable(text({}))}}))},
                 {"created_at", timestamp()},
                 {"sent_at", nullable(timestamp())}}));
  define(r, "ConversationMessagePage", page_of("ConversationMessage"));
  // persistence::conversation_report
  auto spread = object({{"median", nullable(number())}, {"p90", nullable(number())}});
  auto group = object({{"key", nullable(id())},
                       {"conversations", integer()},
                       {"responded", integer()},
                       {"resolved", integer()},
                       {"first_response_seconds", spread},
                       {"resolution_seconds", spread}});
  auto total = object({{"conversations", integer()},
                       {"responded", integer()},
                       {"resolved", integer()},
                       {"first_response_seconds", spread},
                       {"resolution_seconds", spread}});
  define(
      r, "ConversationReport",
      object({{"from", timestamp()},
              {"to", timestamp()},
              {"group_by", one_of(std::array<std::string_view, 3>{"channel", "assignee", "team"})},
              {"groups", array_of(group)},
              {"total", total}}));
  auto text_rule = text({.min = 1, .max = rules::text_max});
  text_rule["pattern"] = "[^" + std::string(blank) + "]"; // not white space alone
  auto purpose = one_of(domain::consent_rules::purposes);
  purpose["default"] = domain::to_string(actors::outbound_request{}.purpose);
  purpose["description"] = "what the message is for: the contact's consents must allow it";
  auto tpl = object(
      {{"name", text_matching("^[a-z0-9_]{1,512}$")},
       {"language", text_matching("^[A-Za-z_]{2,15}$")},
       {"parameters", array_of(text({.min = 1, .max = domain::whatsapp::template_parameter_max})),
        false}});
  tpl["description"] = "WhatsApp: an approved template sent instead of free text (required "
                       "outside the 24-hour window); text is then optional, how staff read it";
  auto canned = id();
  canned["description"] = "a canned response sent as the text, its {{contact.*}} placeholders "
                          "filled for the conversation's contact (without text or template)";
  auto file = object({{"filename", text({.min = 1, .max = 200})},
                      {"content_type", one_of(domain::media::allowed_types)},
                      {"data", text({.min = 1})}});
  file["description"] = "a file of at most 16 MiB, its bytes in base64 (the whole request at "
                        "most 24 MiB)";
  auto files = array_of(file);
  files["minItems"] = 1;
  files["maxItems"] = static_cast<std::int64_t>(domain::media_per_message_max);
  files["description"] = "sent with the message (docs/channels.md \"Media\"): WhatsApp one a "
                         "message, Telegram none; without text, staff read the file names";
  auto send = object({{"text", text_rule, false},
                      {"template", nullable(std::move(tpl)), false},
                      {"canned_response_id", canned, false},
                      {"attachments", files, false},
                      {"purpose", purpose, false}});
  send["anyOf"] = json::array{object_t{{"required", json::array{"text"}}},
                              object_t{{"required", json::array{"template"}}},
                              object_t{{"required", json::array{"canned_response_id"}}},
                              object_t{{"required", json::array{"attachments"}}}};
  define(r, "ConversationMessageSend", std::move(send));
}

} // namespace

void add_conversation_routes(router& r, services& s) {
  using domain::permission;
  using schema::query;
  define_conversation_schemas(r);
  r.add({verb::get, "/api/v1/reports/conversations", access::bearer, permission::manage_automation,
         bind(s, report),
         "Response and resolution times of the conversations opened in a span (from, to, "
         "group_by channel|assignee|team)",
         "inbox"},
        route_doc("", "ConversationReport")
            .with_query({query("from", schema::timestamp(), "start (default: 30 days before to)"),
                         query("to", schema::timestamp(), "end, excluded (default: now)"),
                         query("group_by",
                               schema::one_of(
                                   std::array<std::string_view, 3>{"channel", "assignee", "team"}),
                               "what the groups are (default channel)")}));
  r.add({verb::get, "/api/v1/conversations", access::bearer, permission::read_records,
         bind(s, list),
         "List conversations (status, channel_id, contact_id, assignee_id, team_id, label, "
         "priority)",
         "conversations"},
        route_doc("", "ConversationPage")
            .with_query(schema::paging())
            .with_query({query("status", schema::one_of(rules::conversation_statuses),
                               "only conversations in this status"),
                         query("channel_id", schema::id(), "only this channel's"),
                         query("contact_id", schema::id(), "only this contact's"),
                         query("assignee_id", schema::id(), "only those assigned to this user"),
                         query("team_id", schema::id(), "only those routed to this team"),
                         query("label", schema::text({}), "only those with this label"),
                         query("priority", schema::one_of(rules::conversation_priorities),
                               "only those of this priority")}));
  r.add({verb::get, "/api/v1/conversations/{id}", access::bearer, permission::read_records,
         bind(s, get), "Get a conversation", "conversations"},
        {"", "Conversation"});
  r.add({verb::patch, "/api/v1/conversations/{id}", access::bearer, permission::write_records,
         bind(s, update), "Change a conversation's status, assignee, labels or priority",
         "conversations"},
        {"ConversationUpdate", "Conversation"});
  r.add({verb::post, "/api/v1/conversations/{id}/read", access::bearer, permission::write_records,
         bind(s, read), "Mark a conversation read", "conversations"},
        route_doc("", "Conversation").without_body());
  r.add({verb::get, "/api/v1/conversations/{id}/messages", access::bearer, permission::read_records,
         bind(s, messages), "Messages of a conversation, oldest first", "conversations"},
        route_doc("", "ConversationMessagePage")
            .with_query(schema::paging(messages_per_page_default, messages_per_page_max)));
  // 409: still being fetched from the provider, or not kept (over 16 MiB, a type not allowed).
  r.add({verb::get, "/api/v1/messages/{id}/attachments/{n}", access::bearer,
         permission::read_records, bind(s, attachment),
         "A file a message carried (n from 0), as it came: images, PDF, audio", "conversations"},
        route_doc().with_media("", "application/octet-stream").fails_with({409}));
  // 409: the channel is inactive, or the contact's consents refuse the purpose.
  r.add(with_files({verb::post, "/api/v1/conversations/{id}/messages", access::bearer,
                    permission::write_records, bind(s, post_message),
                    "Send a message through the conversation's channel (queued, then sent)",
                    "conversations", 201}),
        route_doc("ConversationMessageSend", "ConversationMessage").with_example(send_example));
}

} // namespace crm::http
