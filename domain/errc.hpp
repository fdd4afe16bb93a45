// The error values that travel on the request path (actor replies, persistence results).
// http/error_map.hpp maps each one to a status and a contract `code`.
#pragma once
#include <cstdint>

namespace crm::domain {

enum class errc : std::uint8_t {
  invalid_credentials,      // 401
  insufficient_permissions, // 403
  not_found,                // 404
  method_not_allowed,       // 405
  duplicate_email,          // 409
  conflict,                 // 409
  payload_too_large,        // 413
  validation,               // 422 (carries issues)
  rate_limited,             // 429 (carries retry_after)
  service_unavailable,      // 503
  internal,                 // 500
  second_factor_required,   // 401: the password was right, a one-time code is needed
};

} // namespace crm::domain
