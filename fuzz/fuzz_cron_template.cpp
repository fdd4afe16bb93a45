// Workflow schedules and templates: a cron expression that parses has a next time after any
// instant; templates render over any trigger payload.
#include "domain/workflow.hpp"

#include <boost/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto split = in.find('\n');
  std::string error;
  if (auto c = crm::domain::parse_cron(in.substr(0, split), error)) {
    auto t = crm::domain::next_cron_time(*c, 1'700'000'000'000'000);
    if (t != 0 && t <= 1'700'000'000'000'000) __builtin_trap();
  }
  if (split == std::string_view::npos) return 0;
  // The rest: a template string, then (after another newline) a JSON trigger payload.
  auto rest = in.substr(split + 1);
  auto nl = rest.find('\n');
  boost::json::value params = boost::json::object{{"text", rest.substr(0, nl)}};
  boost::json::value payload = boost::json::object();
  if (nl != std::string_view::npos) {
    boost::json::error_code ec;
    auto v = boost::json::parse(rest.substr(nl + 1), ec);
    if (!ec) payload = std::move(v);
  }
  crm::domain::template_context ctx{&payload, 7, 9, "Fuzz"};
  (void)crm::domain::render_templates(params, ctx);
  return 0;
}
