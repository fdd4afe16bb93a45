// Reading a handler's inputs that every endpoint family shares: an id from the path and a JSON
// object body. On failure the 422 is already sent and nothing is returned.
#pragma once
#include "http/exchange.hpp"

#include <boost/json/object.hpp>

#include <optional>
#include <string_view>

namespace crm::http {

std::optional<std::int64_t> id_param(const exchange_ptr& ex, std::string_view name = "id");
std::optional<boost::json::object> object_body(const exchange_ptr& ex);

} // namespace crm::http
