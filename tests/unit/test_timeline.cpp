// The timeline's cursor and summaries (domain/timeline.hpp): a cursor reads back as the position
// it was made from, only for its own contact, and nothing else reads as one.
#include "domain/timeline.hpp"

#include <gtest/gtest.h>

using namespace crm::domain;

TEST(TimelineCursor, ReadsBackItsPositionForItsContactOnly) {
  timeline_position p{1764400000123456, "deal_move", 42};
  auto text = timeline_cursor(7, p);
  auto mine = read_timeline_cursor(text, 7);
  ASSERT_TRUE(mine.position);
  EXPECT_FALSE(mine.error);
  EXPECT_EQ(mine.position->at, p.at);
  EXPECT_EQ(mine.position->type, "deal_move");
  EXPECT_EQ(mine.position->id, 42);
  auto theirs = read_timeline_cursor(text, 8);
  EXPECT_FALSE(theirs.position);
  EXPECT_EQ(theirs.error, cursor_error::other_contact);
  // The epoch itself is a time.
  EXPECT_TRUE(read_timeline_cursor(timeline_cursor(7, {0, "note", 1}), 7).position);
}

TEST(TimelineCursor, RefusesWhatNoTimelineGave) {
  for (const char* bad :
       {"", ".", "7", "7.1.note", "7.1.note.", "7.1.note.0", "7.1.nope.3", "7.-1.note.3",
        "7.1.note.3.4", "07.1.note.3", "7.1.note.3x", "x.1.note.3", "7..note.3", "7.1..3",
        "7.99999999999999999999.note.3", "0.1.note.3", "7.1.note.+3", "7.1.NOTE.3"}) {
    auto r = read_timeline_cursor(bad, 7);
    EXPECT_FALSE(r.position) << bad;
    EXPECT_EQ(r.error, cursor_error::malformed) << bad;
  }
}

TEST(TimelineSummary, KeepsTheFirstLineCutAtACharacter) {
  EXPECT_EQ(timeline_summary("Called back\nmore"), "Called back");
  EXPECT_EQ(timeline_summary("one\r\ntwo"), "one");
  EXPECT_EQ(timeline_summary(""), "");
  std::string long_text(150, 'a');
  EXPECT_EQ(timeline_summary(long_text), std::string(140, 'a') + "\u2026");
  // 141 two-byte characters: cut after the 140th, never inside one.
  std::string accents;
  for (int i = 0; i < 141; ++i) accents += "\u00e9";
  auto s = timeline_summary(accents);
  EXPECT_EQ(s, accents.substr(0, 280) + "\u2026");
}
