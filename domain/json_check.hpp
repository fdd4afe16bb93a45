// Internal to domain/: what the request-body rules of several areas share — enum name tables,
// and a checker that reads JSON values into the contract's 422 issues (pydantic wording:
// "Input should be a valid string", "Extra inputs are not permitted", ...).
#pragma once
#include "domain/failure.hpp"
#include "domain/validation.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/string.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace crm::domain::detail {

// ---- enum <-> name tables ----------------------------------------------------------------

template <class E, std::size_t N>
using name_table = std::array<std::pair<E, std::string_view>, N>;

// The table of an enum whose names are listed, in the order of its enumerators, in a header's
// rules (channel_rules::types): the names are written once, for the readers and the schemas.
template <class E, std::size_t N>
constexpr name_table<E, N> table_of(const std::array<std::string_view, N>& names) {
  name_table<E, N> table{};
  for (std::size_t i = 0; i < N; ++i) table[i] = {static_cast<E>(i), names[i]};
  return table;
}

template <class E, std::size_t N>
std::optional<E> lookup(const name_table<E, N>& table, std::string_view s) {
  for (auto& [e, name] : table)
    if (name == s) return e;
  return std::nullopt;
}

template <class E, std::size_t N>
std::string_view name_of(const name_table<E, N>& table, E e) {
  for (auto& [v, name] : table)
    if (v == e) return name;
  return "";
}

// "Input should be 'a', 'b' or 'c'", the pydantic wording of an enum issue.
template <class E, std::size_t N>
std::string one_of_message(const name_table<E, N>& table) {
  std::string msg = "Input should be ";
  for (std::size_t i = 0; i < N; ++i) {
    if (i > 0) msg += i + 1 == N ? " or " : ", ";
    msg += "'" + std::string(table[i].second) + "'";
  }
  return msg;
}

// ---- JSON values -------------------------------------------------------------------------

inline std::string_view sv(const boost::json::string& s) {
  return {s.data(), s.size()};
}
// A string_view would convert to a temporary json::string and the view would dangle.
std::string_view sv(std::string_view) = delete;

// An integer the way the request parsers read one: a JSON integer, or a double without a
// fraction (pydantic accepts 5.0 for an int).
inline std::optional<std::int64_t> as_integer(const boost::json::value& v) {
  if (auto i = v.if_int64()) return *i;
  if (auto u = v.if_uint64(); u && *u <= static_cast<std::uint64_t>(INT64_MAX))
    return static_cast<std::int64_t>(*u);
  if (auto d = v.if_double();
      d && std::trunc(*d) == *d && *d >= -9223372036854775808.0 && *d < 9223372036854775808.0)
    return static_cast<std::int64_t>(*d);
  return std::nullopt;
}

inline const boost::json::value* member(const boost::json::object& o, std::string_view key) {
  auto it = o.find(key);
  return it == o.end() ? nullptr : &it->value();
}

// A key whose value is null counts as absent: optional fields are "Optional[...] = None".
inline const boost::json::value* given(const boost::json::object& o, std::string_view key) {
  auto v = member(o, key);
  return v && !v->is_null() ? v : nullptr;
}

// ---- issues ------------------------------------------------------------------------------

using loc_path = std::vector<loc_part>;

inline loc_path at(loc_path l, std::string_view key) {
  l.emplace_back(std::string(key));
  return l;
}
inline loc_path at(loc_path l, std::int64_t index) {
  l.emplace_back(index);
  return l;
}

// Each accessor records an issue when the value does not fit and returns nothing.
struct checker {
  std::vector<issue>& issues;

  void add(loc_path l, std::string msg, std::string type) {
    issues.push_back({std::move(l), std::move(msg), std::move(type)});
  }

  void extra_keys(const boost::json::object& o, std::initializer_list<std::string_view> known,
                  const loc_path& l) {
    for (auto& kv : o) {
      auto k = kv.key();
      if (std::find(known.begin(), known.end(), k) == known.end())
        add(at(l, k), "Extra inputs are not permitted", "extra_forbidden");
    }
  }

  const boost::json::object* object(const boost::json::value& v, const loc_path& l) {
    if (auto o = v.if_object()) return o;
    add(l, "Input should be a valid dictionary", "value_error");
    return nullptr;
  }

  const boost::json::array* array(const boost::json::value& v, const loc_path& l) {
    if (auto a = v.if_array()) return a;
    add(l, "Input should be a valid list", "value_error");
    return nullptr;
  }

  const boost::json::string* text(const boost::json::value& v, const loc_path& l) {
    if (auto s = v.if_string()) return s;
    add(l, "Input should be a valid string", "string_type");
    return nullptr;
  }

  // Length in characters of `s` within min..max.
  bool length(std::string_view s, const loc_path& l, std::size_t min, std::size_t max) {
    auto len = utf8_length(s);
    if (len < min) {
      add(l,
          "String should have at least " + std::to_string(min) +
              (min == 1 ? " character" : " characters"),
          "string_too_short");
      return false;
    }
    if (len > max) {
      add(l, "String should have at most " + std::to_string(max) + " characters",
          "string_too_long");
      return false;
    }
    return true;
  }

  std::optional<std::string_view> string(const boost::json::value& v, const loc_path& l,
                                         std::size_t min, std::size_t max) {
    auto s = text(v, l);
    if (!s || !length(sv(*s), l, min, max)) return std::nullopt;
    return sv(*s);
  }

  std::optional<std::int64_t> integer(const boost::json::value& v, const loc_path& l,
                                      std::int64_t min, std::int64_t max) {
    auto n = as_integer(v);
    if (!n) {
      add(l, "Input should be a valid integer", "int_parsing");
      return std::nullopt;
    }
    if (*n < min) {
      add(l, "Input should be greater than or equal to " + std::to_string(min),
          "greater_than_equal");
      return std::nullopt;
    }
    if (*n > max) {
      add(l, "Input should be less than or equal to " + std::to_string(max), "less_than_equal");
      return std::nullopt;
    }
    return n;
  }

  // `what` ("List", "Dictionary") holds `n` items, over `max`.
  void too_long(std::size_t n, std::size_t max, const loc_path& l, std::string_view what) {
    add(l,
        std::string(what) + " should have at most " + std::to_string(max) +
            " items after validation, not " + std::to_string(n),
        "too_long");
  }
};

} // namespace crm::domain::detail
