// The JSON representations of contacts and companies (spec "Shapes of contact
// representations", contract §4–§5). Used by the HTTP handlers, and by the contacts actor for
// idempotent replays and outbox payloads, so every copy of a shape comes from one place.
#pragma once
#include "domain/contact.hpp"
#include "domain/contact_store.hpp"
#include "domain/failure.hpp"

#include <string>
#include <vector>

namespace crm::domain {

std::string encode_contact_created(const contact& c);
// The single-contact shape: list item fields plus company ({id, name} or null), tags,
// custom_fields.
std::string encode_contact_full(const contact& c, const company* co);
std::string encode_contact_page(const std::vector<const contact*>& items, std::int64_t total,
                                int page, int per_page);
// Update response: id, each named field with its stored value, updated_at.
std::string encode_contact_update(const contact& c, const std::vector<std::string>& fields);

std::string encode_company(const company& c);
std::string encode_company_page(const std::vector<company>& items, std::int64_t total, int page,
                                int per_page);

std::string encode_tags(const std::vector<tag_count>& tags);
std::string encode_tag(const tag_count& t);

// One result of a bulk create or an import row: an id, or the row's validation issues.
struct bulk_item {
  std::int64_t id = 0;
  std::vector<issue> errors;
  std::optional<bool> updated; // an upsert's: the row updated a contact (else created one)
};
// {"results": [...]}, the items numbered from `first` (a large import's later part).
std::string encode_bulk_results(const std::vector<bulk_item>& results, std::int64_t first = 0);

} // namespace crm::domain
