// Outbound webhook subscriptions (contract §7, docs/automation.md): CRUD, the delivery log and
// redelivery. Admins only.
#include "http/api.hpp"

#include "actors/workflows.hpp"
#include "http/json.hpp"
#include "http/request_input.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <set>

namespace json = boost::json;

namespace crm::http {
namespace {

using domain::failure;
using domain::issue;

std::optional<std::string> read_url(body_reader& body, bool required) {
  auto url = body.text("url", required, {.min = 1, .max = 2048, .trim = true});
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
  for (std::size_t i = 0; i < a->size(); ++i) {
    auto s = (*a)[i].if_string();
    auto& names = domain::record_event_names();
    // AI agents' decisions (docs/ai.md) reach subscribers, not workflow triggers.
    static constexpr std::string_view ai_events[] = {"ai.replied", "ai.handoff"};
    auto known = [&](std::string_view e) {
      return std::find(names.begin(), names.end(), e) != names.end() ||
             std::find(std::begin(ai_events), std::end(ai_events), e) != std::end(ai_events);
    };
    if (!s || (*s != "*" && !known(std::string_view(*s)))) {
      std::string allowed = "'*'";
      for (auto n : names) allowed += ", '" + std::string(n) + "'";
      for (auto n : ai_events) allowed += ", '" + std::string(n) + "'";
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
  auto description = body.nullable_text("description", {.max = 500});
  auto secret = body.text("secret", false, {.min = 16, .max = 256});
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
  auto page = query_int(ex->req, "page", 1, 1, 1'000'000, issues);
  auto per_page = query_int(ex->req, "per_page", 20, 1, 100, issues);
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
  p.description = body.nullable_text("description", {.max = 500});
  p.secret = body.text("secret", false, {.min = 16, .max = 256});
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
  auto page = query_int(ex->req, "page", 1, 1, 1'000'000, issues);
  auto per_page = query_int(ex->req, "per_page", 20, 1, 100, issues);
  std::optional<std::string> status;
  if (auto v = ex->req.query_value("status")) {
    if (*v == "pending" || *v == "succeeded" || *v == "failed")
      status = std::string(*v);
    else
      issues.push_back(
          {{"query", "status"}, "Input should be 'pending', 'succeeded' or 'failed'", "enum"});
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
        json::object o{{"delivery_id", delivery}, {"status", "pending"}};
        ex->json(202, json::serialize(o));
      }));
}

} // namespace

void add_webhook_subscription_routes(router& r, services& s) {
  constexpr auto admin = domain::permission::administer;
  const std::string base = "/api/v1/webhook-subscriptions";
  r.add({verb::get, base, access::bearer, admin, bind(s, list), "List webhook subscriptions",
         "webhooks"});
  r.add({verb::post, base, access::bearer, admin, bind(s, create),
         "Subscribe a URL to record events (secret generated when absent)", "webhooks", 201});
  r.add({verb::get, base + "/{id}", access::bearer, admin, bind(s, get),
         "Get a webhook subscription", "webhooks"});
  r.add({verb::put, base + "/{id}", access::bearer, admin, bind(s, update),
         "Update a webhook subscription (fields sent)", "webhooks"});
  r.add({verb::patch, base + "/{id}", access::bearer, admin, bind(s, update),
         "Update a webhook subscription (fields sent)", "webhooks"});
  r.add({verb::del, base + "/{id}", access::bearer, admin, bind(s, remove),
         "Delete a webhook subscription", "webhooks", 204});
  r.add({verb::get, base + "/{id}/deliveries", access::bearer, admin, bind(s, deliveries),
         "Deliveries of a subscription with their attempts (page, per_page, status)", "webhooks"});
  r.add({verb::post, base + "/{id}/deliveries/{delivery_id}/redeliver", access::bearer, admin,
         bind(s, redeliver), "Deliver again now", "webhooks", 202});
}

} // namespace crm::http
