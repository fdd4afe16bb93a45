// The page shape for lists rendered as JSON values.
#include "domain/page_json.hpp"

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

namespace crm::domain {

std::string render_page(boost::json::array items, std::int64_t total, int page, int per_page) {
  boost::json::object o;
  o["items"] = std::move(items);
  o["total"] = total;
  o["page"] = page;
  o["per_page"] = per_page;
  o["pages"] = per_page > 0 ? (total + per_page - 1) / per_page : 0;
  return boost::json::serialize(o);
}

std::string render_page_of(std::vector<boost::json::value> all, int page, int per_page) {
  boost::json::array items;
  auto from = static_cast<std::size_t>(page - 1) * static_cast<std::size_t>(per_page);
  for (auto i = from; i < all.size() && i < from + static_cast<std::size_t>(per_page); ++i)
    items.push_back(std::move(all[i]));
  return render_page(std::move(items), static_cast<std::int64_t>(all.size()), page, per_page);
}

} // namespace crm::domain
