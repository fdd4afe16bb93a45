// Channel endpoints (contract §8, docs/channels.md): CRUD (admins) and the inbound webhooks of
// external systems (no JWT: the channel's secret; generic api bodies and Telegram updates).
#include "http/api.hpp"

#include "actors/channels.hpp"
#include "http/json.hpp"
#include "http/owner_directory.hpp"
#include "http/request_input.hpp"
#include "persistence/channel_repo.hpp"
#include "persistence/pg_pool.hpp"

#include <boost/json.hpp>

namespace json = boost::json;

namespace crm::http {
namespace {

owner_directory& channel_owners() {
  static owner_directory directory("channel", &persistence::tenant_of_channel);
  return directory;
}

using domain::failure;
using domain::issue;

constexpr const char* type_names = "'api', 'telegram', 'whatsapp', 'sms' or 'email'";

std::optional<domain::channel_type> read_type(body_reader& body, bool required) {
  auto t = body.text("type", required);
  if (!t) return std::nullopt;
  auto type = domain::parse_channel_type(*t);
  if (!type) body.add({"body", "type"}, std::string("Input should be ") + type_names, "enum");
  return type;
}

void create(services& s, const exchange_ptr& ex) {
  body_reader body(ex->req.body);
  auto name = body.text("name", true, {.min = 1, .max = 200, .trim = true});
  auto type = read_type(body, true);
  auto cfg = body.raw("config");
  std::optional<json::object> config;
  if (type)
    config = domain::parse_channel_config(*type, cfg ? *cfg : json::value(json::object()), nullptr,
                                          body.issues());
  auto secret = body.nullable_text("webhook_secret", {.min = 16, .max = 256});
  auto active = body.boolean("is_active", false);
  if (!body.finish() || !config) return ex->fail(body.failure());
  domain::channel c;
  c.name = *name;
  c.type = *type;
  c.config = std::move(*config);
  if (secret) c.webhook_secret = *secret;
  c.is_active = active.value_or(true);
  actors::create_channel(
      s.rt, ex->who.tenant_id, std::move(c),
      forgetting_missing(channel_owners(), created_reply(ex, "/api/v1/channels/")));
}

void list(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  actors::channel_filter f;
  auto page = query_int(ex->req, "page", 1, 1, 1'000'000, issues);
  auto per_page = query_int(ex->req, "per_page", 20, 1, 100, issues);
  if (auto t = ex->req.query_value("type")) {
    f.type = domain::parse_channel_type(*t);
    if (!f.type)
      issues.push_back({{"query", "type"}, std::string("Input should be ") + type_names, "enum"});
  }
  f.is_active = query_bool(ex->req, "is_active", std::nullopt, issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  f.page = *page;
  f.per_page = *per_page;
  actors::list_channels(s.rt, ex->who.tenant_id, f, json_reply(ex));
}

void get(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::get_channel(s.rt, ex->who.tenant_id, *id, json_reply(ex));
}

void update(services& s, const exchange_ptr& ex) {
  std::vector<issue> path_issues;
  auto id = path_id(ex->param("id"), "id", path_issues);
  body_reader body(ex->req.body);
  for (auto& i : path_issues) body.issues().push_back(i);
  actors::channel_patch p;
  p.name = body.text("name", false, {.min = 1, .max = 200, .trim = true});
  p.type = read_type(body, false);
  if (auto cfg = body.raw("config")) p.config = *cfg;
  p.webhook_secret = body.nullable_text("webhook_secret", {.min = 16, .max = 256});
  p.is_active = body.boolean("is_active", false);
  if (!body.finish()) return ex->fail(body.failure());
  actors::update_channel(s.rt, ex->who.tenant_id, *id, std::move(p), json_reply(ex));
}

void remove(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::delete_channel(s.rt, ex->who.tenant_id, *id, no_content_reply(ex));
}

void inbound(services& s, const exchange_ptr& ex, actors::inbound_kind kind) {
  // The secret is checked before the body is even parsed; its absence first of all.
  std::optional<std::string_view> secret;
  if (kind == actors::inbound_kind::telegram) {
    secret = ex->req.header("x-telegram-bot-api-secret-token");
    if (!secret)
      return ex->fail(failure::invalid(
          {{{"header", "X-Telegram-Bot-Api-Secret-Token"}, "Field required", "missing"}}));
  } else {
    secret = ex->req.header("webhook_secret");
    if (!secret) secret = ex->req.header("webhook-secret");
    if (!secret)
      return ex->fail(
          failure::invalid({{{"header", "webhook_secret"}, "Field required", "missing"}}));
  }
  // The route shares its {id} segment with the CRUD routes; the specification names it
  // channel_id, and so do the validation errors.
  std::vector<issue> issues;
  auto id = path_id(ex->param("id"), "channel_id", issues);
  if (!id) return ex->fail(failure::invalid(std::move(issues)));
  actors::inbound_call call{kind, std::string(*secret), ex->req.body};
  // A workflow's http_request says how deep its chain is: a loop through this channel stops
  // like any other chain of workflows.
  if (auto v = ex->req.header("carecrm-chain-depth")) {
    for (char c : *v)
      if (c >= '0' && c <= '9' && call.depth < 100) call.depth = call.depth * 10 + (c - '0');
  }
  auto deliver = [&s, ex, id = *id](std::int64_t tenant, actors::inbound_call call) {
    actors::receive_inbound(s.rt, tenant, id, std::move(call), json_reply(ex));
  };
  channel_owners().find(
      s.pool, *id,
      [ex, deliver,
       call = std::move(call)](domain::outcome<std::optional<std::int64_t>> r) mutable {
        if (!r) return ex->fail(r.error());
        if (!*r) return ex->fail(failure::of(domain::errc::not_found, "channel not found"));
        deliver(**r, std::move(call));
      });
}

void api_webhook(services& s, const exchange_ptr& ex) {
  inbound(s, ex, actors::inbound_kind::api);
}
void telegram_webhook(services& s, const exchange_ptr& ex) {
  inbound(s, ex, actors::inbound_kind::telegram);
}

} // namespace

void add_channel_routes(router& r, services& s) {
  constexpr auto admin = domain::permission::administer;
  r.add({verb::get, "/api/v1/channels", access::bearer, admin, bind(s, list),
         "List channels (page, per_page, type, is_active)", "channels"});
  r.add({verb::post, "/api/v1/channels", access::bearer, admin, bind(s, create), "Create a channel",
         "channels", 201});
  r.add({verb::get, "/api/v1/channels/{id}", access::bearer, admin, bind(s, get), "Get a channel",
         "channels"});
  r.add({verb::put, "/api/v1/channels/{id}", access::bearer, admin, bind(s, update),
         "Update a channel (fields sent)", "channels"});
  r.add({verb::patch, "/api/v1/channels/{id}", access::bearer, admin, bind(s, update),
         "Update a channel (fields sent)", "channels"});
  r.add({verb::del, "/api/v1/channels/{id}", access::bearer, admin, bind(s, remove),
         "Delete a channel with its conversations", "channels", 204});
  r.add({verb::post,
         "/api/v1/channels/{id}/api/webhook",
         access::open,
         {},
         bind(s, api_webhook),
         "Receive a message from an external system (header webhook_secret)",
         "channels"},
        route_doc::secrets({"webhook_secret"}));
  r.add({verb::post,
         "/api/v1/channels/{id}/telegram/webhook",
         access::open,
         {},
         bind(s, telegram_webhook),
         "Receive a Telegram update (header X-Telegram-Bot-Api-Secret-Token)",
         "channels"},
        route_doc::secrets({"X-Telegram-Bot-Api-Secret-Token"}));
}

} // namespace crm::http
