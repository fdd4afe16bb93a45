// The HTTP request and response as the handlers see them: plain structs, no Beast, so that
// handler code compiles fast and the session (server.cpp) is the only code that knows Beast.
#pragma once
#include "domain/failure.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace crm::http {

enum class verb : std::uint8_t { get, post, put, patch, del, head, options, other };
constexpr std::size_t verb_count = 8;
std::string_view to_string(verb v);
verb parse_verb(std::string_view s);

struct request {
  verb method = verb::get;
  std::string target;                                     // as received
  std::string path;                                       // percent-decoded path, without the query
  std::vector<std::pair<std::string, std::string>> query; // decoded, in order
  std::vector<std::pair<std::string, std::string>> headers; // names lower-cased
  std::string body;
  std::string request_id;
  std::string remote; // peer address

  std::optional<std::string_view> header(std::string_view lower_name) const;
  std::optional<std::string_view> query_value(std::string_view name) const;
};

// A body produced in pieces (exports, large imports' results): each call asks for the next
// chunk, answered on any thread with the chunk or with the end. Sent with chunked transfer
// encoding. A body that fails after its status was sent ends `broken`: the connection is closed
// without the last chunk, so that no client takes a cut body for a whole one.
enum class stream_end : std::uint8_t { complete, broken };
using chunk = std::variant<std::string, stream_end>;
using chunk_sink = std::function<void(chunk)>;
using chunk_source = std::function<void(chunk_sink)>;

struct response {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  chunk_source stream; // when set, the body comes from it instead of `body`
  bool close = false;  // close the connection after sending
  // Who asked (0: nobody signed in), for the access log; set by exchange::respond.
  std::int64_t tenant_id = 0;
  std::int64_t user_id = 0;
};

// Sets `req.target` and from it `req.path` (percent-decoded; as received when malformed) and
// `req.query`.
void set_target(request& req, std::string_view target);

// Splits "a=1&b=x%20y" into decoded pairs ('+' is a space).
std::vector<std::pair<std::string, std::string>> parse_query(std::string_view q);
// The request's text that handlers may store (the decoded path, every query name and value, the
// Idempotency-Key header) checked before any handler runs: a 422 issue for the first value that
// is not UTF-8 text without NUL (or an Idempotency-Key that is not 1-255 visible ASCII
// characters), so no such byte ever reaches SQL.
std::optional<domain::issue> non_text_input(const request& req);

// An Idempotency-Key: 1 to this many visible ASCII characters (0x21-0x7e).
inline constexpr std::size_t idempotency_key_max = 255;

// Percent-decodes; nothing on malformed escapes.
std::optional<std::string> percent_decode(std::string_view s, bool plus_is_space);

} // namespace crm::http
