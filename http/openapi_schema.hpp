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

namespace crm::http::schema {

using object_t = boost::json::object;

object_t text(const text_rule& rule);
object_t text_matching(std::string_view pattern); // a string matching an ECMA-262 pattern
object_t email(std::size_t max = 0);              // 0: no maximum
object_t id();                                    // a positive int64
object_t integer();                               // any int64
object_t boolean();
object_t timestamp(); // RFC 3339, UTC
object_t one_of(std::span<const std::string_view> values);
object_t nullable(object_t s); // s or null
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

// router::define_schema with a built schema.
void define(router& r, std::string name, const object_t& s);

} // namespace crm::http::schema
