// A failed request as a value: an error code, a human detail, and for validation the list of
// every failing field in the contract's 422 shape.
#pragma once
#include "domain/errc.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace crm::domain {

// One element of a `loc` path: a key or an array index.
using loc_part = std::variant<std::string, std::int64_t>;

struct issue {
  std::vector<loc_part> loc;
  std::string msg;
  std::string type;
};

struct failure {
  errc code = errc::internal;
  std::string detail;
  std::vector<issue> issues; // only for errc::validation
  int retry_after = 0;       // seconds, only for errc::rate_limited
  // More members of the error body, as JSON text that starts with a comma (",\"merged_into\":7").
  std::string extra;

  static failure of(errc c, std::string d) { return failure{c, std::move(d), {}, 0, {}}; }
  static failure invalid(std::vector<issue> xs) {
    return failure{errc::validation, "validation failed", std::move(xs), 0, {}};
  }
};

// A value or the failure that prevented it.
template <class T>
class outcome {
public:
  using value_type = T;

  outcome(T value) : value_(std::move(value)) {}
  outcome(failure f) : failure_(std::move(f)) {}

  explicit operator bool() const noexcept { return value_.has_value(); }
  T& operator*() { return *value_; }
  const T& operator*() const { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  const failure& error() const { return failure_; }
  failure& error() { return failure_; }

private:
  std::optional<T> value_;
  failure failure_;
};

// For operations whose success carries nothing.
struct done {};

} // namespace crm::domain
