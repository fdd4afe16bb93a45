#include "http/openapi_schema.hpp"

#include <boost/json/serialize.hpp>

namespace crm::http::schema {

namespace json = boost::json;

object_t text(const text_rule& rule) {
  object_t o{{"type", "string"}};
  if (rule.min > 0) o["minLength"] = rule.min;
  if (rule.max > 0) o["maxLength"] = rule.max;
  return o;
}

object_t text_matching(std::string_view pattern) {
  return object_t{{"type", "string"}, {"pattern", pattern}};
}

object_t email(std::size_t max) {
  object_t o{{"type", "string"}, {"format", "email"}};
  if (max > 0) o["maxLength"] = max;
  return o;
}

object_t id() {
  return object_t{{"type", "integer"}, {"format", "int64"}, {"minimum", 1}};
}

object_t integer() {
  return object_t{{"type", "integer"}, {"format", "int64"}};
}

object_t integer(std::int64_t min, std::int64_t max) {
  return object_t{{"type", "integer"}, {"format", "int64"}, {"minimum", min}, {"maximum", max}};
}

object_t number() {
  return object_t{{"type", "number"}};
}

object_t date() {
  return object_t{{"type", "string"}, {"format", "date"}};
}

object_t any_object() {
  return object_t{{"type", "object"}};
}

object_t boolean() {
  return object_t{{"type", "boolean"}};
}

object_t timestamp() {
  return object_t{{"type", "string"}, {"format", "date-time"}};
}

object_t one_of(std::span<const std::string_view> values) {
  json::array e;
  for (auto v : values) e.emplace_back(v);
  return object_t{{"type", "string"}, {"enum", std::move(e)}};
}

object_t constant(std::string_view value) {
  return object_t{{"type", "string"}, {"const", value}};
}

object_t nullable(object_t s) {
  return object_t{{"oneOf", json::array{std::move(s), object_t{{"type", "null"}}}}};
}

object_t ref(std::string_view component) {
  return object_t{{"$ref", "#/components/schemas/" + std::string(component)}};
}

object_t array_of(object_t items) {
  return object_t{{"type", "array"}, {"items", std::move(items)}};
}

object_t object(std::initializer_list<property> properties, bool closed) {
  object_t props;
  json::array required;
  for (auto& p : properties) {
    props[p.name] = p.schema;
    if (p.required) required.emplace_back(p.name);
  }
  object_t o{{"type", "object"}, {"properties", std::move(props)}};
  if (!required.empty()) o["required"] = std::move(required);
  if (closed) o["additionalProperties"] = false;
  return o;
}

object_t page_of(std::string_view item_component) {
  return object({{"items", array_of(ref(item_component))},
                 {"total", integer()},
                 {"page", integer()},
                 {"per_page", integer()},
                 {"pages", integer()}});
}

object_t bulk_results(std::size_t max) {
  auto errors = array_of(ref("ValidationIssue"));
  errors["minItems"] = 1;
  auto index = integer(0, static_cast<std::int64_t>(max) - 1);
  auto updated = boolean();
  updated["description"] = "only in an import with mode=upsert: whether the row's e-mail found "
                           "a contact it updated (else it created one)";
  auto result = object_t{
      {"oneOf", json::array{object({{"index", index}, {"id", id()}, {"updated", updated, false}}),
                            object({{"index", index}, {"errors", errors}})}}};
  return object({{"results", array_of(result)}});
}

void define(router& r, std::string name, const object_t& s) {
  r.define_schema(std::move(name), json::serialize(s));
}

query_param query(std::string_view name, const object_t& s, std::string_view description) {
  return {std::string(name), json::serialize(s), std::string(description)};
}

std::vector<query_param> paging(int per_page_default, int per_page_max) {
  auto page = integer(1, paging_rules::page_max);
  page["default"] = 1;
  auto per_page = integer(1, per_page_max);
  per_page["default"] = per_page_default;
  return {query("page", page, "the page, from 1"), query("per_page", per_page, "items a page")};
}

query_param idempotency_key() {
  auto s = text_matching("^[\\x21-\\x7e]+$");
  s["maxLength"] = idempotency_key_max;
  return query("Idempotency-Key", s,
               "the same key with the same request is answered the first answer again; with "
               "another request, 409");
}

std::vector<query_param> paged(std::vector<query_param> filters) {
  auto params = paging();
  for (auto& f : filters) params.push_back(std::move(f));
  return params;
}

std::vector<query_param> sorting(std::span<const std::string_view> fields,
                                 std::string_view description) {
  auto sort_by = one_of(fields);
  sort_by["default"] = "id";
  auto sort_order = one_of(list_rules::sort_orders);
  sort_order["default"] = "asc";
  return {query("sort_by", sort_by, description), query("sort_order", sort_order, "asc or desc")};
}

query_param custom_field_filter() {
  return query(std::string(list_rules::custom_prefix) + "<key>", text({}),
               "custom field <key> equals this value (compared by the stored value's JSON type: "
               "text, number or boolean); one parameter a field");
}

std::string text_of(const object_t& s) {
  return json::serialize(s);
}

} // namespace crm::http::schema
