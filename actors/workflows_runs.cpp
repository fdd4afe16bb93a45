// The workflows actor (actors/workflows_internal.hpp): runs, their steps and their actions.
#include "actors/workflows_internal.hpp"

namespace crm::actors::workflows_impl {

// ---- runs ---------------------------------------------------------------------------------

void advance(wf_actor* self, std::int64_t id);

void flush_saves(wf_actor* self);

// After the run's progress was stored (or not): the run goes on, waits or leaves.
void saved(wf_actor* self, std::int64_t id, const domain::outcome<domain::done>& r) {
  auto& st = self->state;
  auto it = st.runs.find(id);
  if (it == st.runs.end()) return;
  auto& x = it->second;
  x.busy = false;
  if (!r) {
    // The step's outcome is not stored: the same save is retried on the next tick, and
    // the run does not move on before it succeeds.
    log_warn("tenant {}: run {} progress not saved ({}); retrying", st.env.tenant_id, id,
             r.error().detail);
    st.running--;
    x.resave = true;
    return;
  }
  // Stopping (passivation, shutdown): the run is stored as it is and resumes from there
  // when the sweeper wakes the tenant again.
  if (!x.cancelled && domain::finished(x.run.status)) count_finished(x.run.status);
  if (x.cancelled || domain::finished(x.run.status) ||
      x.run.status == domain::run_status::waiting || st.stopping) {
    st.running--;
    if (x.cancelled || domain::finished(x.run.status)) st.runs.erase(it);
    start_ready(self);
    return;
  }
  advance(self, id);
}

// Stores the run's progress, then goes on (saved). The saves of runs whose steps end while one
// is being written are written together in the next transaction (benchmarks/RESULTS.md).
void save_then(wf_actor* self, std::int64_t id) {
  auto& st = self->state;
  auto it = st.runs.find(id);
  if (it == st.runs.end()) return;
  it->second.busy = true;
  st.saves.push_back(it->second.run);
  flush_saves(self);
}

void flush_saves(wf_actor* self) {
  auto& st = self->state;
  if (st.saving || st.saves.empty()) return;
  st.saving = true;
  auto runs = std::move(st.saves);
  st.saves.clear();
  std::vector<std::int64_t> ids;
  for (auto& run : runs) ids.push_back(run.id);
  db<domain::done>(
      self,
      [runs = std::move(runs)](persistence::pg_conn& c) {
        persistence::save_runs(c, runs);
        return domain::done{};
      },
      [self, ids = std::move(ids)](domain::outcome<domain::done> r) {
        self->state.saving = false;
        for (auto id : ids) saved(self, id, r);
        flush_saves(self);
      });
}

void finish_step(wf_actor* self, std::int64_t id, json::object step, bool ok, json::value result,
                 std::string error, std::int64_t resume_at) {
  auto& st = self->state;
  auto it = st.runs.find(id);
  if (it == st.runs.end()) return;
  it->second.in_step = false;
  auto& r = it->second.run;
  auto now = domain::now_micros();
  step["status"] = ok ? "succeeded" : "failed";
  step["result"] = std::move(result);
  step["error"] = ok ? json::value(nullptr) : json::value(error);
  step["finished_at"] = domain::format_rfc3339(now);
  r.steps.push_back(std::move(step));
  r.updated_at = now;
  if (!ok) {
    r.status = domain::run_status::failed;
    r.error = "step " + std::to_string(r.next_step) + " failed: " + error;
    r.finished_at = now;
  } else {
    r.next_step++;
    if (resume_at) {
      r.status = domain::run_status::waiting;
      r.resume_at = resume_at;
    } else if (r.next_step >= static_cast<int>(r.actions.size())) {
      r.status = domain::run_status::succeeded;
      r.finished_at = now;
    }
  }
  save_then(self, id);
}

// A sibling actor answered 503 (it was stopping or crashed): not the action's fault. The step
// is tried again in a second, or, when this actor is stopping too, after the restart (the run
// is stored as it was before the step).
void retry_step(wf_actor* self, std::int64_t id) {
  auto& st = self->state;
  auto it = st.runs.find(id);
  if (it == st.runs.end()) return;
  auto& x = it->second;
  x.in_step = false;
  st.running--;
  if (x.cancelled) {
    st.runs.erase(it);
  } else if (!st.stopping) {
    x.run.status = domain::run_status::waiting;
    x.run.resume_at = domain::now_micros() + 1'000'000;
  }
  start_ready(self);
}

// At most `n` bytes of `s`, cut at a character boundary; null when `s` is not UTF-8 text (or
// holds U+0000, which jsonb cannot store).
json::value utf8_prefix(const std::string& s, std::size_t n) {
  std::size_t end = 0;
  for (std::size_t i = 0; i < s.size();) {
    auto len = domain::utf8_sequence(s, i);
    if (len == 0 || s[i] == '\0') return nullptr;
    if (i + len > n) break;
    i += len;
    end = i;
  }
  return json::value(s.substr(0, end));
}

std::string envelope(std::string_view type, std::int64_t at, std::string_view data) {
  std::string out = "{\"type\":";
  out += json::serialize(json::value(type));
  out += ",\"timestamp\":\"";
  out += domain::format_rfc3339(at);
  out += "\",\"data\":";
  out += data;
  out += '}';
  return out;
}

// Headers of Standard Webhooks for one signed request.
void sign(std::vector<std::pair<std::string, std::string>>& headers, const std::string& secret,
          const std::string& msg_id, const std::string& body) {
  auto ts = domain::now_seconds();
  headers.emplace_back("webhook-id", msg_id);
  headers.emplace_back("webhook-timestamp", std::to_string(ts));
  headers.emplace_back("webhook-signature", domain::webhook_signature(secret, msg_id, ts, body));
}

void run_contact_action(wf_actor* self, std::int64_t id, json::object step,
                        domain::action_type type, const json::object& params);
void run_http_action(wf_actor* self, std::int64_t id, json::object step,
                     const json::object& params);
void run_send_action(wf_actor* self, std::int64_t id, json::object step,
                     const json::object& params);
void run_ai_reply_action(wf_actor* self, std::int64_t id, json::object step,
                         const json::object& params);
void run_deal_action(wf_actor* self, std::int64_t id, json::object step, domain::action_type type,
                     const json::object& params);

void advance(wf_actor* self, std::int64_t id) {
  auto& st = self->state;
  auto it = st.runs.find(id);
  if (it == st.runs.end()) return;
  auto& x = it->second;
  auto& r = x.run;
  auto now = domain::now_micros();
  auto wf = st.workflows.find(r.workflow_id);
  if (x.cancelled || wf == st.workflows.end()) {
    st.running--;
    st.runs.erase(it);
    start_ready(self);
    return;
  }
  if (r.status != domain::run_status::running) {
    r.status = domain::run_status::running;
    r.resume_at = 0;
    if (!r.started_at) r.started_at = now;
  }
  if (r.depth >= domain::max_chain_depth) {
    r.status = domain::run_status::failed;
    r.error =
        "workflow chain depth limit (" + std::to_string(domain::max_chain_depth) + ") reached";
    r.finished_at = r.updated_at = now;
    return save_then(self, id);
  }
  if (r.next_step >= static_cast<int>(r.actions.size())) {
    r.status = domain::run_status::succeeded;
    r.finished_at = r.updated_at = now;
    return save_then(self, id);
  }
  auto& a = r.actions[static_cast<std::size_t>(r.next_step)];
  auto* ao = a.if_object();
  // Stored actions were validated when the workflow was saved; an unknown type can only come
  // from a newer version's rows, and fails the step rather than the actor.
  auto known = domain::action_type::add_tag;
  bool has_type = false;
  if (ao)
    if (auto t = ao->if_contains("type"); t && t->is_string())
      if (auto parsed = domain::parse_action_type(std::string_view(t->as_string()))) {
        known = *parsed;
        has_type = true;
      }
  json::object params;
  if (ao && ao->contains("params") && ao->at("params").is_object()) {
    domain::template_context ctx{&r.payload, r.id, wf->second.id, wf->second.name};
    auto rendered = domain::render_templates(ao->at("params"), ctx);
    if (rendered.is_object()) params = rendered.as_object();
  }
  json::object step;
  step["index"] = r.next_step;
  step["type"] = has_type ? json::value(domain::to_string(known)) : json::value(nullptr);
  step["status"] = "running";
  step["params"] = params;
  if (known == domain::action_type::http_request)
    domain::redact_header_values(step["params"].as_object());
  step["result"] = nullptr;
  step["error"] = nullptr;
  step["started_at"] = domain::format_rfc3339(now);
  step["finished_at"] = nullptr;
  x.in_step = true;
  if (!has_type) return finish_step(self, id, std::move(step), false, nullptr, "unknown action");
  if (!domain::action_available(known))
    return finish_step(self, id, std::move(step), false, nullptr,
                       "action '" + std::string(domain::to_string(known)) +
                           "' is not available yet");
  // What the action changes is audited as this workflow's doing (docs/compliance.md): every
  // callback the action makes from here keeps it.
  auto acting = std::make_shared<domain::audit_context>();
  acting->actor = domain::audit_actor::workflow;
  acting->actor_ref = "workflow:" + std::to_string(wf->second.id) + " run:" + std::to_string(r.id);
  domain::audit_scope scope(std::move(acting));
  switch (known) {
  case domain::action_type::delay: {
    auto secs = domain::delay_seconds(params);
    auto resume = now + secs * 1'000'000;
    json::object result{{"resume_at", domain::format_rfc3339(resume)}};
    return finish_step(self, id, std::move(step), true, std::move(result), {}, resume);
  }
  case domain::action_type::http_request: return run_http_action(self, id, std::move(step), params);
  case domain::action_type::send_message: return run_send_action(self, id, std::move(step), params);
  case domain::action_type::ai_reply: return run_ai_reply_action(self, id, std::move(step), params);
  case domain::action_type::create_deal:
  case domain::action_type::move_deal:
    return run_deal_action(self, id, std::move(step), known, params);
  case domain::action_type::create_task: return run_task_action(self, id, std::move(step), params);
  default: return run_contact_action(self, id, std::move(step), known, params);
  }
}

void run_contact_action(wf_actor* self, std::int64_t id, json::object step,
                        domain::action_type type, const json::object& params) {
  auto& st = self->state;
  auto& r = st.runs.at(id).run;
  auto contact = domain::action_contact_id(params, r.payload);
  if (!contact)
    return finish_step(self, id, std::move(step), false, nullptr,
                       "no contact: the trigger payload has no contact_id; set params.contact_id");
  auto depth = r.depth + 1;
  auto tenant = st.env.tenant_id;
  auto& rt = *st.env.rt->owner;
  auto cid = *contact;
  // The continuation of every contact action: the step's outcome, back in this actor.
  auto finish = [self, id, step, cid](const failure* f, json::object result) mutable {
    if (f && f->code == errc::service_unavailable) return retry_step(self, id);
    if (f) return finish_step(self, id, std::move(step), false, nullptr, to_text(*f));
    result["contact_id"] = cid;
    finish_step(self, id, std::move(step), true, std::move(result), {});
  };
  switch (type) {
  case domain::action_type::update_contact:
  case domain::action_type::set_status: {
    contact_fields f;
    if (type == domain::action_type::set_status) {
      auto s = params.if_contains("status");
      auto status = s && s->is_string()
                        ? domain::parse_contact_status(std::string_view(s->as_string()))
                        : std::nullopt;
      if (!status)
        return finish_step(self, id, std::move(step), false, nullptr,
                           "status must be one of active, inactive, qualified, unqualified");
      f.status = *status;
    } else {
      std::vector<domain::issue> issues;
      auto fields = params.if_contains("fields");
      if (!fields || !fields->is_object() || !st.opts || !st.opts->read_contact_patch)
        return finish_step(self, id, std::move(step), false, nullptr,
                           "params.fields must be an object");
      f = st.opts->read_contact_patch(fields->as_object(), issues);
      if (!issues.empty())
        return finish_step(self, id, std::move(step), false, nullptr,
                           to_text(failure::invalid(std::move(issues))));
    }
    f.chain_depth = depth;
    auto k = in_actor<domain::outcome<domain::contact>>(
        self, [finish](domain::outcome<domain::contact> c) mutable {
          if (!c) return finish(&c.error(), {});
          finish(nullptr, {{"status", domain::to_string(c->status)}});
        });
    return update_contact(rt, tenant, cid, std::move(f), callback<domain::contact>(std::move(k)));
  }
  case domain::action_type::add_tag: {
    std::vector<std::string> tags;
    if (auto t = params.if_contains("tag"); t && t->is_string())
      tags.emplace_back(t->as_string().c_str());
    if (auto ts = params.if_contains("tags"); ts && ts->is_array())
      for (auto& t : ts->as_array())
        if (t.is_string()) tags.emplace_back(t.as_string().c_str());
    if (tags.empty())
      return finish_step(self, id, std::move(step), false, nullptr, "no tag to add");
    json::array added;
    for (auto& t : tags) added.emplace_back(t);
    auto k = in_actor<domain::outcome<contact_view>>(
        self, [finish, added](domain::outcome<contact_view> v) mutable {
          if (!v) return finish(&v.error(), {});
          finish(nullptr, {{"tags", added}});
        });
    return add_tags(rt, tenant, cid, std::move(tags), callback<contact_view>(std::move(k)), depth);
  }
  case domain::action_type::remove_tag: {
    auto t = params.if_contains("tag");
    if (!t || !t->is_string())
      return finish_step(self, id, std::move(step), false, nullptr, "no tag to remove");
    std::string tag(t->as_string().c_str());
    auto k = in_actor<domain::outcome<domain::done>>(
        self, [finish, tag](domain::outcome<domain::done> v) mutable {
          // Removing a tag the contact does not have leaves it as wanted: not a failure.
          if (!v && v.error().detail == "the contact has no such tag")
            return finish(nullptr, {{"tag", tag}, {"removed", false}});
          if (!v) return finish(&v.error(), {});
          finish(nullptr, {{"tag", tag}, {"removed", true}});
        });
    return remove_tag(rt, tenant, cid, tag, callback<domain::done>(std::move(k)), depth);
  }
  default: finish_step(self, id, std::move(step), false, nullptr, "not a contact action");
  }
}

// An id parameter after templates: an integer, or a string of digits.
std::optional<std::int64_t> id_value(const json::value* v) {
  if (!v) return std::nullopt;
  if (auto i = v->if_int64()) return *i;
  if (auto u = v->if_uint64()) return static_cast<std::int64_t>(*u);
  if (auto str = v->if_string()) {
    std::int64_t n = 0;
    auto b = str->data(), e = str->data() + str->size();
    auto [ptr, ec] = std::from_chars(b, e, n);
    if (ec == std::errc() && ptr == e && b != e) return n;
  }
  return std::nullopt;
}

// create_deal and move_deal (docs/pipeline.md): through the deals actor, recorded in the
// deal's history with this run's id.
void run_deal_action(wf_actor* self, std::int64_t id, json::object step, domain::action_type type,
                     const json::object& params) {
  auto& st = self->state;
  auto& r = st.runs.at(id).run;
  if (!st.opts || !st.opts->read_deal_fields)
    return finish_step(self, id, std::move(step), false, nullptr, "deal actions are not set up");
  deal_actor_ref who;
  who.workflow_run_id = r.id;
  who.chain_depth = r.depth + 1;
  auto tenant = st.env.tenant_id;
  auto& rt = *st.env.rt->owner;
  // Ids given as template results arrive as strings of digits.
  json::object fields = params;
  for (auto key : {"contact_id", "company_id", "owner_id", "pipeline_id", "stage_id", "position"})
    if (auto v = fields.if_contains(key); v && v->is_string())
      if (auto n = id_value(v)) *v = *n;
  auto failed = [self, id, step](const failure& f) mutable {
    if (f.code == errc::service_unavailable) return retry_step(self, id);
    finish_step(self, id, std::move(step), false, nullptr, to_text(f));
  };
  if (type == domain::action_type::create_deal) {
    if (!fields.contains("contact_id"))
      if (auto c = domain::action_contact_id(params, r.payload)) fields["contact_id"] = *c;
    auto f = st.opts->read_deal_fields(fields, false);
    if (!f.issues.empty())
      return finish_step(self, id, std::move(step), false, nullptr,
                         to_text(failure::invalid(std::move(f.issues))));
    auto k = in_actor<domain::outcome<stored_response>>(
        self, [self, id, step, failed](domain::outcome<stored_response> v) mutable {
          if (!v) return failed(v.error());
          json::object result;
          json::error_code ec;
          auto body = crm::domain::parse_json(v->body, ec);
          if (!ec && body.is_object()) {
            result["deal_id"] = body.as_object()["id"];
            result["stage_id"] = body.as_object()["stage_id"];
          }
          finish_step(self, id, std::move(step), true, std::move(result), {});
        });
    return create_deal(rt, tenant, std::move(f), who, {}, callback<stored_response>(std::move(k)));
  }
  auto deal_id = id_value(fields.if_contains("deal_id"));
  if (!deal_id)
    deal_id =
        id_value(r.payload.is_object() ? r.payload.as_object().if_contains("deal_id") : nullptr);
  if (!deal_id)
    return finish_step(self, id, std::move(step), false, nullptr,
                       "no deal: the trigger payload has no deal_id; set params.deal_id");
  fields.erase("deal_id");
  auto f = st.opts->read_deal_fields(fields, true);
  if (!f.issues.empty())
    return finish_step(self, id, std::move(step), false, nullptr,
                       to_text(failure::invalid(std::move(f.issues))));
  auto k = in_actor<domain::outcome<domain::deal>>(
      self, [self, id, step, failed](domain::outcome<domain::deal> d) mutable {
        if (!d) return failed(d.error());
        json::object result{{"deal_id", d->id},
                            {"stage_id", d->stage_id},
                            {"status", domain::to_string(d->status)}};
        finish_step(self, id, std::move(step), true, std::move(result), {});
      });
  update_deal(rt, tenant, *deal_id, std::move(f), who, callback<domain::deal>(std::move(k)));
}

// create_task (docs/tasks.md "From a workflow"): through the tasks actor, one task per step of
// the run (a step run again after a crash finds the task it made).
void run_task_action(wf_actor* self, std::int64_t id, json::object step,
                     const json::object& params) {
  auto& st = self->state;
  auto& r = st.runs.at(id).run;
  auto t = domain::task_from_action(params, r.payload, domain::now_micros());
  if (!t) return finish_step(self, id, std::move(step), false, nullptr, t.error().detail);
  t->workflow_run_id = r.id;
  t->workflow_step = r.next_step;
  auto k = in_actor<domain::outcome<std::string>>(
      self, [self, id, step](domain::outcome<std::string> v) mutable {
        if (!v && v.error().code == errc::service_unavailable) return retry_step(self, id);
        if (!v) return finish_step(self, id, std::move(step), false, nullptr, to_text(v.error()));
        json::object result;
        json::error_code ec;
        auto body = crm::domain::parse_json(*v, ec);
        if (auto o = ec ? nullptr : body.if_object())
          for (auto [from, to] : {std::pair{"id", "task_id"},
                                  {"contact_id", "contact_id"},
                                  {"assignee_id", "assignee_id"},
                                  {"due_at", "due_at"}})
            if (auto v = o->if_contains(from)) result[to] = *v;
        finish_step(self, id, std::move(step), true, std::move(result), {});
      });
  // No user: the workflow is the creator (created_by null), the assignee is the params' one.
  create_task(*st.env.rt->owner, st.env.tenant_id, std::move(*t),
              domain::requester{std::nullopt, domain::role::manager},
              callback<std::string>(std::move(k)));
}

void run_http_action(wf_actor* self, std::int64_t id, json::object step,
                     const json::object& params) {
  auto& st = self->state;
  auto& r = st.runs.at(id).run;
  if (!st.opts || !st.opts->client)
    return finish_step(self, id, std::move(step), false, nullptr, "outbound HTTP is not set up");
  net::client_request req;
  if (auto m = params.if_contains("method"); m && m->is_string()) req.method = m->as_string();
  if (auto u = params.if_contains("url"); u && u->is_string()) req.url = u->as_string();
  if (!domain::parse_url(req.url))
    return finish_step(self, id, std::move(step), false, nullptr,
                       "url is not an http or https URL: " + req.url);
  if (auto h = params.if_contains("headers"); h && h->is_object())
    for (auto& [k, v] : h->as_object())
      if (v.is_string()) req.headers.emplace_back(std::string(k), std::string(v.as_string()));
  if (auto b = params.if_contains("body")) {
    req.body = json::serialize(*b);
  } else {
    req.body = envelope(r.trigger, r.created_at, json::serialize(r.payload));
  }
  if (req.method == "GET" || req.method == "DELETE") {
    if (!params.contains("body")) req.body.clear();
  }
  // As the reader took it: any JSON number with an integral value (5 or 5.0).
  if (auto t = params.if_contains("timeout_seconds"))
    if (auto n = domain::detail::as_integer(*t)) req.timeout = std::chrono::milliseconds(*n * 1000);
  req.headers.emplace_back("carecrm-chain-depth", std::to_string(r.depth + 1));
  auto& wf = st.workflows.at(r.workflow_id);
  if (wf.webhook_secret)
    sign(req.headers, *wf.webhook_secret,
         "run_" + std::to_string(r.id) + "_" + std::to_string(r.next_step), req.body);
  auto done = in_actor<net::client_response>(self, [self, id,
                                                    step](net::client_response res) mutable {
    json::object result;
    if (!res.ok)
      return finish_step(self, id, std::move(step), false, nullptr, "request failed: " + res.error);
    result["status_code"] = res.status;
    result["body"] = utf8_prefix(res.body, 4096);
    result["duration_ms"] = res.elapsed.count();
    bool ok = res.status >= 200 && res.status < 300;
    finish_step(self, id, std::move(step), ok, ok ? json::value(result) : json::value(nullptr),
                ok ? std::string() : "the server answered " + std::to_string(res.status));
  });
  st.opts->client->send(std::move(req), std::move(done));
}

// An id in an action's params or a trigger payload: a positive integer, or its decimal text
// (what a template renders).
std::optional<std::int64_t> as_id(const json::value* v) {
  if (!v) return std::nullopt;
  if (v->is_int64() && v->as_int64() > 0) return v->as_int64();
  if (v->is_string()) {
    std::int64_t n = 0;
    auto s = std::string_view(v->as_string());
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec == std::errc() && p == s.data() + s.size() && n > 0) return n;
  }
  return std::nullopt;
}

// send_message: to the trigger's conversation (message.received), else to the contact's
// most recent one (on params.channel_id when given). Succeeds once the message is queued.
void run_send_action(wf_actor* self, std::int64_t id, json::object step,
                     const json::object& params) {
  auto& st = self->state;
  auto& r = st.runs.at(id).run;
  outbound_request req;
  if (auto t = params.if_contains("text"); t && t->is_string()) req.text = t->as_string();
  if (req.text.empty())
    return finish_step(self, id, std::move(step), false, nullptr, "the message text is empty");
  req.channel_id = as_id(params.if_contains("channel_id"));
  if (auto p = params.if_contains("purpose"); p && p->is_string())
    req.purpose = domain::parse_consent_purpose(std::string_view(p->as_string()))
                      .value_or(domain::consent_purpose::treatment_communication);
  req.contact_id = domain::action_contact_id(params, r.payload);
  if (auto* p = r.payload.if_object(); p && !params.contains("contact_id"))
    if (!req.channel_id || as_id(p->if_contains("channel_id")) == req.channel_id)
      req.conversation_id = as_id(p->if_contains("conversation_id"));
  if (!req.conversation_id && !req.contact_id)
    return finish_step(self, id, std::move(step), false, nullptr,
                       "no conversation: the trigger has no conversation or contact");
  auto k = in_actor<domain::outcome<std::string>>(
      self, [self, id, step](domain::outcome<std::string> m) mutable {
        if (!m && m.error().code == errc::service_unavailable) return retry_step(self, id);
        if (!m) return finish_step(self, id, std::move(step), false, nullptr, to_text(m.error()));
        json::error_code ec;
        auto v = crm::domain::parse_json(*m, ec);
        json::object result;
        if (!ec && v.is_object()) {
          auto& o = v.as_object();
          for (auto key : {"id", "conversation_id", "status"})
            if (auto x = o.if_contains(key))
              result[key == std::string_view("id") ? "message_id" : key] = *x;
        }
        finish_step(self, id, std::move(step), true, std::move(result), {});
      });
  send_message(*st.env.rt->owner, st.env.tenant_id, std::move(req),
               callback<std::string>(std::move(k)));
}

// ai_reply: the agent (params.agent_id, else the auto-replying agent of the trigger's channel)
// answers the trigger's message (message.received) in its conversation, hand-off rules and all.
void run_ai_reply_action(wf_actor* self, std::int64_t id, json::object step,
                         const json::object& params) {
  auto& st = self->state;
  auto& r = st.runs.at(id).run;
  auto* p = r.payload.if_object();
  ai_inbound m;
  if (p) {
    m.conversation_id = as_id(p->if_contains("conversation_id")).value_or(0);
    m.channel_id = as_id(p->if_contains("channel_id")).value_or(0);
    m.contact_id = as_id(p->if_contains("contact_id")).value_or(0);
    m.message_id = as_id(p->if_contains("message_id")).value_or(0);
    if (auto msg = p->if_contains("message"); msg && msg->is_object())
      if (auto t = msg->as_object().if_contains("text"); t && t->is_string())
        m.text = std::string(t->as_string());
  }
  if (!m.conversation_id || !m.message_id || m.text.empty())
    return finish_step(self, id, std::move(step), false, nullptr,
                       "no message to answer: ai_reply needs a message.received trigger");
  m.depth = r.depth + 1;
  std::optional<std::int64_t> agent;
  if (params.contains("agent_id")) {
    agent = as_id(params.if_contains("agent_id"));
    if (!agent)
      return finish_step(self, id, std::move(step), false, nullptr, "agent_id is not a valid id");
  }
  auto k = in_actor<domain::outcome<std::string>>(
      self, [self, id, step](domain::outcome<std::string> out) mutable {
        if (!out && out.error().code == errc::service_unavailable) return retry_step(self, id);
        if (!out)
          return finish_step(self, id, std::move(step), false, nullptr, to_text(out.error()));
        json::error_code ec;
        auto v = crm::domain::parse_json(*out, ec);
        finish_step(self, id, std::move(step), true,
                    !ec && v.is_object() ? v : json::value(json::object()), {});
      });
  run_ai_reply(*st.env.rt->owner, st.env.tenant_id, agent, std::move(m),
               callback<std::string>(std::move(k)));
}

void start_ready(wf_actor* self) {
  auto& st = self->state;
  while (!st.stopping && st.running < max_running && !st.ready.empty()) {
    auto id = st.ready.front();
    st.ready.pop_front();
    auto it = st.runs.find(id);
    if (it == st.runs.end() || it->second.busy) continue;
    st.running++;
    advance(self, id);
  }
}

// Stores a new run (webhook, manual, schedule) and answers its id; starts it when open.
void create_run(wf_actor* self, const domain::workflow& w, json::value payload, int depth,
                callback<std::int64_t> reply, std::optional<std::int64_t> schedule_next) {
  auto& st = self->state;
  domain::workflow_run run;
  run.tenant_id = st.env.tenant_id;
  run.workflow_id = w.id;
  run.trigger = std::string(domain::to_string(w.trigger));
  run.depth = depth;
  run.actions = domain::actions_to_json(w.actions);
  run.created_at = run.updated_at = domain::now_micros();
  run.conditions_met = domain::conditions_hold(w.conditions, payload);
  run.payload = std::move(payload);
  if (!run.conditions_met) {
    run.status = domain::run_status::succeeded;
    run.started_at = run.finished_at = run.created_at;
  } else if (depth >= domain::max_chain_depth) {
    run.status = domain::run_status::failed;
    run.error =
        "workflow chain depth limit (" + std::to_string(domain::max_chain_depth) + ") reached";
    run.finished_at = run.created_at;
  }
  db<domain::workflow_run>(
      self,
      [run, schedule_next](persistence::pg_conn& c) {
        return persistence::insert_run(c, run, schedule_next);
      },
      [self, reply, wid = w.id, schedule_next](domain::outcome<domain::workflow_run> r) {
        auto& st = self->state;
        if (schedule_next) {
          st.firing.erase(wid);
          if (r) {
            // Stored only for a still active workflow (insert_run's UPDATE says the same).
            if (auto it = st.workflows.find(wid); it != st.workflows.end() && it->second.is_active)
              it->second.next_run_at = *schedule_next;
          }
        }
        if (!r) return reply(r.error());
        reply(r->id);
        add_open_run(self, std::move(*r));
        start_ready(self);
      });
}

} // namespace crm::actors::workflows_impl
