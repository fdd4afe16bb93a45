// Authentication of bearer access tokens (contract §3): verified signature and claims, type
// `access`, session not revoked. Runs on the asio thread before any handler, with no I/O.
#pragma once
#include "domain/failure.hpp"
#include "http/exchange.hpp"

#include <optional>
#include <string_view>

namespace crm::domain {
class revocation_list;
}

namespace crm::http {

// Fills `who` from the Authorization header, or returns the 401 failure.
std::optional<domain::failure> authenticate(const request& req, std::string_view secret,
                                            const domain::revocation_list& revoked, principal& who);

} // namespace crm::http
