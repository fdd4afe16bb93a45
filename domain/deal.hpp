// The sales pipeline (contract §8, docs/pipeline.md): pipelines with ordered stages, deals and
// their money. Amounts are integer cents end to end (parsed from decimal strings, stored as
// numeric, summed in 128 bits): never a float.
#pragma once
#include "domain/failure.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace crm::domain {

// Sums of cents: 128 bits, so that any number of maximal amounts adds up exactly.
__extension__ typedef __int128 money_sum;

enum class stage_kind : std::uint8_t { open, won, lost };
std::optional<stage_kind> parse_stage_kind(std::string_view s);
std::string_view to_string(stage_kind k);
// "Input should be 'open', 'won' or 'lost'"
std::string stage_kind_message();

struct stage {
  std::int64_t id = 0;
  std::int64_t pipeline_id = 0;
  std::string name;
  int position = 0;
  int probability = 0; // percent, 0..100
  stage_kind kind = stage_kind::open;
};

struct pipeline {
  std::int64_t id = 0;
  std::int64_t tenant_id = 0;
  std::string name;
  bool is_default = false;
  std::vector<stage> stages; // in position order
  std::int64_t created_at = 0;
  std::int64_t updated_at = 0;

  const stage* find(std::int64_t stage_id) const;
  const stage* first_open() const;
  const stage* of_kind(stage_kind k) const; // the won or the lost stage
};

// At least one open stage, exactly one won and one lost, names unique (case-insensitive):
// the reason they are broken, or empty.
std::string stage_rules_broken(const std::vector<stage>& stages);
// Positions 0..n-1 in the vector's order.
void renumber(std::vector<stage>& stages);
// The stages of a new tenant's default pipeline "Sales" (ids and pipeline id left 0).
std::vector<stage> default_stages();

struct deal {
  std::int64_t id = 0;
  std::int64_t tenant_id = 0;
  std::string title;
  std::optional<std::int64_t> amount; // cents
  std::string currency;
  std::optional<std::int64_t> contact_id;
  std::optional<std::int64_t> company_id;
  std::optional<std::int64_t> owner_id;
  std::int64_t pipeline_id = 0;
  std::int64_t stage_id = 0;
  std::optional<std::int32_t> expected_close; // days since 1970-01-01
  stage_kind status = stage_kind::open;
  std::optional<std::string> lost_reason;
  std::string custom_fields = "{}";
  std::int64_t created_at = 0;
  std::int64_t updated_at = 0;
  std::optional<std::int64_t> closed_at;
  std::int64_t rank = 0; // board order within the stage (gaps, renumbered when exhausted)
};

// ---- money and dates ----------------------------------------------------------------------
// `^[0-9]{1,13}(\.[0-9]{1,2})?$` → cents.
std::optional<std::int64_t> parse_amount(std::string_view s);
// Cents as "1500.00"; also for sums (128-bit: ten thousand maximal amounts still fit).
std::string format_cents(money_sum cents);
// Σ cents × percent is in 1/10000 units: rounded half-up to cents.
money_sum round_weighted(money_sum cents_times_percent);

// An active ISO 4217 code (the list of Debian's iso-codes, generated at build time).
bool is_currency(std::string_view code);

// `YYYY-MM-DD` ↔ days since 1970-01-01.
std::optional<std::int32_t> parse_date(std::string_view s);
std::string format_date(std::int32_t days);

// ---- JSON ---------------------------------------------------------------------------------
std::string encode_stage(const stage& s);
std::string encode_pipeline(const pipeline& p);
void append_deal(std::string& out, const deal& d);
std::string encode_deal(const deal& d);
// The board's card of a deal: id, title, amount, currency, contact_id, company_id, owner_id,
// expected_close_date, status (GET /deals/{id} has the rest).
void append_deal_card(std::string& out, const deal& d);

// ---- list queries -------------------------------------------------------------------------
enum class deal_sort : std::uint8_t {
  id,
  title,
  amount,
  currency,
  status,
  pipeline_id,
  stage_id,
  owner_id,
  contact_id,
  company_id,
  expected_close_date,
  created_at,
  updated_at,
  closed_at
};
std::optional<deal_sort> parse_deal_sort(std::string_view s);
std::string deal_sort_message();

struct deal_query {
  std::optional<std::int64_t> pipeline_id, stage_id, owner_id, contact_id, company_id;
  std::optional<stage_kind> status;
  std::optional<std::string> currency;
  std::optional<std::int64_t> amount_min, amount_max; // cents
  std::optional<std::int32_t> close_after, close_before;
  std::vector<std::pair<std::string, std::string>> custom; // cf.<key> = value
  std::string search;                                      // title, case-insensitive
  deal_sort sort = deal_sort::id;
  bool descending = false;
};

bool deal_matches(const deal& d, const deal_query& q);
// Strict weak order of the query's sort (nulls last ascending, first descending; ties on id).
bool deal_before(const deal& a, const deal& b, const deal_query& q);

// CSV export: header line and one line per deal (formula-injection safe).
std::string deal_csv_header();
std::string deal_csv_row(const deal& d);

} // namespace crm::domain
