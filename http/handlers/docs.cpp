// GET /api/v1/docs: a reference of the API for people, Redoc reading GET /api/v1/openapi.json.
// Redoc's standalone bundle comes from npm at build time (web/package.json) and is part of the
// binary (docs_assets.cpp), served at GET /api/v1/docs/redoc.standalone.js: no CDN, nothing to
// install beside carecrm.
#include "http/api.hpp"

extern "C" {
extern const char crm_redoc_js_start[];
extern const char crm_redoc_js_end[];
}

namespace crm::http {

namespace {

constexpr std::string_view page = R"(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>carecrm API reference</title>
<style>body { margin: 0; padding: 0; }</style>
</head>
<body>
<redoc spec-url="/api/v1/openapi.json" hide-download-button="false"></redoc>
<script src="/api/v1/docs/redoc.standalone.js"></script>
</body>
</html>
)";

// A handler answering fixed content.
handler_fn fixed(std::string_view content_type, std::string_view body,
                 std::string_view cache_control) {
  return [=](const exchange_ptr& ex) {
    response res;
    res.content_type = content_type;
    res.body = body;
    res.headers.emplace_back("Cache-Control", cache_control);
    ex->respond(std::move(res));
  };
}

} // namespace

void add_docs_routes(router& r) {
  r.add({verb::get,
         "/api/v1/docs",
         access::open,
         {},
         fixed("text/html; charset=utf-8", page, "no-cache"),
         "This API's reference, for people (Redoc)",
         "operations"},
        route_doc().with_media("", "text/html"));
  r.add(
      {verb::get,
       "/api/v1/docs/redoc.standalone.js",
       access::open,
       {},
       fixed("application/javascript; charset=utf-8",
             {crm_redoc_js_start, static_cast<std::size_t>(crm_redoc_js_end - crm_redoc_js_start)},
             "public, max-age=86400"),
       "Redoc, the script of the reference page",
       "operations"},
      route_doc().with_media("", "application/javascript"));
}

} // namespace crm::http
