// JSON request bodies through the field rules of contacts and deals (create, update, move), the
// contact search (its body, its custom fields against definitions, its predicate on a contact)
// and the generic body reader: any bytes give a value or validation issues, never a crash.
#include "domain/contact_search.hpp"
#include "http/contact_input.hpp"
#include "http/deal_input.hpp"
#include "http/json.hpp"

#include <boost/json/parse.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace crm::http;
  std::string body(reinterpret_cast<const char*>(data), size);
  {
    body_reader b(body);
    b.text("name", false, {.min = 1, .max = 200, .trim = true});
    b.integer("n", false);
    b.boolean("flag", false);
    (void)b.finish();
  }
  boost::json::error_code ec;
  auto v = boost::json::parse(body, ec);
  if (ec) return 0;
  {
    std::vector<crm::domain::issue> issues;
    if (auto s = crm::domain::parse_contact_search(v, issues)) {
      crm::domain::field_definitions defs;
      for (auto [name, type] : {std::pair{"plan", crm::domain::field_type::select},
                                {"age", crm::domain::field_type::integer},
                                {"due", crm::domain::field_type::date},
                                {"tags", crm::domain::field_type::multiselect}}) {
        crm::domain::custom_field f;
        f.id = static_cast<std::int64_t>(defs.fields.size() + 1);
        f.name = name;
        f.type = type;
        f.options = {"gold", "silver"};
        defs.fields.push_back(f);
      }
      if (crm::domain::check_custom_filters(*s, defs).empty()) {
        crm::domain::contact c;
        c.id = 7;
        c.first_name = "Ana";
        c.email = "ana@example.org";
        c.tags = {"vip", "Diabetes"};
        c.custom_fields = R"({"plan":"gold","age":70,"due":"2026-12-01","tags":["gold"]})";
        (void)crm::domain::search_matches(*s, c);
      }
    }
  }
  if (!v.is_object()) return 0;
  auto& o = v.as_object();
  for (bool creating : {true, false}) {
    std::vector<crm::domain::issue> issues;
    (void)read_contact(o, creating, {std::string("body")}, issues);
    issues.clear();
    (void)read_deal(o, creating, !creating, {std::string("body")});
  }
  return 0;
}
