// UTC time in microseconds and its RFC 3339 text. Calendar arithmetic is done by hand (Howard
// Hinnant's days_from_civil) so neither the locale nor the TZ environment can change a result.
#include "domain/clock.hpp"

#include <array>
#include <chrono>

namespace crm::domain {

namespace {

constexpr std::int64_t micros_per_second = 1'000'000;
constexpr std::int64_t seconds_per_day = 86'400;
constexpr std::int64_t seconds_per_hour = 3600;
constexpr std::int64_t seconds_per_minute = 60;

// Division that rounds towards negative infinity, so instants before 1970 format correctly.
constexpr std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

constexpr bool is_leap(std::int64_t y) {
  return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

constexpr int days_in_month(std::int64_t y, int m) {
  constexpr std::array<int, 12> days = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && is_leap(y) ? 29 : days[static_cast<std::size_t>(m - 1)];
}

// Days since 1970-01-01 of a proleptic Gregorian date.
constexpr std::int64_t days_from_civil(std::int64_t y, int m, int d) {
  y -= m <= 2 ? 1 : 0;
  const std::int64_t era = floor_div(y, 400);
  const std::int64_t yoe = y - era * 400;
  const std::int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const std::int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146'097 + doe - 719'468;
}

struct civil_date {
  std::int64_t year;
  int month;
  int day;
};

constexpr civil_date civil_from_days(std::int64_t z) {
  z += 719'468;
  const std::int64_t era = floor_div(z, 146'097);
  const std::int64_t doe = z - era * 146'097;
  const std::int64_t yoe = (doe - doe / 1460 + doe / 36'524 - doe / 146'096) / 365;
  const std::int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const std::int64_t mp = (5 * doy + 2) / 153;
  const auto d = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  const auto m = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  return {yoe + era * 400 + (m <= 2 ? 1 : 0), m, d};
}

static_assert(days_from_civil(1970, 1, 1) == 0);
static_assert(days_from_civil(2000, 3, 1) == 11'017);
static_assert(civil_from_days(-1).year == 1969 && civil_from_days(-1).day == 31);

template <class Out>
void append_digits(Out& out, std::int64_t value, int width) {
  std::array<char, 24> buf{};
  int n = 0;
  // Negative years are not RFC 3339, but keep the text honest rather than garbled.
  const bool negative = value < 0;
  auto v = static_cast<std::uint64_t>(negative ? -(value + 1) : value) + (negative ? 1U : 0U);
  do {
    buf[static_cast<std::size_t>(n++)] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  if (negative) {
    out.push_back('-');
  }
  for (int i = n; i < width; ++i) {
    out.push_back('0');
  }
  while (n > 0) {
    out.push_back(buf[static_cast<std::size_t>(--n)]);
  }
}

// A cursor over the input that reads fixed-width decimal fields.
class reader {
public:
  explicit reader(std::string_view s) : s_(s) {}

  bool at_end() const { return pos_ == s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[pos_]; }
  void skip() { ++pos_; }

  bool digits(int width, int& out) {
    if (s_.size() - pos_ < static_cast<std::size_t>(width)) {
      return false;
    }
    int v = 0;
    for (int i = 0; i < width; ++i) {
      const char c = s_[pos_++];
      if (c < '0' || c > '9') {
        return false;
      }
      v = v * 10 + (c - '0');
    }
    out = v;
    return true;
  }

  bool expect(char c) {
    if (at_end() || s_[pos_] != c) {
      return false;
    }
    ++pos_;
    return true;
  }

private:
  std::string_view s_;
  std::size_t pos_ = 0;
};

} // namespace

std::int64_t now_micros() {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
}

rfc3339_text rfc3339(std::int64_t micros) {
  // Written so that even INT64_MIN cannot overflow.
  std::int64_t secs = micros / micros_per_second;
  std::int64_t frac = micros % micros_per_second;
  if (frac < 0) {
    frac += micros_per_second;
    --secs;
  }
  const std::int64_t days = floor_div(secs, seconds_per_day);
  const std::int64_t sod = secs - days * seconds_per_day;
  const civil_date date = civil_from_days(days);

  rfc3339_text out;
  append_digits(out, date.year, 4);
  out.push_back('-');
  append_digits(out, date.month, 2);
  out.push_back('-');
  append_digits(out, date.day, 2);
  out.push_back('T');
  append_digits(out, sod / seconds_per_hour, 2);
  out.push_back(':');
  append_digits(out, sod / seconds_per_minute % 60, 2);
  out.push_back(':');
  append_digits(out, sod % seconds_per_minute, 2);
  out.push_back('.');
  append_digits(out, frac, 6);
  out.push_back('Z');
  return out;
}

std::string format_rfc3339(std::int64_t micros) {
  return std::string(rfc3339(micros).view());
}

std::optional<std::int64_t> parse_rfc3339(std::string_view text) {
  reader in(text);
  int year = 0;
  int month = 0;
  int day = 0;
  if (!in.digits(4, year) || !in.expect('-') || !in.digits(2, month) || !in.expect('-') ||
      !in.digits(2, day)) {
    return std::nullopt;
  }
  if (month < 1 || month > 12 || day < 1 || day > days_in_month(year, month)) {
    return std::nullopt;
  }
  const std::int64_t midnight = days_from_civil(year, month, day) * seconds_per_day;
  if (in.at_end()) {
    return midnight * micros_per_second;
  }

  const char sep = in.peek();
  if (sep != 'T' && sep != 't' && sep != ' ') {
    return std::nullopt;
  }
  in.skip();
  int hour = 0;
  int minute = 0;
  int second = 0;
  if (!in.digits(2, hour) || !in.expect(':') || !in.digits(2, minute) || !in.expect(':') ||
      !in.digits(2, second)) {
    return std::nullopt;
  }
  // No leap seconds: Unix time (and so every timestamp we store) has no :60 to map it to.
  if (hour > 23 || minute > 59 || second > 59) {
    return std::nullopt;
  }

  std::int64_t fraction = 0;
  if (in.peek() == '.') {
    in.skip();
    std::size_t count = 0;
    while (in.peek() >= '0' && in.peek() <= '9') {
      // RFC 3339 allows any precision; digits past microseconds are dropped (truncated).
      if (count < 6) {
        fraction = fraction * 10 + (in.peek() - '0');
      }
      ++count;
      in.skip();
    }
    if (count == 0) {
      return std::nullopt;
    }
    for (std::size_t i = count; i < 6; ++i) {
      fraction *= 10;
    }
  }

  std::int64_t offset_seconds = 0;
  const char zone = in.peek();
  if (zone == 'Z' || zone == 'z') {
    in.skip();
  } else if (zone == '+' || zone == '-') {
    in.skip();
    int oh = 0;
    int om = 0;
    if (!in.digits(2, oh) || !in.expect(':') || !in.digits(2, om)) {
      return std::nullopt;
    }
    if (oh > 23 || om > 59) {
      return std::nullopt;
    }
    offset_seconds = (zone == '+' ? 1 : -1) * (oh * seconds_per_hour + om * seconds_per_minute);
  } else {
    return std::nullopt;
  }
  if (!in.at_end()) {
    return std::nullopt;
  }

  const std::int64_t secs =
      midnight + hour * seconds_per_hour + minute * seconds_per_minute + second - offset_seconds;
  return secs * micros_per_second + fraction;
}

} // namespace crm::domain
