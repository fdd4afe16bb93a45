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

// Page `page` of the records of `by_id` (a map ordered by id) that `keep` takes, newest (highest
// id) first; only the page's records are rendered, by `to_json`.
template <class Map, class Keep, class ToJson>
std::string render_newest_first(const Map& by_id, Keep&& keep, ToJson&& to_json, int page,
                                int per_page) {
  auto from = static_cast<std::int64_t>(page - 1) * per_page;
  std::int64_t total = 0;
  boost::json::array items;
  for (auto it = by_id.rbegin(); it != by_id.rend(); ++it) {
    if (!keep(it->second)) continue;
    if (total >= from && total < from + per_page) items.push_back(to_json(it->second));
    ++total;
  }
  return render_page(std::move(items), total, page, per_page);
}

} // namespace crm::domain
