// The open batch of a record actor (contacts, deals) and its hand-over to the group committer
// (docs/design.md): the writes staged while the previous batch commits ride together in the
// next one. Internal to actors/ (CAF).
//
// The actor's state has `env`, `open` and `in_flight` (std::optional) batches with `seq`,
// `sql` (a persistence::tx_batch with `tenant_id` and `events`), `on_commit`, `on_fail` and
// `writes`, and `next_seq`.
#pragma once
#include "actors/system.hpp"
#include "persistence/group_committer.hpp"

#include <memory>
#include <type_traits>

namespace crm::actors {

// Hands the open batch to the group committer when none of this actor is in flight. After
// COMMIT, back in the actor: `applied(batch, sql)` changes memory, the workflow actor hears of
// new outbox events, and the batch's writes are answered. After a failure: the writes of the
// batch and of the one staged behind it (validated against it) are failed, after
// `forget_projection(failure)` (which reloads the state from Postgres when the failure leaves
// the outcome unknown). Then `next()` (flush again, run what waited).
template <class Actor, class Applied, class Forget, class Next>
void flush_open_batch(Actor* self, Applied applied, Forget forget_projection, Next next) {
  auto& st = self->state;
  if (st.in_flight || st.open.writes == 0) return;
  using batch_type = std::decay_t<decltype(st.open)>;
  using sql_type = std::decay_t<decltype(st.open.sql)>;
  st.in_flight.emplace(std::move(st.open));
  st.open = batch_type{};
  st.open.seq = st.next_seq++;
  auto sql = std::make_shared<sql_type>(std::move(st.in_flight->sql));
  sql->tenant_id = st.env.tenant_id;
  auto me = caf::actor_cast<caf::actor>(self);
  st.env.committer->submit(sql, [me, self, sql, applied, forget_projection,
                                 next](domain::outcome<domain::done> r) mutable {
    caf::anon_send(
        me, resume_atom::value,
        continuation{[self, sql, applied, forget_projection, next, r = std::move(r)]() mutable {
          auto& st = self->state;
          auto done = std::move(*st.in_flight);
          st.in_flight.reset();
          auto& gc = group_commits();
          if (r) {
            gc.batches++;
            gc.writes += done.writes;
            applied(done, *sql);
            // The workflow actor takes the committed events from the outbox.
            if (!sql->events.empty())
              st.env.rt->route(st.env.tenant_id, child_kind::workflows,
                               caf::make_message(outbox_atom::value));
            for (auto& k : done.on_commit) k();
          } else {
            gc.failures++;
            auto behind = std::move(st.open);
            st.open = batch_type{};
            st.open.seq = st.next_seq++;
            forget_projection(r.error());
            for (auto& f : done.on_fail) f(r.error());
            for (auto& f : behind.on_fail) f(r.error());
          }
          next();
        }});
  });
}

// Runs `read()` in the actor once every batch of this tenant's aggregate (`Batch`) that a
// predecessor of the actor handed the group committer has settled: a state loaded then holds
// what those batches committed (group_committer::when_settled).
template <class Batch, class Actor, class Read>
void after_settled(Actor* self, Read read) {
  auto me = caf::actor_cast<caf::actor>(self);
  self->state.env.committer->when_settled(self->state.env.tenant_id, typeid(Batch), [me, read] {
    caf::anon_send(me, resume_atom::value, continuation{read});
  });
}

} // namespace crm::actors
