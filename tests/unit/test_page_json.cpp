// The page shape of contract §4 over records kept in memory (domain/page_json.hpp).
#include "domain/page_json.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <gtest/gtest.h>

#include <map>
#include <string>

namespace {

using crm::domain::render_newest_first;

struct record {
  int id;
  bool active;
};

std::map<int, record> records(int n) {
  std::map<int, record> m;
  for (int i = 1; i <= n; ++i) m.emplace(i, record{i, i % 2 == 0});
  return m;
}

boost::json::object page_of(const std::map<int, record>& m, bool only_active, int page,
                            int per_page) {
  int rendered = 0;
  auto text = render_newest_first(
      m, [only_active](const record& r) { return !only_active || r.active; },
      [&rendered](const record& r) {
        ++rendered;
        return boost::json::value(r.id);
      },
      page, per_page);
  auto o = boost::json::parse(text).as_object();
  // Only the page's records are rendered.
  EXPECT_EQ(rendered, static_cast<int>(o["items"].as_array().size()));
  return o;
}

TEST(PageJson, NewestFirstPagedWithTheTotalOfWhatIsKept) {
  auto m = records(7);
  auto first = page_of(m, false, 1, 3);
  EXPECT_EQ(boost::json::serialize(first["items"]), "[7,6,5]");
  EXPECT_EQ(first["total"].as_int64(), 7);
  EXPECT_EQ(first["pages"].as_int64(), 3);
  EXPECT_EQ(boost::json::serialize(page_of(m, false, 3, 3)["items"]), "[1]");
  EXPECT_EQ(boost::json::serialize(page_of(m, false, 4, 3)["items"]), "[]");

  auto active = page_of(m, true, 1, 2);
  EXPECT_EQ(boost::json::serialize(active["items"]), "[6,4]");
  EXPECT_EQ(active["total"].as_int64(), 3);
  EXPECT_EQ(active["pages"].as_int64(), 2);
  EXPECT_EQ(boost::json::serialize(page_of(m, true, 2, 2)["items"]), "[2]");
}

TEST(PageJson, EmptyMapIsAnEmptyPage) {
  auto o = page_of({}, false, 1, 50);
  EXPECT_EQ(boost::json::serialize(o["items"]), "[]");
  EXPECT_EQ(o["total"].as_int64(), 0);
  EXPECT_EQ(o["pages"].as_int64(), 0);
}

} // namespace
