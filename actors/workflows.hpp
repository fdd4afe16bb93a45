// Workflows, their runs, and outbound webhook subscriptions of a tenant (contract §7,
// docs/automation.md), owned by the tenant's workflow actor. It takes record events from the
// outbox, starts and steps runs (each step's outcome written before the next starts), fires
// schedules, and delivers webhooks with retries. Nothing here blocks: database work runs on the
// pool and HTTP on the client's thread, and their results come back as messages.
#pragma once
#include "actors/callback.hpp"
#include "actors/contacts.hpp"
#include "actors/deals.hpp"
#include "domain/automation.hpp"

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace crm::net {
class http_client;
class smtp_client;
} // namespace crm::net

namespace crm::actors {

class runtime;

struct automation_options {
  net::http_client* client = nullptr; // outbound deliveries and http_request actions
  net::smtp_client* smtp = nullptr;   // e-mail channels' sends
  std::string public_url;             // base of webhook_url
  double retry_base = 5;              // seconds before the first retry
  double retry_max = 3600;            // longest delay between attempts
  double retry_window = 86400;        // keep retrying for at least this long
  // How long a WhatsApp or SMS message whose send's outcome was lost waits for the provider's
  // report naming it before it is sent again (domain::after_unknown_send).
  double report_wait = 600;
  double poll_interval = 1; // sweeper period (seconds)
  double ai_timeout = 20;   // one call to an AI agent's model provider (seconds)
  // Reads an update_contact action's `fields` with the rules of PATCH /contacts/{id} (the
  // HTTP layer's reader: the actors do not parse request bodies themselves).
  std::function<contact_fields(const boost::json::object&, std::vector<domain::issue>&)>
      read_contact_patch;
  // Reads a create_deal (`move` false) or move_deal (`move` true) action's fields with the
  // rules of POST /deals and POST /deals/{id}/move (issues in the result's `issues`).
  std::function<deal_fields(const boost::json::object&, bool move)> read_deal_fields;
};

// Installs the options and starts the sweeper, which wakes idle tenants with due work (outbox
// events, runs, deliveries, schedules), including everything left unfinished by a crash.
void start_automation(runtime& rt, automation_options opts);

// Workflows. Bodies are validated by the HTTP layer except what depends on stored state
// (trigger_config against the trigger type after a partial update). Replies carry JSON.
struct workflow_patch {
  std::optional<std::string> name;
  std::optional<std::optional<std::string>> description;
  std::optional<domain::trigger_type> trigger;
  std::optional<boost::json::value> trigger_config; // validated by the actor
  std::optional<std::vector<domain::condition>> conditions;
  std::optional<std::vector<domain::action>> actions;
  std::optional<bool> is_active;
  std::optional<std::optional<std::string>> webhook_secret;
};

struct workflow_filter {
  std::optional<domain::trigger_type> trigger;
  std::optional<bool> is_active;
  int page = 1;
  int per_page = 20;
};

void list_workflows(runtime& rt, std::int64_t tenant, workflow_filter f,
                    callback<std::string> reply);
void get_workflow(runtime& rt, std::int64_t tenant, std::int64_t id, callback<std::string> reply);
void create_workflow(runtime& rt, std::int64_t tenant, domain::workflow w,
                     callback<std::string> reply);
void update_workflow(runtime& rt, std::int64_t tenant, std::int64_t id, workflow_patch p,
                     callback<std::string> reply);
void delete_workflow(runtime& rt, std::int64_t tenant, std::int64_t id,
                     callback<domain::done> reply);
void webhook_info(runtime& rt, std::int64_t tenant, std::int64_t id, callback<std::string> reply);
// POST /workflows/{id}/run: the run's id once it is stored.
void run_workflow(runtime& rt, std::int64_t tenant, std::int64_t id, boost::json::value payload,
                  callback<std::int64_t> reply);
void list_runs(runtime& rt, std::int64_t tenant, std::int64_t workflow_id,
               std::optional<domain::run_status> status, int page, int per_page,
               callback<std::string> reply);
void get_run(runtime& rt, std::int64_t tenant, std::int64_t run_id, callback<std::string> reply);
// A contact merged into another (POST /contacts/{id}/merge, after its COMMIT): the open runs
// whose trigger payload names it act on the survivor from their next step.
void move_contact_runs(runtime& rt, std::int64_t tenant, std::int64_t from, std::int64_t into);

// POST /webhooks/{workflow_id}: the tenant is the workflow's (looked up by the caller).
struct webhook_call {
  std::string body;
  domain::webhook_credentials creds;
  int depth = 0; // carecrm-chain-depth
};
void receive_webhook(runtime& rt, std::int64_t tenant, std::int64_t workflow_id, webhook_call call,
                     callback<std::int64_t> reply);

// Outbound webhook subscriptions.
struct subscription_patch {
  std::optional<std::string> url;
  std::optional<std::vector<std::string>> events;
  std::optional<std::optional<std::string>> description;
  std::optional<std::string> secret;
  std::optional<bool> is_active;
};
void list_subscriptions(runtime& rt, std::int64_t tenant, int page, int per_page,
                        callback<std::string> reply);
void get_subscription(runtime& rt, std::int64_t tenant, std::int64_t id,
                      callback<std::string> reply);
// `generated_secret`: returned once in the body when the client sent none.
void create_subscription(runtime& rt, std::int64_t tenant, domain::webhook_subscription s,
                         bool generated_secret, callback<std::string> reply);
void update_subscription(runtime& rt, std::int64_t tenant, std::int64_t id, subscription_patch p,
                         callback<std::string> reply);
void delete_subscription(runtime& rt, std::int64_t tenant, std::int64_t id,
                         callback<domain::done> reply);
void list_deliveries(runtime& rt, std::int64_t tenant, std::int64_t subscription_id,
                     std::optional<std::string> status, int page, int per_page,
                     callback<std::string> reply);
void redeliver(runtime& rt, std::int64_t tenant, std::int64_t subscription_id,
               std::int64_t delivery_id, callback<domain::done> reply);

} // namespace crm::actors
