// Work a child actor starts outside itself (a Postgres job, an HTTP request, a sibling's
// answer) and finishes inside itself. The actor's state counts it in `pending_io`, so that a
// stopping actor quits only when nothing it started is still out; after each result the
// actor's own `settle(self)` decides whether it can quit now. Internal to actors/ (CAF).
#pragma once
#include "actors/system.hpp"

#include <deque>
#include <functional>
#include <utility>

namespace crm::actors {

// Runs `work(conn)` on a pool thread and `then(outcome)` back in the actor.
template <class T, class Actor, class Work, class Then>
void db(Actor* self, Work work, Then then) {
  auto me = caf::actor_cast<caf::actor>(self);
  self->state.pending_io++;
  self->state.env.pool->template run<T>(std::move(work), [me, self, then = std::move(then)](
                                                             domain::outcome<T> r) mutable {
    caf::anon_send(me, resume_atom::value, continuation{[self, then, r = std::move(r)]() mutable {
                     self->state.pending_io--;
                     then(std::move(r));
                     settle(self);
                   }});
  });
}

// A function whose call, from any thread, runs `then(value)` in the actor (exactly once: the
// callers are HTTP client callbacks and sibling replies).
template <class T, class Actor, class Then>
std::function<void(T)> in_actor(Actor* self, Then then) {
  auto me = caf::actor_cast<caf::actor>(self);
  self->state.pending_io++;
  return [me, self, then = std::move(then)](T v) mutable {
    caf::anon_send(me, resume_atom::value, continuation{[self, then, v = std::move(v)]() mutable {
                     self->state.pending_io--;
                     then(std::move(v));
                     settle(self);
                   }});
  };
}

// Requests that arrive before the actor's state is loaded: each waits with the way to fail it.
using waiting_list =
    std::deque<std::pair<continuation, std::function<void(const domain::failure&)>>>;

// Runs `k` now once the actor's state is loaded; else queues it and starts the actor's own
// `load(self)` (which ends with release_waiting).
template <class Actor>
void when_loaded(Actor* self, std::function<void(const domain::failure&)> fail, continuation k) {
  auto& st = self->state;
  if (st.loaded) return k();
  st.waiting.emplace_back(std::move(k), std::move(fail));
  load(self);
}

// The load ended: runs what waited, in order, or fails it with `error`.
inline void release_waiting(waiting_list& waiting, const domain::failure* error) {
  auto released = std::move(waiting);
  waiting.clear();
  for (auto& [k, fail] : released) {
    if (error)
      fail(*error);
    else
      k();
  }
}

// Runs the requests a record actor holds (each with `k` and `fail`), in order, while `ready`
// admits the first; with `error`, fails the ones it refuses instead (a load or an id
// reservation failed). Returns the first request still held, or null.
template <class Held, class Ready>
const Held* run_held(std::deque<Held>& held, Ready ready, const domain::failure* error) {
  while (!held.empty()) {
    auto& h = held.front();
    if (ready(h)) {
      auto k = std::move(h.k);
      held.pop_front();
      k();
    } else if (error) {
      auto f = std::move(h.fail);
      held.pop_front();
      f(*error);
    } else {
      return &held.front();
    }
  }
  return nullptr;
}

// Work that runs one step at a time inside an actor (conversation changes, an area's writes):
// each step calls done() however it ends, and the next queued step starts then.
class one_at_a_time {
public:
  void run(continuation k) {
    if (busy_) {
      queue_.push_back(std::move(k));
      return;
    }
    busy_ = true;
    k();
  }
  void done() {
    if (queue_.empty()) {
      busy_ = false;
      return;
    }
    auto k = std::move(queue_.front());
    queue_.pop_front();
    k();
  }
  bool busy() const { return busy_; }

private:
  bool busy_ = false;
  std::deque<continuation> queue_;
};

template <class T>
std::function<void(const domain::failure&)> fail_with(callback<T> reply) {
  return [reply](const domain::failure& f) { reply(f); };
}

} // namespace crm::actors
