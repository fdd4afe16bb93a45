// JSON request bodies through the field rules of contacts and deals (create, update, move) and
// the generic body reader: any bytes give a value or validation issues, never a crash.
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
  if (ec || !v.is_object()) return 0;
  auto& o = v.as_object();
  for (bool creating : {true, false}) {
    std::vector<crm::domain::issue> issues;
    (void)read_contact(o, creating, {std::string("body")}, issues);
    issues.clear();
    (void)read_deal(o, creating, !creating, {std::string("body")});
  }
  return 0;
}
