// How many sends of one channel are in flight at once (docs/channels.md "Pace"): a queue of
// thousands of messages (a campaign, a restart that finds them queued) drains through a few
// connections at a time, at the provider's pace, instead of opening one connection a message.
// The channel actor owns one; pure, so a unit test reaches its rules.
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>

namespace crm::domain {

class send_window {
public:
  explicit send_window(std::size_t per_channel) : limit_(per_channel < 1 ? 1 : per_channel) {}

  // True: `message` may be sent now (it counts as in flight on `channel`); false: it waits,
  // in arrival order, for one of the channel's sends to finish.
  bool admit(std::int64_t channel, std::int64_t message);
  // A send of `channel` finished (sent, failed, queued for later or given up): the message that
  // waited longest on the channel, now in flight in its place, if any.
  std::optional<std::int64_t> finish(std::int64_t channel);
  // Forgets every waiting message (the actor stops: they are queued in Postgres and resume at
  // the next load).
  void clear();

  std::size_t in_flight(std::int64_t channel) const;
  std::size_t waiting(std::int64_t channel) const;
  std::size_t limit() const { return limit_; }

private:
  struct lane {
    std::size_t in_flight = 0;
    std::deque<std::int64_t> waiting;
  };
  std::size_t limit_;
  std::map<std::int64_t, lane> lanes_;
};

} // namespace crm::domain
