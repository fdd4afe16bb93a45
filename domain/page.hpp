// One page of a paginated list (contract §4: items, total, page, per_page, pages).
#pragma once
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

} // namespace crm::domain
