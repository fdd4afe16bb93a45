// Builders of the JSON Schemas in the OpenAPI document (http/handlers/openapi.cpp), for the
// handlers that declare the bodies of their routes next to the rules that check them: a text
// field's schema is made from the same text_rule its body_reader call uses, an enum's from the
// same list of values.
#pragma once
#include "http/json.hpp"
#include "http/router.hpp"

#include <boost/json/object.hpp>

#include <initializer_list>
#include <span>
#include <string_view>
#include <vector>

namespace crm::http::schema {

using object_t = boost::json::object;

object_t text(const text_rule& rule);
object_t text_matching(std::string_view pattern); // a string matching an ECMA-262 pattern
object_t email(std::size_t max = 0);              // 0: no maximum
object_t id();                                    // a positive int64
object_t integer();                               // any int64
object_t integer(std::int64_t min, std::int64_t max);
object_t number();
object_t date();       // YYYY-MM-DD
object_t any_object(); // a JSON object of any members (custom fields, provider payloads)
object_t boolean();
object_t timestamp(); // RFC 3339, UTC
object_t one_of(std::span<const std::string_view> values);
object_t constant(std::string_view value); // a string that is always `value`
object_t nullable(object_t s);             // s or null
object_t ref(std::string_view component);
object_t array_of(object_t items);

struct property {
  std::string_view name;
  object_t schema;
  bool required = true;
};
// An object with these properties. `closed`: no other property (the readers refuse unknown
// fields with extra_forbidden, and answers carry exactly these).
object_t object(std::initializer_list<property> properties, bool closed = true);
// A page of a list: {items: [item], total, page, per_page, pages}.
object_t page_of(std::string_view item_component);

// The answer of a bulk create or import of up to `max` items: {results: [...]}, one an item in
// order, with its id or why it was not created (ValidationIssue of the document's components).
object_t bulk_results(std::size_t max);

// router::define_schema with a built schema.
void define(router& r, std::string name, const object_t& s);

// A query parameter (route_doc::with_query).
query_param query(std::string_view name, const object_t& s, std::string_view description = {});
// page and per_page, with the limits of the list (paging_rules, http/json.hpp, by default).
std::vector<query_param> paging(int per_page_default = paging_rules::per_page_default,
                                int per_page_max = paging_rules::per_page_max);
// The Idempotency-Key header of the creates that honour it (route_doc::with_headers).
query_param idempotency_key();
// paging() followed by `filters`.
std::vector<query_param> paged(std::vector<query_param> filters);
// sort_by (one of `fields`, by id unless asked) and sort_order (list_rules::sort_orders, asc).
std::vector<query_param> sorting(std::span<const std::string_view> fields,
                                 std::string_view description = "the order");
// ?cf.<key>=<value> (list_rules::custom_prefix), as one documented parameter.
query_param custom_field_filter();
// JSON text of a schema, for route_doc::with_path.
std::string text_of(const object_t& s);

} // namespace crm::http::schema
