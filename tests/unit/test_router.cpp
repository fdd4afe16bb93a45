// The router: templates, parameters, literal-over-parameter precedence, 404 and 405 with Allow.
#include "http/router.hpp"

#include <gtest/gtest.h>

using namespace crm::http;

namespace {

router sample() {
  router r;
  auto noop = [](const exchange_ptr&) {};
  r.add({verb::get, "/api/v1/users", access::bearer, {}, noop, "", ""});
  r.add({verb::post, "/api/v1/users", access::bearer, {}, noop, "", ""});
  r.add({verb::get, "/api/v1/users/{id}", access::bearer, {}, noop, "", ""});
  r.add({verb::del, "/api/v1/users/{id}", access::bearer, {}, noop, "", ""});
  r.add({verb::get, "/api/v1/users/me", access::bearer, {}, noop, "", ""});
  r.add({verb::get, "/api/v1/contacts/{id}/tags/{tag}", access::bearer, {}, noop, "", ""});
  return r;
}

} // namespace

TEST(router, matches_a_literal_route) {
  auto r = sample();
  auto m = r.match(verb::get, "/api/v1/users");
  ASSERT_EQ(m.result, router::outcome::found);
  EXPECT_EQ(m.matched->path, "/api/v1/users");
  EXPECT_EQ(m.matched->method, verb::get);
}

TEST(router, captures_path_parameters_by_name) {
  auto r = sample();
  auto m = r.match(verb::get, "/api/v1/contacts/42/tags/vip");
  ASSERT_EQ(m.result, router::outcome::found);
  ASSERT_EQ(m.params.size(), 2u);
  EXPECT_EQ(m.params[0].first, "id");
  EXPECT_EQ(m.params[0].second, "42");
  EXPECT_EQ(m.params[1].first, "tag");
  EXPECT_EQ(m.params[1].second, "vip");
}

TEST(router, prefers_a_literal_segment_over_a_parameter) {
  auto r = sample();
  auto m = r.match(verb::get, "/api/v1/users/me");
  ASSERT_EQ(m.result, router::outcome::found);
  EXPECT_EQ(m.matched->path, "/api/v1/users/me");
  auto p = r.match(verb::get, "/api/v1/users/17");
  ASSERT_EQ(p.result, router::outcome::found);
  EXPECT_EQ(p.matched->path, "/api/v1/users/{id}");
}

TEST(router, answers_405_with_the_allowed_methods_for_a_known_path) {
  auto r = sample();
  auto m = r.match(verb::put, "/api/v1/users/17");
  EXPECT_EQ(m.result, router::outcome::method_not_allowed);
  EXPECT_EQ(m.allow, "GET, DELETE");
  EXPECT_EQ(m.matched, nullptr);
}

TEST(router, answers_404_for_unknown_paths) {
  auto r = sample();
  EXPECT_EQ(r.match(verb::get, "/api/v1/nothing").result, router::outcome::not_found);
  EXPECT_EQ(r.match(verb::get, "/api/v1/users/17/extra").result, router::outcome::not_found);
  EXPECT_EQ(r.match(verb::get, "/api/v1").result, router::outcome::not_found);
  EXPECT_EQ(r.match(verb::get, "/").result, router::outcome::not_found);
}

TEST(router, does_not_match_an_empty_parameter) {
  auto r = sample();
  EXPECT_EQ(r.match(verb::get, "/api/v1/users/").result, router::outcome::not_found);
}

TEST(router, rejects_a_duplicate_route) {
  auto r = sample();
  EXPECT_THROW(r.add({verb::get, "/api/v1/users", access::bearer, {}, {}, "", ""}),
               std::logic_error);
}

TEST(router, numbers_routes_in_insertion_order) {
  auto r = sample();
  ASSERT_EQ(r.routes().size(), 6u);
  for (std::size_t i = 0; i < r.routes().size(); ++i) EXPECT_EQ(r.routes()[i]->index, i);
}
