// A CSV import of any size (contacts, deals; docs/design.md "Import"): the file's rows are read
// and committed a part of 1,000 at a time, each part by the aggregate's actor as one bulk
// create, and the results are streamed out as the parts commit. The body is held once (as it
// arrived), the rows of one part at a time: never the file's rows as fields, nor its contacts.
#pragma once
#include "actors/callback.hpp"
#include "actors/contacts.hpp"
#include "http/exchange.hpp"
#include "http/request_input.hpp"
#include "http/router.hpp"
#include "http/services.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace crm::http {

inline constexpr std::size_t import_rows_max = 100'000;
inline constexpr std::size_t import_part_rows = 1000;
// The import routes' body limit: 100,000 rows of an export with a few custom fields.
inline constexpr std::size_t import_body_limit = std::size_t{64} * 1024 * 1024;

// An import's route: its body may be as large as import_body_limit, whatever --body-limit says
// for the other routes.
inline route import_route(route rt) {
  rt.body_limit = import_body_limit;
  return rt;
}

// One part: the rows numbered from `first` (their results and issue locations count from it),
// to be created under `key` and answered as a replayable {"results": [...]} response.
using import_part = std::function<void(
    const std::vector<std::string>& header, std::vector<std::vector<std::string>> rows,
    std::int64_t first, actors::idempotency key, actors::callback<actors::stored_response> reply)>;

// Checks the request's CSV body (csv_body: at most import_rows_max rows, columns `known`
// accepts, `required` among them) and imports it part by part, answering {"results": [...]},
// one item per row in the file's order. The check of the whole file and the hash of its
// Idempotency-Key (tens of ms for 100,000 rows) run on the services' worker pool, not on an
// I/O thread (503 when it is full), as the request's caller for the audit. A file of one part is
// answered as a bulk create is; a larger one is streamed once its first part committed (a failure
// of the first part is its own status); a later part that fails breaks the stream (the client sees
// a cut body, never a whole one), and the parts before it stay committed. With an Idempotency-Key
// each part is kept under its own key (the first under the client's), all bound to the whole file:
// the same key and file again replay the committed parts and import the rest, so an import cut
// short is completed by sending it again, each row imported once.
void import_csv(services& s, const exchange_ptr& ex, std::function<bool(std::string_view)> known,
                std::string_view required, import_part part);

} // namespace crm::http
