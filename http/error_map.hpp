// The one mapping from domain::errc to the HTTP status and contract `code` (contract §2).
#pragma once
#include "domain/errc.hpp"

#include <string_view>

namespace crm::http {

struct error_info {
  int status;
  std::string_view code;
};

constexpr error_info describe(domain::errc e) {
  using domain::errc;
  switch (e) {
  case errc::invalid_credentials: return {401, "INVALID_CREDENTIALS"};
  case errc::insufficient_permissions: return {403, "INSUFFICIENT_PERMISSIONS"};
  case errc::not_found: return {404, "NOT_FOUND"};
  case errc::method_not_allowed: return {405, "METHOD_NOT_ALLOWED"};
  case errc::duplicate_email: return {409, "DUPLICATE_EMAIL"};
  case errc::conflict: return {409, "CONFLICT"};
  case errc::payload_too_large: return {413, "PAYLOAD_TOO_LARGE"};
  case errc::validation: return {422, ""};
  case errc::rate_limited: return {429, "RATE_LIMITED"};
  case errc::service_unavailable: return {503, "SERVICE_UNAVAILABLE"};
  case errc::internal: return {500, "INTERNAL_ERROR"};
  case errc::second_factor_required: return {401, "TOTP_REQUIRED"};
  }
  return {500, "INTERNAL_ERROR"};
}

} // namespace crm::http
