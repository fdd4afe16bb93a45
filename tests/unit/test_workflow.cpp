// Unit tests for domain/workflow: definition validation (422 issues and their loc paths),
// condition evaluation, templates, cron schedules, retry backoff, webhook signatures and URLs.
#include "domain/workflow.hpp"

#include "domain/automation.hpp"
#include "domain/clock.hpp"
#include "domain/crypto.hpp"

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "issue_text.hpp"

#include <set>

using namespace crm::domain;
using crm::testing::described;
namespace json = boost::json;

namespace {

json::value js(std::string_view text) {
  return json::parse(text);
}

std::vector<std::string> condition_issues(std::string_view text) {
  std::vector<issue> issues;
  auto r = parse_conditions(js(text), issues);
  EXPECT_EQ(r.has_value(), issues.empty());
  return described(issues);
}

std::vector<std::string> action_issues(std::string_view text) {
  std::vector<issue> issues;
  auto r = parse_actions(js(text), issues);
  EXPECT_EQ(r.has_value(), issues.empty());
  return described(issues);
}

std::vector<std::string> config_issues(trigger_type t, std::string_view text) {
  std::vector<issue> issues;
  auto r = parse_trigger_config(t, js(text), issues);
  EXPECT_EQ(r.has_value(), issues.empty());
  return described(issues);
}

using strings = std::vector<std::string>;

bool holds(std::string_view field, std::string_view op, std::string_view value,
           std::string_view payload) {
  condition c;
  c.field = field;
  c.op = *parse_condition_op(op);
  c.value = value.empty() ? json::value(nullptr) : js(value);
  return condition_holds(c, js(payload));
}

std::int64_t utc(std::string_view text) {
  return *parse_rfc3339(text);
}

std::string next_cron(std::string_view expr, std::string_view after) {
  std::string error;
  auto c = parse_cron(expr, error);
  EXPECT_TRUE(c) << expr << ": " << error;
  if (!c) return "";
  auto t = next_cron_time(*c, utc(after));
  return t == 0 ? "none" : format_rfc3339(t);
}

std::string cron_error(std::string_view expr) {
  std::string error;
  EXPECT_FALSE(parse_cron(expr, error)) << expr;
  return error;
}

const char* contact_payload = R"({
  "contact_id": 7,
  "contact": {"id": 7, "status": "qualified", "email": "ann@example.com", "score": 10,
              "tags": ["vip", "new"], "custom_fields": {"blood_type": "A+", "visits": 3}},
  "previous": {"status": "active"}
})";

} // namespace

// ---- Names ---------------------------------------------------------------------------------

TEST(workflow, names_round_trip_and_record_events_are_the_outbox_ones) {
  for (auto name : {"contact.created", "contact.tag_added", "deal.stage_changed",
                    "message.received", "webhook", "schedule", "manual"})
    EXPECT_EQ(to_string(*parse_trigger_type(name)), name);
  EXPECT_FALSE(parse_trigger_type("contact.exploded"));
  for (auto name : {"deal.created", "deal.updated", "deal.won", "deal.lost", "deal.deleted"})
    EXPECT_EQ(to_string(*parse_trigger_type(name)), name);
  for (auto name : {"appointment.booked", "appointment.rescheduled", "appointment.cancelled",
                    "appointment.confirmed", "appointment.no_show", "appointment.completed"})
    EXPECT_EQ(to_string(*parse_trigger_type(name)), name);
  EXPECT_EQ(to_string(*parse_trigger_type("task.overdue")), "task.overdue");
  EXPECT_EQ(to_string(*parse_trigger_type("contact.merged")), "contact.merged");
  EXPECT_EQ(record_event_names().size(), 20U);
  EXPECT_EQ(record_event_names().front(), "contact.created");
  EXPECT_EQ(record_event_names().back(), "contact.merged");
  EXPECT_TRUE(is_record_event(trigger_type::appointment_booked));
  EXPECT_TRUE(is_record_event(trigger_type::deal_created));
  EXPECT_FALSE(is_record_event(trigger_type::schedule));
  EXPECT_TRUE(action_available(action_type::ai_reply));
  EXPECT_TRUE(action_available(action_type::delay));
  EXPECT_EQ(to_string(action_type::http_request), "http_request");
  EXPECT_EQ(to_string(condition_op::changed_to), "changed_to");
}

// ---- Conditions: evaluation ----------------------------------------------------------------

TEST(workflow, eq_and_neq_compare_numbers_numerically_and_never_across_types) {
  EXPECT_TRUE(holds("n", "eq", "1", R"({"n": 1.0})"));
  EXPECT_TRUE(holds("n", "eq", "1.0", R"({"n": 1})"));
  EXPECT_TRUE(holds("n", "eq", "18446744073709551615", R"({"n": 18446744073709551615})"));
  EXPECT_FALSE(holds("n", "eq", "9007199254740993", R"({"n": 9007199254740992.0})"));
  EXPECT_FALSE(holds("n", "eq", "-1", R"({"n": 18446744073709551615})"));
  EXPECT_FALSE(holds("n", "eq", R"("1")", R"({"n": 1})"));
  EXPECT_TRUE(holds("n", "neq", R"("1")", R"({"n": 1})"));
  EXPECT_FALSE(holds("n", "neq", "2.0", R"({"n": 2})"));
  EXPECT_TRUE(holds("o", "eq", R"({"a": [1, {"b": 2.0}], "c": null})",
                    R"({"o": {"c": null, "a": [1.0, {"b": 2}]}})"));
  EXPECT_FALSE(holds("o", "eq", R"({"a": 1})", R"({"o": {"a": 1, "b": 2}})"));
  EXPECT_TRUE(holds("b", "eq", "true", R"({"b": true})"));
}

TEST(workflow, a_missing_path_is_null) {
  EXPECT_TRUE(holds("nope", "eq", "null", "{}"));
  EXPECT_TRUE(holds("a.b.c", "eq", "null", R"({"a": {"b": 1}})"));
  EXPECT_FALSE(holds("nope", "neq", "null", "{}"));
  EXPECT_FALSE(holds("nope", "gt", "0", "{}"));
  EXPECT_FALSE(holds("nope", "lt", "0", "{}"));
  EXPECT_FALSE(holds("nope", "contains", R"("x")", "{}"));
  EXPECT_FALSE(holds("nope", "in", "[null, 1]", "{}"));
  EXPECT_FALSE(holds("nope", "exists", "", "{}"));
  EXPECT_TRUE(holds("nope", "exists", "false", "{}"));
}

TEST(workflow, contains_looks_in_strings_and_arrays) {
  EXPECT_TRUE(holds("s", "contains", R"("ell")", R"({"s": "hello"})"));
  EXPECT_FALSE(holds("s", "contains", "1", R"({"s": "a1"})"));
  EXPECT_TRUE(holds("a", "contains", "2", R"({"a": [1, 2.0, 3]})"));
  EXPECT_TRUE(holds("a", "contains", R"("vip")", R"({"a": ["vip"]})"));
  EXPECT_FALSE(holds("a", "contains", R"("vi")", R"({"a": ["vip"]})"));
  EXPECT_FALSE(holds("n", "contains", "1", R"({"n": 1})"));
}

TEST(workflow, in_matches_one_element_of_the_list) {
  EXPECT_TRUE(holds("s", "in", R"(["a", "b"])", R"({"s": "b"})"));
  EXPECT_TRUE(holds("n", "in", "[1.0, 5]", R"({"n": 1})"));
  EXPECT_FALSE(holds("s", "in", R"(["a", "b"])", R"({"s": "c"})"));
}

TEST(workflow, gt_and_lt_need_two_numbers_or_two_strings) {
  EXPECT_TRUE(holds("n", "gt", "1", R"({"n": 1.5})"));
  EXPECT_FALSE(holds("n", "gt", "1.0", R"({"n": 1})"));
  EXPECT_TRUE(holds("n", "lt", "18446744073709551615", R"({"n": -1})"));
  EXPECT_TRUE(holds("n", "gt", "9007199254740992.0", R"({"n": 9007199254740993})"));
  EXPECT_FALSE(holds("n", "gt", R"("1")", R"({"n": 2})"));
  EXPECT_TRUE(holds("t", "gt", R"("2026-01-01T00:00:00Z")", R"({"t": "2026-05-01T00:00:00Z"})"));
  EXPECT_TRUE(holds("t", "lt", R"("b")", R"({"t": "a"})"));
  EXPECT_FALSE(holds("t", "lt", R"("a")", R"({"t": "a"})"));
}

TEST(workflow, exists_defaults_to_true_and_null_counts_as_absent) {
  EXPECT_TRUE(holds("a", "exists", "", R"({"a": 0})"));
  EXPECT_TRUE(holds("a", "exists", "true", R"({"a": false})"));
  EXPECT_FALSE(holds("a", "exists", "", R"({"a": null})"));
  EXPECT_TRUE(holds("a", "exists", "false", R"({"a": null})"));
}

TEST(workflow, paths_fall_back_to_the_contact_and_index_arrays) {
  auto p = js(contact_payload);
  EXPECT_EQ(*resolve_path(p, "status"), js(R"("qualified")"));
  EXPECT_EQ(*resolve_path(p, "contact.status"), js(R"("qualified")"));
  EXPECT_EQ(*resolve_path(p, "contact_id"), js("7"));
  EXPECT_EQ(*resolve_path(p, "tags.1"), js(R"("new")"));
  EXPECT_EQ(*resolve_path(p, "custom_fields.blood_type"), js(R"("A+")"));
  EXPECT_EQ(resolve_path(p, "tags.2"), nullptr);
  EXPECT_EQ(resolve_path(p, "tags.x"), nullptr);
  EXPECT_EQ(resolve_path(p, "email.x"), nullptr);
  EXPECT_EQ(resolve_path(js(R"({"status": "x"})"), "email"), nullptr);
  // A key of the payload wins over the contact's.
  EXPECT_EQ(*resolve_path(js(R"({"status": "top", "contact": {"status": "c"}})"), "status"),
            js(R"("top")"));
  // Webhook bodies are any JSON.
  EXPECT_EQ(*resolve_path(js(R"([{"a": 1}])"), "0.a"), js("1"));
  EXPECT_EQ(*resolve_path(js(R"({"items": {"0": "key"}})"), "items.0"), js(R"("key")"));
}

TEST(workflow, cf_means_custom_fields_in_the_payload_and_in_the_contact) {
  auto p = js(contact_payload);
  EXPECT_EQ(*resolve_path(p, "cf.blood_type"), js(R"("A+")"));
  EXPECT_EQ(*resolve_path(p, "contact.cf.visits"), js("3"));
  EXPECT_EQ(*resolve_path(js(R"({"custom_fields": {"x": 1}})"), "cf.x"), js("1"));
  EXPECT_TRUE(holds("cf.visits", "gt", "2", contact_payload));
}

TEST(workflow, changed_to_needs_the_old_value_to_differ) {
  EXPECT_TRUE(holds("status", "changed_to", R"("qualified")", contact_payload));
  EXPECT_TRUE(holds("contact.status", "changed_to", R"("qualified")", contact_payload));
  EXPECT_FALSE(holds("status", "changed_to", R"("active")", contact_payload));
  // Same value before and after.
  EXPECT_FALSE(
      holds("status", "changed_to", R"("qualified")",
            R"({"contact": {"status": "qualified"}, "previous": {"status": "qualified"}})"));
  // A field absent from `previous` did not change.
  EXPECT_FALSE(holds("email", "changed_to", R"("ann@example.com")", contact_payload));
  // Custom fields: the old custom_fields object is in `previous`.
  EXPECT_TRUE(holds(
      "cf.blood_type", "changed_to", R"("A+")",
      R"({"contact": {"custom_fields": {"blood_type": "A+"}}, "previous": {"custom_fields": {}}})"));
  // Without `previous` (contact.created) the old value is null.
  EXPECT_TRUE(holds("status", "changed_to", R"("active")", R"({"contact": {"status": "active"}})"));
  EXPECT_FALSE(
      holds("status", "changed_to", R"("qualified")", R"({"contact": {"status": "active"}})"));
  EXPECT_FALSE(holds("missing", "changed_to", "null", R"({"contact": {}})"));
}

TEST(workflow, conditions_all_must_hold) {
  std::vector<issue> issues;
  auto cs = *parse_conditions(js(R"([{"field": "status", "op": "eq", "value": "qualified"},
             {"field": "tags", "op": "contains", "value": "vip"}])"),
                              issues);
  EXPECT_TRUE(conditions_hold(cs, js(contact_payload)));
  cs.push_back({"score", condition_op::gt, json::value(100)});
  EXPECT_FALSE(conditions_hold(cs, js(contact_payload)));
  EXPECT_TRUE(conditions_hold({}, js("{}")));
}

// ---- Conditions: validation ----------------------------------------------------------------

TEST(workflow, valid_conditions_parse_and_round_trip) {
  std::vector<issue> issues;
  auto text = R"([{"field": "status", "op": "in", "value": ["a", "b"]},
                  {"field": "cf.x", "op": "exists"},
                  {"field": "n", "op": "gt", "value": 3},
                  {"field": "n", "op": "eq", "value": null}])";
  auto cs = parse_conditions(js(text), issues);
  ASSERT_TRUE(cs) << described(issues)[0];
  ASSERT_EQ(cs->size(), 4U);
  EXPECT_EQ((*cs)[1].op, condition_op::exists);
  EXPECT_TRUE((*cs)[1].value.is_null());
  auto back = conditions_from_json(conditions_to_json(*cs));
  EXPECT_EQ(conditions_to_json(back), conditions_to_json(*cs));
  EXPECT_EQ(conditions_to_json(back)[0],
            js(R"({"field": "status", "op": "in", "value": ["a", "b"]})"));
  EXPECT_TRUE(parse_conditions(js("null"), issues)->empty());
}

TEST(workflow, condition_issues_name_the_item_and_key) {
  EXPECT_EQ(condition_issues(R"([{"field": "a", "op": "eq", "value": 1},
                                 {"op": "like", "value": 1, "why": 2},
                                 {"field": "", "op": "in", "value": "x"},
                                 {"field": 5, "op": "gt", "value": [1]},
                                 {"field": "b", "op": "exists", "value": "yes"},
                                 {"field": "c", "op": "neq"},
                                 7])"),
            (strings{"body/conditions/1/why:extra_forbidden", "body/conditions/1/field:missing",
                     "body/conditions/1/op:enum", "body/conditions/2/field:string_too_short",
                     "body/conditions/2/value:value_error", "body/conditions/3/field:string_type",
                     "body/conditions/3/value:value_error", "body/conditions/4/value:bool_parsing",
                     "body/conditions/5/value:missing", "body/conditions/6:value_error"}));
  EXPECT_EQ(condition_issues(R"({"field": "a"})"), strings{"body/conditions:value_error"});
  EXPECT_EQ(condition_issues(R"([{"field": ")" + std::string(201, 'x') + R"(", "op": "exists"}])"),
            strings{"body/conditions/0/field:string_too_long"});
  std::string many = "[";
  for (int i = 0; i < 51; ++i) many += std::string(i ? "," : "") + R"({"field":"a","op":"exists"})";
  EXPECT_EQ(condition_issues(many + "]"), strings{"body/conditions:too_long"});
}

TEST(workflow, an_unknown_op_lists_the_ops) {
  std::vector<issue> issues;
  parse_conditions(js(R"([{"field": "a", "op": "like", "value": 1}])"), issues);
  ASSERT_EQ(issues.size(), 1U);
  EXPECT_EQ(issues[0].msg, "Input should be 'eq', 'neq', 'contains', 'in', 'gt', 'lt', 'exists' "
                           "or 'changed_to'");
}

TEST(workflow, create_task_params_are_checked_when_saved) {
  EXPECT_TRUE(action_issues(R"([{"type": "create_task", "params": {"title": "Call back",
      "due_in_days": 2, "priority": "high", "assignee_id": 3}}])")
                  .empty());
  EXPECT_TRUE(action_issues(R"([{"type": "create_task", "params": {"title": "x",
      "priority": "{{trigger.priority}}", "contact_id": "{{trigger.id}}"}}])")
                  .empty());
  EXPECT_EQ(action_issues(R"([{"type": "create_task", "params": {"due_in_days": 2}}])"),
            strings{"body/actions/0/params/title:missing"});
  EXPECT_EQ(action_issues(R"([{"type": "create_task", "params": {"title": "x",
      "due_in_days": 2, "due_in_hours": 1}}])"),
            strings{"body/actions/0/params:value_error"});
  EXPECT_EQ(
      action_issues(R"([{"type": "create_task", "params": {"title": "x",
      "priority": "urgent", "due_in_days": 400, "note": 1}}])"),
      (strings{"body/actions/0/params/note:extra_forbidden", "body/actions/0/params/priority:enum",
               "body/actions/0/params/due_in_days:less_than_equal"}));
}

TEST(workflow, a_create_task_step_links_the_triggers_records_and_counts_its_due_time_from_now) {
  auto payload = js(R"({"appointment_id": 12, "contact_id": 5,
                        "appointment": {"id": 12, "contact_id": 5}})");
  auto t = task_from_action(js(R"({"title": "Call back", "due_in_days": 2})").as_object(), payload,
                            1'000'000);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->title, "Call back");
  EXPECT_EQ(t->contact_id, 5);
  EXPECT_EQ(t->appointment_id, 12);
  EXPECT_FALSE(t->deal_id);
  EXPECT_FALSE(t->assignee_id);
  EXPECT_EQ(t->due_at, 1'000'000 + 2LL * 86400 * 1'000'000);
  // Params name other records (digits after templates); no due unit: no due time.
  auto other = task_from_action(
      js(R"({"title": "x", "contact_id": "7", "deal_id": 9, "assignee_id": "3"})").as_object(),
      payload, 0);
  ASSERT_TRUE(other);
  EXPECT_EQ(other->contact_id, 7);
  EXPECT_EQ(other->deal_id, 9);
  EXPECT_EQ(other->assignee_id, 3);
  EXPECT_FALSE(other->due_at);
  // Unless named, the trigger's contact's owner takes it.
  auto owned = js(R"({"contact_id": 5, "contact": {"id": 5, "owner_id": 8}})");
  EXPECT_EQ(task_from_action(js(R"({"title": "x"})").as_object(), owned, 0)->assignee_id, 8);
  EXPECT_EQ(task_from_action(js(R"({"title": "x", "assignee_id": 3})").as_object(), owned, 0)
                ->assignee_id,
            3);
  // A template that rendered into something that is not a priority, an id or a short title.
  EXPECT_FALSE(
      task_from_action(js(R"({"title": "x", "priority": "soon"})").as_object(), payload, 0));
  EXPECT_FALSE(task_from_action(js(R"({"title": "x", "deal_id": "d"})").as_object(), payload, 0));
  EXPECT_FALSE(task_from_action(js(R"({"title": ""})").as_object(), payload, 0));
  EXPECT_FALSE(task_from_action(js("{\"title\": \"" + std::string(201, 'a') + "\"}").as_object(),
                                payload, 0));
}

// ---- Actions: validation -------------------------------------------------------------------

TEST(workflow, valid_actions_parse_and_keep_params_as_sent) {
  std::vector<issue> issues;
  auto text = R"([
    {"type": "update_contact", "params": {"fields": {"first_name": "{{trigger.name}}",
                                                      "custom_fields": {"x": 1}}}},
    {"type": "set_status", "params": {"status": "qualified", "contact_id": 5}},
    {"type": "set_status", "params": {"status": "{{trigger.status}}", "contact_id": "{{trigger.id}}"}},
    {"type": "add_tag", "params": {"tag": "vip"}},
    {"type": "add_tag", "params": {"tags": ["a", "b"], "contact_id": "12"}},
    {"type": "remove_tag", "params": {"tag": "old"}},
    {"type": "http_request", "params": {"url": "https://hooks.example.com/x?y=1",
      "headers": {"X-Token": "abc"}, "body": [1, 2], "timeout_seconds": 30}},
    {"type": "http_request", "params": {"url": "{{trigger.callback}}", "method": "PUT"}},
    {"type": "delay", "params": {"hours": 720}},
    {"type": "delay", "params": {"minutes": 5}}
  ])";
  auto as = parse_actions(js(text), issues);
  ASSERT_TRUE(as) << described(issues)[0];
  ASSERT_EQ(as->size(), 10U);
  EXPECT_EQ((*as)[6].type, action_type::http_request);
  EXPECT_FALSE((*as)[6].params.contains("method")); // the default is not written in
  EXPECT_EQ(delay_seconds((*as)[8].params), 720 * 3600);
  EXPECT_EQ(delay_seconds((*as)[9].params), 300);
  auto back = actions_from_json(actions_to_json(*as));
  EXPECT_EQ(actions_to_json(back), actions_to_json(*as));
  EXPECT_EQ(actions_to_json(back), js(text).as_array());
}

TEST(workflow, params_default_to_an_empty_object) {
  std::vector<issue> issues;
  // delay with no params is invalid, but the issue is about the params' content.
  EXPECT_EQ(action_issues(R"([{"type": "delay"}])"), strings{"body/actions/0/params:value_error"});
  EXPECT_EQ(action_issues(R"([{"type": "delay", "params": null}])"),
            strings{"body/actions/0/params:value_error"});
  EXPECT_EQ(action_issues(R"([{"type": "add_tag", "params": [1]}])"),
            strings{"body/actions/0/params:value_error"});
  EXPECT_TRUE(parse_actions(js("null"), issues)->empty());
  EXPECT_TRUE(parse_actions(js("[]"), issues)->empty());
}

TEST(workflow, action_issues_have_exact_locations) {
  EXPECT_EQ(action_issues(R"([
    {"type": "add_tag", "params": {"tag": "ok"}},
    {"type": "send_fax", "params": {}},
    {"type": "set_status", "params": {"status": "gold", "extra": 1}},
    {"type": "update_contact", "params": {"fields": {"first_name": "A", "password": "x"}}},
    {"type": "update_contact", "params": {"fields": {}}},
    {"type": "update_contact", "params": {}},
    {"type": "add_tag", "params": {"tag": "a", "tags": ["b"]}},
    {"type": "add_tag", "params": {"tags": ["", 3]}},
    {"type": "remove_tag", "params": {"contact_id": 0}},
    {"type": "http_request", "params": {"url": "ftp://x", "method": "TRACE",
      "headers": {"Host": "x", "Bad Name": "v", "X-N": 1, "X-Crlf": "a\r\nb"},
      "timeout_seconds": 31}},
    {"type": "delay", "params": {"seconds": 10, "minutes": 1}},
    {"type": "delay", "params": {"hours": 721}},
    {"type": "delay", "params": {"seconds": 0}},
    {"params": {}, "kind": 1}
  ])"),
            (strings{
                "body/actions/1/type:enum",
                "body/actions/2/params/extra:extra_forbidden",
                "body/actions/2/params/status:enum",
                "body/actions/3/params/fields/password:extra_forbidden",
                "body/actions/4/params/fields:too_short",
                "body/actions/5/params/fields:missing",
                "body/actions/6/params:value_error",
                "body/actions/7/params/tags/0:string_too_short",
                "body/actions/7/params/tags/1:string_type",
                "body/actions/8/params/contact_id:greater_than_equal",
                "body/actions/8/params/tag:missing",
                "body/actions/9/params/url:value_error",
                "body/actions/9/params/method:enum",
                "body/actions/9/params/headers/Host:value_error",
                "body/actions/9/params/headers/Bad Name:value_error",
                "body/actions/9/params/headers/X-N:string_type",
                "body/actions/9/params/headers/X-Crlf:value_error",
                "body/actions/9/params/timeout_seconds:less_than_equal",
                "body/actions/10/params:value_error",
                "body/actions/11/params/hours:less_than_equal",
                "body/actions/12/params/seconds:greater_than_equal",
                "body/actions/13/kind:extra_forbidden",
                "body/actions/13/type:missing",
            }));
}

TEST(workflow, contact_ids_are_positive_integers_digit_strings_or_templates) {
  EXPECT_TRUE(action_issues(R"([{"type": "add_tag", "params": {"tag": "a", "contact_id": 3}},
                                {"type": "add_tag", "params": {"tag": "a", "contact_id": "3"}},
                                {"type": "add_tag", "params": {"tag": "a", "contact_id": null}},
                                {"type": "add_tag", "params": {"tag": "a",
                                                               "contact_id": "{{trigger.id}}"}}])")
                  .empty());
  EXPECT_EQ(action_issues(R"([{"type": "add_tag", "params": {"tag": "a", "contact_id": "abc"}},
                              {"type": "add_tag", "params": {"tag": "a", "contact_id": 1.5}},
                              {"type": "add_tag", "params": {"tag": "a", "contact_id": true}}])"),
            (strings{"body/actions/0/params/contact_id:int_parsing",
                     "body/actions/1/params/contact_id:int_parsing",
                     "body/actions/2/params/contact_id:int_parsing"}));
}

TEST(workflow, http_request_headers_are_limited_to_twenty) {
  std::string headers;
  for (int i = 0; i < 21; ++i)
    headers += std::string(i ? "," : "") + R"("X-)" + std::to_string(i) + R"(": "v")";
  EXPECT_EQ(action_issues(R"([{"type": "http_request", "params": {"url": "http://a.b",
                                                                    "headers": {)" +
                          headers + "}}}]"),
            strings{"body/actions/0/params/headers:too_long"});
  EXPECT_EQ(action_issues(R"([{"type": "http_request", "params": {}}])"),
            strings{"body/actions/0/params/url:missing"});
}

TEST(workflow, ai_reply_takes_an_optional_agent_id_and_nothing_else) {
  EXPECT_EQ(action_issues(R"([{"type": "ai_reply"}])"), strings{});
  EXPECT_EQ(action_issues(R"([{"type": "ai_reply", "params": {"agent_id": 7}}])"), strings{});
  EXPECT_EQ(action_issues(R"([{"type": "ai_reply", "params": {"agent_id": "{{trigger.x}}"}}])"),
            strings{});
  EXPECT_EQ(action_issues(R"([{"type": "ai_reply", "params": {"agent_id": 0}}])"),
            strings{"body/actions/0/params/agent_id:greater_than_equal"});
  EXPECT_EQ(action_issues(R"([{"type": "ai_reply", "params": {"model": "x"}}])"),
            strings{"body/actions/0/params/model:extra_forbidden"});
}

TEST(workflow, deal_actions_check_their_params) {
  std::vector<issue> issues;
  parse_actions(js(R"([{"type": "create_deal", "params": {"x": 1}}, {"type": "move_deal"},
                       {"type": "create_deal", "params": {"title": "{{trigger.contact.first_name}}",
                        "contact_id": "{{trigger.contact_id}}", "stage_id": 0}},
                       {"type": "move_deal", "params": {"stage_id": "{{trigger.to}}",
                        "position": -1}}])"),
                issues);
  EXPECT_EQ(described(issues), (strings{"body/actions/0/params/x:extra_forbidden",
                                        "body/actions/0/params/title:missing",
                                        "body/actions/1/params/stage_id:missing",
                                        "body/actions/2/params/stage_id:greater_than_equal",
                                        "body/actions/3/params/position:greater_than_equal"}));
  issues.clear();
  auto ok = parse_actions(js(R"([{"type": "create_deal", "params": {"title": "Plan",
                                  "amount": "10.00", "pipeline_id": 3}},
                                 {"type": "move_deal", "params": {"stage_id": 7, "deal_id": 9}}])"),
                          issues);
  EXPECT_TRUE(issues.empty());
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok->size(), 2U);
}

TEST(workflow, deal_trigger_config_filters_pipeline_and_stages) {
  std::vector<issue> issues;
  auto cfg = parse_trigger_config(trigger_type::deal_stage_changed,
                                  js(R"({"pipeline_id": 1, "to": 5})"), issues);
  ASSERT_TRUE(cfg.has_value());
  auto payload = js(R"({"deal": {"pipeline_id": 1}, "from_stage_id": 2, "to_stage_id": 5})");
  EXPECT_TRUE(trigger_config_matches(trigger_type::deal_stage_changed, *cfg, payload));
  auto elsewhere = js(R"({"deal": {"pipeline_id": 1}, "from_stage_id": 2, "to_stage_id": 6})");
  EXPECT_FALSE(trigger_config_matches(trigger_type::deal_stage_changed, *cfg, elsewhere));
  auto other_pipeline = js(R"({"deal": {"pipeline_id": 2}, "to_stage_id": 5})");
  EXPECT_FALSE(trigger_config_matches(trigger_type::deal_stage_changed, *cfg, other_pipeline));
  EXPECT_FALSE(parse_trigger_config(trigger_type::deal_won, js(R"({"to": 5})"), issues));
  EXPECT_EQ(described(issues), (strings{"body/trigger_config/to:extra_forbidden"}));
}

TEST(workflow, send_message_needs_its_text) {
  std::vector<issue> issues;
  parse_actions(js(R"([{"type": "send_message", "params": {"text": "Hi {{contact.first_name}}",
                        "channel_id": 3}}, {"type": "send_message", "params": {"channel_id": 0,
                        "to": "x"}}])"),
                issues);
  EXPECT_EQ(described(issues), (strings{"body/actions/1/params/to:extra_forbidden",
                                        "body/actions/1/params/text:missing",
                                        "body/actions/1/params/channel_id:greater_than_equal"}));
}

TEST(workflow, an_unknown_action_type_lists_the_types) {
  std::vector<issue> issues;
  parse_actions(js(R"([{"type": 3}])"), issues);
  ASSERT_EQ(issues.size(), 1U);
  EXPECT_EQ(issues[0].type, "enum");
  EXPECT_NE(issues[0].msg.find("'update_contact'"), std::string::npos);
  EXPECT_NE(issues[0].msg.find("'delay' or 'create_task'"), std::string::npos);
}

// ---- Trigger configuration -----------------------------------------------------------------

TEST(workflow, schedule_needs_exactly_one_of_interval_or_cron) {
  EXPECT_TRUE(config_issues(trigger_type::schedule, R"({"interval_seconds": 5})").empty());
  EXPECT_TRUE(
      config_issues(trigger_type::schedule, R"({"cron": "*/15 * * * *", "payload": {"k": 1}})")
          .empty());
  EXPECT_EQ(
      config_issues(trigger_type::schedule, R"({"interval_seconds": 60, "cron": "* * * * *"})"),
      strings{"body/trigger_config:value_error"});
  EXPECT_EQ(config_issues(trigger_type::schedule, "{}"),
            strings{"body/trigger_config:value_error"});
  EXPECT_EQ(config_issues(trigger_type::schedule, "null"),
            strings{"body/trigger_config:value_error"});
  EXPECT_EQ(config_issues(trigger_type::schedule, R"({"interval_seconds": 4})"),
            strings{"body/trigger_config/interval_seconds:greater_than_equal"});
  EXPECT_EQ(config_issues(trigger_type::schedule, R"({"interval_seconds": 31536001})"),
            strings{"body/trigger_config/interval_seconds:less_than_equal"});
  EXPECT_EQ(config_issues(trigger_type::schedule, R"({"interval_seconds": "60"})"),
            strings{"body/trigger_config/interval_seconds:int_parsing"});
  EXPECT_EQ(config_issues(trigger_type::schedule,
                          R"({"interval_seconds": 60, "payload": [], "every": 1})"),
            (strings{"body/trigger_config/every:extra_forbidden",
                     "body/trigger_config/payload:value_error"}));
}

TEST(workflow, a_bad_cron_reports_the_parser_message_at_cron) {
  std::vector<issue> issues;
  EXPECT_FALSE(
      parse_trigger_config(trigger_type::schedule, js(R"({"cron": "61 * * * *"})"), issues));
  ASSERT_EQ(issues.size(), 1U);
  EXPECT_EQ(described(issues), strings{"body/trigger_config/cron:value_error"});
  EXPECT_EQ(issues[0].msg, cron_error("61 * * * *"));
  EXPECT_NE(issues[0].msg.find("minute"), std::string::npos);
}

TEST(workflow, trigger_configs_of_other_triggers) {
  EXPECT_TRUE(config_issues(trigger_type::contact_status_changed,
                            R"({"from": "active", "to": "qualified"})")
                  .empty());
  EXPECT_TRUE(config_issues(trigger_type::contact_status_changed, "{}").empty());
  EXPECT_EQ(config_issues(trigger_type::contact_status_changed, R"({"to": "gold", "x": 1})"),
            (strings{"body/trigger_config/x:extra_forbidden", "body/trigger_config/to:enum"}));
  EXPECT_TRUE(config_issues(trigger_type::contact_tag_added, R"({"tag": "vip"})").empty());
  EXPECT_EQ(config_issues(trigger_type::contact_tag_added, R"({"tag": ""})"),
            strings{"body/trigger_config/tag:string_too_short"});
  EXPECT_TRUE(config_issues(trigger_type::webhook, "{}").empty());
  EXPECT_TRUE(config_issues(trigger_type::manual, "null").empty());
  EXPECT_EQ(config_issues(trigger_type::contact_created, R"({"tag": "vip"})"),
            strings{"body/trigger_config/tag:extra_forbidden"});
  EXPECT_EQ(config_issues(trigger_type::webhook, "[]"), strings{"body/trigger_config:value_error"});
  std::vector<issue> issues;
  parse_trigger_config(trigger_type::webhook, js("3"), issues);
  EXPECT_EQ(issues.at(0).msg, "Input should be a valid dictionary");
}

TEST(workflow, trigger_config_filters_status_changes_and_tags) {
  auto cfg = js(R"({"from": "active", "to": "qualified"})").as_object();
  auto change = js(R"({"from": "active", "to": "qualified", "contact_id": 1})");
  EXPECT_TRUE(trigger_config_matches(trigger_type::contact_status_changed, cfg, change));
  EXPECT_FALSE(trigger_config_matches(trigger_type::contact_status_changed, cfg,
                                      js(R"({"from": "inactive", "to": "qualified"})")));
  EXPECT_TRUE(trigger_config_matches(trigger_type::contact_status_changed,
                                     js(R"({"to": "qualified"})").as_object(),
                                     js(R"({"from": "inactive", "to": "qualified"})")));
  EXPECT_FALSE(trigger_config_matches(trigger_type::contact_status_changed, cfg, js("{}")));
  EXPECT_TRUE(
      trigger_config_matches(trigger_type::contact_status_changed, json::object{}, js("{}")));
  auto tag = js(R"({"tag": "VIP"})").as_object();
  EXPECT_TRUE(
      trigger_config_matches(trigger_type::contact_tag_added, tag, js(R"({"tag": "vip"})")));
  EXPECT_FALSE(
      trigger_config_matches(trigger_type::contact_tag_added, tag, js(R"({"tag": "vips"})")));
  EXPECT_TRUE(trigger_config_matches(trigger_type::webhook, tag, js("{}")));
}

// ---- Templates -----------------------------------------------------------------------------

TEST(workflow, a_whole_template_keeps_the_json_type) {
  auto payload = js(R"({"n": 42, "obj": {"a": [1, 2]}, "name": "Ann", "contact": {"id": 9,
                        "custom_fields": {"x": true}}})");
  template_context ctx{&payload, 77, 3, "Welcome"};
  auto out = render_templates(js(R"({"n": "{{trigger.n}}", "o": "{{ trigger.obj }}",
                                     "id": "{{contact.id}}", "cf": "{{contact.cf.x}}",
                                     "missing": "{{trigger.nope}}", "run": "{{run.id}}",
                                     "wf": "{{workflow.id}}", "wn": "{{workflow.name}}",
                                     "el": "{{trigger.obj.a.1}}", "all": "{{trigger.name}}",
                                     "unknown": "{{secrets.key}}"})"),
                              ctx);
  EXPECT_EQ(out, js(R"({"n": 42, "o": {"a": [1, 2]}, "id": 9, "cf": true, "missing": null,
                       "run": 77, "wf": 3, "wn": "Welcome", "el": 2, "all": "Ann",
                       "unknown": null})"));
}

TEST(workflow, templates_inside_text_become_text) {
  auto payload = js(R"({"n": 42, "x": 1.5, "obj": {"a": 1}, "name": "Ann", "nil": null})");
  template_context ctx{&payload, 1, 2, "W"};
  auto out = render_templates(
      js(R"(["Hi {{trigger.name}}!", "n={{trigger.n}} x={{trigger.x}}", "{{trigger.obj}}.",
             "[{{trigger.nope}}][{{trigger.nil}}]", "{{trigger.name}}{{trigger.n}}",
             "{{ unclosed", "no templates", "run {{run.id}} of {{workflow.name}}"])"),
      ctx);
  EXPECT_EQ(out, js(R"(["Hi Ann!", "n=42 x=1.5", "{\"a\":1}.", "[][]", "Ann42", "{{ unclosed",
                       "no templates", "run 1 of W"])"));
}

TEST(workflow, templates_render_deeply_and_leave_other_values) {
  auto payload = js(R"({"tag": "vip", "contact": {"id": 4}})");
  template_context ctx{&payload, 1, 2, "W"};
  auto out = render_templates(
      js(R"({"fields": {"tags": ["{{trigger.tag}}", "x"], "n": 5, "b": false, "z": null},
             "contact_id": "{{contact.id}}"})"),
      ctx);
  EXPECT_EQ(out, js(R"({"fields": {"tags": ["vip", "x"], "n": 5, "b": false, "z": null},
                       "contact_id": 4})"));
  // trigger.X has no contact fallback: `id` is not a key of the payload.
  EXPECT_EQ(render_templates(js(R"("{{trigger.id}}")"), ctx), js("null"));
  // A rendered value is not rendered again.
  auto sneaky = js(R"({"v": "{{run.id}}"})");
  template_context ctx2{&sneaky, 5, 2, "W"};
  EXPECT_EQ(render_templates(js(R"("{{trigger.v}}")"), ctx2), js(R"("{{run.id}}")"));
}

// ---- Contacts of actions -------------------------------------------------------------------

TEST(workflow, the_contact_of_an_action_is_params_then_contact_id_then_contact) {
  auto payload = js(R"({"contact_id": 7, "contact": {"id": 8}})");
  EXPECT_EQ(action_contact_id(js(R"({"contact_id": 3})").as_object(), payload), 3);
  EXPECT_EQ(action_contact_id(js(R"({"contact_id": "12"})").as_object(), payload), 12);
  EXPECT_EQ(action_contact_id(json::object{}, payload), 7);
  EXPECT_EQ(action_contact_id(js(R"({"contact_id": null})").as_object(), payload), 7);
  EXPECT_EQ(action_contact_id(json::object{}, js(R"({"contact": {"id": 8}})")), 8);
  EXPECT_EQ(action_contact_id(json::object{}, js(R"({"contact_id": "7"})")), std::nullopt);
  EXPECT_EQ(action_contact_id(json::object{}, js(R"({"other": 1})")), std::nullopt);
  EXPECT_EQ(action_contact_id(json::object{}, js("[]")), std::nullopt);
  // A contact_id that is given but not an id fails rather than acting on another contact.
  EXPECT_EQ(action_contact_id(js(R"({"contact_id": "abc"})").as_object(), payload), std::nullopt);
  EXPECT_EQ(action_contact_id(js(R"({"contact_id": 0})").as_object(), payload), std::nullopt);
  EXPECT_EQ(action_contact_id(js(R"({"contact_id": -4})").as_object(), payload), std::nullopt);
}

// A merge moves a run to the survivor: the contact its actions fall back to, and nothing else.
TEST(workflow, a_merged_contact_moves_a_runs_payload_to_the_survivor) {
  auto both = js(R"({"contact_id": 7, "contact": {"id": 7, "first_name": "Ana"}, "deal_id": 7})");
  EXPECT_TRUE(move_payload_contact(both, 7, 9));
  EXPECT_EQ(both, js(R"({"contact_id": 9, "contact": {"id": 9, "first_name": "Ana"},
                         "deal_id": 7})"));
  EXPECT_EQ(action_contact_id(json::object{}, both), 9);
  auto nested = js(R"({"contact": {"id": 7}})");
  EXPECT_TRUE(move_payload_contact(nested, 7, 9));
  EXPECT_EQ(action_contact_id(json::object{}, nested), 9);
  // Another contact's run, a run about a contact named only inside the contact object, and a
  // payload that is not an object are left as they are.
  auto other = js(R"({"contact_id": 8, "contact": {"id": 7}})");
  EXPECT_TRUE(move_payload_contact(other, 7, 9));
  EXPECT_EQ(other, js(R"({"contact_id": 8, "contact": {"id": 9}})"));
  EXPECT_EQ(action_contact_id(json::object{}, other), 8);
  auto none = js(R"({"contact_id": 8})");
  EXPECT_FALSE(move_payload_contact(none, 7, 9));
  EXPECT_EQ(none, js(R"({"contact_id": 8})"));
  auto list = js("[7]");
  EXPECT_FALSE(move_payload_contact(list, 7, 9));
}

// ---- Cron ----------------------------------------------------------------------------------

TEST(workflow, cron_steps_land_on_the_next_multiple) {
  EXPECT_EQ(next_cron("*/15 * * * *", "2024-03-15T10:07:00Z"), "2024-03-15T10:15:00.000000Z");
  EXPECT_EQ(next_cron("*/15 * * * *", "2024-03-15T10:15:00Z"), "2024-03-15T10:30:00.000000Z");
  EXPECT_EQ(next_cron("*/15 * * * *", "2024-03-15T23:59:30Z"), "2024-03-16T00:00:00.000000Z");
  EXPECT_EQ(next_cron("* * * * *", "2024-03-15T10:00:00.5Z"), "2024-03-15T10:01:00.000000Z");
  EXPECT_EQ(next_cron("5/20 * * * *", "2024-03-15T10:26:00Z"), "2024-03-15T10:45:00.000000Z");
  EXPECT_EQ(next_cron("10-30/10 * * * *", "2024-03-15T10:31:00Z"), "2024-03-15T11:10:00.000000Z");
  EXPECT_EQ(next_cron("0,30 8,17 * * *", "2024-03-15T08:30:00Z"), "2024-03-15T17:00:00.000000Z");
}

TEST(workflow, cron_weekdays_skip_the_weekend) {
  // 2024-03-15 is a Friday.
  EXPECT_EQ(next_cron("0 9 * * 1-5", "2024-03-15T10:00:00Z"), "2024-03-18T09:00:00.000000Z");
  EXPECT_EQ(next_cron("0 9 * * MON-FRI", "2024-03-15T08:00:00Z"), "2024-03-15T09:00:00.000000Z");
  EXPECT_EQ(next_cron("0 0 * * 7", "2024-03-15T10:00:00Z"), "2024-03-17T00:00:00.000000Z");
  EXPECT_EQ(next_cron("0 0 * * 0", "2024-03-15T10:00:00Z"), "2024-03-17T00:00:00.000000Z");
  EXPECT_EQ(next_cron("0 12 * jan sun", "2024-03-15T10:00:00Z"), "2025-01-05T12:00:00.000000Z");
}

TEST(workflow, cron_leap_days_and_impossible_dates) {
  EXPECT_EQ(next_cron("0 0 29 2 *", "2025-03-01T00:00:00Z"), "2028-02-29T00:00:00.000000Z");
  EXPECT_EQ(next_cron("0 0 29 2 *", "2024-01-10T00:00:00Z"), "2024-02-29T00:00:00.000000Z");
  EXPECT_EQ(next_cron("0 0 30 2 *", "2024-01-10T00:00:00Z"), "none");
  EXPECT_EQ(next_cron("0 0 31 4,6,9,11 *", "2024-01-10T00:00:00Z"), "none");
  EXPECT_EQ(next_cron("0 0 31 * *", "2024-04-01T00:00:00Z"), "2024-05-31T00:00:00.000000Z");
}

TEST(workflow, cron_day_fields_both_restricted_match_either) {
  // 2024-04-22 and 04-29 are Mondays; 05-01 is a Wednesday.
  EXPECT_EQ(next_cron("0 0 1 * 1", "2024-04-22T00:00:00Z"), "2024-04-29T00:00:00.000000Z");
  EXPECT_EQ(next_cron("0 0 1 * 1", "2024-04-29T00:00:00Z"), "2024-05-01T00:00:00.000000Z");
  // One restricted, the other "*" or "*/n": the restricted one decides.
  EXPECT_EQ(next_cron("0 0 13 * *", "2024-04-22T00:00:00Z"), "2024-05-13T00:00:00.000000Z");
  EXPECT_EQ(next_cron("0 0 */1 * 5", "2024-04-22T00:00:00Z"), "2024-04-26T00:00:00.000000Z");
  std::string error;
  auto c = *parse_cron("0 0 1 * 1", error);
  EXPECT_FALSE(c.day_of_month_any);
  EXPECT_FALSE(c.day_of_week_any);
  EXPECT_TRUE(parse_cron("0 0 * * *", error)->day_of_week_any);
}

TEST(workflow, cron_rolls_over_months_and_years) {
  EXPECT_EQ(next_cron("0 0 1 * *", "2024-01-31T12:00:00Z"), "2024-02-01T00:00:00.000000Z");
  EXPECT_EQ(next_cron("0 0 1 1 *", "2024-06-01T00:00:00Z"), "2025-01-01T00:00:00.000000Z");
  EXPECT_EQ(next_cron("59 23 31 12 *", "2024-12-31T23:59:00Z"), "2025-12-31T23:59:00.000000Z");
  EXPECT_EQ(next_cron("30 2 * * *", "2024-12-31T23:59:00Z"), "2025-01-01T02:30:00.000000Z");
  EXPECT_EQ(next_cron("0 0 * 3 *", "1999-12-31T00:00:00Z"), "2000-03-01T00:00:00.000000Z");
}

TEST(workflow, cron_parses_fields_and_rejects_nonsense) {
  std::string error;
  auto c = parse_cron("  1,2-4,*/20   0-23/6 1 1-12/3 1-7  ", error);
  ASSERT_TRUE(c) << error;
  EXPECT_EQ(c->minute.count(), 7U); // 0 1 2 3 4 20 40
  EXPECT_TRUE(c->minute[40] && c->minute[3] && !c->minute[5]);
  EXPECT_EQ(c->hour.count(), 4U);
  EXPECT_TRUE(c->month[1] && c->month[4] && c->month[10] && !c->month[12]);
  EXPECT_EQ(c->day_of_week.count(), 7U); // 7 folds into Sunday
  for (std::string_view bad :
       {"* * * *", "* * * * * *", "60 * * * *", "* 24 * * *", "* * 0 * *", "* * 32 * *",
        "* * * 13 *", "* * * * 8", "*/0 * * * *", "5-1 * * * *", "a * * * *", ", * * * *",
        "1,,2 * * * *", "* * * FOO *", "1- * * * *", "*/x * * * *", ""})
    EXPECT_FALSE(parse_cron(bad, error)) << bad;
  EXPECT_NE(cron_error("* * * *").find("5 fields"), std::string::npos);
  EXPECT_NE(cron_error("5-1 * * * *").find("reversed"), std::string::npos);
  EXPECT_NE(cron_error("* * * * 8").find("day-of-week"), std::string::npos);
}

TEST(workflow, next_schedule_time_follows_interval_or_cron) {
  auto t = utc("2024-03-15T10:07:30Z");
  EXPECT_EQ(next_schedule_time(js(R"({"interval_seconds": 90})").as_object(), t), t + 90'000'000);
  EXPECT_EQ(next_schedule_time(js(R"({"cron": "0 * * * *"})").as_object(), t),
            utc("2024-03-15T11:00:00Z"));
}

// ---- Retries -------------------------------------------------------------------------------

TEST(workflow, retry_delays_double_up_to_the_cap_with_bounded_jitter) {
  EXPECT_DOUBLE_EQ(retry_delay_seconds(1, 5, 3600, 0.5), 5);
  EXPECT_DOUBLE_EQ(retry_delay_seconds(2, 5, 3600, 0.5), 10);
  EXPECT_DOUBLE_EQ(retry_delay_seconds(4, 5, 3600, 0.5), 40);
  EXPECT_DOUBLE_EQ(retry_delay_seconds(10, 5, 3600, 0.5), 2560);
  EXPECT_DOUBLE_EQ(retry_delay_seconds(11, 5, 3600, 0.5), 3600);
  EXPECT_DOUBLE_EQ(retry_delay_seconds(5000, 5, 3600, 0.5), 3600);
  EXPECT_DOUBLE_EQ(retry_delay_seconds(std::numeric_limits<int>::max(), 5, 3600, 0.5), 3600);
  EXPECT_DOUBLE_EQ(retry_delay_seconds(0, 5, 3600, 0.5), 5);
  EXPECT_DOUBLE_EQ(retry_delay_seconds(1, 5, 3600, 0.0), 4);
  EXPECT_NEAR(retry_delay_seconds(1, 5, 3600, 0.999999), 6, 1e-5);
  EXPECT_LT(retry_delay_seconds(1, 5, 3600, 0.999999), 6);
  EXPECT_DOUBLE_EQ(retry_delay_seconds(20, 5, 3600, 0.0), 2880);
}

// ---- Signatures and secrets ----------------------------------------------------------------

TEST(workflow, webhook_signature_matches_the_standard_webhooks_vector) {
  // Computed independently with Python's hmac and base64 (the Standard Webhooks example).
  EXPECT_EQ(webhook_signature("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                              "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330,
                              R"({"test": 2432232314})"),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
}

TEST(workflow, webhook_signature_of_a_plain_secret_uses_its_bytes) {
  EXPECT_EQ(webhook_signature("my-plain-secret-1234", "msg_42", 1700000000,
                              R"({"type":"contact.created"})"),
            "v1,wGkav125GewPgdZK27ZinxCGr5LuY4rB/mKN81yQTjg=");
  // A whsec_ secret that is not base64 is used as it is, prefix included.
  EXPECT_EQ(webhook_signature("whsec_!!notbase64!!", "msg_1", 1, "x"),
            "v1,LqzaCYYb+q/brAjwi6SlLYg5bHy43eXGzzy8/lzyoRk=");
}

TEST(workflow, generated_secrets_are_whsec_and_24_random_bytes) {
  std::set<std::string> seen;
  for (int i = 0; i < 20; ++i) {
    auto s = generate_webhook_secret();
    ASSERT_EQ(s.substr(0, 6), "whsec_");
    EXPECT_EQ(s.size(), 6U + 32U);
    seen.insert(s);
  }
  EXPECT_EQ(seen.size(), 20U);
}

// ---- URLs ----------------------------------------------------------------------------------

TEST(workflow, parse_url_accepts_http_and_https_with_a_host) {
  struct row {
    std::string_view url;
    bool https;
    std::string_view host;
    std::uint16_t port;
    std::string_view target;
  };
  for (auto& r : std::vector<row>{
           {"http://example.com", false, "example.com", 80, "/"},
           {"https://example.com/", true, "example.com", 443, "/"},
           {"HTTPS://Hooks.Example.com:8443/a/b?x=1&y=2", true, "Hooks.Example.com", 8443,
            "/a/b?x=1&y=2"},
           {"http://10.0.0.1:65535?q", false, "10.0.0.1", 65535, "/?q"},
           {"http://[::1]:8080/x", false, "::1", 8080, "/x"},
           {"https://[2001:db8::1]", true, "2001:db8::1", 443, "/"},
           {"http://my-host/p%20q", false, "my-host", 80, "/p%20q"},
       }) {
    auto u = parse_url(r.url);
    ASSERT_TRUE(u) << r.url;
    EXPECT_EQ(u->https, r.https) << r.url;
    EXPECT_EQ(u->host, r.host) << r.url;
    EXPECT_EQ(u->port, r.port) << r.url;
    EXPECT_EQ(u->target, r.target) << r.url;
  }
}

TEST(workflow, parse_url_rejects_everything_else) {
  for (std::string_view bad : {"",
                               "ftp://example.com",
                               "example.com",
                               "http://",
                               "http:///x",
                               "http://user@host/",
                               "http://user:pw@host/",
                               "http://host/#frag",
                               "http://host:0/",
                               "http://host:65536/",
                               "http://host:/",
                               "http://host:80x/",
                               "http://ho st/",
                               "http://host/a b",
                               "http://host\r\n/",
                               "http://[::1/",
                               "http://[]/",
                               "http://[zz::1]/",
                               "http://[::1]x/",
                               "http://a..b/",
                               "http://.a/",
                               "http://a_b.com/",
                               "http://h\xc3\xa9.com/",
                               "http:\\\\host/",
                               "javascript://host/"})
    EXPECT_FALSE(parse_url(bad)) << bad;
  EXPECT_TRUE(parse_url("http://h/" + std::string(2048 - 9, 'a')));
  EXPECT_FALSE(parse_url("http://h/" + std::string(2048 - 8, 'a')));
}

// ---- inbound webhook credentials (issue 31 item 3) ----------------------------------------------

TEST(WebhookRefusal, AWorkflowWithoutASecretAdmitsNobody) {
  webhook_credentials c;
  EXPECT_TRUE(webhook_refusal(std::nullopt, c, "{}", 1000));
  c.secret = "";
  EXPECT_TRUE(webhook_refusal(std::nullopt, c, "{}", 1000));
  EXPECT_TRUE(webhook_refusal(std::string(), c, "{}", 1000));
  // A signature made with an empty key does not open a workflow without a secret either.
  c.secret.reset();
  c.signature = "sha256=" + hex_encode(as_bytes(hmac_sha256("", "{}")));
  EXPECT_TRUE(webhook_refusal(std::nullopt, c, "{}", 1000));
  webhook_credentials s;
  s.std_id = "msg_1";
  s.std_timestamp = "1000";
  s.std_signature = webhook_signature("", "msg_1", 1000, "{}");
  EXPECT_TRUE(webhook_refusal(std::nullopt, s, "{}", 1000));
}

TEST(WebhookRefusal, TheSecretTheContractSignatureOrAFreshStandardSignature) {
  const std::string secret = "a-long-shared-secret-0001";
  webhook_credentials c;
  EXPECT_EQ(webhook_refusal(secret, c, "{}", 1000), webhook_refused);
  c.secret = secret;
  EXPECT_FALSE(webhook_refusal(secret, c, "{}", 1000));
  c.secret = secret + "x";
  EXPECT_TRUE(webhook_refusal(secret, c, "{}", 1000));
  c.signature = "sha256=" + hex_encode(as_bytes(hmac_sha256(secret, "{}")));
  EXPECT_FALSE(webhook_refusal(secret, c, "{}", 1000));
  EXPECT_TRUE(webhook_refusal(secret, c, "{} ", 1000));
  webhook_credentials s;
  s.std_id = "msg_1";
  s.std_timestamp = "1000";
  s.std_signature = webhook_signature(secret, "msg_1", 1000, "{}");
  EXPECT_FALSE(webhook_refusal(secret, s, "{}", 1100));
  EXPECT_NE(webhook_refusal(secret, s, "{}", 2000), std::nullopt); // stale
  s.secret = secret; // the plain secret beside a stale signature does not help
  EXPECT_TRUE(webhook_refusal(secret, s, "{}", 2000));
}

TEST(WebhookSecret, AWebhookWorkflowSavedWithoutOneGetsOneDrawn) {
  workflow w;
  w.trigger = trigger_type::manual;
  EXPECT_FALSE(ensure_webhook_secret(w));
  EXPECT_FALSE(w.webhook_secret);
  w.trigger = trigger_type::webhook;
  auto drawn = ensure_webhook_secret(w);
  ASSERT_TRUE(drawn);
  EXPECT_EQ(drawn->rfind("whsec_", 0), 0u);
  EXPECT_EQ(w.webhook_secret, drawn);
  EXPECT_FALSE(ensure_webhook_secret(w)); // kept, not drawn again
  w.webhook_secret = "";
  EXPECT_TRUE(ensure_webhook_secret(w));
}

TEST(workflow, appointment_trigger_config_filters_calendar_and_service) {
  std::vector<issue> issues;
  auto cfg = parse_trigger_config(trigger_type::appointment_booked,
                                  js(R"({"calendar_id": 3, "service_id": 4})"), issues);
  ASSERT_TRUE(cfg.has_value());
  auto payload = js(R"({"appointment": {"calendar_id": 3, "service_id": 4}, "contact_id": 9})");
  EXPECT_TRUE(trigger_config_matches(trigger_type::appointment_booked, *cfg, payload));
  auto elsewhere = js(R"({"appointment": {"calendar_id": 5, "service_id": 4}})");
  EXPECT_FALSE(trigger_config_matches(trigger_type::appointment_booked, *cfg, elsewhere));
  auto any = parse_trigger_config(trigger_type::appointment_cancelled, js("{}"), issues);
  ASSERT_TRUE(any.has_value());
  EXPECT_TRUE(trigger_config_matches(trigger_type::appointment_cancelled, *any, elsewhere));
  EXPECT_TRUE(issues.empty());
  EXPECT_FALSE(
      parse_trigger_config(trigger_type::appointment_booked, js(R"({"pipeline_id": 1})"), issues));
  EXPECT_FALSE(
      parse_trigger_config(trigger_type::appointment_booked, js(R"({"calendar_id": 0})"), issues));
  EXPECT_EQ(issues.size(), 2U);
}
