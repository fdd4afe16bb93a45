// Tasks (contract §11, docs/tasks.md). Agents and above create them; the assignee, the creator
// or a manager changes one, the creator or a manager deletes it. A task about a patient is
// audited as a touch of the patient's record.
#include "http/api.hpp"

#include "actors/tasks.hpp"
#include "domain/task.hpp"
#include "http/json.hpp"
#include "http/openapi_schema.hpp"
#include "http/request_input.hpp"

namespace crm::http {
namespace {

using domain::failure;
namespace rules = domain::task_rules;

constexpr text_rule title_rule{.min = 1, .max = rules::title_max};
constexpr text_rule description_rule{.min = 0, .max = rules::description_max};

domain::requester editor(const exchange_ptr& ex) {
  return {ex->who.acting_user(), ex->who.role};
}

void create(services& s, const exchange_ptr& ex) {
  body_reader body(ex->req.body);
  domain::task t;
  if (auto v = body.text("title", true, title_rule)) t.title = *v;
  if (auto v = body.text("description", false, description_rule)) t.description = *v;
  for (auto [key, out] : {std::pair{"contact_id", &t.contact_id},
                          {"deal_id", &t.deal_id},
                          {"appointment_id", &t.appointment_id},
                          {"assignee_id", &t.assignee_id}})
    if (auto v = body.nullable_id(key)) *out = *v;
  if (auto v = body.nullable_timestamp("due_at")) t.due_at = *v;
  if (auto v = body.one_of("priority", false, rules::priorities))
    t.priority = *domain::parse_task_priority(*v);
  if (auto v = body.one_of("status", false, rules::statuses))
    t.status = *domain::parse_task_status(*v);
  if (!body.finish()) return ex->fail(body.failure());
  actors::create_task(s.rt, ex->who.tenant_id, std::move(t), editor(ex),
                      created_reply(ex, "/api/v1/tasks/"));
}

void list(services& s, const exchange_ptr& ex) {
  std::vector<domain::issue> issues;
  auto page = query_int(ex->req, "page", 1, 1, paging_rules::page_max, issues);
  auto per_page = query_int(ex->req, "per_page", paging_rules::per_page_default, 1,
                            paging_rules::per_page_max, issues);
  domain::task_query q;
  if (ex->req.query_value("assignee_id") == std::optional<std::string_view>("me")) {
    // An API key acts for no user: nothing is assigned to it.
    auto me = ex->who.acting_user();
    if (!me)
      issues.push_back({{"query", "assignee_id"},
                        "'me' needs a signed-in user (an API key is nobody's)",
                        "value_error"});
    q.assignee_id = me;
  } else {
    q.assignee_id = query_id(ex->req, "assignee_id", issues);
  }
  if (auto v = ex->req.query_value("status")) {
    q.status = domain::parse_task_status(*v);
    if (!q.status)
      issues.push_back(
          {{"query", "status"}, "Input should be 'open', 'done' or 'cancelled'", "enum"});
  }
  q.contact_id = query_id(ex->req, "contact_id", issues);
  q.deal_id = query_id(ex->req, "deal_id", issues);
  q.due_before = query_time(ex->req, "due_before", issues);
  q.overdue = query_bool(ex->req, "overdue", std::nullopt, issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::list_tasks(s.rt, ex->who.tenant_id, std::move(q), *page, *per_page, json_reply(ex));
}

void get(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::get_task(s.rt, ex->who.tenant_id, *id, json_reply(ex));
}

void update(services& s, const exchange_ptr& ex) {
  std::vector<domain::issue> path_issues;
  auto id = path_id(ex->param("id"), "id", path_issues);
  body_reader body(ex->req.body);
  for (auto& i : path_issues) body.issues().push_back(i);
  domain::task_patch p;
  p.title = body.text("title", false, title_rule);
  p.description = body.text("description", false, description_rule);
  p.contact_id = body.nullable_id("contact_id");
  p.deal_id = body.nullable_id("deal_id");
  p.appointment_id = body.nullable_id("appointment_id");
  p.assignee_id = body.nullable_id("assignee_id");
  p.due_at = body.nullable_timestamp("due_at");
  if (auto v = body.one_of("priority", false, rules::priorities))
    p.priority = domain::parse_task_priority(*v);
  if (auto v = body.one_of("status", false, rules::statuses))
    p.status = domain::parse_task_status(*v);
  if (!body.finish()) return ex->fail(body.failure());
  actors::update_task(s.rt, ex->who.tenant_id, *id, std::move(p), editor(ex), json_reply(ex));
}

void remove(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::delete_task(s.rt, ex->who.tenant_id, *id, editor(ex), no_content_reply(ex));
}

constexpr const char* create_example = R"({
  "title": "Call back with the lab result",
  "contact_id": 42,
  "due_at": "2026-12-01T14:00:00Z",
  "priority": "high"
})";

void define_task_schemas(router& r) {
  using namespace schema;
  auto link = [](const char* what) {
    auto s = nullable(id());
    s["description"] = std::string("the tenant's ") + what + " (null: none)";
    return s;
  };
  auto appointment = link("appointment");
  appointment["description"] = "the tenant's appointment (null: none); a task about an "
                               "appointment is about its patient: contact_id becomes the "
                               "appointment's, and another contact is refused";
  auto assignee = nullable(id());
  assignee["description"] = "an active user of the tenant (default: the creator)";
  auto due = nullable(timestamp());
  due["description"] = "task.overdue fires once when an open task passes it (again after a "
                       "new due_at)";
  auto fields = [&](bool creating) {
    return object({{"title", text(title_rule), creating},
                   {"description", text(description_rule), false},
                   {"contact_id", link("contact"), false},
                   {"deal_id", link("deal"), false},
                   {"appointment_id", appointment, false},
                   {"assignee_id", assignee, false},
                   {"due_at", due, false},
                   {"priority", one_of(rules::priorities), false},
                   {"status", one_of(rules::statuses), false}});
  };
  define(r, "TaskCreate", fields(true));
  define(r, "TaskUpdate", fields(false));
  // domain::task_to_json
  auto overdue = boolean();
  overdue["description"] = "open, and due before now";
  auto run = nullable(id());
  run["description"] = "the workflow run whose create_task step made it";
  define(r, "Task",
         object({{"id", id()},
                 {"title", text({})},
                 {"description", text({})},
                 {"contact_id", nullable(id())},
                 {"deal_id", nullable(id())},
                 {"appointment_id", nullable(id())},
                 {"assignee_id", nullable(id())},
                 {"created_by", nullable(id())},
                 {"due_at", nullable(timestamp())},
                 {"priority", one_of(rules::priorities)},
                 {"status", one_of(rules::statuses)},
                 {"overdue", overdue},
                 {"completed_at", nullable(timestamp())},
                 {"workflow_run_id", run},
                 {"created_at", timestamp()},
                 {"updated_at", timestamp()}}));
  define(r, "TaskPage", page_of("Task"));
}

} // namespace

void add_task_routes(router& r, services& s) {
  using domain::permission;
  define_task_schemas(r);
  r.add({verb::post, "/api/v1/tasks", access::bearer, permission::write_records, bind(s, create),
         "Create a task (assigned to its creator unless assignee_id)", "tasks", 201},
        route_doc("TaskCreate", "Task").with_example(create_example));
  schema::object_t assignee{{"anyOf", boost::json::array{schema::id(), schema::constant("me")}}};
  r.add({verb::get, "/api/v1/tasks", access::bearer, permission::read_records, bind(s, list),
         "Tasks, by due time (those without one last)", "tasks"},
        route_doc("", "TaskPage")
            .with_query(schema::paging())
            .with_query({schema::query("assignee_id", assignee, "assigned to this user (me: you)"),
                         schema::query("status", schema::one_of(rules::statuses)),
                         schema::query("contact_id", schema::id(), "about this contact"),
                         schema::query("deal_id", schema::id(), "about this deal"),
                         schema::query("due_before", schema::timestamp(), "due before this"),
                         schema::query("overdue", schema::boolean(),
                                       "true: open and due before now; false: the others")}));
  r.add({verb::get, "/api/v1/tasks/{id}", access::bearer, permission::read_records, bind(s, get),
         "One task", "tasks"},
        {"", "Task"});
  r.add({verb::patch, "/api/v1/tasks/{id}", access::bearer, permission::write_records,
         bind(s, update), "Change a task (its assignee, its creator, or a manager)", "tasks"},
        {"TaskUpdate", "Task"});
  r.add({verb::del, "/api/v1/tasks/{id}", access::bearer, permission::write_records,
         bind(s, remove), "Delete a task (its creator, or a manager)", "tasks", 204});
}

} // namespace crm::http
