// The shared inbox's teams and availability (contract §12, docs/channels.md "Teams and
// assignment"): managers and admins shape the teams; every signed-in user says whether they
// are available for new conversations.
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
namespace rules = domain::team_rules;

constexpr text_rule name_rule{.min = 1, .max = rules::name_max, .trim = true};

// A list of ids at `key`: each a positive integer, at most `max` of them; nothing and an issue
// otherwise.
std::optional<std::vector<std::int64_t>> id_list(body_reader& body, const char* key,
                                                 std::size_t max) {
  auto v = body.raw(key);
  if (!v) return std::nullopt;
  auto a = v->if_array();
  if (!a) {
    body.add({"body", key}, "Input should be a valid list", "list_type");
    return std::nullopt;
  }
  if (a->size() > max) {
    body.add({"body", key},
             "List should have at most " + std::to_string(max) + " items after validation, not " +
                 std::to_string(a->size()),
             "too_long");
    return std::nullopt;
  }
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < a->size(); ++i) {
    auto n = (*a)[i].if_int64();
    if (!n || *n < 1) {
      body.add({"body", key, static_cast<std::int64_t>(i)}, "Input should be a positive integer",
               "int_type");
      return std::nullopt;
    }
    out.push_back(*n);
  }
  return out;
}

std::optional<std::optional<int>> cap(body_reader& body) {
  auto v = body.raw("max_open_per_member");
  if (!v) return std::nullopt;
  if (v->is_null()) return std::optional<int>();
  auto n = v->if_int64();
  if (!n || *n < 1 || *n > rules::max_open_max) {
    body.add({"body", "max_open_per_member"},
             "Input should be an integer from 1 to " + std::to_string(rules::max_open_max),
             "value_error");
    return std::nullopt;
  }
  return std::optional<int>(static_cast<int>(*n));
}

void create(services& s, const exchange_ptr& ex) {
  body_reader body(ex->req.body);
  domain::team t;
  auto name = body.text("name", true, name_rule);
  auto members = id_list(body, "member_ids", rules::members_max);
  auto channels = id_list(body, "channel_ids", rules::channels_max);
  auto max_open = cap(body);
  if (!body.finish()) return ex->fail(body.failure());
  t.name = *name;
  if (members) t.member_ids = *members;
  if (channels) t.channel_ids = *channels;
  if (max_open) t.max_open_per_member = *max_open;
  actors::create_team(s.rt, ex->who.tenant_id, std::move(t), created_reply(ex, "/api/v1/teams/"));
}

void list(services& s, const exchange_ptr& ex) {
  std::vector<domain::issue> issues;
  auto page = query_int(ex->req, "page", 1, 1, paging_rules::page_max, issues);
  auto per_page = query_int(ex->req, "per_page", paging_rules::per_page_default, 1,
                            paging_rules::per_page_max, issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::list_teams(s.rt, ex->who.tenant_id, *page, *per_page, json_reply(ex));
}

void get(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::get_team(s.rt, ex->who.tenant_id, *id, json_reply(ex));
}

void update(services& s, const exchange_ptr& ex) {
  std::vector<domain::issue> path_issues;
  auto id = path_id(ex->param("id"), "id", path_issues);
  body_reader body(ex->req.body);
  for (auto& i : path_issues) body.issues().push_back(i);
  domain::team_patch p;
  p.name = body.text("name", false, name_rule);
  p.member_ids = id_list(body, "member_ids", rules::members_max);
  p.channel_ids = id_list(body, "channel_ids", rules::channels_max);
  p.max_open_per_member = cap(body);
  if (!body.finish()) return ex->fail(body.failure());
  actors::update_team(s.rt, ex->who.tenant_id, *id, std::move(p), json_reply(ex));
}

void remove(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::delete_team(s.rt, ex->who.tenant_id, *id, no_content_reply(ex));
}

// The signed-in user's own availability (an API key has no user: 403).
std::optional<std::int64_t> me(const exchange_ptr& ex) {
  auto user = ex->who.acting_user();
  if (!user)
    ex->fail(failure::of(domain::errc::insufficient_permissions,
                         "availability is a signed-in user's: an API key has none"));
  return user;
}

void get_availability(services& s, const exchange_ptr& ex) {
  auto user = me(ex);
  if (!user) return;
  actors::get_availability(s.rt, ex->who.tenant_id, *user, json_reply(ex));
}

void put_availability(services& s, const exchange_ptr& ex) {
  body_reader body(ex->req.body);
  auto available = body.boolean("available", true);
  if (!body.finish()) return ex->fail(body.failure());
  auto user = me(ex);
  if (!user) return;
  actors::set_availability(s.rt, ex->who.tenant_id, *user, *available, json_reply(ex));
}

constexpr const char* create_example = R"({
  "name": "Front desk",
  "member_ids": [2, 3, 4],
  "channel_ids": [1],
  "max_open_per_member": 20
})";

void define_team_schemas(router& r) {
  using namespace schema;
  auto ids = [](std::size_t max) {
    auto a = array_of(id());
    a["maxItems"] = max;
    return a;
  };
  auto cap = integer();
  cap["minimum"] = 1;
  cap["maximum"] = rules::max_open_max;
  define(r, "TeamCreate",
         object({{"name", text(name_rule)},
                 {"member_ids", ids(rules::members_max), false},
                 {"channel_ids", ids(rules::channels_max), false},
                 {"max_open_per_member", nullable(cap), false}}));
  define(r, "TeamUpdate",
         object({{"name", text(name_rule), false},
                 {"member_ids", ids(rules::members_max), false},
                 {"channel_ids", ids(rules::channels_max), false},
                 {"max_open_per_member", nullable(cap), false}}));
  // domain::team_to_json
  define(r, "Team",
         object({{"id", id()},
                 {"name", text({})},
                 {"member_ids", array_of(id())},
                 {"channel_ids", array_of(id())},
                 {"max_open_per_member", nullable(integer())},
                 {"created_at", timestamp()},
                 {"updated_at", timestamp()}}));
  define(r, "TeamPage", page_of("Team"));
  define(r, "UserAvailabilityUpdate", object({{"available", boolean()}}));
  define(r, "UserAvailability", object({{"user_id", id()}, {"available", boolean()}}));
}

} // namespace

void add_team_routes(router& r, services& s) {
  using domain::permission;
  define_team_schemas(r);
  r.add({verb::get, "/api/v1/teams", access::bearer, permission::read_records, bind(s, list),
         "List teams (page, per_page), by name", "inbox"},
        route_doc("", "TeamPage").with_query(schema::paging()));
  // 409: a channel another team serves already.
  r.add({verb::post, "/api/v1/teams", access::bearer, permission::manage_automation,
         bind(s, create), "Create a team", "inbox", 201},
        route_doc("TeamCreate", "Team").with_example(create_example).fails_with({409}));
  r.add({verb::get, "/api/v1/teams/{id}", access::bearer, permission::read_records, bind(s, get),
         "Get a team", "inbox"},
        {"", "Team"});
  r.add({verb::patch, "/api/v1/teams/{id}", access::bearer, permission::manage_automation,
         bind(s, update), "Update a team (fields sent)", "inbox"},
        route_doc("TeamUpdate", "Team").fails_with({409}));
  r.add({verb::del, "/api/v1/teams/{id}", access::bearer, permission::manage_automation,
         bind(s, remove), "Delete a team", "inbox", 204});
  r.add({verb::get, "/api/v1/users/me/availability", access::bearer, permission::read_records,
         bind(s, get_availability), "Whether new conversations may be assigned to me", "inbox"},
        {"", "UserAvailability"});
  r.add({verb::put, "/api/v1/users/me/availability", access::bearer, permission::read_records,
         bind(s, put_availability), "Say whether new conversations may be assigned to me", "inbox"},
        {"UserAvailabilityUpdate", "UserAvailability"});
}

} // namespace crm::http
