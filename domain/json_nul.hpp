// PostgreSQL text and jsonb cannot hold U+0000, which JSON can carry as "\u0000". Bodies that
// reach storage are checked once after parsing, so such a string (a key or a value) is refused
// with 422 at its place instead of failing the transaction it would have joined.
#pragma once
#include "domain/failure.hpp"

#include <optional>
#include <string_view>
#include <vector>

namespace boost::json {
class object;
class value;
} // namespace boost::json

namespace crm::domain {

// Where the first string holding U+0000 is, under `base` ({"body"} for a request body);
// nothing when there is none. `raw` is the text `v` was parsed from: without the escape in it
// the walk is skipped.
std::optional<std::vector<loc_part>> nul_location(std::string_view raw, const boost::json::value& v,
                                                  std::vector<loc_part> base = {"body"});

// The 422 item for that place.
issue nul_issue(std::vector<loc_part> loc);

// A request body parsed into `doc` as a JSON object; nothing and the 422 json_invalid of
// contract §4 (at ["body"]) when it is not JSON, holds U+0000, or is not an object.
const boost::json::object* body_object(std::string_view text, boost::json::value& doc,
                                       std::vector<issue>& issues);

} // namespace crm::domain
