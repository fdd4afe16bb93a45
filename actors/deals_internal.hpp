// The deals actor's parts (docs/pipeline.md), shared by its files: the actor with its indexes,
// readiness, events, staging, board order and behaviour (deals_actor.cpp), the deal rules and
// writes (deals_writes.cpp), and pipelines with the reads (deals_reads.cpp). Internal to actors/
// (CAF).
#pragma once
#include "actors/deals.hpp"

#include "actors/async_io.hpp"
#include "actors/group_batch.hpp"
#include "actors/system.hpp"
#include "actors/tasks.hpp"
#include "domain/clock.hpp"
#include "domain/custom_field.hpp"
#include "domain/json_parse.hpp"
#include "domain/json_writer.hpp"
#include "domain/page_json.hpp"
#include "domain/validation.hpp"
#include "persistence/deal_repo.hpp"
#include "persistence/field_repo.hpp"
#include "persistence/group_committer.hpp"

#include <boost/json.hpp>

#include <deque>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace caf {
template <>
struct allowed_unsafe_message_type<crm::actors::deal_fields> : std::true_type {};
template <>
struct allowed_unsafe_message_type<std::vector<crm::actors::deal_fields>> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::deal_actor_ref> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::idempotency> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::pipeline_input> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::pipeline_patch> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::stage_patch> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::board_query> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::summary_query> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::domain::deal_query> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::domain::stage> : std::true_type {};
template <>
struct allowed_unsafe_message_type<std::optional<int>> : std::true_type {};
template <>
struct allowed_unsafe_message_type<std::optional<std::int64_t>> : std::true_type {};
} // namespace caf

namespace crm::actors::deals_impl {

namespace json = boost::json;
using domain::errc;
using domain::failure;
using domain::money_sum;
using domain::stage_kind;

using pl_list_atom = caf::atom_constant<caf::atom("pllist")>;
using pl_get_atom = caf::atom_constant<caf::atom("plget")>;
using pl_new_atom = caf::atom_constant<caf::atom("plnew")>;
using pl_put_atom = caf::atom_constant<caf::atom("plput")>;
using pl_del_atom = caf::atom_constant<caf::atom("pldel")>;
using st_new_atom = caf::atom_constant<caf::atom("stnew")>;
using st_get_atom = caf::atom_constant<caf::atom("stget")>;
using st_put_atom = caf::atom_constant<caf::atom("stput")>;
using st_del_atom = caf::atom_constant<caf::atom("stdel")>;
using board_atom = caf::atom_constant<caf::atom("board")>;
using summary_atom = caf::atom_constant<caf::atom("summary")>;
using d_new_atom = caf::atom_constant<caf::atom("dnew")>;
using d_bulk_atom = caf::atom_constant<caf::atom("dbulk")>;
using d_get_atom = caf::atom_constant<caf::atom("dget")>;
using d_put_atom = caf::atom_constant<caf::atom("dput")>;
using d_del_atom = caf::atom_constant<caf::atom("ddel")>;
using d_list_atom = caf::atom_constant<caf::atom("dlist")>;
using d_contact_atom = caf::atom_constant<caf::atom("dcontact")>;
using d_export_atom = caf::atom_constant<caf::atom("dexport")>;
using d_hist_atom = caf::atom_constant<caf::atom("dhist")>;
using gone_atom = caf::atom_constant<caf::atom("gone")>;

constexpr int id_block = 256;
constexpr std::size_t max_batch = 2000;
constexpr std::int64_t rank_gap = 1 << 20;
constexpr std::size_t max_custom_fields_bytes = 16 * 1024;
constexpr std::int64_t idempotency_window = persistence::idempotency_window_micros;

struct batch {
  std::uint64_t seq = 0;
  persistence::deal_batch sql;
  std::unordered_set<std::int64_t> in_group; // deals in the current statement group
  std::vector<continuation> on_commit;
  std::vector<std::function<void(const failure&)>> on_fail;
  std::size_t writes = 0;
};

enum class need : std::uint8_t { read, write, exclusive };

struct held {
  need n;
  std::size_t ids = 0;
  continuation k;
  std::function<void(const failure&)> fail;
};

struct stage_totals {
  std::int64_t count = 0;
  std::map<std::string, money_sum> sums; // cents per currency
};

struct deals_state {
  tenant_env env;
  bool loaded = false;
  bool loading = false;
  bool stopping = false;
  bool exclusive_busy = false; // a pipeline change is committing

  // Committed state.
  std::map<std::int64_t, domain::pipeline> pipelines;
  std::unordered_map<std::int64_t, std::int64_t> stage_pipeline; // stage → pipeline
  std::unordered_map<std::int64_t, domain::deal> deals;
  std::unordered_map<std::int64_t, std::set<std::pair<std::int64_t, std::int64_t>>> board;
  std::unordered_map<std::int64_t, stage_totals> totals;
  std::unordered_map<std::int64_t, std::set<std::int64_t>> by_contact;
  std::unordered_map<std::int64_t, std::int64_t> next_rank; // per stage, only grows
  // Rendered boards by query, dropped by every change to a deal or a pipeline: a board shown to
  // many users between two changes is rendered once.
  std::unordered_map<std::string, std::string> board_cache;
  std::unordered_map<std::string, persistence::idempotency_record> keys;
  std::int64_t keys_pruned_at = 0; // persistence::forget_expired_keys
  domain::field_definitions defs;
  std::string currency = "USD";
  bool event_listeners = true;
  bool listeners_told_while_loading = false;
  // Contacts and companies deleted since the actor started: a deal staged with one of them is
  // written without it (the statement re-reads them) and applied without it.
  std::unordered_set<std::int64_t> gone_contacts, gone_companies;
  // Contacts merged into another (duplicate → survivor): a deal committed later with the
  // duplicate names the survivor, as its row does.
  std::unordered_map<std::int64_t, std::int64_t> moved_contacts;

  // Projection of staged and in-flight writes over the committed state.
  struct pending {
    std::uint64_t seq;
    std::optional<domain::deal> value; // nothing: deleted
  };
  std::unordered_map<std::int64_t, pending> p_deals;
  std::unordered_map<std::string, std::pair<std::uint64_t, std::string>> p_keys;

  std::deque<std::int64_t> ids;
  bool reserving = false;
  std::uint64_t next_seq = 1;
  batch open;
  std::optional<batch> in_flight;
  std::deque<held> waiting;
  int pending_io = 0;

  std::int64_t published_mailbox = 0;
  actor_meter* meter = nullptr;
  static inline const char* name = "deals";
};

using deals_actor = caf::stateful_actor<deals_state>;

struct built {
  domain::deal next;
  std::vector<domain::issue> issues;
  bool stage_changed = false;
};

enum class key_state : std::uint8_t { fresh, replay, pending, conflict };

// The reference issues of each item of a write (contact, company, owner not the tenant's).
using ref_issues = std::vector<std::vector<domain::issue>>;

// ---- shared by the actor's files ---------------------------------------------------------------

// deals_actor.cpp
bool idle_pipeline(const deals_state& st);
void settle(deals_actor* self);
failure missing(const char* what);
void index_add(deals_state& st, const domain::deal& d);
void index_remove(deals_state& st, const domain::deal& d);
void put_committed(deals_state& st, domain::deal d);
void erase_committed(deals_state& st, std::int64_t id);
void keep_pipeline(deals_state& st, domain::pipeline p);
const domain::pipeline* default_pipeline(const deals_state& st);
const domain::deal* projected(const deals_state& st, std::int64_t id);
void load(deals_actor* self);
void reload(deals_actor* self);
void read_snapshot(deals_actor* self);
void reserve(deals_actor* self);
bool ready(const deals_state& st, const held& h);
void when_ready(deals_actor* self, need n, std::function<void(const failure&)> fail, continuation k,
                std::size_t ids = 0);
void drain(deals_actor* self, const failure* error = nullptr);
std::string event_payload(const deals_state& st, const domain::deal& d, std::string_view extra);
std::vector<std::string> changed_fields(const domain::deal& a, const domain::deal& b);
void record_change(const deals_state& st, persistence::deal_batch& b, const domain::deal* before,
                   const domain::deal& after, const deal_actor_ref& who, bool history = true);
void audit_change(deals_state& st, const domain::audit_context* who, std::optional<std::int64_t> id,
                  const char* action, std::vector<std::string> fields, int status,
                  std::vector<std::int64_t> ids = {});
void stage_deal(deals_actor* self, const domain::deal* before, domain::deal after,
                const deal_actor_ref& who, bool history = true);
void stage_write(deals_actor* self, continuation applied,
                 std::function<void(const failure&)> failed);
void apply_batch(deals_state& st, const persistence::deal_batch& sql);
void flush(deals_actor* self);
std::vector<std::pair<std::int64_t, std::int64_t>> projected_order(const deals_state& st,
                                                                   std::int64_t stage);
std::int64_t take_last_rank(deals_state& st, std::int64_t stage);
std::int64_t rank_at(deals_actor* self, std::int64_t stage, std::int64_t position, std::int64_t id);

// deals_writes.cpp
std::vector<domain::loc_part> at(std::vector<domain::loc_part> l, std::string key);
built build_deal(deals_state& st, const domain::deal* before, const deal_fields& f);
void check_refs(deals_actor* self, const std::vector<const deal_fields*>& items,
                std::function<void(domain::outcome<ref_issues>)> k);
std::string key_of(const idempotency& k);
bool answer_known_key(deals_actor* self, const idempotency& key,
                      const callback<stored_response>& reply);
void stage_key(deals_state& st, const idempotency& key, int status, const std::string& body);
std::optional<domain::deal> stage_create(deals_actor* self, const deal_fields& f,
                                         const deal_actor_ref& who,
                                         std::vector<domain::issue>& issues);
void do_create(deals_actor* self, deal_fields f, deal_actor_ref who, idempotency key,
               callback<stored_response> reply);
void do_bulk(deals_actor* self, std::vector<deal_fields> items, deal_actor_ref who, idempotency key,
             std::int64_t first, callback<stored_response> reply);
void do_update(deals_actor* self, std::int64_t id, deal_fields f, deal_actor_ref who,
               callback<domain::deal> reply);
void do_delete(deals_actor* self, std::int64_t id, deal_actor_ref who,
               callback<domain::done> reply);
void do_gone(deals_actor* self, bool contact, std::int64_t id);
void do_contact_moved(deals_actor* self, std::int64_t from, std::int64_t into);

// deals_reads.cpp
void commit_change(deals_actor* self, persistence::pipeline_change ch,
                   std::function<void(domain::outcome<std::vector<domain::pipeline>>)> done);
std::int64_t deals_in_stage(const deals_state& st, std::int64_t stage);
std::int64_t deals_in_pipeline(const deals_state& st, const domain::pipeline& p);
void save_pipeline(deals_actor* self, domain::pipeline next, callback<std::string> reply,
                   std::function<std::string(const domain::pipeline&)> render);
failure conflict(std::string why);
std::string render_deal_page(const deals_state& st, const domain::deal_query& q, int page,
                             int per_page, const std::set<std::int64_t>* only = nullptr);
void write_sums(domain::json_writer& w, const std::map<std::string, money_sum>& sums);
std::string render_board(const deals_state& st, const domain::pipeline& p, const board_query& q);
std::string render_summary(const deals_state& st, const domain::pipeline& p,
                           const summary_query& q);
caf::behavior deals_behavior(deals_actor* self, tenant_env env);

template <class T>
void reply_missing(deals_actor* self, persistence::pipeline_record kind, std::int64_t id,
                   const char* what, callback<T> reply) {
  reply_not_held(
      self->state.env,
      [kind, id](persistence::pg_conn& c) { return persistence::tenant_of(c, kind, id); },
      missing(what), std::move(reply));
}

template <class T>
bool find_pipeline(deals_actor* self, std::int64_t id, const callback<T>& reply,
                   domain::pipeline** out) {
  auto it = self->state.pipelines.find(id);
  if (it == self->state.pipelines.end()) {
    reply_missing(self, persistence::pipeline_record::pipeline, id, "pipeline", reply);
    return false;
  }
  *out = &it->second;
  return true;
}

// A stage of pipeline `p`; a stage of another pipeline of the tenant is 404 too.
template <class T>
const domain::stage* find_stage_of(deals_actor* self, const domain::pipeline& p,
                                   std::int64_t stage_id, const callback<T>& reply) {
  if (auto s = p.find(stage_id)) return s;
  if (self->state.stage_pipeline.count(stage_id))
    reply(missing("stage"));
  else
    reply_missing(self, persistence::pipeline_record::stage, stage_id, "stage", reply);
  return nullptr;
}

} // namespace crm::actors::deals_impl
