// JSON text to boost::json::value, every number read exactly (issue 31 item 7). Boost.JSON 1.81's
// own parser rounds some decimal numbers to a neighbouring double (2.242077542919712e-44 came
// back one unit in the last place off), and 1.81 has no precise mode yet. This parser is the same
// machine (boost::json::basic_parser building a value_stack) with one change: a number that is
// not an integer is read again from its text with std::from_chars, which rounds correctly, so a
// number reads back as it was written (the serializer prints the shortest text that round-trips).
// Every JSON that carecrm parses goes through here.
#pragma once
#include <boost/json/parse_options.hpp>
#include <boost/json/storage_ptr.hpp>
#include <boost/json/value.hpp>

#include <string_view>

namespace crm::domain {

// As boost::json::parse: sets `ec` on malformed text (and returns null).
boost::json::value parse_json(std::string_view text, boost::json::error_code& ec,
                              boost::json::storage_ptr sp = {},
                              const boost::json::parse_options& opt = {});
// As boost::json::parse: throws boost::system::system_error on malformed text.
boost::json::value parse_json(std::string_view text);

} // namespace crm::domain
