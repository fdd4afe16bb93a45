// Duplicates and merges of contacts (contract §11, docs/patient-record.md "Duplicates and
// merge"): which pairs of a tenant's contacts look like one person, and what the survivor of a
// merge holds. Pure rules; the contacts actor owns the contacts and the merge's transaction.
#pragma once
#include "domain/contact.hpp"

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace crm::domain {

// The fields a merge chooses between the two contacts (`prefer`).
inline constexpr std::array<std::string_view, 9> merge_fields{
    "first_name", "last_name", "email",  "phone",        "company_id",
    "owner_id",   "status",    "source", "custom_fields"};
inline constexpr std::array<std::string_view, 2> merge_sides{"survivor", "duplicate"};

enum class merge_side : std::uint8_t { survivor, duplicate };
// A field not named takes the survivor's value, or the duplicate's where the survivor has none
// (first_name and status always have one). "duplicate" takes the duplicate's value where it
// has one. custom_fields go key by key the same way.
using merge_preferences = std::map<std::string, merge_side, std::less<>>;

// The survivor once `duplicate` is merged into it: its id and created_at kept, the fields as
// `prefer` says, the tags of both (the survivor's first), the custom values combined.
// `duplicate_custom_fields` is the duplicate's custom values as the survivor may hold them
// (sealed values resealed for the survivor). updated_at is left to the caller.
contact merged_contact(const contact& survivor, const contact& duplicate,
                       const merge_preferences& prefer, std::string_view duplicate_custom_fields);

// ---- duplicates ---------------------------------------------------------------------------

// An e-mail address as a mailbox: lower-cased, the "+tag" of the local part dropped, and for
// Gmail the dots of the local part too (they reach the same mailbox).
std::string mailbox_of(std::string_view email);
// A name as compared: lower-cased (ASCII), runs of spaces, dots and hyphens as one space.
std::string name_key(const contact& c);
// Names close enough to be one person's: equal keys, or keys of at least 5 characters one edit
// apart (two edits from 10 characters).
bool close_names(const contact& a, const contact& b);

struct duplicate_pair {
  std::int64_t first = 0; // the lower id
  std::int64_t second = 0;
  std::vector<std::string> reasons; // "phone", "email", "name", in that order
};

// Candidate pairs among `contacts`: the same phone, the same mailbox, or close names that share
// a company. Ordered by the first id, then the second. Groups are bounded: of more than
// `group_max` contacts sharing a phone or mailbox (a front desk's number), the pairs of the
// first `group_max` by id; names are compared with their neighbours in name order within each
// company.
inline constexpr std::size_t duplicate_group_max = 20;
std::vector<duplicate_pair> find_duplicates(const std::vector<const contact*>& contacts);

} // namespace crm::domain
