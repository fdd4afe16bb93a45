#include "actors/meters.hpp"

#include <initializer_list>
#include <utility>

namespace crm::actors {
namespace {

std::mutex& meters_mutex() {
  static std::mutex m;
  return m;
}
std::deque<actor_meter>& all_meters() {
  static std::deque<actor_meter> all; // deque: references stay valid as it grows
  return all;
}

} // namespace

automation_meter& automation_counts() {
  static automation_meter m;
  return m;
}

ai_meter& ai_counts() {
  static ai_meter m;
  return m;
}

commit_meter& group_commits() {
  static commit_meter m;
  return m;
}

namespace {
std::mutex incidents_mutex;
std::deque<incident> incidents;
} // namespace

void note_incident(incident i) {
  std::lock_guard lock(incidents_mutex);
  incidents.push_back(std::move(i));
  while (incidents.size() > incidents_kept) incidents.pop_front();
}

std::deque<incident> recent_incidents() {
  std::lock_guard lock(incidents_mutex);
  return incidents;
}

actor_meter& meter(const std::string& actor_type) {
  std::lock_guard<std::mutex> lock(meters_mutex());
  for (auto& m : all_meters())
    if (m.name == actor_type) return m;
  return all_meters().emplace_back(actor_type);
}

inbox_meter& inbox_counts() {
  static inbox_meter m;
  return m;
}

void inbox_meter::histogram::observe(std::int64_t us) {
  if (us < 0) us = 0;
  const double seconds = static_cast<double>(us) / 1e6;
  std::size_t b = 0;
  while (b < bounds.size() && seconds > bounds[b]) ++b;
  buckets[b]++;
  micros += static_cast<std::uint64_t>(us);
}

void write_actor_metrics(std::string& out) {
  std::lock_guard<std::mutex> lock(meters_mutex());
  out += "# HELP carecrm_actor_messages_total Messages handled, per actor type.\n"
         "# TYPE carecrm_actor_messages_total counter\n";
  for (auto& m : all_meters())
    out += "carecrm_actor_messages_total{actor=\"" + m.name + "\"} " +
           std::to_string(m.messages.load()) + "\n";
  out += "# HELP carecrm_actor_mailbox_depth Messages waiting, summed over live actors.\n"
         "# TYPE carecrm_actor_mailbox_depth gauge\n";
  for (auto& m : all_meters())
    out += "carecrm_actor_mailbox_depth{actor=\"" + m.name + "\"} " +
           std::to_string(m.mailbox.load()) + "\n";
  out += "# HELP carecrm_actor_processing_seconds_total Time spent handling messages.\n"
         "# TYPE carecrm_actor_processing_seconds_total counter\n";
  for (auto& m : all_meters())
    out += "carecrm_actor_processing_seconds_total{actor=\"" + m.name + "\"} " +
           std::to_string(static_cast<double>(m.nanos.load()) / 1e9) + "\n";
  out += "# HELP carecrm_actor_restarts_total Actors that failed and were restarted.\n"
         "# TYPE carecrm_actor_restarts_total counter\n";
  for (auto& m : all_meters())
    out += "carecrm_actor_restarts_total{actor=\"" + m.name + "\"} " +
           std::to_string(m.restarts.load()) + "\n";
  auto& gc = group_commits();
  out +=
      "# HELP carecrm_group_commit_transactions_total Transactions that committed batches of"
      " record actors (of one or more tenants).\n# TYPE carecrm_group_commit_transactions_total"
      " counter\ncarecrm_group_commit_transactions_total " +
      std::to_string(gc.transactions.load()) +
      "\n# HELP carecrm_group_commit_batches_total Batches committed by record actors.\n"
      "# TYPE carecrm_group_commit_batches_total counter\ncarecrm_group_commit_batches_total " +
      std::to_string(gc.batches.load()) +
      "\n# HELP carecrm_group_commit_writes_total Writes carried by those batches.\n"
      "# TYPE carecrm_group_commit_writes_total counter\ncarecrm_group_commit_writes_total " +
      std::to_string(gc.writes.load()) +
      "\n# HELP carecrm_group_commit_failures_total Batches that failed to commit.\n"
      "# TYPE carecrm_group_commit_failures_total counter\ncarecrm_group_commit_failures_total " +
      std::to_string(gc.failures.load()) + "\n";
  gc.latency.write(
      out, "carecrm_group_commit_seconds",
      "Group-commit transactions that committed, from their first statement to COMMIT.");
  auto& am = automation_counts();
  auto counter = [&out](const char* name, const char* help, const char* label,
                        std::initializer_list<std::pair<const char*, std::uint64_t>> values) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n";
    for (auto& [v, n] : values)
      out += std::string(name) + "{" + label + "=\"" + v + "\"} " + std::to_string(n) + "\n";
  };
  counter("carecrm_workflow_runs_total", "Workflow runs finished, by outcome.", "status",
          {{"succeeded", am.runs_succeeded.load()}, {"failed", am.runs_failed.load()}});
  counter("carecrm_webhook_attempts_total", "Outbound webhook delivery attempts, by outcome.",
          "result",
          {{"delivered", am.deliveries_delivered.load()}, {"failed", am.deliveries_failed.load()}});
  out += "# HELP carecrm_webhook_deliveries_given_up_total Deliveries failed for good (retry "
         "window over, or the receiver answered 410).\n"
         "# TYPE carecrm_webhook_deliveries_given_up_total counter\n"
         "carecrm_webhook_deliveries_given_up_total " +
         std::to_string(am.deliveries_given_up.load()) + "\n";
  counter("carecrm_channel_messages_total", "Channel messages, by direction and outcome.", "status",
          {{"received", am.messages_received.load()},
           {"sent", am.messages_sent.load()},
           {"failed", am.messages_failed.load()}});
  auto& ai = ai_counts();
  const char* providers[] = {"builtin", "openai_compatible"};
  const char* intents[] = {"greeting",  "faq",      "booking", "billing", "results",
                           "complaint", "clinical", "urgent",  "other"};
  const char* reasons[] = {"none",      "urgent",    "clinical",      "keyword",
                           "complaint", "no_answer", "provider_error"};
  out += "# HELP carecrm_ai_replies_total AI agent decisions on messages, by provider and intent.\n"
         "# TYPE carecrm_ai_replies_total counter\n";
  for (std::size_t p = 0; p < ai_meter::providers; ++p)
    for (std::size_t i = 0; i < ai_meter::intents; ++i)
      out += std::string("carecrm_ai_replies_total{provider=\"") + providers[p] + "\",intent=\"" +
             intents[i] + "\"} " + std::to_string(ai.replies[p][i].load()) + "\n";
  out += "# HELP carecrm_ai_handoffs_total Conversations AI agents handed to a person, by reason.\n"
         "# TYPE carecrm_ai_handoffs_total counter\n";
  for (std::size_t r = 1; r < ai_meter::reasons; ++r)
    out += std::string("carecrm_ai_handoffs_total{reason=\"") + reasons[r] + "\"} " +
           std::to_string(ai.handoffs[r].load()) + "\n";
  out += "# HELP carecrm_ai_provider_requests_total Calls to model providers, by outcome.\n"
         "# TYPE carecrm_ai_provider_requests_total counter\n";
  for (std::size_t p = 1; p < ai_meter::providers; ++p)
    out += std::string("carecrm_ai_provider_requests_total{provider=\"") + providers[p] +
           "\",outcome=\"ok\"} " + std::to_string(ai.calls_ok[p].load()) + "\n" +
           "carecrm_ai_provider_requests_total{provider=\"" + providers[p] +
           "\",outcome=\"error\"} " + std::to_string(ai.calls_failed[p].load()) + "\n";
  out += "# HELP carecrm_ai_provider_seconds Time to an agent's answer, by provider.\n"
         "# TYPE carecrm_ai_provider_seconds summary\n";
  for (std::size_t p = 0; p < ai_meter::providers; ++p)
    out += std::string("carecrm_ai_provider_seconds_sum{provider=\"") + providers[p] + "\"} " +
           std::to_string(static_cast<double>(ai.latency_micros[p].load()) / 1e6) + "\n" +
           "carecrm_ai_provider_seconds_count{provider=\"" + providers[p] + "\"} " +
           std::to_string(ai.latency_count[p].load()) + "\n";
  auto& inbox = inbox_counts();
  const char* types[] = {"api", "telegram", "whatsapp", "sms", "email"};
  out += "# HELP carecrm_conversations_opened_total Conversations opened by a contact's message,"
         " by channel type.\n# TYPE carecrm_conversations_opened_total counter\n";
  for (std::size_t t = 0; t < inbox_meter::types; ++t)
    out += std::string("carecrm_conversations_opened_total{channel_type=\"") + types[t] + "\"} " +
           std::to_string(inbox.opened[t].load()) + "\n";
  auto histograms = [&](const char* name, const char* help, const inbox_meter::histogram* h) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " histogram\n";
    for (std::size_t t = 0; t < inbox_meter::types; ++t) {
      std::uint64_t below = 0;
      auto label = std::string("channel_type=\"") + types[t] + "\"";
      for (std::size_t b = 0; b <= inbox_meter::bounds.size(); ++b) {
        below += h[t].buckets[b].load();
        auto le = b < inbox_meter::bounds.size()
                      ? std::to_string(static_cast<std::int64_t>(inbox_meter::bounds[b]))
                      : std::string("+Inf");
        out += std::string(name) + "_bucket{" + label + ",le=\"" + le + "\"} " +
               std::to_string(below) + "\n";
      }
      out += std::string(name) + "_sum{" + label + "} " +
             std::to_string(static_cast<double>(h[t].micros.load()) / 1e6) + "\n" + name +
             "_count{" + label + "} " + std::to_string(below) + "\n";
    }
  };
  histograms("carecrm_conversation_first_response_seconds",
             "Time from a conversation's opening to a person's first reply, by channel type.",
             inbox.first_response);
  histograms("carecrm_conversation_resolution_seconds",
             "Time from a conversation's opening to its closing, by channel type.",
             inbox.resolution);
  out += "# HELP carecrm_actor_instances Live actors, per type.\n"
         "# TYPE carecrm_actor_instances gauge\n";
  for (auto& m : all_meters())
    out += "carecrm_actor_instances{actor=\"" + m.name + "\"} " +
           std::to_string(m.instances.load()) + "\n";
}

} // namespace crm::actors
