#include "http/placement.hpp"

#include "actors/cluster.hpp"
#include "actors/runtime.hpp"
#include "cluster/membership.hpp"
#include "domain/audit.hpp"
#include "http/services.hpp"

#include <boost/json.hpp>

namespace crm::http {
namespace {

// A forwarded request waits at most this long for the owner (a model provider's answer to an
// AI agent included), then is answered 503 here.
constexpr std::chrono::seconds forward_deadline{30};
constexpr const char* not_owner_header = "X-Carecrm-Not-Owner";

domain::failure moving() {
  return domain::failure::of(domain::errc::service_unavailable,
                             "this tenant is moving between nodes; retry");
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
  if (book.holds(tenant)) return here();
  // Out of touch with Postgres for too long: this node may have been declared dead and its
  // tenants taken, so it serves none until a heartbeat succeeds again.
  if (!book.fresh()) return ex->fail(moving());
  if (!forwarded)
    if (auto owner = book.owner_elsewhere(tenant))
      if (auto n = members_.node(*owner); n && n->state == "live")
        return forward(ex, tenant, *n, 0, std::move(here_later));
  acquire_then(ex, tenant, forwarded, 0, std::move(here_later));
}

void tenant_placement::acquire_then(const exchange_ptr& ex, std::int64_t tenant, bool forwarded,
                                    int attempt, std::function<void()> here_later) {
  members_.acquire(tenant, [this, ex, tenant, forwarded, attempt,
                            here_later = std::move(here_later)](cluster::owner_outcome r) {
    if (!r) return ex->fail(r.error());
    if (r->node == members_.book().node_id()) return here_later();
    if (forwarded) {
      ++not_owner_;
      auto res = error_response(moving());
      res.headers.emplace_back(not_owner_header, r->node);
      return ex->respond(std::move(res));
    }
    if (!r->live) return ex->fail(moving()); // not yet declared dead, nor taken over
    cluster::node_info n;
    n.id = r->node;
    n.actor_host = r->actor_host;
    n.actor_port = r->actor_port;
    n.state = "live";
    forward(ex, tenant, n, attempt, here_later);
  });
}

void tenant_placement::forward(const exchange_ptr& ex, std::int64_t tenant,
                               const cluster::node_info& to, int attempt,
                               std::function<void()> here_later) {
  // The owner audits the request (its dispatch sees the answer); audited here too, each read
  // of a record would be in the trail twice.
  ex->audit = nullptr;
  actors::forwarded_request req;
  req.method = std::string(to_string(ex->req.method));
  req.target = ex->req.target;
  req.headers.reserve(ex->req.headers.size() * 2);
  for (auto& [k, v] : ex->req.headers) {
    req.headers.push_back(k);
    req.headers.push_back(v);
  }
  req.body = ex->req.body;
  req.remote = ex->req.remote;
  req.request_id = ex->req.request_id;
  actors::forward_to(rt_, to.actor_host, to.actor_port, std::move(req), forward_deadline,
                     [this, ex, tenant, attempt, here_later](actors::forwarded_response r) {
                       response res;
                       res.status = r.status;
                       res.content_type.clear();
                       bool not_owner = false;
                       for (std::size_t i = 0; i + 1 < r.headers.size(); i += 2) {
                         auto& k = r.headers[i];
                         if (k == "Content-Type")
                           res.content_type = std::move(r.headers[i + 1]);
                         else if (k == not_owner_header)
                           not_owner = true;
                         else if (k == actors::forward_failed_header)
                           not_owner = not_owner || r.headers[i + 1] == "unsent";
                         else
                           res.headers.emplace_back(std::move(k), std::move(r.headers[i + 1]));
                       }
                       // The node this one believed the owner is not (a move, a takeover or a
                       // node that left meanwhile), or one the request never reached: ask
                       // Postgres once more, then answer what the owner it names answers. A
                       // request that may have reached the node is never sent again.
                       if (not_owner && attempt == 0) {
                         members_.book().forget(tenant);
                         return acquire_then(ex, tenant, false, 1, here_later);
                       }
                       res.body = std::move(r.body);
                       ex->respond(std::move(res));
                     });
}

bool tenant_placement::fresh() const {
  return members_.book().fresh();
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
    j["state"] = n.state;
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
