#include "http/request_input.hpp"

#include "domain/json_nul.hpp"

#include "http/json.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

namespace crm::http {

std::optional<std::int64_t> id_param(const exchange_ptr& ex, std::string_view name) {
  std::vector<domain::issue> issues;
  auto id = path_id(ex->param(name), name, issues);
  if (!id) ex->fail(domain::failure::invalid(std::move(issues)));
  return id;
}

std::optional<boost::json::object> object_body(const exchange_ptr& ex) {
  boost::json::error_code ec;
  auto v = boost::json::parse(ex->req.body, ec);
  if (ec) {
    ex->fail(domain::failure::invalid({{{"body"}, "JSON decode error", "json_invalid"}}));
    return std::nullopt;
  }
  if (!v.is_object()) {
    ex->fail(domain::failure::invalid(
        {{{"body"}, "Input should be a valid dictionary", "json_invalid"}}));
    return std::nullopt;
  }
  if (auto at = domain::nul_location(ex->req.body, v)) {
    ex->fail(domain::failure::invalid({domain::nul_issue(std::move(*at))}));
    return std::nullopt;
  }
  return std::move(v.as_object());
}

actors::callback<domain::done> no_content_reply(const exchange_ptr& ex) {
  return actors::callback<domain::done>([ex](domain::outcome<domain::done> r) {
    if (!r) return ex->fail(r.error());
    ex->no_content();
  });
}

actors::callback<std::string> json_reply(const exchange_ptr& ex) {
  return actors::callback<std::string>([ex](domain::outcome<std::string> r) {
    if (!r) return ex->fail(r.error());
    ex->json(200, std::move(*r));
  });
}

actors::callback<std::string> created_reply(const exchange_ptr& ex, std::string location_prefix) {
  return actors::callback<std::string>(
      [ex, prefix = std::move(location_prefix)](domain::outcome<std::string> r) {
        if (!r) return ex->fail(r.error());
        response res;
        res.status = 201;
        boost::json::error_code ec;
        auto v = boost::json::parse(*r, ec);
        if (!ec && v.is_object())
          if (auto id = v.as_object().if_contains("id"))
            res.headers.emplace_back("Location", prefix + boost::json::serialize(*id));
        res.body = std::move(*r);
        ex->respond(std::move(res));
      });
}

} // namespace crm::http
