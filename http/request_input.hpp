// What every endpoint family shares: reading an id from the path and a JSON object body (on
// failure the 422 is already sent and nothing is returned), and the common replies.
#pragma once
#include "actors/callback.hpp"
#include "actors/contacts.hpp"
#include "http/exchange.hpp"

#include <boost/json/object.hpp>

#include <functional>
#include <optional>
#include <string_view>
#include <vector>

namespace crm::http {

std::optional<std::int64_t> id_param(const exchange_ptr& ex, std::string_view name = "id");
std::optional<boost::json::object> object_body(const exchange_ptr& ex);

// An import's text/csv body (contacts, deals), checked whole before any row is used: UTF-8
// text, quotes that close, a header (trimmed) of columns `known` accepts (another is
// extra_forbidden at body.header.<name>) with `required` among them, and at most `rows_max`
// rows. The rows stay in the body, read a part at a time (http/import_stream.hpp). On any
// failure the 422 is already sent and nothing is returned.
struct csv_file {
  std::vector<std::string> header;
  std::size_t rows = 0;    // data rows, the header not counted
  std::size_t rows_at = 0; // where the first data row starts in the body
};
std::optional<csv_file> csv_body(const exchange_ptr& ex, std::size_t rows_max,
                                 const std::function<bool(std::string_view)>& known,
                                 std::string_view required);

// 204 with no body, or the failure.
actors::callback<domain::done> no_content_reply(const exchange_ptr& ex);
// 200 with a body the actor already rendered, or the failure.
actors::callback<std::string> json_reply(const exchange_ptr& ex);
// 201 with a body the actor rendered (an object with an "id") and Location: prefix + id.
actors::callback<std::string> created_reply(const exchange_ptr& ex, std::string location_prefix);

// Runs `then` once the contacts actor confirms that contact `id` is the caller's tenant's;
// otherwise answers its 404 (or 403 for another tenant's id), as GET /contacts/{id} would.
void with_contact(actors::runtime& rt, const exchange_ptr& ex, std::int64_t id,
                  std::function<void()> then);

// The Idempotency-Key of a request (with the hash of its method, path and body), or none.
actors::idempotency idempotency_of(const exchange_ptr& ex);
// Answers a replayable response; a 201 gets `Location: location_prefix + id`.
void reply_stored(const exchange_ptr& ex, domain::outcome<actors::stored_response> r,
                  const char* location_prefix);

} // namespace crm::http
