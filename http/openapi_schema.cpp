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

void define(router& r, std::string name, const object_t& s) {
  r.define_schema(std::move(name), json::serialize(s));
}

} // namespace crm::http::schema
