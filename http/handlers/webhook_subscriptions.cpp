// Outbound webhook subscriptions (contract §7, docs/automation.md): CRUD, the delivery log and
// redelivery. Admins only.
#include "http/api.hpp"

#include "actors/workflows.hpp"
#include "http/json.hpp"
#include "http/openapi_schema.hpp"
#include "http/request_input.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <array>
#include <set>

namespace json = boost::json;

namespace crm::http {
namespace {

using domain::failure;
using domain::issue;

// The rules of a subscription's fields, shared by the readers below and the OpenAPI schemas.
namespace subscription_rules {
// parse_url's limit too.
constexpr text_rule url{.min = 1, .max = domain::workflow_rules::url_max, .trim = true};
constexpr text_rule description{.max = 500};
constexpr text_rule secret{.min = 16, .max = 256};
constexpr std::string_view every_event = "*";
// AI agents' decisions (docs/ai.md) reach subscribers, not workflow triggers.
constexpr std::array<std::string_view, 2> ai_events{"ai.replied", "ai.handoff"};
} // namespace subscription_rules

// What `events` may name: "*", the record events, the AI agents' events.
const std::vector<std::string_view>& event_names() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> out{subscription_rules::every_event};
    for (auto n : domain::record_event_names()) out.push_back(n);
    for (auto n : subscription_rules::ai_events) out.push_back(n);
    return out;
  }();
  return names;
}

std::optional<std::string> read_url(body_reader& body, bool required) {
  auto url = body.text("url", required, subscription_rules::url);
  if (url && !domain::parse_url(*url)) {
    body.add({"body", "url"},
             "URL must be http:// or https:// with a host (no user info or fragment)",
             "value_error");
    return std::nullopt;
  }
  return url;
}

std::optional<std::vector<std::string>> read_events(body_reader& body, bool required) {
  auto v = body.raw("events");
  if (!body.valid_json()) return std::nullopt;
  if (!v) {
    if (required) body.add({"body", "events"}, "Field required", "missing");
    return std::nullopt;
  }
  auto a = v->if_array();
  if (!a || a->empty()) {
    body.add({"body", "events"}, "events must be a non-empty list of event names", "value_error");
    return std::nullopt;
  }
  std::vector<std::string> out;
  std::set<std::string> seen;
  bool ok = true;
  auto& names = event_names();
  for (std::size_t i = 0; i < a->size(); ++i) {
    auto s = (*a)[i].if_string();
    if (!s || std::find(names.begin(), names.end(), std::string_view(*s)) == names.end()) {
      std::string allowed;
      for (auto n : names) allowed += (allowed.empty() ? "'" : ", '") + std::string(n) + "'";
      body.add({"body", "events", static_cast<std::int64_t>(i)}, "Input should be " + allowed,
               "enum");
      ok = false;
      continue;
    }
    std::string e(s->c_str());
    if (seen.insert(e).second) out.push_back(std::move(e));
  }
  if (!ok) return std::nullopt;
  return out;
}

void create(services& s, const exchange_ptr& ex) {
  body_reader body(ex->req.body);
  auto url = read_url(body, true);
  auto events = read_events(body, true);
  auto description = body.nullable_text("description", subscription_rules::description);
  auto secret = body.text("secret", false, subscription_rules::secret);
  auto active = body.boolean("is_active", false);
  if (!body.finish()) return ex->fail(body.failure());
  domain::webhook_subscription sub;
  sub.url = *url;
  sub.events = std::move(*events);
  if (description) sub.description = *description;
  sub.secret = secret ? *secret : domain::generate_webhook_secret();
  sub.is_active = active.value_or(true);
  actors::create_subscription(s.rt, ex->who.tenant_id, std::move(sub), !secret,
                              created_reply(ex, "/api/v1/webhook-subscriptions/"));
}

void list(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  auto page = query_int(ex->req, "page", 1, 1, paging_rules::page_max, issues);
  auto per_page = query_int(ex->req, "per_page", paging_rules::per_page_default, 1,
                            paging_rules::per_page_max, issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::list_subscriptions(s.rt, ex->who.tenant_id, *page, *per_page, json_reply(ex));
}

void get(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::get_subscription(s.rt, ex->who.tenant_id, *id, json_reply(ex));
}

void update(services& s, const exchange_ptr& ex) {
  std::vector<issue> path_issues;
  auto id = path_id(ex->param("id"), "id", path_issues);
  body_reader body(ex->req.body);
  for (auto& i : path_issues) body.issues().push_back(i);
  actors::subscription_patch p;
  p.url = read_url(body, false);
  p.events = read_events(body, false);
  p.description = body.nullable_text("description", subscription_rules::description);
  p.secret = body.text("secret", false, subscription_rules::secret);
  p.is_active = body.boolean("is_active", false);
  if (!body.finish()) return ex->fail(body.failure());
  actors::update_subscription(s.rt, ex->who.tenant_id, *id, std::move(p), json_reply(ex));
}

void remove(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::delete_subscription(s.rt, ex->who.tenant_id, *id, no_content_reply(ex));
}

void deliveries(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  auto id = path_id(ex->param("id"), "id", issues);
  auto page = query_int(ex->req, "page", 1, 1, paging_rules::page_max, issues);
  auto per_page = query_int(ex->req, "per_page", paging_rules::per_page_default, 1,
                            paging_rules::per_page_max, issues);
  std::optional<std::string> status;
  if (auto v = ex->req.query_value("status")) {
    auto& statuses = domain::delivery_statuses;
    if (std::find(statuses.begin(), statuses.end(), *v) != statuses.end()) {
      status = std::string(*v);
    } else {
      std::string allowed;
      for (std::size_t i = 0; i < statuses.size(); ++i)
        allowed += std::string(i == 0                     ? "'"
                               : i + 1 == statuses.size() ? " or '"
                                                          : ", '") +
                   std::string(statuses[i]) + "'";
      issues.push_back({{"query", "status"}, "Input should be " + allowed, "enum"});
    }
  }
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::list_deliveries(s.rt, ex->who.tenant_id, *id, status, *page, *per_page, json_reply(ex));
}

void redeliver(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  auto id = path_id(ex->param("id"), "id", issues);
  auto delivery = path_id(ex->param("delivery_id"), "delivery_id", issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::redeliver(
      s.rt, ex->who.tenant_id, *id, *delivery,
      actors::callback<domain::done>([ex, delivery = *delivery](domain::outcome<domain::done> r) {
        if (!r) return ex->fail(r.error());
        json::object o{{"delivery_id", delivery}, {"status", domain::delivery_statuses[0]}};
        ex->json(202, json::serialize(o));
      }));
}

void define_subscription_schemas(router& r) {
  using namespace schema;
  namespace rules = subscription_rules;
  auto url = text(rules::url);
  url["description"] = "http:// or https:// with a host, without user info or fragment";
  auto events = array_of(one_of(event_names()));
  events["minItems"] = 1;
  events["description"] = "the events to deliver (\"*\": every one); duplicates are dropped";
  auto input = [&](bool creating) {
    auto o = object({{"url", url, creating},
                     {"events", events, creating},
                     {"description", nullable(text(rules::description)), false},
                     {"secret", text(rules::secret), false},
                     {"is_active", boolean(), false}});
    auto& props = o["properties"].as_object();
    props["secret"].as_object()["description"] =
        "write-only: signs the deliveries (Standard Webhooks); generated when absent on create";
    props["is_active"].as_object()["default"] = true;
    return o;
  };
  define(r, "WebhookSubscriptionCreate", input(true));
  define(r, "WebhookSubscriptionUpdate", input(false));
  auto subscription = [&](bool created) {
    auto o = object({{"id", id()},
                     {"url", text({})},
                     {"events", array_of(one_of(event_names()))},
                     {"description", nullable(text({}))},
                     {"is_active", boolean()},
                     {"has_secret", boolean()},
                     {"disabled_reason", nullable(text({}))},
                     {"created_at", timestamp()},
                     {"updated_at", timestamp()}});
    if (created)
      o["properties"].as_object()["secret"] = object_t{
          {"type", "string"},
          {"description", "the generated secret, shown this once (absent when one was sent)"}};
    return o;
  };
  define(r, "WebhookSubscription", subscription(false));
  define(r, "WebhookSubscriptionCreated", subscription(true));
  define(r, "WebhookSubscriptionPage", page_of("WebhookSubscription"));
  define(r, "WebhookDeliveryAttempt",
         object({{"attempt", integer()},
                 {"at", timestamp()},
                 {"status_code", nullable(integer())},
                 {"error", nullable(text({}))},
                 {"duration_ms", integer()}}));
  define(r, "WebhookDelivery",
         object({{"id", id()},
                 {"subscription_id", id()},
                 {"event", text({})},
                 {"webhook_id", text({})},
                 {"status", one_of(domain::delivery_statuses)},
                 {"attempts", integer()},
                 {"next_attempt_at", nullable(timestamp())},
                 {"last_status_code", nullable(integer())},
                 {"last_error", nullable(text({}))},
                 {"payload", any_object()},
                 {"created_at", timestamp()},
                 {"delivered_at", nullable(timestamp())},
                 {"attempt_log", array_of(ref("WebhookDeliveryAttempt"))}}));
  define(r, "WebhookDeliveryPage", page_of("WebhookDelivery"));
  define(r, "WebhookRedelivery",
         object({{"delivery_id", id()},
                 {"status", one_of(std::span(domain::delivery_statuses).first(1))}}));
}

constexpr const char* subscription_example = R"({
  "url": "https://example.org/hooks/carecrm",
  "events": ["contact.created", "deal.won"],
  "description": "Sync new patients and won deals to the billing system"
})";

} // namespace

void add_webhook_subscription_routes(router& r, services& s) {
  constexpr auto admin = domain::permission::administer;
  const std::string base = "/api/v1/webhook-subscriptions";
  define_subscription_schemas(r);
  auto deliveries_query = schema::paging();
  deliveries_query.push_back(schema::query("status", schema::one_of(domain::delivery_statuses),
                                           "only deliveries in this status"));
  r.add({verb::get, base, access::bearer, admin, bind(s, list), "List webhook subscriptions",
         "webhooks"},
        route_doc("", "WebhookSubscriptionPage").with_query(schema::paging()));
  r.add({verb::post, base, access::bearer, admin, bind(s, create),
         "Subscribe a URL to record events (secret generated when absent)", "webhooks", 201},
        route_doc("WebhookSubscriptionCreate", "WebhookSubscriptionCreated")
            .with_example(subscription_example));
  r.add({verb::get, base + "/{id}", access::bearer, admin, bind(s, get),
         "Get a webhook subscription", "webhooks"},
        {"", "WebhookSubscription"});
  r.add({verb::put, base + "/{id}", access::bearer, admin, bind(s, update),
         "Update a webhook subscription (fields sent)", "webhooks"},
        {"WebhookSubscriptionUpdate", "WebhookSubscription"});
  r.add({verb::patch, base + "/{id}", access::bearer, admin, bind(s, update),
         "Update a webhook subscription (fields sent)", "webhooks"},
        {"WebhookSubscriptionUpdate", "WebhookSubscription"});
  r.add({verb::del, base + "/{id}", access::bearer, admin, bind(s, remove),
         "Delete a webhook subscription", "webhooks", 204});
  r.add({verb::get, base + "/{id}/deliveries", access::bearer, admin, bind(s, deliveries),
         "Deliveries of a subscription with their attempts (page, per_page, status)", "webhooks"},
        route_doc("", "WebhookDeliveryPage").with_query(std::move(deliveries_query)));
  r.add({verb::post, base + "/{id}/deliveries/{delivery_id}/redeliver", access::bearer, admin,
         bind(s, redeliver), "Deliver again now", "webhooks", 202},
        route_doc("", "WebhookRedelivery").without_body().fails_with({409})); // inactive
}

} // namespace crm::http
