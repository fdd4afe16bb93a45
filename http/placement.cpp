#include "http/placement.hpp"

#include "actors/cluster.hpp"
#include "actors/runtime.hpp"
#include "cluster/membership.hpp"
#include "domain/audit.hpp"
#include "http/services.hpp"
#include "persistence/fence.hpp"
#include "persistence/log.hpp"

#include <boost/json.hpp>

#include <algorithm>

namespace crm::http {
namespace {

// A forwarded request waits at most this long for the owner (a model provider's answer to an
// AI agent included), then is answered 503 here.
constexpr std::chrono::seconds forward_deadline{30};
constexpr const char* not_owner_header = "X-Carecrm-Not-Owner";
// On a forwarded request: the node that forwarded it (names lower-cased, as requests keep them).
constexpr const char* from_node_header = "x-carecrm-from-node";
// Between two looks at who owns a tenant while a request is held.
constexpr std::chrono::milliseconds hold_step{150};

bool safe(verb v) {
  return v == verb::get || v == verb::head || v == verb::options;
}

} // namespace

void within_tenant(services& s, const exchange_ptr& ex, std::int64_t tenant,
                   std::function<void()> here) {
  if (!s.placement) return here();
  s.placement->route(ex, tenant, ex->forwarded, here,
                     [here, who = domain::current_audit_context()] {
                       domain::audit_scope scope(who);
                       here();
                     });
}

tenant_placement::tenant_placement(cluster::membership& members, actors::runtime& rt)
    : members_(members), rt_(rt) {}

void tenant_placement::route(const exchange_ptr& ex, std::int64_t tenant, bool forwarded,
                             const std::function<void()>& here, std::function<void()> here_later) {
  auto& book = members_.book();
  if (book.holds(tenant)) {
    if (rebalancing_.load(std::memory_order_relaxed))
      demand_.note(tenant, forwarded ? ex->req.header(from_node_header).value_or("") : "");
    return here();
  }
  // Out of touch with Postgres for too long: this node may have been declared dead and its
  // tenants taken, so it serves none until a heartbeat succeeds again.
  if (!book.fresh()) return ex->fail(persistence::tenant_moving());
  auto until = clock::now() + hold_limit();
  if (!forwarded)
    if (auto owner = book.owner_elsewhere(tenant))
      if (auto n = members_.node(*owner); n && n->state == "live")
        return forward(ex, tenant, *n, until, std::move(here_later));
  acquire_then(ex, tenant, forwarded, until, std::move(here_later));
}

std::chrono::milliseconds tenant_placement::hold_limit() const {
  // Long enough to see a dead owner declared and its tenants taken over (dead-after plus a
  // heartbeat), short of a client's usual timeout.
  auto& o = members_.opts();
  auto ms = static_cast<std::int64_t>((o.dead_after + 4 * o.heartbeat_interval) * 1000);
  return std::chrono::milliseconds(std::clamp<std::int64_t>(ms, 1000, 15000));
}

void tenant_placement::hold(const exchange_ptr& ex, std::int64_t tenant, clock::time_point until,
                            std::function<void()> here_later, const domain::failure& why) {
  // The tenant is moving, its owner is dead but not yet declared so, or it could not be
  // reached: the request waits and asks again, until `until`; then the 503 goes out.
  if (clock::now() + hold_step >= until) return ex->fail(why);
  ++held_;
  // If the wait is dropped unrun (the node stops), the request is answered 503 all the same.
  struct answer_if_dropped {
    answer_if_dropped(exchange_ptr e, domain::failure w) : ex(std::move(e)), why(std::move(w)) {}
    answer_if_dropped(const answer_if_dropped&) = delete;
    answer_if_dropped& operator=(const answer_if_dropped&) = delete;
    ~answer_if_dropped() {
      if (!ran) ex->fail(why);
    }
    exchange_ptr ex;
    domain::failure why;
    bool ran = false;
  };
  auto guard = std::make_shared<answer_if_dropped>(ex, why);
  actors::after(rt_, hold_step, [this, guard, tenant, until, here_later = std::move(here_later)] {
    guard->ran = true;
    members_.book().forget(tenant);
    acquire_then(guard->ex, tenant, false, until, here_later);
  });
}

void tenant_placement::acquire_then(const exchange_ptr& ex, std::int64_t tenant, bool forwarded,
                                    clock::time_point until, std::function<void()> here_later) {
  members_.acquire(tenant, [this, ex, tenant, forwarded, until,
                            here_later = std::move(here_later)](cluster::owner_outcome r) mutable {
    if (!r) {
      if (forwarded || r.error().code != domain::errc::service_unavailable)
        return ex->fail(r.error());
      return hold(ex, tenant, until, std::move(here_later), r.error());
    }
    if (r->node == members_.book().node_id()) return here_later();
    if (forwarded) {
      ++not_owner_;
      auto res = error_response(persistence::tenant_moving());
      res.headers.emplace_back(not_owner_header, r->node);
      return ex->respond(std::move(res));
    }
    // Its owner has stopped beating but is not yet declared dead: wait for the takeover.
    if (!r->live)
      return hold(ex, tenant, until, std::move(here_later), persistence::tenant_moving());
    cluster::node_info n;
    n.id = r->node;
    n.actor_host = r->actor_host;
    n.actor_port = r->actor_port;
    n.state = "live";
    forward(ex, tenant, n, until, std::move(here_later));
  });
}

void tenant_placement::forward(const exchange_ptr& ex, std::int64_t tenant,
                               const cluster::node_info& to, clock::time_point until,
                               std::function<void()> here_later) {
  actors::forwarded_request req;
  req.method = std::string(to_string(ex->req.method));
  req.target = ex->req.target;
  req.headers.reserve(ex->req.headers.size() * 2 + 2);
  for (auto& [k, v] : ex->req.headers) {
    if (k == from_node_header) continue; // a client's: only this node's own is sent
    req.headers.push_back(k);
    req.headers.push_back(v);
  }
  req.headers.push_back(from_node_header);
  req.headers.push_back(members_.book().node_id());
  req.body = ex->req.body;
  req.remote = ex->req.remote;
  req.request_id = ex->req.request_id;
  actors::forward_to(rt_, to.actor_host, to.actor_port, std::move(req), forward_deadline,
                     [this, ex, tenant, until, here_later](actors::forwarded_response r) {
                       response res;
                       res.status = r.status;
                       res.content_type.clear();
                       bool again = false;
                       bool made_here = false; // by forward_to, not by the other node
                       for (std::size_t i = 0; i + 1 < r.headers.size(); i += 2) {
                         auto& k = r.headers[i];
                         if (k == "Content-Type") {
                           res.content_type = std::move(r.headers[i + 1]);
                         } else if (k == not_owner_header) {
                           again = true;
                         } else if (k == actors::forward_failed_header) {
                           made_here = true;
                           again = again || r.headers[i + 1] == "unsent" || safe(ex->req.method);
                         } else
                           res.headers.emplace_back(std::move(k), std::move(r.headers[i + 1]));
                       }
                       // The node this one believed the owner is not (a move, a takeover or a
                       // node that left meanwhile), or one the request never reached (or a
                       // read, which may be sent twice): ask Postgres again, until `until`, and
                       // answer what the owner it names answers. A write that may have reached
                       // the node is never sent again.
                       if (again) {
                         return hold(ex, tenant, until, here_later,
                                     domain::failure::of(domain::errc::service_unavailable,
                                                         "the node owning this tenant cannot "
                                                         "answer now; retry"));
                       }
                       // The owner audited the request it answered (its dispatch saw the
                       // answer); audited here too, each read would be in the trail twice. A
                       // request held and then run here (above), or answered here, keeps its
                       // audit here.
                       if (!made_here) ex->audit = nullptr;
                       res.body = std::move(r.body);
                       ex->respond(std::move(res));
                     });
}

bool tenant_placement::fresh() const {
  return members_.book().fresh();
}

void tenant_placement::start_rebalancing(std::chrono::milliseconds window) {
  window_ = window;
  if (rebalancing_.exchange(true)) return;
  actors::after(rt_, window_, [this] { rebalance_tick(); });
}

void tenant_placement::rebalance_tick() {
  auto& book = members_.book();
  // A node in its shutdown grace hands every tenant over when it leaves: it moves none now.
  if (members_.is_stopping()) return;
  const auto moves =
      demand_.end_window(rules_, clock::now(), [&book](std::int64_t t) { return book.holds(t); });
  for (const domain::demand_move& m : moves) {
    // Only to a live member that takes tenants (the move itself refuses any other).
    const auto n = members_.node(m.to);
    if (!n || n->state != "live" || n->stopping) continue;
    log_info("cluster: tenant {} moves to {}: {} of its {} requests in the last {} ms came "
             "through it",
             m.tenant, m.to, m.from_there, m.total, window_.count());
    members_.move_tenant(m.tenant, m.to, [this, m](domain::outcome<cluster::lease> l) {
      if (l)
        ++rebalanced_;
      else
        log_warn("cluster: tenant {} could not move to {}: {}", m.tenant, m.to, l.error().detail);
    });
  }
  actors::after(rt_, window_, [this] { rebalance_tick(); });
}

void tenant_placement::write_metrics(std::string& out) const {
  auto f = actors::forwarding(rt_);
  auto& m = members_;
  auto line = [&out](const char* name, const char* type, const char* help, auto value) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" +
           name + " " + std::to_string(value) + "\n";
  };
  line("carecrm_cluster_leases_held", "gauge", "Tenant leases this node holds.",
       m.book().held_count());
  line("carecrm_cluster_forwarded_total", "counter",
       "Requests forwarded to the owning node and answered by it.", f.forwarded);
  line("carecrm_cluster_forward_failures_total", "counter",
       "Forwarded requests answered 503 here (owner unreachable, gone or too slow).", f.failed);
  line("carecrm_cluster_forward_seconds_total", "counter",
       "Time the answered forwarded requests took, end to end.", f.seconds);
  line("carecrm_cluster_forwards_served_total", "counter",
       "Requests other nodes forwarded here and this node answered.", f.served);
  line("carecrm_cluster_forwards_resent_total", "counter",
       "Forwarded requests sent again on a new connection after their link dropped.", f.resent);
  line("carecrm_cluster_forwards_repeated_total", "counter",
       "Copies of a forwarded request sent here again, answered without running it twice.",
       f.repeated);
  line("carecrm_cluster_held_total", "counter",
       "Waits of a request for a moving tenant or a dead owner's takeover (150 ms each).",
       held_.load());
  line("carecrm_cluster_rebalance_moves_total", "counter",
       "Tenants this node handed to the node their requests came through (docs/cluster.md "
       "\"Balance\").",
       rebalanced_.load());
  line("carecrm_cluster_not_owner_total", "counter",
       "Forwarded requests this node answered as not the owner.", not_owner_.load());
  line("carecrm_cluster_heartbeats_total", "counter", "Heartbeats written.", m.heartbeats());
  line("carecrm_cluster_heartbeat_failures_total", "counter", "Heartbeats that failed.",
       m.heartbeat_failures());
  line("carecrm_cluster_nodes_declared_dead_total", "counter", "Nodes this node declared dead.",
       m.nodes_declared_dead());
  line("carecrm_cluster_leases_taken_over_total", "counter",
       "Leases of dead nodes this node handed to live ones.", m.leases_taken_over());
  line("carecrm_cluster_leases_lost_total", "counter",
       "Leases this node lost (moved away while it held them).", m.leases_lost());
  line("carecrm_cluster_acquisitions_total", "counter",
       "Tenant owners looked up or placed through Postgres.", m.acquisitions());
}

void tenant_placement::move(std::int64_t tenant, std::string to,
                            std::function<void(domain::outcome<std::string>)> done) {
  members_.move_tenant(
      tenant, to, [tenant, to, done = std::move(done)](domain::outcome<cluster::lease> l) {
        if (!l) return done(l.error());
        done(boost::json::serialize(boost::json::object{
            {"tenant_id", tenant}, {"to", to}, {"owner", l->node}, {"epoch", l->epoch}}));
      });
}

std::string tenant_placement::cluster_json() const {
  boost::json::object o;
  o["node"] = members_.book().node_id();
  o["fresh"] = members_.book().fresh();
  boost::json::array nodes;
  for (auto& n : members_.nodes()) {
    boost::json::object j;
    j["node_id"] = n.id;
    j["http_address"] = n.http_address;
    j["actor_address"] = n.actor_host + ":" + std::to_string(n.actor_port);
    // As `carecrm cluster status` says it: a live node in its shutdown grace is `stopping`.
    j["state"] = n.state == "live" && n.stopping ? "stopping" : n.state;
    j["heartbeat_age_seconds"] = n.heartbeat_age;
    j["tenants"] = n.tenants;
    nodes.push_back(std::move(j));
  }
  o["nodes"] = std::move(nodes);
  boost::json::array leases;
  for (auto& l : members_.book().held())
    leases.push_back(boost::json::object{{"tenant_id", l.tenant}, {"epoch", l.epoch}});
  o["leases"] = std::move(leases);
  return boost::json::serialize(o);
}

} // namespace crm::http
