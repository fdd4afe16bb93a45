// FHIR R4 Patient (contract §9 "Health data", docs/compliance.md "FHIR R4"): the tenant's
// contacts read, searched and created as Patient resources, `application/fhir+json`. Errors keep
// the contract's bodies.
#include "http/api.hpp"

#include "actors/contacts.hpp"
#include "config/settings.hpp"
#include "domain/fhir.hpp"
#include "http/contact_input.hpp"
#include "http/json.hpp"
#include "http/request_input.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <memory>

namespace json = boost::json;

namespace crm::http {
namespace {

using domain::failure;
using domain::issue;

constexpr int default_count = 50;
constexpr int max_count = 200;

void respond_fhir(const exchange_ptr& ex, int status, const json::object& resource,
                  std::vector<std::pair<std::string, std::string>> headers = {}) {
  response r;
  r.status = status;
  r.content_type = std::string(domain::fhir_json_type);
  r.body = json::serialize(resource);
  r.headers = std::move(headers);
  ex->respond(std::move(r));
}

// The service's base for fullUrl: the public URL when configured, else this request's Host.
std::string fhir_base(services& s, const exchange_ptr& ex) {
  std::string base = s.cfg.public_url;
  if (base.empty()) base = "http://" + std::string(ex->req.header("host").value_or("localhost"));
  while (!base.empty() && base.back() == '/') base.pop_back();
  return base + "/api/v1/fhir";
}

// The contact `id` as a Patient, or the contacts actor's 404 / 403.
void read(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  auto& rt = s.rt;
  auto tenant = ex->who.tenant_id;
  actors::fetch_contacts(
      rt, tenant, {*id},
      actors::callback<std::vector<domain::contact>>(
          [&rt, tenant, ex, id = *id](domain::outcome<std::vector<domain::contact>> r) {
            if (!r) return ex->fail(r.error());
            if (!r->empty()) return respond_fhir(ex, 200, domain::contact_to_patient(r->front()));
            // Not the tenant's: the same answer as GET /contacts/{id} (404, or 403).
            actors::get_contact(rt, tenant, id,
                                actors::callback<std::string>([ex](domain::outcome<std::string> g) {
                                  if (!g) return ex->fail(g.error());
                                  ex->fail(failure::of(domain::errc::not_found, "not found"));
                                }));
          }));
}

// The URL of the search's page from `from`: the query as the client sent it (still encoded),
// with _count and _offset set.
std::string page_url(std::string_view root, std::string_view target, int count, std::int64_t from) {
  auto q = target.find('?');
  std::string url = std::string(root) + std::string(target.substr(0, q)) + "?";
  if (q != std::string_view::npos) {
    auto rest = target.substr(q + 1);
    while (!rest.empty()) {
      auto amp = rest.find('&');
      auto piece = rest.substr(0, amp);
      rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
      auto name = piece.substr(0, piece.find('='));
      if (piece.empty() || name == "_count" || name == "_offset") continue;
      url.append(piece).push_back('&');
    }
  }
  return url + "_count=" + std::to_string(count) + "&_offset=" + std::to_string(from);
}

void search(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  auto count = query_int(ex->req, "_count", default_count, 1, max_count, issues);
  auto offset = query_int(ex->req, "_offset", 0, 0, 1'000'000'000, issues);
  auto q = domain::read_patient_search(ex->req.query, ex->who.tenant_id, issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  domain::contact_query cq;
  cq.extra = [q](const domain::contact& c) { return domain::patient_matches(q, c); };
  auto& rt = s.rt;
  auto tenant = ex->who.tenant_id;
  auto base = fhir_base(s, ex);
  auto root = base.substr(0, base.size() - std::string_view("/api/v1/fhir").size());
  actors::match_contacts(
      rt, tenant, std::move(cq),
      actors::callback<std::vector<std::int64_t>>(
          [&rt, tenant, ex, base, root, count = *count,
           offset = *offset](domain::outcome<std::vector<std::int64_t>> ids) {
            if (!ids) return ex->fail(ids.error());
            auto total = static_cast<std::int64_t>(ids->size());
            auto from = std::min<std::int64_t>(offset, total);
            auto to = std::min<std::int64_t>(from + count, total);
            std::vector<std::int64_t> slice(ids->begin() + from, ids->begin() + to);
            auto self = page_url(root, ex->req.target, count, from);
            auto next = to < total ? page_url(root, ex->req.target, count, to) : std::string();
            actors::fetch_contacts(
                rt, tenant, std::move(slice),
                actors::callback<std::vector<domain::contact>>(
                    [ex, base, total, self, next](domain::outcome<std::vector<domain::contact>> r) {
                      if (!r) return ex->fail(r.error());
                      respond_fhir(ex, 200, domain::patient_bundle(*r, total, base, self, next));
                    }));
          }));
}

// A Patient becomes a contact with the same rules as POST /contacts; 201 with the Patient.
void create(services& s, const exchange_ptr& ex) {
  auto body = object_body(ex);
  if (!body) return;
  std::vector<issue> issues;
  auto fields = domain::patient_to_contact(*body, issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  auto f = read_contact(fields, true, {std::string("body")}, issues);
  f.issues = std::move(issues);
  auto& rt = s.rt;
  auto tenant = ex->who.tenant_id;
  actors::create_contact(
      rt, tenant, std::move(f), idempotency_of(ex),
      actors::callback<actors::stored_response>(
          [&rt, tenant, ex](domain::outcome<actors::stored_response> r) {
            if (!r) return ex->fail(r.error());
            std::int64_t id = r->id.value_or(0);
            if (!r->id) { // a replay: the id is in the stored body
              json::error_code ec;
              auto v = json::parse(r->body, ec);
              if (!ec && v.is_object())
                if (auto* x = v.as_object().if_contains("id"); x && x->is_int64())
                  id = x->get_int64();
            }
            if (r->status != 201 || id == 0)
              return reply_stored(ex, std::move(r), "/api/v1/contacts/");
            actors::fetch_contacts(
                rt, tenant, {id},
                actors::callback<std::vector<domain::contact>>(
                    [ex, id](domain::outcome<std::vector<domain::contact>> c) {
                      if (!c) return ex->fail(c.error());
                      if (c->empty())
                        return ex->fail(failure::of(domain::errc::not_found, "not found"));
                      respond_fhir(ex, 201, domain::contact_to_patient(c->front()),
                                   {{"Location", "/api/v1/fhir/Patient/" + std::to_string(id)}});
                    }));
          }));
}

} // namespace

void add_fhir_routes(router& r, services& s) {
  using domain::permission;
  r.add({verb::get, "/api/v1/fhir/Patient/{id}", access::bearer, permission::read_records,
         bind(s, read), "A contact as a FHIR R4 Patient (application/fhir+json)", "fhir"});
  r.add({verb::get, "/api/v1/fhir/Patient", access::bearer, permission::read_records,
         bind(s, search),
         "Search contacts as FHIR R4 Patients: identifier, _id, name, phone, email, _count, "
         "_offset (a searchset Bundle)",
         "fhir"});
  r.add({verb::post, "/api/v1/fhir/Patient", access::bearer, permission::write_records,
         bind(s, create), "Create a contact from a FHIR R4 Patient", "fhir", 201});
}

} // namespace crm::http
