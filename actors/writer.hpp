// The one writer of an aggregate (docs/aggregates.md): its writes run one at a time, in the
// order they arrived, each planned from the state the previous one left in memory (committed
// and applied, or failed). So two concurrent updates of different fields both stick, and an
// update that arrives after a delete finds the record gone (404) instead of writing it back.
// Internal to actors/ (CAF).
#pragma once
#include "actors/async_io.hpp"

namespace crm::actors {

// Runs `step(reply)` in its turn among the writes of `self` (its state's `writes`, a
// one_at_a_time). The reply `step` is given answers the caller and ends the write; `step` must
// answer it exactly once, after memory holds what it committed. A reply dropped unanswered
// answers 503 and ends the write too. The next write starts from the actor's mailbox, never
// inside the reply (which may run on another thread when dropped).
template <class T, class Actor, class Step>
void write_in_turn(Actor* self, callback<T> reply, Step step) {
  self->state.writes.run([self, reply = std::move(reply), step = std::move(step)]() mutable {
    auto me = caf::actor_cast<caf::actor>(self);
    step(reply.and_then([me, self] {
      caf::anon_send(me, resume_atom::value, continuation{[self] {
                       self->state.writes.done();
                       settle(self);
                     }});
    }));
  });
}

} // namespace crm::actors
