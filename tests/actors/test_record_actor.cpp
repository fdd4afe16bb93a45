// The record kernel (actors/record_actor.hpp) run deterministically: CAF's test_coordinator
// runs each message on this thread when the test says so, and the database seam is a pool that
// runs each job at once on the caller's thread (pg_pool::run_inline), so the only concurrency
// is the order of messages in the actor's mailbox, which the tests choose.
#include "actors/record_actor.hpp"

#include "persistence/pg_pool.hpp"
#include "tests/actors/coordinated.hpp"

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace crm::actors {
namespace {

using remove_atom = caf::atom_constant<caf::atom("remove")>;

struct note {
  std::string title;
  std::string body;
};

// The "table" the aggregate loads from and commits to, and its failures on demand.
struct table {
  std::map<std::int64_t, note> rows;                // this tenant's
  std::map<std::int64_t, std::int64_t> other_owner; // ids held by other tenants
  int loads = 0;
  bool fail_load = false;
  bool fail_commit = false;
};
table db_table;

struct notes_aggregate {
  static constexpr child_kind kind = child_kind::users; // any registered kind: only metrics
  struct store {
    std::map<std::int64_t, note> notes;
    domain::outcome<note> get(std::int64_t id) const {
      if (auto it = notes.find(id); it != notes.end()) return it->second;
      return domain::failure::of(domain::errc::not_found, "note not found");
    }
  };
  static store load(persistence::pg_conn&, std::int64_t) {
    db_table.loads++;
    if (db_table.fail_load) throw std::runtime_error("the load failed");
    return store{db_table.rows};
  }
  static std::optional<std::int64_t> owner_of(persistence::pg_conn&, std::int64_t id) {
    if (auto it = db_table.other_owner.find(id); it != db_table.other_owner.end())
      return it->second;
    return std::nullopt;
  }
};
using notes_actor = record_actor<notes_aggregate>;
using store = notes_aggregate::store;

struct edit {
  std::int64_t id;
  note next;
};

// A patch of one member ("title" or "body"), planned from what memory holds in its turn.
caf::behavior notes(notes_actor* self, tenant_env env) {
  return record_behavior(
      self, env,
      [](notes_actor* self, get_atom, std::int64_t id, callback<std::string>& reply) {
        read(self, id, reply, [id](const store& s) -> domain::outcome<std::string> {
          auto n = s.get(id);
          if (!n) return n.error();
          return n->title + "|" + n->body;
        });
      },
      [](notes_actor* self, update_atom, std::int64_t id, const std::string& member,
         const std::string& value, callback<std::string>& reply) {
        change(
            self, id, reply,
            [id, member, value](const store& s) -> domain::outcome<edit> {
              auto n = s.get(id);
              if (!n) return n.error();
              (member == "title" ? n->title : n->body) = value;
              return edit{id, *n};
            },
            [](persistence::pg_conn&, const edit& e) {
              if (db_table.fail_commit) throw std::runtime_error("the commit failed");
              db_table.rows[e.id] = e.next;
              return e;
            },
            [](notes_actor* self, edit e) {
              self->state.store.notes[e.id] = e.next;
              return e.next.title + "|" + e.next.body;
            });
      },
      [](notes_actor* self, remove_atom, std::int64_t id, callback<domain::done>& reply) {
        change(
            self, id, reply,
            [id](const store& s) -> domain::outcome<std::int64_t> {
              if (!s.notes.count(id)) return domain::failure::of(domain::errc::not_found, "gone");
              return id;
            },
            [](persistence::pg_conn&, std::int64_t id) {
              db_table.rows.erase(id);
              return id;
            },
            [](notes_actor* self, std::int64_t id) {
              self->state.store.notes.erase(id);
              return domain::done{};
            });
      });
}

std::string code(domain::errc c) {
  return "error " + std::to_string(static_cast<int>(c));
}

class record_actor_test : public coordinated {
protected:
  record_actor_test() : pool(persistence::pg_pool::run_inline, "postgresql://unused") {
    db_table = table{};
    db_table.rows[1] = note{"t", "b"};
    tenant_env env;
    env.tenant_id = 1;
    env.pool = &pool;
    env.stats = std::make_shared<tenant_stats>();
    actor = sys.spawn(notes, env);
    actor->attach_functor([this] { down = true; });
    sched.run();
  }
  template <class T>
  callback<T> record() {
    return callback<T>([this](domain::outcome<T> r) {
      if (!r)
        answers.push_back(code(r.error().code));
      else if constexpr (std::is_same_v<T, std::string>)
        answers.push_back(*r);
      else
        answers.push_back("done");
    });
  }
  void get(std::int64_t id) { caf::anon_send(actor, get_atom::value, id, record<std::string>()); }
  void update(std::int64_t id, const char* member, const char* value) {
    caf::anon_send(actor, update_atom::value, id, std::string(member), std::string(value),
                   record<std::string>());
  }
  void remove(std::int64_t id) {
    caf::anon_send(actor, remove_atom::value, id, record<domain::done>());
  }
  record_state<notes_aggregate>& state() { return state_of<notes_actor>(); }

  persistence::pg_pool pool;
  std::vector<std::string> answers;
  bool down = false;
};

TEST_F(record_actor_test, requests_before_the_load_wait_for_it_and_it_runs_once) {
  get(1);
  update(1, "title", "T");
  get(1);
  sched.run();
  EXPECT_EQ(db_table.loads, 1);
  // The second read does not wait for the write in flight (it was not answered yet, so either
  // state is right): it answers from memory before the write's COMMIT is applied.
  EXPECT_EQ(answers, (std::vector<std::string>{"t|b", "t|b", "T|b"}));
  get(1);
  sched.run();
  EXPECT_EQ(answers.back(), "T|b");
}

TEST_F(record_actor_test, a_failed_load_fails_what_waited_and_the_next_request_loads_again) {
  db_table.fail_load = true;
  get(1);
  update(1, "title", "T");
  sched.run();
  // Each waiting request gets the load's failure (an unexplained exception: 500).
  EXPECT_EQ(answers,
            (std::vector<std::string>{code(domain::errc::internal), code(domain::errc::internal)}));
  EXPECT_EQ(db_table.rows.at(1).title, "t"); // the update never ran
  db_table.fail_load = false;
  get(1);
  sched.run();
  EXPECT_EQ(db_table.loads, 2);
  EXPECT_EQ(answers.back(), "t|b");
}

TEST_F(record_actor_test, concurrent_updates_of_different_members_both_stick) {
  get(1);
  sched.run(); // loaded
  answers.clear();
  update(1, "title", "T");
  update(1, "body", "B");
  sched.run();
  EXPECT_EQ(answers, (std::vector<std::string>{"T|b", "T|B"}));
  EXPECT_EQ(db_table.rows.at(1).title, "T");
  EXPECT_EQ(db_table.rows.at(1).body, "B");
  EXPECT_EQ(state().store.notes.at(1).title, "T");
}

TEST_F(record_actor_test, an_update_racing_a_delete_answers_404_and_nothing_comes_back) {
  remove(1);
  update(1, "title", "late");
  sched.run();
  EXPECT_EQ(answers, (std::vector<std::string>{"done", code(domain::errc::not_found)}));
  EXPECT_EQ(db_table.rows.count(1), 0u);
  EXPECT_EQ(state().store.notes.count(1), 0u);
}

TEST_F(record_actor_test, an_id_another_tenant_holds_is_403_and_an_unknown_one_404) {
  db_table.other_owner[7] = 2;
  get(7);
  update(7, "title", "x");
  get(8);
  sched.run();
  EXPECT_EQ(answers, (std::vector<std::string>{code(domain::errc::insufficient_permissions),
                                               code(domain::errc::insufficient_permissions),
                                               code(domain::errc::not_found)}));
}

TEST_F(record_actor_test, a_failed_commit_changes_nothing_in_memory_and_the_next_write_runs) {
  get(1);
  sched.run();
  db_table.fail_commit = true;
  update(1, "title", "lost");
  sched.run();
  db_table.fail_commit = false;
  update(1, "body", "kept");
  sched.run();
  ASSERT_EQ(answers.size(), 3u);
  EXPECT_EQ(answers[1], code(domain::errc::internal));
  EXPECT_EQ(answers[2], "t|kept");
  EXPECT_EQ(state().store.notes.at(1).title, "t");
}

TEST_F(record_actor_test, a_stopping_actor_answers_the_write_in_flight_before_it_quits) {
  get(1);
  sched.run();
  update(1, "title", "T");
  update(1, "body", "B");
  caf::anon_send(actor, stop_atom::value);
  // The first update commits and waits for its completion; the second waits its turn.
  sched.run_once();
  sched.run_once();
  sched.run_once(); // stop: two writes are not done, so it stays
  EXPECT_FALSE(down);
  sched.run();
  EXPECT_EQ(answers, (std::vector<std::string>{"t|b", "T|b", "T|B"}));
  EXPECT_TRUE(down);
}

} // namespace
} // namespace crm::actors
