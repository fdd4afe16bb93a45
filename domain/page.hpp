// One page of a paginated list (contract §4: items, total, page, per_page, pages).
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

namespace crm::domain {

template <class T>
struct page {
  std::vector<T> items;
  std::int64_t total = 0;
  int number = 1;
  int per_page = 20;

  std::int64_t pages() const { return per_page > 0 ? (total + per_page - 1) / per_page : 0; }
};

// Page `number` of `sorted` (records in a store, in the list's order), copied out.
template <class T>
page<T> page_of(const std::vector<const T*>& sorted, int number, int per_page) {
  page<T> out;
  out.number = number;
  out.per_page = per_page;
  out.total = static_cast<std::int64_t>(sorted.size());
  auto skip =
      static_cast<std::size_t>(std::max(0, number - 1)) * static_cast<std::size_t>(per_page);
  for (auto i = skip; i < sorted.size() && out.items.size() < static_cast<std::size_t>(per_page);
       ++i)
    out.items.push_back(*sorted[i]);
  return out;
}

} // namespace crm::domain
