// The base of the actor tests: an actor system under CAF's test_coordinator, which runs each
// message on the test's thread when the test says so (sched.run(), sched.run_once()), and one
// actor under test that is shut down with the fixture.
#pragma once
#include <caf/all.hpp>

#include <gtest/gtest.h>

namespace crm::actors {

class coordinated : public ::testing::Test {
protected:
  coordinated()
      : sys(testing(cfg)), sched(dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler())) {
  }
  ~coordinated() override {
    caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
    sched.run();
  }

  // The state of the actor under test.
  template <class Actor>
  auto& state_of() {
    return static_cast<Actor*>(caf::actor_cast<caf::abstract_actor*>(actor))->state;
  }

  caf::actor_system_config cfg; // before sys: sys is made from it
  caf::actor_system sys;
  caf::scheduler::test_coordinator& sched;
  caf::actor actor;

private:
  static caf::actor_system_config& testing(caf::actor_system_config& c) {
    c.set("scheduler.policy", caf::atom("testing"));
    c.set("logger.verbosity", caf::atom("quiet"));
    return c;
  }
};

} // namespace crm::actors
