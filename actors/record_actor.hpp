// The kernel every per-tenant aggregate runs on (docs/aggregates.md). It owns what each record
// actor used to retype: load on first use with the requests that wait for it, one writer for
// every write (in arrival order, each planned from what the previous one left in memory), the
// 403-or-404 answer for an id the tenant does not hold, settle and stop on passivation, and the
// actor's metrics. An aggregate supplies a pure domain store and a small table of its messages.
// Internal to actors/ (CAF).
//
// An aggregate `A` is a struct with
//   static constexpr child_kind kind;          // its entry in CRM_TENANT_CHILDREN
//   using store = ...;                         // its state, indexes and rules (domain/)
//   static store load(persistence::pg_conn&, std::int64_t tenant);
//   static std::optional<std::int64_t> owner_of(persistence::pg_conn&, std::int64_t id);
//     (or owner_of(conn, id, what): `what` is the detail of the not_found, for an aggregate
//     that holds several kinds of record)
//   using extra = ...;                         // optional: actor state beside the store
// (`aggregate<...>` below makes one of a repository's two functions) and its handlers are functions
// `void(record_actor<A>* self, <message...>)`, given to `record_behavior`, each calling `read`,
// `read_in_turn`, `change` or `write` below.
#pragma once
#include "actors/writer.hpp"

#include <optional>
#include <string_view>
#include <tuple>
#include <type_traits>

// Lets values of T travel in messages within this process (CAF 0.17's
// allowed_unsafe_message_type): one line per type, inside `namespace caf { ... }`.
#define CRM_LOCAL_MESSAGE(T)                                                                       \
  template <>                                                                                      \
  struct allowed_unsafe_message_type<T> : std::true_type {};

namespace crm::actors {

// An aggregate whose repository loads its store and finds a row's tenant as they are.
template <child_kind K, class Store, Store (*Load)(persistence::pg_conn&, std::int64_t),
          std::optional<std::int64_t> (*OwnerOf)(persistence::pg_conn&, std::int64_t)>
struct aggregate {
  static constexpr child_kind kind = K;
  using store = Store;
  static store load(persistence::pg_conn& c, std::int64_t tenant) { return Load(c, tenant); }
  static std::optional<std::int64_t> owner_of(persistence::pg_conn& c, std::int64_t id) {
    return OwnerOf(c, id);
  }
};

namespace detail {
// What an aggregate's actor keeps beside its store (A::extra, when it declares one): work under
// way that is no rule of the domain, such as replies waiting for a shared commit.
template <class A>
struct extra_of {
  struct type {};
};
template <class A>
requires requires {
  typename A::extra;
}
struct extra_of<A> {
  using type = typename A::extra;
};
} // namespace detail

template <class A>
struct record_state {
  tenant_env env;
  typename A::store store;
  typename detail::extra_of<A>::type extra;
  bool loaded = false;
  bool loading = false;
  bool stopping = false;
  waiting_list waiting; // requests that arrived before the store was loaded
  one_at_a_time writes; // the one writer (actors/writer.hpp)
  int pending_io = 0;   // work started outside the actor (actors/async_io.hpp)
  std::int64_t published_mailbox = 0;
  actor_meter* meter = nullptr;
  const char* name = child_name(A::kind);
};

template <class A>
using record_actor = caf::stateful_actor<record_state<A>>;

// A stopping actor quits once nothing it started is still out and nothing waits.
template <class A>
void settle(record_actor<A>* self) {
  auto& st = self->state;
  if (st.stopping && !st.loading && st.pending_io == 0 && !st.writes.busy() && st.waiting.empty())
    self->quit();
}

// Loads the store (once at a time); what waited runs after, or is failed with the load's
// failure (the next request tries again).
template <class A>
void load(record_actor<A>* self) {
  auto& st = self->state;
  if (st.loading) return;
  st.loading = true;
  db<typename A::store>(
      self, [tid = st.env.tenant_id](persistence::pg_conn& c) { return A::load(c, tid); },
      [self](domain::outcome<typename A::store> r) {
        auto& st = self->state;
        st.loading = false;
        if (!r) return release_waiting(st.waiting, &r.error());
        st.store = std::move(*r);
        st.loaded = true;
        release_waiting(st.waiting, nullptr);
      });
}

// Answers `reply` with `r`. A not_found about record `id` (> 0) is checked against the other
// tenants first: 403 when one of them holds the id, else the not_found itself.
template <class A, class T>
void answer(record_actor<A>* self, std::int64_t id, domain::outcome<T> r,
            const callback<T>& reply) {
  if (!r && r.error().code == domain::errc::not_found && id > 0) {
    // An aggregate of several kinds of record tells them apart by what was not found.
    auto owner = [id, what = r.error().detail](persistence::pg_conn& c) {
      if constexpr (requires { A::owner_of(c, id, std::string_view(what)); })
        return A::owner_of(c, id, std::string_view(what));
      else
        return A::owner_of(c, id);
    };
    return reply_not_held(self->state.env, std::move(owner), std::move(r.error()), reply);
  }
  reply(std::move(r));
}

// A read from memory, answered once the store is loaded: `f(const store&)` gives the outcome
// (a not_found about `id` is answered as `answer` says).
template <class A, class T, class F>
void read(record_actor<A>* self, std::int64_t id, callback<T> reply, F f) {
  when_loaded(self, fail_with(reply), [self, id, reply, f = std::move(f)]() mutable {
    answer<A, T>(self, id, f(std::as_const(self->state.store)), reply);
  });
}

// A read that waits for the writes that arrived before it (for an aggregate whose writes reach
// other actors before they reach memory: no read sees a state they have not reached).
template <class A, class T, class F>
void read_in_turn(record_actor<A>* self, std::int64_t id, callback<T> reply, F f) {
  when_loaded(self, fail_with(reply), [self, id, reply, f = std::move(f)]() mutable {
    write_in_turn(self, reply, [self, id, f = std::move(f)](callback<T> reply) mutable {
      answer<A, T>(self, id, f(std::as_const(self->state.store)), reply);
    });
  });
}

// A fact about rows that already left Postgres (a contact deleted, and its rows with it):
// `f(store&)` forgets them. Not loaded: nothing to do (a load finds them gone). Loading: after
// the load, which may have read them before the delete committed.
template <class A, class F>
void forget(record_actor<A>* self, F f) {
  auto& st = self->state;
  if (!st.loaded && !st.loading) return;
  when_loaded(
      self, [](const domain::failure&) {}, [self, f = std::move(f)] { f(self->state.store); });
}

// A write in its turn, in general form: `step(reply)` runs once the store is loaded and every
// earlier write has ended, and must answer `reply` exactly once, after memory holds what it
// committed (use `db` and `in_actor` for work outside the actor).
template <class A, class T, class Step>
void write(record_actor<A>* self, callback<T> reply, Step step) {
  when_loaded(self, fail_with(reply), [self, reply, step = std::move(step)]() mutable {
    write_in_turn(self, reply, std::move(step));
  });
}

namespace detail {
// What a commit gives: T, or outcome<T>.
template <class T>
struct unwrapped {
  using type = T;
};
template <class T>
struct unwrapped<domain::outcome<T>> {
  using type = T;
};
} // namespace detail

// A write in its common form, in its turn: `plan(const store&)` gives the change (or the
// failure: a not_found about `id` is answered as `answer` says), `commit(conn, change)`
// writes it in one transaction on a pool thread (giving the saved value, or its outcome), and after
// COMMIT `apply(self, saved)` changes memory and gives the answer. Nothing changes in memory when
// the commit fails.
template <class A, class T, class Plan, class Commit, class Apply>
void change(record_actor<A>* self, std::int64_t id, callback<T> reply, Plan plan, Commit commit,
            Apply apply) {
  using planned = std::invoke_result_t<Plan&, const typename A::store&>;
  using change_type = typename planned::value_type;
  using saved_type = typename detail::unwrapped<
      std::invoke_result_t<Commit&, persistence::pg_conn&, const change_type&>>::type;
  write<A, T>(self, reply,
              [self, id, plan = std::move(plan), commit = std::move(commit),
               apply = std::move(apply)](callback<T> reply) mutable {
                planned p = plan(std::as_const(self->state.store));
                if (!p) return answer<A, T>(self, id, p.error(), reply);
                db<saved_type>(
                    self,
                    [commit = std::move(commit), c = std::move(*p)](persistence::pg_conn& conn) {
                      return commit(conn, c);
                    },
                    [self, reply, apply = std::move(apply)](domain::outcome<saved_type> r) mutable {
                      if (!r) return reply(r.error());
                      reply(apply(self, std::move(*r)));
                    });
              });
}

namespace detail {

// Wraps an aggregate's handler `void(record_actor<A>*, Xs...)` as the CAF handler of Xs...,
// measured like every message of the actor.
template <class F>
struct record_handler : record_handler<decltype(&F::operator())> {};

template <class C, class Self, class... Xs>
struct record_handler<void (C::*)(Self, Xs...) const> {
  template <class H, class Measure>
  static auto wrap(Self self, Measure measure, H h) {
    return [self, measure, h](Xs... xs) {
      auto _ = measure();
      h(self, std::forward<Xs>(xs)...);
    };
  }
};

} // namespace detail

// The behavior of aggregate A's actor: its handlers, plus resume (work finished outside) and
// stop (passivation: quit once settled).
template <class A, class... Handlers>
caf::behavior record_behavior(record_actor<A>* self, const tenant_env& env, Handlers... hs) {
  self->state.env = env;
  auto measure = instrument(self, A::kind);
  return {
      [self, measure](resume_atom, continuation& k) {
        auto _ = measure();
        k();
      },
      [self](stop_atom) {
        self->state.stopping = true;
        settle(self);
      },
      detail::record_handler<Handlers>::wrap(self, measure, std::move(hs))...,
  };
}

} // namespace crm::actors
