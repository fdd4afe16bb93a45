// Response shapes of the messaging area (docs/channels.md). Channel secrets are never
// rendered: only `has_secret` and the config's `has_<key>` flags.
#pragma once
#include "domain/channel.hpp"

#include <boost/json/object.hpp>

#include <string_view>

namespace crm::domain {

boost::json::object channel_to_json(const channel& c, std::string_view public_url);
boost::json::object conversation_to_json(const conversation& c);

} // namespace crm::domain
