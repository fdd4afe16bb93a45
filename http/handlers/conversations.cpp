// Conversations and messages (contract §8, docs/channels.md): everyone reads; agents and above
// change a conversation and send messages.
#include "http/api.hpp"

#include "actors/channels.hpp"
#include "http/json.hpp"
#include "http/request_input.hpp"

#include <boost/json.hpp>

namespace json = boost::json;

namespace crm::http {
namespace {

using domain::failure;
using domain::issue;

constexpr const char* status_names = "'open', 'pending' or 'closed'";

std::optional<std::int64_t> query_id(const request& req, std::string_view name,
                                     std::vector<issue>& issues) {
  auto v = req.query_value(name);
  if (!v) return std::nullopt;
  std::vector<issue> local;
  auto id = path_id(*v, name, local);
  if (!id)
    issues.push_back(
        {{"query", std::string(name)}, "Input should be a valid integer", "int_parsing"});
  return id;
}

void list(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  actors::conversation_filter f;
  auto page = query_int(ex->req, "page", 1, 1, 1'000'000, issues);
  auto per_page = query_int(ex->req, "per_page", 20, 1, 100, issues);
  if (auto v = ex->req.query_value("status")) {
    f.status = domain::parse_conversation_status(*v);
    if (!f.status)
      issues.push_back(
          {{"query", "status"}, std::string("Input should be ") + status_names, "enum"});
  }
  f.channel_id = query_id(ex->req, "channel_id", issues);
  f.contact_id = query_id(ex->req, "contact_id", issues);
  f.assignee_id = query_id(ex->req, "assignee_id", issues);
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
    if (!p.status)
      body.add({"body", "status"}, std::string("Input should be ") + status_names, "enum");
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
  auto page = query_int(ex->req, "page", 1, 1, 1'000'000, issues);
  auto per_page = query_int(ex->req, "per_page", 50, 1, 200, issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::list_messages(s.rt, ex->who.tenant_id, *id, *page, *per_page, json_reply(ex));
}

void post_message(services& s, const exchange_ptr& ex) {
  std::vector<issue> path_issues;
  auto id = path_id(ex->param("id"), "id", path_issues);
  body_reader body(ex->req.body);
  for (auto& i : path_issues) body.issues().push_back(i);
  auto text = body.text("text", true, {.min = 1, .max = 4096});
  if (text && text->find_first_not_of(" \t\r\n") == std::string::npos) {
    body.add({"body", "text"}, "String should have at least 1 character", "string_too_short");
    text.reset();
  }
  auto purpose = body.one_of("purpose", false,
                             {"treatment_communication", "appointment_reminders", "marketing",
                              "ai_processing", "data_sharing"});
  if (!body.finish()) return ex->fail(body.failure());
  actors::outbound_request req;
  req.conversation_id = *id;
  req.text = *text;
  if (purpose) req.purpose = domain::parse_consent_purpose(*purpose).value_or(req.purpose);
  req.sender_user_id = ex->who.user_id;
  actors::send_message(
      s.rt, ex->who.tenant_id, std::move(req),
      created_reply(ex, "/api/v1/conversations/" + std::to_string(*id) + "/messages/"));
}

} // namespace

void add_conversation_routes(router& r, services& s) {
  using domain::permission;
  r.add({verb::get, "/api/v1/conversations", access::bearer, permission::read_records,
         bind(s, list), "List conversations (status, channel_id, contact_id, assignee_id)",
         "conversations"});
  r.add({verb::get, "/api/v1/conversations/{id}", access::bearer, permission::read_records,
         bind(s, get), "Get a conversation", "conversations"});
  r.add({verb::patch, "/api/v1/conversations/{id}", access::bearer, permission::write_records,
         bind(s, update), "Change a conversation's status or assignee", "conversations"});
  r.add({verb::post, "/api/v1/conversations/{id}/read", access::bearer, permission::write_records,
         bind(s, read), "Mark a conversation read", "conversations"});
  r.add({verb::get, "/api/v1/conversations/{id}/messages", access::bearer, permission::read_records,
         bind(s, messages), "Messages of a conversation, oldest first", "conversations"});
  r.add({verb::post, "/api/v1/conversations/{id}/messages", access::bearer,
         permission::write_records, bind(s, post_message),
         "Send a message through the conversation's channel (queued, then sent)", "conversations",
         201});
}

} // namespace crm::http
