// The one writer of an aggregate (actors/writer.hpp), run deterministically: CAF's
// test_coordinator runs every message on this thread when the test says so, and the "database"
// is a list of completions the test releases one at a time, so each interleaving is chosen
// here, not left to the scheduler.
#include "actors/writer.hpp"
#include "tests/actors/coordinated.hpp"

#include <map>
#include <string>
#include <vector>

namespace crm::actors {
namespace {

using release_atom = caf::atom_constant<caf::atom("release")>;
using remove_atom = caf::atom_constant<caf::atom("remove")>;

// A record store with one writer: an update appends to the record's text, planned from what
// memory holds when its turn comes, and applied only when its "commit" is released.
struct store_state {
  one_at_a_time writes;
  std::map<int, std::string> records;
  std::vector<continuation> io; // commits under way, released by the test in order
  int settled = 0;
};
using store_actor = caf::stateful_actor<store_state>;

void settle(store_actor* self) {
  self->state.settled++;
}

caf::behavior store(store_actor* self, std::string first) {
  self->state.records[1] = std::move(first);
  return {
      [self](resume_atom, continuation& k) { k(); },
      [self](release_atom) {
        auto& io = self->state.io;
        if (io.empty()) return;
        auto k = std::move(io.front());
        io.erase(io.begin());
        k();
      },
      [self](update_atom, int id, const std::string& suffix, callback<std::string>& reply) {
        write_in_turn(self, reply, [self, id, suffix](callback<std::string> reply) {
          auto it = self->state.records.find(id);
          if (it == self->state.records.end())
            return reply(domain::failure::of(domain::errc::not_found, "record not found"));
          auto next = it->second + "+" + suffix;
          self->state.io.push_back([self, id, next, reply] {
            self->state.records[id] = next;
            reply(next);
          });
        });
      },
      [self](remove_atom, int id, callback<domain::done>& reply) {
        write_in_turn(self, reply, [self, id](callback<domain::done> reply) {
          if (!self->state.records.count(id))
            return reply(domain::failure::of(domain::errc::not_found, "record not found"));
          self->state.io.push_back([self, id, reply] {
            self->state.records.erase(id);
            reply(domain::done{});
          });
        });
      },
      // A write whose step drops its reply unanswered (a bug, or an actor stopping mid-way).
      [self](get_atom, callback<std::string>& reply) {
        write_in_turn(self, reply, [](callback<std::string>) {});
      },
  };
}

class writer_test : public coordinated {
protected:
  writer_test() {
    // With an argument: CAF 0.17 dereferences a null tuple when a function actor takes none.
    actor = sys.spawn(store, std::string("a"));
    sched.run();
  }
  // Answers land here, in the order they were given.
  template <class T>
  callback<T> record(std::vector<std::string>& answers) {
    return callback<T>([&answers](domain::outcome<T> r) {
      if (!r)
        answers.push_back("error " + std::to_string(static_cast<int>(r.error().code)));
      else if constexpr (std::is_same_v<T, std::string>)
        answers.push_back(*r);
      else
        answers.push_back("done");
    });
  }

  store_state& state() { return state_of<store_actor>(); }
  void release() {
    caf::anon_send(actor, release_atom::value);
    sched.run();
  }
};

TEST_F(writer_test, a_second_write_waits_for_the_first_and_starts_from_what_it_left) {
  std::vector<std::string> answers;
  caf::anon_send(actor, update_atom::value, 1, std::string("x"), record<std::string>(answers));
  caf::anon_send(actor, update_atom::value, 1, std::string("y"), record<std::string>(answers));
  sched.run();
  // Only the first is under way; the second has not been planned yet.
  ASSERT_EQ(state().io.size(), 1u);
  EXPECT_TRUE(answers.empty());
  release();
  ASSERT_EQ(answers, std::vector<std::string>{"a+x"});
  // The second was planned only now, from the first's result: nothing is lost.
  ASSERT_EQ(state().io.size(), 1u);
  release();
  EXPECT_EQ(answers, (std::vector<std::string>{"a+x", "a+x+y"}));
  EXPECT_EQ(state().records.at(1), "a+x+y");
  EXPECT_FALSE(state().writes.busy());
}

TEST_F(writer_test, an_update_after_a_delete_finds_the_record_gone_and_does_not_bring_it_back) {
  std::vector<std::string> answers;
  caf::anon_send(actor, remove_atom::value, 1, record<domain::done>(answers));
  caf::anon_send(actor, update_atom::value, 1, std::string("late"), record<std::string>(answers));
  sched.run();
  release();
  sched.run();
  EXPECT_EQ(answers, (std::vector<std::string>{"done", "error " + std::to_string(static_cast<int>(
                                                                      domain::errc::not_found))}));
  EXPECT_TRUE(state().io.empty());
  EXPECT_EQ(state().records.count(1), 0u);
}

TEST_F(writer_test, a_reply_dropped_unanswered_answers_503_and_the_next_write_still_runs) {
  std::vector<std::string> answers;
  caf::anon_send(actor, get_atom::value, record<std::string>(answers));
  caf::anon_send(actor, update_atom::value, 1, std::string("z"), record<std::string>(answers));
  sched.run();
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0],
            "error " + std::to_string(static_cast<int>(domain::errc::service_unavailable)));
  ASSERT_EQ(state().io.size(), 1u);
  release();
  EXPECT_EQ(answers.back(), "a+z");
  // Each ended write settled the actor (a stopping actor quits once the last one ends).
  EXPECT_EQ(state().settled, 2);
}

} // namespace
} // namespace crm::actors
