// The page shape of contract §4 ({"items", "total", "page", "per_page", "pages"}) for lists
// rendered as JSON values.
#pragma once
#include <boost/json/array.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace crm::domain {

// `items` is already the requested page, out of `total`.
std::string render_page(boost::json::array items, std::int64_t total, int page, int per_page);
// Page `page` of all the items.
std::string render_page_of(std::vector<boost::json::value> all, int page, int per_page);

} // namespace crm::domain
