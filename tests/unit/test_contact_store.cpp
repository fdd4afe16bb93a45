// Unit tests for domain/contact_store: the list order, filters, search and tag counts behind
// GET /contacts and GET /tags (contract §4). A randomised test holds the store to a plain
// reference (a std::map filtered and sorted the obvious way) through thousands of changes.
#include "domain/contact_store.hpp"

#include "domain/validation.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <map>
#include <random>
#include <tuple>

using namespace crm::domain;
using namespace std::string_literals;

namespace {

contact make_contact(std::int64_t id, std::string first, std::optional<std::string> last = {},
                     std::optional<std::string> email = {}, std::optional<std::string> phone = {}) {
  contact c;
  c.id = id;
  c.tenant_id = 1;
  c.first_name = std::move(first);
  c.last_name = std::move(last);
  c.email = std::move(email);
  c.phone = std::move(phone);
  c.created_at = 1000 + id;
  c.updated_at = 1000 + id;
  return c;
}

std::vector<std::int64_t> ids_of(const contact_page& page) {
  std::vector<std::int64_t> ids;
  for (const auto* c : page.items) ids.push_back(c->id);
  return ids;
}

std::vector<std::int64_t> list_ids(const contact_store& store, contact_query q) {
  q.offset = 0;
  q.limit = 1'000'000;
  return ids_of(store.list(q));
}

contact_query sorted_by(contact_sort key, bool descending) {
  contact_query q;
  q.sort = key;
  q.descending = descending;
  q.limit = 100;
  return q;
}

contact_query searching(std::string text) {
  contact_query q;
  q.search = std::move(text);
  q.limit = 100;
  return q;
}

bool same_contact(const contact& a, const contact& b) {
  return a.id == b.id && a.tenant_id == b.tenant_id && a.first_name == b.first_name &&
         a.last_name == b.last_name && a.email == b.email && a.phone == b.phone &&
         a.company_id == b.company_id && a.owner_id == b.owner_id && a.status == b.status &&
         a.source == b.source && a.tags == b.tags && a.custom_fields == b.custom_fields &&
         a.created_at == b.created_at && a.updated_at == b.updated_at;
}

// ---- The reference: the documented rules written the obvious way, independently of the store.

bool reference_search(const contact& c, std::string_view query) {
  if (query.empty()) return true;
  const auto q = ascii_lower(query);
  const auto has = [&](const std::string& text) {
    return ascii_lower(text).find(q) != std::string::npos;
  };
  if (has(c.first_name)) return true;
  if (c.last_name && (has(*c.last_name) || has(c.first_name + " " + *c.last_name))) return true;
  if (c.email && has(*c.email)) return true;
  return c.phone && has(*c.phone);
}

bool reference_matches(const contact& c, const contact_query& q) {
  if (q.status && c.status != *q.status) return false;
  if (q.source && c.source != q.source) return false;
  if (q.company_id && c.company_id != q.company_id) return false;
  if (q.owner_id && c.owner_id != q.owner_id) return false;
  for (const auto& wanted : q.tags) {
    bool has = false;
    for (const auto& t : c.tags) has = has || ascii_lower(t) == ascii_lower(wanted);
    if (!has) return false;
  }
  if (q.created_after && c.created_at <= *q.created_after) return false;
  if (q.created_before && c.created_at >= *q.created_before) return false;
  if (q.updated_after && c.updated_at <= *q.updated_after) return false;
  if (!reference_search(c, q.search)) return false;
  return !q.extra || q.extra(c);
}

// A sort key as a tuple: (absent, lower-cased text, raw text, number); absent sorts last.
using sort_tuple = std::tuple<bool, std::string, std::string, std::int64_t>;

sort_tuple text_key(const std::optional<std::string>& s) {
  if (!s) return {true, "", "", 0};
  return {false, ascii_lower(*s), "", 0}; // case-insensitive: raw text is no key
}

sort_tuple key_of(const contact& c, contact_sort key) {
  switch (key) {
  case contact_sort::id: return {false, "", "", c.id};
  case contact_sort::first_name: return text_key(c.first_name);
  case contact_sort::last_name: return text_key(c.last_name);
  case contact_sort::email: return text_key(c.email);
  case contact_sort::phone: return text_key(c.phone);
  case contact_sort::status: return text_key(std::string(to_string(c.status)));
  case contact_sort::source:
    return text_key(c.source ? std::optional<std::string>(to_string(*c.source)) : std::nullopt);
  case contact_sort::created_at: return {false, "", "", c.created_at};
  case contact_sort::updated_at: return {false, "", "", c.updated_at};
  }
  return {};
}

std::vector<std::int64_t> reference_order(const std::map<std::int64_t, contact>& contacts,
                                          const contact_query& q) {
  std::vector<std::pair<sort_tuple, std::int64_t>> rows;
  for (const auto& [id, c] : contacts)
    if (reference_matches(c, q)) rows.emplace_back(key_of(c, q.sort), id);
  std::sort(rows.begin(), rows.end(), [&](const auto& a, const auto& b) {
    if (a.first != b.first) return q.descending ? b.first < a.first : a.first < b.first;
    return a.second < b.second;
  });
  std::vector<std::int64_t> ids;
  ids.reserve(rows.size());
  for (const auto& row : rows) ids.push_back(row.second);
  return ids;
}

// ---- Random contacts and queries.

class generator {
public:
  explicit generator(std::uint64_t seed) : rng_(seed) {}

  std::size_t below(std::size_t n) { return static_cast<std::size_t>(rng_() % n); }
  bool chance(int percent) { return below(100) < static_cast<std::size_t>(percent); }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[below(v.size())];
  }

  std::string recase(std::string s) {
    for (char& ch : s) {
      if (chance(30))
        ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      else if (chance(30))
        ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    }
    return s;
  }

  std::string digits(std::size_t n) {
    std::string s;
    for (std::size_t i = 0; i < n; ++i) s += static_cast<char>('0' + below(10));
    return s;
  }

  // E-mails carry the id, so they stay unique in the tenant as the service guarantees.
  std::optional<std::string> email_for(std::int64_t id) {
    static const std::vector<std::string> locals = {"ann", "Ann.Smith", "bob",
                                                    "x",   "jo.ann",    "ZOE"};
    static const std::vector<std::string> domains = {"example.com", "Example.ORG", "mail.co"};
    if (chance(15)) return std::nullopt;
    return pick(locals) + "+" + std::to_string(id) + "@" + pick(domains);
  }

  std::vector<std::string> tags() {
    static const std::vector<std::string> pool = {"VIP",    "vip",    "Vip",   "lead",       "LEAD",
                                                  "cardio", "Cardio", "ortho", "new-patient"};
    std::vector<std::string> out;
    const auto n = below(4);
    for (std::size_t i = 0; i < n; ++i) {
      auto t = pick(pool);
      const bool dup = std::any_of(out.begin(), out.end(), [&](const std::string& o) {
        return ascii_lower(o) == ascii_lower(t);
      });
      if (!dup) out.push_back(t);
    }
    return out;
  }

  void randomise(contact& c, bool every_field) {
    static const std::vector<std::string> firsts = {
        "Ann",    "ann", "ANNA", "Bob",       "bobby",   "Zo\xc3\xab", "\xc3\x89mile",
        "Jo Ann", "Li",  "Al",   "Mary-Kate", "o'Brien", "Ann "};
    static const std::vector<std::string> lasts = {
        "Smith", "smith", "SMITHERS", "Lee", "van Dyke", "Ng", "\xc3\x93 Briain", "", "Brown"};
    const auto maybe = [&] { return every_field || chance(40); };
    if (maybe()) c.first_name = pick(firsts);
    if (maybe()) c.last_name = chance(20) ? std::nullopt : std::optional(pick(lasts));
    if (maybe()) c.email = email_for(c.id);
    if (maybe()) c.phone = chance(20) ? std::nullopt : std::optional("+1" + digits(3 + below(8)));
    if (maybe())
      c.company_id = chance(30) ? std::nullopt : std::optional<std::int64_t>(1 + below(4));
    if (maybe()) c.owner_id = chance(40) ? std::nullopt : std::optional<std::int64_t>(1 + below(3));
    if (maybe()) c.status = static_cast<contact_status>(below(4));
    if (maybe())
      c.source = chance(25) ? std::nullopt : std::optional(static_cast<contact_source>(below(7)));
    if (maybe()) c.tags = tags();
    if (maybe()) c.created_at = 1000 + static_cast<std::int64_t>(below(40));
    if (maybe()) c.updated_at = c.created_at + static_cast<std::int64_t>(below(20));
  }

  // A search string: usually a piece of some contact's searchable text, 1, 2 or 3+ characters,
  // in any case; sometimes a piece spanning two fields, or text nobody has.
  std::string search(const std::map<std::int64_t, contact>& contacts) {
    if (contacts.empty() || chance(10)) {
      static const std::vector<std::string> odd = {
          "zzq", "a@", "1 2",       "+1",           "@",
          ".",   " ",  "ann smith", "ann\x1fsmith", std::string(1, '\0')};
      return pick(odd);
    }
    auto it = contacts.begin();
    std::advance(it, static_cast<std::ptrdiff_t>(below(contacts.size())));
    const contact& c = it->second;
    std::vector<std::string> texts = {c.first_name};
    if (c.last_name) {
      texts.push_back(*c.last_name);
      texts.push_back(c.first_name + " " + *c.last_name);
    }
    if (c.email) texts.push_back(*c.email);
    if (c.phone) texts.push_back(*c.phone);
    if (c.email && c.phone) texts.push_back(*c.email + *c.phone); // must not match across fields
    if (c.last_name && c.email) texts.push_back(*c.last_name + " " + *c.email);
    const auto& text = pick(texts);
    if (text.empty()) return "x";
    constexpr std::array<std::size_t, 6> lengths = {1, 2, 3, 4, 6, 9};
    const auto len = std::min(text.size(), lengths[below(lengths.size())]);
    const auto start = below(text.size() - len + 1);
    return recase(text.substr(start, len));
  }

  contact_query query(const std::map<std::int64_t, contact>& contacts) {
    contact_query q;
    q.sort = static_cast<contact_sort>(below(9));
    q.descending = chance(50);
    if (!chance(30)) { // else: no filter at all
      if (chance(20)) q.status = static_cast<contact_status>(below(4));
      if (chance(15)) q.source = static_cast<contact_source>(below(7));
      if (chance(15)) q.company_id = 1 + static_cast<std::int64_t>(below(4));
      if (chance(15)) q.owner_id = 1 + static_cast<std::int64_t>(below(3));
      if (chance(20)) {
        static const std::vector<std::string> pool = {"vip",    "VIP",   "Lead",
                                                      "cardio", "ortho", "nobody"};
        q.tags.push_back(pick(pool));
        if (chance(30)) q.tags.push_back(pick(pool));
      }
      if (chance(15)) q.created_after = 1000 + static_cast<std::int64_t>(below(40));
      if (chance(15)) q.created_before = 1000 + static_cast<std::int64_t>(below(40));
      if (chance(15)) q.updated_after = 1000 + static_cast<std::int64_t>(below(60));
      if (chance(60)) q.search = search(contacts);
      if (chance(5)) q.extra = [](const contact& c) { return c.id % 3 != 0; };
    }
    const auto n = contacts.size();
    if (chance(40)) q.offset = static_cast<std::int64_t>(below(chance(50) ? 10 : n + 10));
    q.limit = static_cast<std::int64_t>(below(30));
    return q;
  }

private:
  std::mt19937_64 rng_;
};

std::string describe(const contact_query& q) {
  std::string s = "sort=" + std::to_string(static_cast<int>(q.sort)) +
                  (q.descending ? " desc" : " asc") + " offset=" + std::to_string(q.offset) +
                  " limit=" + std::to_string(q.limit) + " search='" + q.search + "'";
  if (q.status) s += " status=" + std::string(to_string(*q.status));
  if (q.source) s += " source=" + std::string(to_string(*q.source));
  if (q.company_id) s += " company=" + std::to_string(*q.company_id);
  if (q.owner_id) s += " owner=" + std::to_string(*q.owner_id);
  for (const auto& t : q.tags) s += " tag=" + t;
  if (q.created_after) s += " created_after=" + std::to_string(*q.created_after);
  if (q.created_before) s += " created_before=" + std::to_string(*q.created_before);
  if (q.updated_after) s += " updated_after=" + std::to_string(*q.updated_after);
  if (q.extra) s += " extra";
  return s;
}

// The reference of the tags' display names: the spelling first seen, kept while any contact
// carries the tag; on an update the new tags count before the old ones are let go.
class tag_names {
public:
  void add(const contact& c) {
    for (const auto& t : c.tags) {
      auto& entry = names_[ascii_lower(t)];
      if (entry.second++ == 0) entry.first = t;
    }
  }
  void remove(const contact& c) {
    for (const auto& t : c.tags)
      if (--names_[ascii_lower(t)].second == 0) names_.erase(ascii_lower(t));
  }
  std::string name(const std::string& lowered) const { return names_.at(lowered).first; }

private:
  std::map<std::string, std::pair<std::string, int>> names_;
};

struct random_run {
  std::uint64_t seed;
  std::int64_t id_range; // new contacts take random ids below this, or
  bool sequential_ids;   // the next id, created in id order (as the database hands them out)
  int operations;
  int check_every;
  int queries_per_check;
  int shrink_erase_percent; // in the second half of the run
};

void check_against_reference(const contact_store& store,
                             const std::map<std::int64_t, contact>& reference,
                             const tag_names& names, generator& gen, int queries) {
  ASSERT_EQ(store.size(), reference.size());
  for (const auto& [id, c] : reference) {
    const auto* found = store.find(id);
    ASSERT_NE(found, nullptr) << id;
    ASSERT_TRUE(same_contact(*found, c)) << id;
    if (c.email) {
      const auto* by_email = store.find_by_email(gen.recase(*c.email));
      ASSERT_NE(by_email, nullptr) << *c.email;
      EXPECT_EQ(by_email->id, id);
    }
  }
  EXPECT_EQ(store.find_by_email("nobody@example.com"), nullptr);

  std::map<std::string, std::int64_t> counts;
  std::map<std::int64_t, std::vector<std::int64_t>> companies;
  for (const auto& [id, c] : reference) {
    for (const auto& t : c.tags) ++counts[ascii_lower(t)];
    if (c.company_id) companies[*c.company_id].push_back(id);
  }
  const auto tags = store.tags();
  ASSERT_EQ(tags.size(), counts.size());
  std::size_t i = 0;
  for (const auto& [lowered, count] : counts) {
    EXPECT_EQ(tags[i].name, names.name(lowered));
    EXPECT_EQ(tags[i].count, count) << lowered;
    std::vector<std::int64_t> carriers;
    for (const auto& [id, c] : reference)
      for (const auto& t : c.tags)
        if (ascii_lower(t) == lowered) carriers.push_back(id);
    EXPECT_EQ(store.with_tag(gen.recase(lowered)), carriers) << lowered;
    ++i;
  }
  for (std::int64_t company = 1; company <= 4; ++company)
    EXPECT_EQ(store.of_company(company), companies[company]) << company;

  for (int k = 0; k < queries; ++k) {
    const auto q = gen.query(reference);
    const auto expected = reference_order(reference, q);
    for (const auto& [id, c] : reference)
      ASSERT_EQ(matches(c, q), reference_matches(c, q)) << describe(q) << " id " << id;
    const auto page = store.list(q);
    ASSERT_EQ(page.total, static_cast<std::int64_t>(expected.size())) << describe(q);
    const auto from = std::min(expected.size(), static_cast<std::size_t>(q.offset));
    const auto to = std::min(expected.size(), from + static_cast<std::size_t>(q.limit));
    const std::vector<std::int64_t> window(expected.begin() + static_cast<std::ptrdiff_t>(from),
                                           expected.begin() + static_cast<std::ptrdiff_t>(to));
    ASSERT_EQ(ids_of(page), window) << describe(q);
    if (k % 4 == 0) {
      std::vector<std::int64_t> all;
      store.for_each(q, [&](const contact& c) { all.push_back(c.id); });
      ASSERT_EQ(all, expected) << describe(q);
    }
  }
}

void run_against_reference(const random_run& run) {
  generator gen(run.seed);
  contact_store store;
  std::map<std::int64_t, contact> reference;
  tag_names names;
  std::int64_t next_id = 0;
  for (int op = 1; op <= run.operations; ++op) {
    // The first half grows the store, the second half mostly shrinks it again.
    const int erase_percent = op <= run.operations / 2 ? 15 : run.shrink_erase_percent;
    if (gen.chance(erase_percent)) {
      const auto range = static_cast<std::size_t>(std::max(run.id_range, next_id + 1));
      std::int64_t id = 1 + static_cast<std::int64_t>(gen.below(range));
      if (!reference.empty() && gen.chance(80)) {
        auto it = reference.begin();
        std::advance(it, static_cast<std::ptrdiff_t>(gen.below(reference.size())));
        id = it->first;
      }
      const auto it = reference.find(id);
      ASSERT_EQ(store.erase(id), it != reference.end()) << id;
      if (it != reference.end()) {
        names.remove(it->second);
        reference.erase(it);
      }
    } else {
      contact c;
      if (!reference.empty() && gen.chance(50)) {
        auto it = reference.begin();
        std::advance(it, static_cast<std::ptrdiff_t>(gen.below(reference.size())));
        c = it->second;
        gen.randomise(c, gen.chance(10));
      } else {
        c.id =
            run.sequential_ids
                ? ++next_id
                : 1 + static_cast<std::int64_t>(gen.below(static_cast<std::size_t>(run.id_range)));
        c.tenant_id = 7;
        gen.randomise(c, true);
        if (run.sequential_ids) {
          c.created_at = 1000 + c.id / 40;
          c.updated_at = c.created_at;
        }
        if (const auto it = reference.find(c.id); it != reference.end()) c.email = it->second.email;
      }
      names.add(c);
      if (const auto it = reference.find(c.id); it != reference.end()) names.remove(it->second);
      reference[c.id] = c;
      store.upsert(c);
    }
    if (op % run.check_every == 0) {
      check_against_reference(store, reference, names, gen, run.queries_per_check);
      if (testing::Test::HasFatalFailure()) {
        ADD_FAILURE() << "seed " << run.seed << " after operation " << op;
        return;
      }
    }
  }
  check_against_reference(store, reference, names, gen, run.queries_per_check);
}

} // namespace

// ---- The store against the reference.

TEST(contact_store, agrees_with_reference_through_random_updates_of_a_small_tenant) {
  for (const std::uint64_t seed : {1u, 2u, 3u})
    run_against_reference({seed, 300, false, 3000, 50, 30, 45});
}

// Enough contacts for every sort order to be split into several blocks, then merged again as
// most contacts are deleted.
TEST(contact_store, agrees_with_reference_while_growing_past_index_block_sizes) {
  run_against_reference({42, 9000, false, 12000, 1000, 25, 75});
}

TEST(contact_store, agrees_with_reference_while_growing_in_id_order) {
  run_against_reference({7, 0, true, 12000, 1000, 25, 75});
}

// ---- Order.

TEST(contact_store, descending_order_breaks_ties_by_id_ascending) {
  contact_store store;
  for (std::int64_t id : {5, 2, 9, 1, 7}) store.upsert(make_contact(id, id % 2 ? "Ann" : "Bob"));
  EXPECT_EQ(list_ids(store, sorted_by(contact_sort::first_name, true)),
            (std::vector<std::int64_t>{2, 1, 5, 7, 9}));
  EXPECT_EQ(list_ids(store, sorted_by(contact_sort::first_name, false)),
            (std::vector<std::int64_t>{1, 5, 7, 9, 2}));
}

TEST(contact_store, descending_pages_keep_ties_by_id_ascending) {
  contact_store store;
  for (std::int64_t id = 1; id <= 40; ++id) {
    auto c = make_contact(id, "X");
    c.status = static_cast<contact_status>(id % 3);
    store.upsert(c);
  }
  auto q = sorted_by(contact_sort::status, true);
  const auto all = list_ids(store, q);
  ASSERT_EQ(all.size(), 40u);
  std::vector<std::int64_t> paged;
  q.limit = 7;
  for (q.offset = 0; q.offset < 40; q.offset += 7) {
    const auto page = store.list(q);
    EXPECT_EQ(page.total, 40);
    for (const auto* c : page.items) paged.push_back(c->id);
  }
  EXPECT_EQ(paged, all);
  // qualified (id % 3 == 2) first, then inactive, then active; ids ascending within each.
  EXPECT_EQ(all.front(), 2);
  EXPECT_EQ(all[1], 5);
  EXPECT_EQ(all.back(), 39);
}

TEST(contact_store, absent_values_sort_last_ascending_and_first_descending) {
  contact_store store;
  store.upsert(make_contact(1, "A", "Young"));
  store.upsert(make_contact(2, "B"));
  store.upsert(make_contact(3, "C", "adams"));
  store.upsert(make_contact(4, "D"));
  EXPECT_EQ(list_ids(store, sorted_by(contact_sort::last_name, false)),
            (std::vector<std::int64_t>{3, 1, 2, 4}));
  EXPECT_EQ(list_ids(store, sorted_by(contact_sort::last_name, true)),
            (std::vector<std::int64_t>{2, 4, 1, 3}));
}

TEST(contact_store, names_sort_case_insensitively_with_ties_by_id) {
  contact_store store;
  store.upsert(make_contact(1, "bob"));
  store.upsert(make_contact(2, "Bob"));
  store.upsert(make_contact(3, "alice"));
  store.upsert(make_contact(4, "Carol"));
  EXPECT_EQ(list_ids(store, sorted_by(contact_sort::first_name, false)),
            (std::vector<std::int64_t>{3, 1, 2, 4}));
  EXPECT_EQ(list_ids(store, sorted_by(contact_sort::first_name, true)),
            (std::vector<std::int64_t>{4, 1, 2, 3}));
}

TEST(contact_store, status_and_source_sort_by_their_names) {
  contact_store store;
  const std::array sources = {contact_source::website, contact_source::referral,
                              contact_source::ads, contact_source::manual};
  for (std::int64_t id = 1; id <= 4; ++id) {
    auto c = make_contact(id, "X");
    c.source = sources.at(static_cast<std::size_t>(id - 1));
    store.upsert(c);
  }
  store.upsert(make_contact(5, "X")); // no source
  EXPECT_EQ(list_ids(store, sorted_by(contact_sort::source, false)),
            (std::vector<std::int64_t>{3, 4, 2, 1, 5})); // ads, manual, referral, website, none
}

TEST(contact_store, update_moves_contact_in_sort_order) {
  contact_store store;
  store.upsert(make_contact(1, "Ann"));
  store.upsert(make_contact(2, "Bob"));
  store.upsert(make_contact(3, "Cid"));
  auto c = *store.find(1);
  c.first_name = "Dora";
  store.upsert(c);
  EXPECT_EQ(list_ids(store, sorted_by(contact_sort::first_name, false)),
            (std::vector<std::int64_t>{2, 3, 1}));
  EXPECT_EQ(store.find(1)->first_name, "Dora");
  EXPECT_EQ(store.size(), 3u);
}

TEST(contact_store, page_past_the_end_is_empty_with_the_full_total) {
  contact_store store;
  for (std::int64_t id = 1; id <= 5; ++id) store.upsert(make_contact(id, "Ann"));
  for (const auto& search : {std::string(), std::string("ann")}) {
    auto q = searching(search);
    q.offset = 20;
    q.limit = 10;
    const auto page = store.list(q);
    EXPECT_TRUE(page.items.empty()) << search;
    EXPECT_EQ(page.total, 5) << search;
  }
}

TEST(contact_store, unfiltered_list_pages_in_id_order) {
  contact_store store;
  for (std::int64_t id = 10; id >= 1; --id) store.upsert(make_contact(id, "X"));
  contact_query q;
  q.offset = 3;
  q.limit = 4;
  const auto page = store.list(q);
  EXPECT_EQ(ids_of(page), (std::vector<std::int64_t>{4, 5, 6, 7}));
  EXPECT_EQ(page.total, 10);
}

TEST(contact_store, contacts_arriving_in_reverse_order_list_in_order) {
  // Each new contact sorts first by name and last by id: both ends of the index blocks grow.
  contact_store store;
  const std::int64_t n = 1500;
  for (std::int64_t id = 1; id <= n; ++id) {
    auto name = std::to_string(10'000 - id);
    store.upsert(make_contact(id, "N" + name, "L" + name));
  }
  for (const bool descending : {false, true}) {
    auto q = sorted_by(contact_sort::first_name, descending);
    const auto ids = list_ids(store, q);
    ASSERT_EQ(ids.size(), static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
      ASSERT_EQ(ids[static_cast<std::size_t>(i)], descending ? i + 1 : n - i) << i;
    q.offset = 700;
    q.limit = 3;
    EXPECT_EQ(ids_of(store.list(q)), descending ? (std::vector<std::int64_t>{701, 702, 703})
                                                : (std::vector<std::int64_t>{800, 799, 798}));
  }
  for (std::int64_t id = 1; id <= n; id += 2) store.erase(id);
  EXPECT_EQ(list_ids(store, sorted_by(contact_sort::last_name, false)).front(), n);
  EXPECT_EQ(list_ids(store, sorted_by(contact_sort::last_name, false)).back(), 2);
}

// ---- Search.

TEST(contact_store, search_matches_across_first_and_last_name) {
  contact_store store;
  store.upsert(make_contact(1, "Mary", "Smith"));
  store.upsert(make_contact(2, "Rosemary"));
  EXPECT_EQ(list_ids(store, searching("ry sm")), (std::vector<std::int64_t>{1}));
  EXPECT_EQ(list_ids(store, searching("Mary Smith")), (std::vector<std::int64_t>{1}));
  EXPECT_EQ(list_ids(store, searching("mary ")), (std::vector<std::int64_t>{1}));
  EXPECT_TRUE(matches_search(*store.find(1), "y s"));
}

TEST(contact_store, search_does_not_span_fields_beyond_the_full_name) {
  contact_store store;
  store.upsert(make_contact(1, "Ann", "Lee", "ann@example.com", "+15550100"));
  for (const char* query :
       {"com+1", ".com+", "leeann", "lee ann", "ann@example.com+15550100", "annlee", "lee a"}) {
    EXPECT_TRUE(list_ids(store, searching(query)).empty()) << query;
    EXPECT_FALSE(matches_search(*store.find(1), query)) << query;
  }
  for (const char* query : {"e.com", "+1555", "n l", "ann lee"})
    EXPECT_EQ(list_ids(store, searching(query)), (std::vector<std::int64_t>{1})) << query;
}

TEST(contact_store, search_without_last_name_tests_the_first_name_alone) {
  contact_store store;
  store.upsert(make_contact(1, "Ann"));
  store.upsert(make_contact(2, "Ann", ""));
  EXPECT_EQ(list_ids(store, searching("ann ")), (std::vector<std::int64_t>{2}));
  EXPECT_EQ(list_ids(store, searching("ann")), (std::vector<std::int64_t>{1, 2}));
}

TEST(contact_store, search_ignores_case) {
  contact_store store;
  store.upsert(make_contact(1, "ANNE", "O'Neil", "Anne.ONeil@Example.COM"));
  store.upsert(make_contact(2, "bob"));
  for (const char* query : {"anne", "AnNe", "o'neil", "example.com", "EXAMPLE", "e.on", "nE"})
    EXPECT_EQ(list_ids(store, searching(query)), (std::vector<std::int64_t>{1})) << query;
}

TEST(contact_store, short_searches_match_anywhere) {
  contact_store store;
  store.upsert(make_contact(1, "Ann", std::nullopt, std::nullopt, "+4420"));
  store.upsert(make_contact(2, "Bob", "Quinn"));
  store.upsert(make_contact(3, "Cy"));
  EXPECT_EQ(list_ids(store, searching("N")), (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(list_ids(store, searching("42")), (std::vector<std::int64_t>{1}));
  EXPECT_EQ(list_ids(store, searching("b q")), (std::vector<std::int64_t>{2}));
  EXPECT_EQ(list_ids(store, searching("y")), (std::vector<std::int64_t>{3}));
}

TEST(contact_store, search_with_control_bytes_never_spans_fields) {
  contact_store store;
  store.upsert(make_contact(1, "Ann", "Lee", "ann@example.com", "+15550100"));
  for (const auto& query :
       {"\0"s, "ann\0lee"s, "lee\0ann@"s, "com\0+1"s, "ann lee\0"s, "\x1f"s, "com\x1f+1"s})
    EXPECT_TRUE(list_ids(store, searching(query)).empty()) << query.size();
  // Only a field that itself holds the byte matches (the service's validation keeps them out).
  store.upsert(make_contact(2, "Bo\0b"s, "Quinn"));
  for (const auto& query : {"\0"s, "o\0b"s, "BO\0B q"s, "\0b quinn"s})
    EXPECT_EQ(list_ids(store, searching(query)), (std::vector<std::int64_t>{2})) << query.size();
}

TEST(contact_store, search_combines_with_filters_and_sort) {
  contact_store store;
  for (std::int64_t id = 1; id <= 30; ++id) {
    auto c = make_contact(id, id % 2 ? "Smithy" : "Jones", "Name" + std::to_string(30 - id));
    c.status = id % 3 == 0 ? contact_status::qualified : contact_status::active;
    store.upsert(c);
  }
  auto q = searching("smith");
  q.status = contact_status::qualified;
  q.sort = contact_sort::last_name;
  q.descending = true;
  q.offset = 1;
  q.limit = 2;
  const auto page = store.list(q);
  // Odd multiples of 3: 3, 9, 15, 21, 27 with last names Name27, Name21, Name15, Name9, Name3.
  // Descending by last name: Name9 (21), Name3 (27), Name27 (3), Name21 (9), Name15 (15).
  EXPECT_EQ(page.total, 5);
  EXPECT_EQ(ids_of(page), (std::vector<std::int64_t>{27, 3}));
}

// ---- Other filters and indexes.

TEST(contact_store, tag_filter_ignores_case_and_requires_every_tag) {
  contact_store store;
  auto a = make_contact(1, "A");
  a.tags = {"VIP", "Cardio"};
  auto b = make_contact(2, "B");
  b.tags = {"vip"};
  store.upsert(a);
  store.upsert(b);
  contact_query q;
  q.tags = {"vip"};
  EXPECT_EQ(list_ids(store, q), (std::vector<std::int64_t>{1, 2}));
  q.tags = {"Vip", "CARDIO"};
  EXPECT_EQ(list_ids(store, q), (std::vector<std::int64_t>{1}));
  q.tags = {"vip", "ortho"};
  EXPECT_TRUE(list_ids(store, q).empty());
  EXPECT_EQ(store.with_tag("VIP"), (std::vector<std::int64_t>{1, 2}));
}

TEST(contact_store, time_filters_are_strict) {
  contact_store store;
  for (std::int64_t id = 1; id <= 5; ++id) store.upsert(make_contact(id, "X")); // created 1001..
  contact_query q;
  q.created_after = 1002;
  q.created_before = 1005;
  EXPECT_EQ(list_ids(store, q), (std::vector<std::int64_t>{3, 4}));
  contact_query u;
  u.updated_after = 1004;
  EXPECT_EQ(list_ids(store, u), (std::vector<std::int64_t>{5}));
}

TEST(contact_store, extra_predicate_filters_and_counts) {
  contact_store store;
  for (std::int64_t id = 1; id <= 6; ++id) store.upsert(make_contact(id, "X"));
  contact_query q;
  q.extra = [](const contact& c) { return c.id % 2 == 0; };
  q.limit = 2;
  const auto page = store.list(q);
  EXPECT_EQ(page.total, 3);
  EXPECT_EQ(ids_of(page), (std::vector<std::int64_t>{2, 4}));
}

TEST(contact_store, erase_removes_contact_from_every_index) {
  contact_store store;
  auto a = make_contact(1, "Ann", "Lee", "ann@example.com", "+15550100");
  a.tags = {"VIP"};
  a.company_id = 3;
  store.upsert(a);
  store.upsert(make_contact(2, "Bob"));
  ASSERT_TRUE(store.erase(1));
  EXPECT_FALSE(store.erase(1));
  EXPECT_EQ(store.find(1), nullptr);
  EXPECT_EQ(store.find_by_email("ANN@example.com"), nullptr);
  EXPECT_TRUE(list_ids(store, searching("ann lee")).empty());
  EXPECT_TRUE(list_ids(store, searching("an")).empty());
  EXPECT_TRUE(store.tags().empty());
  EXPECT_TRUE(store.with_tag("vip").empty());
  EXPECT_TRUE(store.of_company(3).empty());
  for (std::size_t k = 0; k < 9; ++k)
    EXPECT_EQ(list_ids(store, sorted_by(static_cast<contact_sort>(k), k % 2 == 1)),
              (std::vector<std::int64_t>{2}));
  EXPECT_EQ(store.size(), 1u);
  // The slot is reused by the next contact without traces of the old one.
  store.upsert(make_contact(3, "Cy"));
  EXPECT_TRUE(list_ids(store, searching("lee")).empty());
  EXPECT_EQ(list_ids(store, searching("cy")), (std::vector<std::int64_t>{3}));
}

TEST(contact_store, find_by_email_ignores_case_and_follows_updates) {
  contact_store store;
  store.upsert(make_contact(1, "Ann", std::nullopt, "Ann@Example.com"));
  store.upsert(make_contact(2, "Bob", std::nullopt, "bob@example.com"));
  ASSERT_NE(store.find_by_email("ann@EXAMPLE.COM"), nullptr);
  EXPECT_EQ(store.find_by_email("ann@EXAMPLE.COM")->id, 1);
  EXPECT_EQ(store.find_by_email("an@example.com"), nullptr);
  auto a = *store.find(1);
  a.email = "ann.new@example.com";
  store.upsert(a);
  EXPECT_EQ(store.find_by_email("ann@example.com"), nullptr);
  EXPECT_EQ(store.find_by_email("ANN.NEW@example.com")->id, 1);
  EXPECT_EQ(store.find_by_email("bob@example.com")->id, 2);
}

TEST(contact_store, tag_keeps_first_seen_spelling_while_any_contact_carries_it) {
  contact_store store;
  auto a = make_contact(1, "A");
  a.tags = {"VIP"};
  auto b = make_contact(2, "B");
  b.tags = {"vip", "Lead"};
  store.upsert(a);
  store.upsert(b);
  auto tags = store.tags();
  ASSERT_EQ(tags.size(), 2u);
  EXPECT_EQ(tags[0].name, "Lead");
  EXPECT_EQ(tags[0].count, 1);
  EXPECT_EQ(tags[1].name, "VIP");
  EXPECT_EQ(tags[1].count, 2);

  a.tags = {"Vip"}; // re-spelt by its first carrier: still the same tag, same name
  store.upsert(a);
  EXPECT_EQ(store.tags()[1].name, "VIP");
  store.erase(1);
  tags = store.tags();
  EXPECT_EQ(tags[1].name, "VIP"); // contact 2 still carries it
  EXPECT_EQ(tags[1].count, 1);
  store.erase(2);
  b.id = 3;
  store.upsert(b);
  EXPECT_EQ(store.tags()[1].name, "vip"); // nobody carried it in between: a new first sighting
}

TEST(contact_store, tags_are_ordered_by_lower_cased_name) {
  contact_store store;
  auto a = make_contact(1, "A");
  a.tags = {"beta", "Alpha", "GAMMA"};
  store.upsert(a);
  std::vector<std::string> names;
  for (const auto& t : store.tags()) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"Alpha", "beta", "GAMMA"}));
}

TEST(contact_store, moved_store_keeps_contacts) {
  contact_store store;
  store.upsert(make_contact(1, "Ann"));
  contact_store other(std::move(store));
  ASSERT_NE(other.find(1), nullptr);
  contact_store third;
  third = std::move(other);
  EXPECT_EQ(list_ids(third, searching("ann")), (std::vector<std::int64_t>{1}));
}

// ---- Scale (correctness only, not timed).

TEST(contact_store, search_in_twenty_thousand_contacts_finds_exactly_the_matches) {
  const std::vector<std::string> firsts = {"Olivia", "Liam",   "Emma",  "Noah",     "Ava",
                                           "Elijah", "Sophia", "James", "Isabella", "Lucas"};
  const std::vector<std::string> lasts = {
      "Smith", "Johnson",   "Williams", "Brown",     "Jones", "Garcia",  "Miller",
      "Davis", "Rodriguez", "Martinez", "Hernandez", "Lopez", "Gonzalez"};
  contact_store store;
  std::map<std::int64_t, contact> reference;
  for (std::int64_t id = 1; id <= 20'000; ++id) {
    const auto& first = firsts[static_cast<std::size_t>(id * 7 % 10)];
    const auto& last = lasts[static_cast<std::size_t>(id * 11 % 13)];
    auto c = make_contact(id, first, last,
                          ascii_lower(first) + "." + ascii_lower(last) + std::to_string(id) +
                              "@example.com",
                          "+1" + std::to_string(2'000'000'000 + id * 7919));
    c.status = static_cast<contact_status>(id % 4);
    reference.emplace(id, c);
    store.upsert(std::move(c));
  }
  for (const char* search : {"emma lopez", "Lopez1", "son12", "+12000079", "DAVIS", "zq"}) {
    for (const bool descending : {false, true}) {
      contact_query q = searching(search);
      q.sort = contact_sort::last_name;
      q.descending = descending;
      q.offset = 3;
      q.limit = 20;
      const auto expected = reference_order(reference, q);
      const auto page = store.list(q);
      EXPECT_EQ(page.total, static_cast<std::int64_t>(expected.size())) << search;
      const std::vector<std::int64_t> window(
          expected.begin() +
              std::min<std::ptrdiff_t>(3, static_cast<std::ptrdiff_t>(expected.size())),
          expected.begin() +
              std::min<std::ptrdiff_t>(23, static_cast<std::ptrdiff_t>(expected.size())));
      EXPECT_EQ(ids_of(page), window) << search;
    }
  }
}
