// The operator console (docs/operations.md "Console"), on the metrics listener: GET /console,
// one page with its style and script (web/console/, embedded with uPlot by console_assets.cpp),
// and GET /console/data, the JSON it polls every second. The page holds no data: without the
// operator token it answers 401 with its sign-in form, and only /console/data (operator token)
// carries figures. The drills the page offers are the operator routes that exist (fail a
// tenant's child).
#include "http/api.hpp"

#include "actors/meters.hpp"
#include "actors/runtime.hpp"
#include "domain/clock.hpp"
#include "domain/json_writer.hpp"
#include "http/json.hpp"
#include "http/placement.hpp"

#include <charconv>
#include <cmath>

extern "C" {
extern const char crm_console_html_start[], crm_console_html_end[];
extern const char crm_console_js_start[], crm_console_js_end[];
extern const char crm_console_css_start[], crm_console_css_end[];
extern const char crm_uplot_js_start[], crm_uplot_js_end[];
extern const char crm_uplot_css_start[], crm_uplot_css_end[];
}

namespace crm::http {

namespace {

std::string_view bytes(const char* start, const char* end) {
  return {start, static_cast<std::size_t>(end - start)};
}

constexpr int tenants_default = 200, tenants_max = 10'000;

// The page may run only its own script, talk only to this listener, and be framed by nobody.
constexpr std::string_view page_policy =
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'";

handler_fn asset(std::string_view content_type, std::string_view body) {
  return [=](const exchange_ptr& ex) {
    response res;
    res.content_type = content_type;
    res.body = body;
    res.headers.emplace_back("Cache-Control", "no-cache");
    res.headers.emplace_back("X-Content-Type-Options", "nosniff");
    ex->respond(std::move(res));
  };
}

} // namespace

std::string prometheus_json(std::string_view text) {
  // {"family": [{"labels": {...}, "value": v}, ...], ...}: every sample of the text format,
  // grouped by name in the order they come (a family's samples are adjacent).
  std::string out;
  domain::json_writer w(out);
  w.begin_object();
  std::string current;
  bool open = false;
  while (!text.empty()) {
    auto nl = text.find('\n');
    auto line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (line.empty() || line[0] == '#') continue;
    auto name_end = line.find_first_of("{ ");
    if (name_end == std::string_view::npos) continue;
    std::string name(line.substr(0, name_end));
    std::vector<std::pair<std::string, std::string>> labels;
    auto rest = line.substr(name_end);
    if (!rest.empty() && rest[0] == '{') {
      std::size_t i = 1;
      while (i < rest.size() && rest[i] != '}') {
        auto eq = rest.find('=', i);
        if (eq == std::string_view::npos || eq + 1 >= rest.size() || rest[eq + 1] != '"') break;
        std::string key(rest.substr(i, eq - i)), value;
        std::size_t j = eq + 2;
        for (; j < rest.size() && rest[j] != '"'; ++j) {
          if (rest[j] == '\\' && j + 1 < rest.size()) {
            ++j;
            value += rest[j] == 'n' ? '\n' : rest[j];
          } else {
            value += rest[j];
          }
        }
        labels.emplace_back(std::move(key), std::move(value));
        i = j + 1;
        if (i < rest.size() && rest[i] == ',') ++i;
      }
      auto close = rest.find('}', i);
      rest = close == std::string_view::npos ? std::string_view{} : rest.substr(close + 1);
    }
    while (!rest.empty() && rest[0] == ' ') rest.remove_prefix(1);
    double value = 0;
    auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
    if (ec != std::errc() || !std::isfinite(value)) continue;
    if (!open || name != current) {
      if (open) w.end_array();
      w.key(name).begin_array();
      current = name;
      open = true;
    }
    w.begin_object().key("labels").begin_object();
    for (auto& [k, v] : labels) w.key(k).value(v);
    char num[32];
    auto [end, ec2] = std::to_chars(num, num + sizeof num, value);
    w.end_object().key("value").raw(ec2 == std::errc() ? std::string_view(num, end - num) : "0");
    w.end_object();
  }
  if (open) w.end_array();
  w.end_object();
  return out;
}

void add_console_routes(router& r, services& s) {
  r.add({verb::get,
         "/console",
         access::operator_page,
         {},
         [](const exchange_ptr& ex) {
           response res;
           res.content_type = "text/html; charset=utf-8";
           res.body = bytes(crm_console_html_start, crm_console_html_end);
           // Signed out: the same page, whose form asks for the token (kept for the tab).
           if (!ex->operator_signed_in) {
             res.status = 401;
             res.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"carecrm operator\"");
           }
           res.headers.emplace_back("Cache-Control", "no-store");
           res.headers.emplace_back("Content-Security-Policy", std::string(page_policy));
           res.headers.emplace_back("X-Content-Type-Options", "nosniff");
           res.headers.emplace_back("Referrer-Policy", "no-referrer");
           ex->respond(std::move(res));
         },
         "The operator console: a live page of this node, its tenants and the cluster",
         "operations"});
  // The script and the styles hold no data: anyone may load them. (One r.add per route, each
  // path written out: tests/integration/test_openapi.py reads every route from the source.)
  r.add({verb::get,
         "/console/console.js",
         access::open,
         {},
         asset("application/javascript; charset=utf-8",
               bytes(crm_console_js_start, crm_console_js_end)),
         "The console's script",
         "operations"});
  r.add({verb::get,
         "/console/console.css",
         access::open,
         {},
         asset("text/css; charset=utf-8", bytes(crm_console_css_start, crm_console_css_end)),
         "The console's style",
         "operations"});
  r.add(
      {verb::get,
       "/console/uplot.js",
       access::open,
       {},
       asset("application/javascript; charset=utf-8", bytes(crm_uplot_js_start, crm_uplot_js_end)),
       "uPlot, the console's charts",
       "operations"});
  r.add({verb::get,
         "/console/uplot.css",
         access::open,
         {},
         asset("text/css; charset=utf-8", bytes(crm_uplot_css_start, crm_uplot_css_end)),
         "uPlot's style",
         "operations"});
  r.add({verb::get,
         "/console/data",
         access::operator_token,
         {},
         [&s](const exchange_ptr& ex) {
           std::vector<domain::issue> issues;
           auto limit = query_int(ex->req, "limit", tenants_default, 1, tenants_max, issues);
           auto search = ex->req.query_value("search").value_or("");
           if (search.size() > 20)
             issues.push_back({{"query", "search"}, "at most 20 characters", "string_too_long"});
           if (!issues.empty()) return ex->fail(domain::failure::invalid(std::move(issues)));
           std::string body = "{\"at\":" + std::to_string(domain::now_micros());
           body += ",\"actors\":" + s.rt.actors_json(search, static_cast<std::size_t>(*limit));
           body += ",\"cluster\":" + (s.placement ? s.placement->cluster_json() : "null");
           body += ",\"metrics\":" + prometheus_json(metrics_text(s));
           std::string incidents;
           domain::json_writer w(incidents);
           w.begin_array();
           for (auto& i : actors::recent_incidents()) {
             w.begin_object();
             w.key("at").value(domain::format_rfc3339(i.at));
             w.key("tenant_id").value(i.tenant_id);
             w.key("child").value(i.child);
             w.key("reason").value(i.reason);
             w.end_object();
           }
           w.end_array();
           body += ",\"incidents\":" + incidents + "}";
           response res;
           res.body = std::move(body);
           res.headers.emplace_back("Cache-Control", "no-store");
           ex->respond(std::move(res));
         },
         "The console's figures: the busiest live tenants and their children, the cluster, "
         "every /metrics sample, the last incidents",
         "operations"});
}

} // namespace crm::http
