// The reply channel from an actor back to whoever asked (an HTTP exchange): a function called
// exactly once with the outcome. If every copy is destroyed unanswered — the actor stopped or
// crashed with the request in its mailbox — it answers 503 itself, so no client ever hangs.
// It also keeps who asked and from where (the audit context installed while it was made), so
// the actor that carries out a change can audit it in the change's own transaction.
#pragma once
#include "domain/audit.hpp"
#include "domain/failure.hpp"

#include <atomic>
#include <functional>
#include <memory>

namespace crm::actors {

template <class T>
class callback {
public:
  using fn_type = std::function<void(domain::outcome<T>)>;

  callback() = default;
  explicit callback(fn_type fn) : state_(std::make_shared<state>(std::move(fn))) {}

  void operator()(domain::outcome<T> v) const {
    if (state_) state_->fire(std::move(v));
  }

  // Who asked (null: carecrm itself, or no request).
  const domain::audit_context* who() const { return state_ ? state_->who.get() : nullptr; }

  // A reply that answers through this one, then calls `after()` (also when it is dropped
  // unanswered and answers 503 itself, on whichever thread drops it). It keeps who asked.
  template <class F>
  callback and_then(F after) const {
    callback out([first = *this, after = std::move(after)](domain::outcome<T> v) mutable {
      first(std::move(v));
      after();
    });
    if (state_) out.state_->who = state_->who;
    return out;
  }

private:
  struct state {
    explicit state(fn_type f) : fn(std::move(f)) {}
    ~state() {
      if (!fired.exchange(true) && fn)
        fn(domain::failure::of(domain::errc::service_unavailable,
                               "the service stopped before answering; retry"));
    }
    void fire(domain::outcome<T> v) {
      if (!fired.exchange(true)) fn(std::move(v));
    }
    fn_type fn;
    std::atomic<bool> fired{false};
    domain::audit_context_ptr who = domain::current_audit_context();
  };
  std::shared_ptr<state> state_;
};

} // namespace crm::actors
