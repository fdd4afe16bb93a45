// Channel endpoints (contract §8, docs/channels.md): CRUD (admins) and the inbound webhooks of
// external systems (no JWT: the channel's secret; generic api bodies and Telegram updates).
#include "http/api.hpp"

#include "http/placement.hpp"

#include "actors/channels.hpp"
#include "actors/inbox.hpp"
#include "domain/clock.hpp"
#include "domain/email.hpp"
#include "domain/media.hpp"
#include "domain/secret_keys.hpp"
#include "domain/twilio.hpp"
#include "domain/whatsapp.hpp"
#include "http/contact_input.hpp"
#include "http/json.hpp"
#include "http/openapi_schema.hpp"
#include "http/request_input.hpp"
#include "http/secret_gate.hpp"
#include "persistence/channel_repo.hpp"
#include "persistence/pg_pool.hpp"
#include "persistence/sealed_columns.hpp"
#include "persistence/secret_owners.hpp"

#include <boost/json.hpp>

#include <array>

namespace json = boost::json;

namespace crm::http {
namespace {

secret_gate& channel_gate() {
  static secret_gate gate("channel", &persistence::webhook_owner_of_channel);
  return gate;
}

// WhatsApp's webhook is signed with the app's secret: this gate holds each WhatsApp channel's
// owner and app secret, and checks the signature before the tenant is woken.
secret_gate& whatsapp_gate() {
  static secret_gate gate("whatsapp", &persistence::signing_owner_of_whatsapp);
  return gate;
}

// Twilio signs its webhooks with the account's auth token: the same for SMS channels.
secret_gate& sms_gate() {
  static secret_gate gate("sms", &persistence::signing_owner_of_sms);
  return gate;
}

// Mailgun signs the e-mails a route forwards with the account's webhook signing key.
secret_gate& email_gate() {
  static secret_gate gate("email", &persistence::signing_owner_of_email);
  return gate;
}

// A change of a channel's secrets (its webhook secret, a WhatsApp app secret, a Twilio auth
// token, a Mailgun signing key) is in force at the gates at once on this node.
template <class Callback>
Callback forgetting_channel(std::int64_t id, Callback reply) {
  return forgetting(
      channel_gate(), id,
      forgetting(whatsapp_gate(), id,
                 forgetting(sms_gate(), id, forgetting(email_gate(), id, std::move(reply)))));
}

using domain::failure;
using domain::issue;

namespace rules = domain::channel_rules;

// The fields this reader checks itself (the config and the inbound bodies are domain/'s).
constexpr text_rule name_rule{.min = 1, .max = 200, .trim = true};
constexpr text_rule secret_rule{.min = rules::secret_min, .max = rules::secret_max};

constexpr text_rule zone_rule{.min = 1, .max = domain::time_zone_name_max};
constexpr text_rule reply_rule{.min = 1, .max = rules::after_hours_reply_max, .trim = true};

// business_hours (null: always open), time_zone and after_hours_reply (null: none) as sent
// (docs/channels.md "Business hours").
struct hours_input {
  std::optional<std::optional<domain::working_week>> business_hours;
  std::optional<std::string> time_zone;
  std::optional<std::optional<std::string>> after_hours_reply;
};

hours_input read_hours(body_reader& body) {
  hours_input h;
  if (body.is_null("business_hours")) {
    body.raw("business_hours");
    h.business_hours = std::optional<domain::working_week>();
  } else if (auto* v = body.raw("business_hours")) {
    if (auto w = domain::read_working_hours(
            *v, {std::string("body"), std::string("business_hours")}, body.issues()))
      h.business_hours = std::optional<domain::working_week>(*w);
  }
  if (auto z = body.text("time_zone", false, zone_rule)) {
    if (domain::is_time_zone(*z))
      h.time_zone = *z;
    else
      body.add({"body", "time_zone"},
               "unknown time zone: an IANA name such as \"America/Sao_Paulo\"", "value_error");
  }
  h.after_hours_reply = body.nullable_text("after_hours_reply", reply_rule);
  return h;
}

std::optional<domain::channel_type> read_type(body_reader& body, bool required) {
  auto t = body.text("type", required);
  if (!t) return std::nullopt;
  auto type = domain::parse_channel_type(*t);
  if (!type) body.add({"body", "type"}, domain::channel_type_choices(), "enum");
  return type;
}

void create(services& s, const exchange_ptr& ex) {
  body_reader body(ex->req.body);
  auto name = body.text("name", true, name_rule);
  auto type = read_type(body, true);
  auto cfg = body.raw("config");
  std::optional<json::object> config;
  if (type)
    config = domain::parse_channel_config(*type, cfg ? *cfg : json::value(json::object()), nullptr,
                                          body.issues());
  auto secret = body.nullable_text("webhook_secret", secret_rule);
  auto active = body.boolean("is_active", false);
  auto hours = read_hours(body);
  if (!body.finish() || !config) return ex->fail(body.failure());
  domain::channel c;
  if (hours.business_hours) c.business_hours = *hours.business_hours;
  if (hours.time_zone) c.time_zone = *hours.time_zone;
  if (hours.after_hours_reply) c.after_hours_reply = *hours.after_hours_reply;
  c.name = *name;
  c.type = *type;
  c.config = std::move(*config);
  if (secret) c.webhook_secret = *secret;
  c.is_active = active.value_or(true);
  actors::create_channel(
      s.rt, ex->who.tenant_id, std::move(c),
      forgetting_unknown(
          channel_gate(),
          forgetting_unknown(whatsapp_gate(), created_reply(ex, "/api/v1/channels/"))));
}

void list(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  actors::channel_filter f;
  auto page = query_int(ex->req, "page", 1, 1, paging_rules::page_max, issues);
  auto per_page = query_int(ex->req, "per_page", paging_rules::per_page_default, 1,
                            paging_rules::per_page_max, issues);
  if (auto t = ex->req.query_value("type")) {
    f.type = domain::parse_channel_type(*t);
    if (!f.type) issues.push_back({{"query", "type"}, domain::channel_type_choices(), "enum"});
  }
  f.is_active = query_bool(ex->req, "is_active", std::nullopt, issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  f.page = *page;
  f.per_page = *per_page;
  actors::list_channels(s.rt, ex->who.tenant_id, f, json_reply(ex));
}

void get(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::get_channel(s.rt, ex->who.tenant_id, *id, json_reply(ex));
}

void update(services& s, const exchange_ptr& ex) {
  std::vector<issue> path_issues;
  auto id = path_id(ex->param("id"), "id", path_issues);
  body_reader body(ex->req.body);
  for (auto& i : path_issues) body.issues().push_back(i);
  actors::channel_patch p;
  p.name = body.text("name", false, name_rule);
  p.type = read_type(body, false);
  if (auto cfg = body.raw("config")) p.config = *cfg;
  p.webhook_secret = body.nullable_text("webhook_secret", secret_rule);
  p.is_active = body.boolean("is_active", false);
  auto hours = read_hours(body);
  p.business_hours = std::move(hours.business_hours);
  p.time_zone = std::move(hours.time_zone);
  p.after_hours_reply = std::move(hours.after_hours_reply);
  // The team whose members answer it (docs/channels.md "Teams and assignment"); null: none.
  std::optional<std::optional<std::int64_t>> team;
  if (body.is_null("team_id")) {
    body.raw("team_id");
    team = std::optional<std::int64_t>();
  } else if (auto t = body.id("team_id", false)) {
    team = std::optional<std::int64_t>(*t);
  }
  if (!body.finish()) return ex->fail(body.failure());
  // The gate reads the secret again at the next call here (other nodes within a second).
  if (!team)
    return actors::update_channel(s.rt, ex->who.tenant_id, *id, std::move(p),
                                  forgetting_channel(*id, json_reply(ex)));
  // The team is checked first (nothing changes for a team of no one), then the channel's own
  // fields, then its team (the inbox actor's), then the channel as it is now.
  const auto tenant = ex->who.tenant_id;
  auto answer = json_reply(ex);
  auto no_team = [answer] {
    answer(failure::invalid(
        {{{"body", "team_id"}, "no team of the tenant has this id", "value_error"}}));
  };
  auto not_held = [](const failure& f) {
    return f.code == domain::errc::not_found || f.code == domain::errc::insufficient_permissions;
  };
  auto set_team = [&s, tenant, id = *id, team = *team, answer, no_team,
                   not_held](domain::outcome<std::string> r) {
    if (!r) return answer(r.error());
    actors::set_channel_team(
        s.rt, tenant, id, team,
        actors::callback<domain::done>(
            [&s, tenant, id, answer, no_team, not_held](domain::outcome<domain::done> d) {
              if (!d) return not_held(d.error()) ? no_team() : answer(d.error());
              actors::get_channel(s.rt, tenant, id, answer);
            }));
  };
  auto apply = [&s, tenant, id = *id, p = std::move(p), set_team]() mutable {
    actors::update_channel(s.rt, tenant, id, std::move(p),
                           forgetting_channel(id, actors::callback<std::string>(set_team)));
  };
  if (!*team) return apply();
  actors::get_team(
      s.rt, tenant, **team,
      actors::callback<std::string>([apply = std::move(apply), no_team, answer,
                                     not_held](domain::outcome<std::string> r) mutable {
        if (r) return apply();
        not_held(r.error()) ? no_team() : answer(r.error());
      }));
}

void remove(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::delete_channel(s.rt, ex->who.tenant_id, *id,
                         forgetting_channel(*id, no_content_reply(ex)));
}

void inbound(services& s, const exchange_ptr& ex, actors::inbound_kind kind) {
  // The secret is checked before the body is even parsed; its absence first of all.
  std::optional<std::string_view> secret;
  if (kind == actors::inbound_kind::telegram) {
    secret = ex->req.header("x-telegram-bot-api-secret-token");
    if (!secret)
      return ex->fail(failure::invalid(
          {{{"header", "X-Telegram-Bot-Api-Secret-Token"}, "Field required", "missing"}}));
  } else {
    secret = ex->req.header("webhook_secret");
    if (!secret) secret = ex->req.header("webhook-secret");
    if (!secret)
      return ex->fail(
          failure::invalid({{{"header", "webhook_secret"}, "Field required", "missing"}}));
  }
  // The route shares its {id} segment with the CRUD routes; the specification names it
  // channel_id, and so do the validation errors.
  std::vector<issue> issues;
  auto id = path_id(ex->param("id"), "channel_id", issues);
  if (!id) return ex->fail(failure::invalid(std::move(issues)));
  actors::inbound_call call;
  call.kind = kind;
  call.secret = std::string(*secret);
  call.body = ex->req.body;
  // A workflow's http_request says how deep its chain is: a loop through this channel stops
  // like any other chain of workflows.
  if (auto v = ex->req.header("carecrm-chain-depth")) {
    for (char c : *v)
      if (c >= '0' && c <= '9' && call.depth < 100) call.depth = call.depth * 10 + (c - '0');
  }
  auto deliver = [&s, ex, id = *id](std::int64_t tenant, actors::inbound_call call) {
    within_tenant(s, ex, tenant, [&s, ex, id, tenant, call = std::move(call)]() mutable {
      actors::receive_inbound(s.rt, tenant, id, std::move(call), json_reply(ex));
    });
  };
  // The secret is checked here before the tenant is woken (the actor checks it again).
  auto shared = std::make_shared<actors::inbound_call>(std::move(call));
  auto accepts = [&s, shared](const persistence::secret_owner& o) {
    return s.pool.keys().verify(persistence::sealed::channel_webhook_secret, o.tenant_id,
                                shared->secret,
                                o.secret.value_or(std::string())) != domain::secret_keys::match::no;
  };
  channel_gate().admit(
      s.pool, *id, std::move(accepts),
      [ex, deliver, shared](domain::outcome<secret_gate::admission> r) mutable {
        if (!r) return ex->fail(r.error());
        if (r->v == secret_gate::verdict::unknown)
          return ex->fail(failure::of(domain::errc::not_found, "channel not found"));
        if (r->v == secret_gate::verdict::refused)
          return ex->fail(
              failure::of(domain::errc::invalid_credentials, "missing or wrong webhook secret"));
        deliver(r->tenant, std::move(*shared));
      });
}

// GET /media/{token}: a file carecrm sends, fetched by the provider (WhatsApp's media link,
// Twilio's MediaUrl) at the capability URL minted for the attempt; any flaw in the token → 404,
// saying nothing of what it named.
void provider_fetch(services& s, const exchange_ptr& ex) {
  namespace media = domain::media;
  auto gone = [ex] { ex->fail(failure::of(domain::errc::not_found, "no such file")); };
  auto parts = media::split_link_token(ex->param("token"));
  if (!parts) return gone();
  auto claim = media::read_link_payload(parts->payload);
  // Checked before the tenant is woken (and again by its channel actor): a token of no key of
  // this server wakes nobody.
  if (!claim || claim->expires < domain::now_micros() ||
      !domain::secret_keys::is_hashed(parts->mac) ||
      s.pool.keys().verify(media::link_purpose, claim->tenant, parts->payload, parts->mac) ==
          domain::secret_keys::match::no)
    return gone();
  within_tenant(s, ex, claim->tenant, [&s, ex, c = *claim, p = std::move(*parts), gone] {
    actors::read_linked_attachment(
        s.rt, c.tenant, c.message_id, c.n, p.payload, p.mac,
        actors::callback<actors::attachment>([ex, gone](domain::outcome<actors::attachment> r) {
          if (!r) return gone();
          response res;
          res.body = std::move(r->data);
          res.content_type = r->content_type;
          res.headers.emplace_back("X-Content-Type-Options", "nosniff");
          res.headers.emplace_back("Cache-Control", "private, no-store");
          ex->respond(std::move(res));
        }));
  });
}

// A forwarded mail carries its attachments (up to 16 MiB each, docs/channels.md "Media"): its
// route takes a body of up to 40 MiB, whatever --body-limit says for the other routes.
route large_mail(route rt) {
  rt.body_limit = std::size_t{40} * 1024 * 1024;
  return rt;
}

// ---- WhatsApp (docs/channels.md "WhatsApp") ---------------------------------------------------

// Admits a call on a provider's channel through its gate: `accepts` judges the provider's
// secret, then `deliver(tenant, id)` runs within the tenant. Unknown (no channel of the gate's
// type) → 404; refused → `refused`.
template <class Deliver>
void admit_signed(services& s, const exchange_ptr& ex, secret_gate& gate,
                  secret_gate::accepts_fn accepts, failure refused, Deliver deliver) {
  std::vector<issue> issues;
  auto id = path_id(ex->param("id"), "channel_id", issues);
  if (!id) return ex->fail(failure::invalid(std::move(issues)));
  gate.admit(
      s.pool, *id, std::move(accepts),
      [&s, ex, id = *id, refused = std::move(refused),
       deliver = std::move(deliver)](domain::outcome<secret_gate::admission> r) mutable {
        if (!r) return ex->fail(r.error());
        if (r->v == secret_gate::verdict::unknown)
          return ex->fail(failure::of(domain::errc::not_found, "no such channel of this type"));
        if (r->v == secret_gate::verdict::refused) return ex->fail(std::move(refused));
        auto tenant = r->tenant;
        within_tenant(s, ex, tenant, [ex, id, tenant, deliver = std::move(deliver)]() mutable {
          deliver(tenant, id);
        });
      });
}

// GET: Meta's subscription handshake. The challenge is echoed as text when hub.verify_token is
// the channel's; a wrong token is 403, as Meta expects.
void whatsapp_verify(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  auto challenge = ex->req.query_value("hub.challenge");
  if (!challenge || challenge->empty() || challenge->size() > 256)
    issues.push_back({{"query", "hub.challenge"}, "Field required: 1-256 characters", "missing"});
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::hub_verification v{std::string(ex->req.query_value("hub.mode").value_or("")),
                             std::string(ex->req.query_value("hub.verify_token").value_or("")),
                             std::string(*challenge)};
  admit_signed(
      s, ex, whatsapp_gate(), [](const persistence::secret_owner&) { return true; }, failure{},
      [&s, ex, v = std::move(v)](std::int64_t tenant, std::int64_t id) mutable {
        actors::verify_hub(s.rt, tenant, id, std::move(v),
                           actors::callback<std::string>([ex](domain::outcome<std::string> r) {
                             if (!r) return ex->fail(r.error());
                             response res;
                             res.body = std::move(*r);
                             res.content_type = "text/plain; charset=utf-8";
                             ex->respond(std::move(res));
                           }));
      });
}

// POST: messages and statuses, signed with X-Hub-Signature-256 (missing or wrong → 401).
void whatsapp_webhook(services& s, const exchange_ptr& ex) {
  auto refused =
      failure::of(domain::errc::invalid_credentials, "missing or wrong X-Hub-Signature-256");
  auto signature = ex->req.header("x-hub-signature-256");
  if (!signature) return ex->fail(refused);
  auto call = std::make_shared<actors::inbound_call>();
  call->kind = actors::inbound_kind::whatsapp;
  call->secret = std::string(*signature);
  call->body = ex->req.body;
  admit_signed(
      s, ex, whatsapp_gate(),
      [call](const persistence::secret_owner& o) {
        return domain::whatsapp::signature_matches(*o.secret, call->body, call->secret);
      },
      std::move(refused),
      [&s, ex, call](std::int64_t tenant, std::int64_t id) {
        actors::receive_inbound(s.rt, tenant, id, std::move(*call), json_reply(ex));
      });
}

// ---- SMS (Twilio; docs/channels.md "SMS") -------------------------------------------------------

// POST: an incoming message or a status callback, as a form signed with X-Twilio-Signature
// over the URL Twilio called and the fields. Answered with empty TwiML (Twilio sends nothing
// back on its own).
void sms_webhook(services& s, const exchange_ptr& ex) {
  auto refused =
      failure::of(domain::errc::invalid_credentials, "missing or wrong X-Twilio-Signature");
  auto signature = ex->req.header("x-twilio-signature");
  if (!signature) return ex->fail(refused);
  auto call = std::make_shared<actors::inbound_call>();
  call->kind = actors::inbound_kind::sms;
  call->secret = std::string(*signature);
  call->form = parse_query(ex->req.body);
  call->url = actors::public_base_url(s.rt) + ex->req.target;
  admit_signed(
      s, ex, sms_gate(),
      [call](const persistence::secret_owner& o) {
        return domain::twilio::signature_matches(*o.secret, call->url, call->form, call->secret);
      },
      std::move(refused),
      [&s, ex, call](std::int64_t tenant, std::int64_t id) {
        actors::receive_inbound(s.rt, tenant, id, std::move(*call),
                                actors::callback<std::string>([ex](domain::outcome<std::string> r) {
                                  if (!r) return ex->fail(r.error());
                                  response res;
                                  res.body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
                                             "<Response></Response>";
                                  res.content_type = "text/xml; charset=utf-8";
                                  ex->respond(std::move(res));
                                }));
      });
}

// ---- E-mail (Mailgun's inbound routes; docs/channels.md "E-mail") -----------------------------

// POST: an e-mail a route forwarded, as a form (urlencoded, or multipart with attachments)
// signed with timestamp, token and signature (HMAC-SHA256 under the webhook signing key).
void email_webhook(services& s, const exchange_ptr& ex) {
  auto refused =
      failure::of(domain::errc::invalid_credentials, "missing or wrong Mailgun signature");
  auto call = std::make_shared<actors::inbound_call>();
  call->kind = actors::inbound_kind::email;
  auto type = ex->req.header("content-type").value_or("");
  if (auto boundary = domain::email::multipart_boundary(type)) {
    auto parts = domain::email::parse_multipart(ex->req.body, *boundary);
    if (!parts)
      return ex->fail(
          failure::invalid({{{"body"}, "not a multipart/form-data document", "value_error"}}));
    call->form = std::move(parts->fields);
    call->files = std::move(parts->files);
  } else {
    call->form = parse_query(ex->req.body);
  }
  auto field = [call](std::string_view name) {
    for (auto& [k, v] : call->form)
      if (k == name) return v;
    return std::string();
  };
  if (field("signature").empty()) return ex->fail(refused);
  admit_signed(
      s, ex, email_gate(),
      [call, field](const persistence::secret_owner& o) {
        return domain::email::signature_matches(*o.secret, field("timestamp"), field("token"),
                                                field("signature"));
      },
      std::move(refused),
      [&s, ex, call](std::int64_t tenant, std::int64_t id) {
        actors::receive_inbound(s.rt, tenant, id, std::move(*call), json_reply(ex));
      });
}

void templates(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::list_templates(s.rt, ex->who.tenant_id, *id, json_reply(ex));
}

void api_webhook(services& s, const exchange_ptr& ex) {
  inbound(s, ex, actors::inbound_kind::api);
}
void telegram_webhook(services& s, const exchange_ptr& ex) {
  inbound(s, ex, actors::inbound_kind::telegram);
}

// ---- OpenAPI schemas -------------------------------------------------------------------------

using schema::constant;
using schema::object_t;

// The statuses of an inbound webhook's answer (actors/channels_actor.cpp: ack, on_inbound).
constexpr std::string_view accepted_status = "accepted";
constexpr std::string_view ignored_status = "ignored";
// The white space domain::trim removes, and an http(s) URL's start (domain::parse_url, which
// also wants a host and accepts no spaces, controls, '#' or '\').
constexpr std::string_view blank_class = "[ \\t\\n\\r\\f\\v]";
constexpr std::string_view http_url_start = "^[Hh][Tt][Tt][Pp][Ss]?://";

// One object schema per kind of channel, told apart by `type`: `make(type_schema, kind)`
// builds each.
template <class Make>
object_t by_channel_type(Make make) {
  using domain::channel_type;
  constexpr std::array kinds_of = {channel_type::api, channel_type::telegram,
                                   channel_type::whatsapp, channel_type::sms, channel_type::email};
  static_assert(kinds_of.size() == rules::types.size());
  json::array kinds;
  for (auto k : kinds_of) kinds.push_back(make(constant(domain::to_string(k)), k));
  return object_t{{"oneOf", std::move(kinds)}};
}

object_t url(bool as_base) {
  auto u = schema::text({.min = 1, .max = rules::url_max});
  // A base URL takes paths after it: no query.
  u["pattern"] = std::string(http_url_start) + (as_base ? "[^?]*$" : "");
  return u;
}

// A string of 1..external_id_max characters or an integer (kept as its decimal text).
object_t external_id() {
  return object_t{{"anyOf", json::array{schema::text({.min = 1, .max = rules::external_id_max}),
                                        schema::integer()}}};
}

void define_channel_schemas(router& r) {
  using namespace schema;
  // The config a client sends, by type (domain::parse_channel_config). null members are not
  // given; on an update a secret not sent is kept and null removes it.
  define(r, "ChannelApiConfigInput",
         object({{"outbound_url", nullable(url(false)), false},
                 {"signing_secret", nullable(text(secret_rule)), false}}));
  auto bot_token =
      text_matching("^[0-9]+:[A-Za-z0-9_-]{" + std::to_string(rules::bot_token_secret_min) + ",}$");
  // On create the bot_token is required; an update keeps the stored one.
  for (bool creating : {true, false})
    define(
        r, creating ? "ChannelTelegramConfigCreate" : "ChannelTelegramConfigUpdate",
        object({{"bot_token", bot_token, creating}, {"api_base_url", nullable(url(true)), false}}));
  // WhatsApp (domain::whatsapp): the number's id and the three secrets are required on create.
  auto digits = text_matching("^[0-9]{1," + std::to_string(rules::whatsapp_id_max) + "}$");
  for (bool creating : {true, false})
    define(r, creating ? "ChannelWhatsAppConfigCreate" : "ChannelWhatsAppConfigUpdate",
           object({{"phone_number_id", digits, creating},
                   {"business_account_id", nullable(digits), false},
                   {"api_base_url", nullable(url(true)), false},
                   {"api_version", nullable(text_matching("^v[0-9]+\\.[0-9]+$")), false},
                   {"access_token", text({.min = 1, .max = rules::config_value_max}), creating},
                   {"app_secret", text({.min = 1, .max = rules::config_value_max}), creating},
                   {"verify_token", text({.min = 1, .max = rules::config_value_max}), creating}}));
  // SMS through Twilio: the account, its number and the auth token are required on create.
  for (bool creating : {true, false})
    define(r, creating ? "ChannelSmsConfigCreate" : "ChannelSmsConfigUpdate",
           object({{"account_sid", text_matching("^AC[0-9a-fA-F]{32}$"), creating},
                   {"from_number", text_matching("^\\+[1-9][0-9]{1,14}$"), creating},
                   {"api_base_url", nullable(url(true)), false},
                   {"auth_token", text({.min = 1, .max = rules::config_value_max}), creating}}));
  // E-mail: the SMTP server and sender are required on create.
  for (bool creating : {true, false})
    define(
        r, creating ? "ChannelEmailConfigCreate" : "ChannelEmailConfigUpdate",
        object(
            {{"smtp_host", text_matching("^[A-Za-z0-9.-]{1,253}$"), creating},
             {"smtp_port", nullable(integer()), false},
             {"smtp_security",
              nullable(one_of(std::array<std::string_view, 3>{"starttls", "tls", "none"})), false},
             {"smtp_username", nullable(text({.min = 1, .max = 200})), false},
             {"smtp_password", nullable(text({.min = 1, .max = rules::config_value_max})), false},
             {"from_address", text({.min = 3, .max = 254}), creating},
             {"from_name", nullable(text({.min = 1, .max = 200})), false},
             {"subject", nullable(text({.min = 1, .max = 200})), false},
             {"inbound_signing_key", nullable(text({.min = 1, .max = rules::config_value_max})),
              false}}));

  // A create names its type, and the config is checked for it (none: an empty one, which a
  // telegram channel cannot have: its bot_token is required).
  auto zone = [] {
    auto z = text(zone_rule);
    z["description"] = "an IANA time zone name (default UTC): the business_hours' local time";
    return z;
  };
  define(r, "ChannelCreate", by_channel_type([&](object_t type, domain::channel_type kind) {
           bool telegram = kind == domain::channel_type::telegram;
           bool whatsapp = kind == domain::channel_type::whatsapp;
           bool sms = kind == domain::channel_type::sms;
           bool email = kind == domain::channel_type::email;
           return object({{"name", text(name_rule)},
                          {"type", std::move(type)},
                          {"config",
                           telegram   ? ref("ChannelTelegramConfigCreate")
                           : whatsapp ? ref("ChannelWhatsAppConfigCreate")
                           : sms      ? ref("ChannelSmsConfigCreate")
                           : email    ? ref("ChannelEmailConfigCreate")
                                      : nullable(ref("ChannelApiConfigInput")),
                           telegram || whatsapp || sms || email},
                          {"webhook_secret", nullable(text(secret_rule)), false},
                          {"is_active", boolean(), false},
                          {"business_hours", nullable(ref("WorkingHours")), false},
                          {"time_zone", zone(), false},
                          {"after_hours_reply", nullable(text(reply_rule)), false}});
         }));
  // An update's config is checked against the channel's type, which cannot change (409).
  define(r, "ChannelUpdate",
         object({{"name", text(name_rule), false},
                 {"type", one_of(rules::types), false},
                 {"config",
                  nullable(object_t{{"anyOf", json::array{ref("ChannelApiConfigInput"),
                                                          ref("ChannelTelegramConfigUpdate"),
                                                          ref("ChannelWhatsAppConfigUpdate"),
                                                          ref("ChannelSmsConfigUpdate"),
                                                          ref("ChannelEmailConfigUpdate")}}}),
                  false},
                 {"webhook_secret", nullable(text(secret_rule)), false},
                 {"is_active", boolean(), false},
                 {"business_hours", nullable(ref("WorkingHours")), false},
                 {"time_zone", zone(), false},
                 {"after_hours_reply", nullable(text(reply_rule)), false},
                 {"team_id", nullable(id()), false}}));

  // The config as answers show it (domain::public_config): secrets are never rendered, only
  // has_<key> flags.
  define(r, "ChannelApiConfig",
         object({{"outbound_url", text({}), false}, {"has_signing_secret", boolean()}}));
  define(r, "ChannelTelegramConfig",
         object({{"api_base_url", text({}), false}, {"has_bot_token", boolean()}}));
  define(r, "ChannelWhatsAppConfig",
         object({{"phone_number_id", text({})},
                 {"business_account_id", text({}), false},
                 {"api_base_url", text({}), false},
                 {"api_version", text({}), false},
                 {"has_access_token", boolean()},
                 {"has_app_secret", boolean()},
                 {"has_verify_token", boolean()}}));
  define(r, "ChannelSmsConfig",
         object({{"account_sid", text({})},
                 {"from_number", text({})},
                 {"api_base_url", text({}), false},
                 {"has_auth_token", boolean()}}));
  define(r, "ChannelEmailConfig",
         object({{"smtp_host", text({})},
                 {"smtp_port", integer(), false},
                 {"smtp_security", text({}), false},
                 {"smtp_username", text({}), false},
                 {"from_address", text({})},
                 {"from_name", text({}), false},
                 {"subject", text({}), false},
                 {"has_smtp_password", boolean()},
                 {"has_inbound_signing_key", boolean()}}));
  define(r, "Channel", by_channel_type([&](object_t type, domain::channel_type kind) {
           auto config = kind == domain::channel_type::api        ? ref("ChannelApiConfig")
                         : kind == domain::channel_type::telegram ? ref("ChannelTelegramConfig")
                         : kind == domain::channel_type::whatsapp ? ref("ChannelWhatsAppConfig")
                         : kind == domain::channel_type::sms      ? ref("ChannelSmsConfig")
                                                                  : ref("ChannelEmailConfig");
           auto has_secret = boolean();
           has_secret["description"] = "whether a webhook_secret is set (it is never shown)";
           return object({{"id", id()},
                          {"name", text({})},
                          {"type", std::move(type)},
                          {"config", std::move(config)},
                          {"is_active", boolean()},
                          {"has_secret", has_secret},
                          {"webhook_url", text({})},
                          {"business_hours", nullable(ref("WorkingHours"))},
                          {"time_zone", text({})},
                          {"after_hours_reply", nullable(text({}))},
                          {"team_id", nullable(id())},
                          {"created_at", timestamp()},
                          {"updated_at", timestamp()}});
         }));
  define(r, "ChannelPage", page_of("Channel"));

  // The generic inbound body (domain::parse_api_inbound): null members are not given.
  auto phone = text_matching(
      "^" + std::string(blank_class) + "*" +
      std::string(contact_rules::phone_pattern.substr(1, contact_rules::phone_pattern.size() - 2)) +
      std::string(blank_class) + "*$");
  auto contact = object({{"phone", nullable(phone), false},
                         {"email", nullable(text({})), false},
                         {"name", nullable(text({.max = rules::contact_name_max})), false},
                         {"external_id", nullable(external_id()), false}});
  contact["description"] = "who sent it: matched to a contact by external_id, phone or email "
                           "(each trimmed), else a new contact";
  json::array one_given;
  for (auto key : {"phone", "email", "external_id"})
    one_given.emplace_back(
        object_t{{"required", json::array{key}},
                 {"properties", object_t{{key, object_t{{"not", object_t{{"type", "null"}}}}}}}});
  contact["anyOf"] = std::move(one_given);
  auto text_body = text({.min = 1, .max = rules::text_max});
  text_body["pattern"] = "[^" + std::string(blank_class.substr(1)); // not white space alone
  define(r, "ChannelInboundMessage",
         object({{"event", nullable(constant(rules::inbound_event)), false},
                 {"contact", contact},
                 {"message", object({{"text", text_body}, {"external_message_id", external_id()}})},
                 {"timestamp", nullable(timestamp()), false}}));
  define(r, "ChannelInboundAck",
         object({{"status", constant(accepted_status)},
                 {"message_id", id()},
                 {"conversation_id", id()},
                 {"contact_id", id()},
                 {"duplicate", boolean()}}));

  // A Telegram Update (domain::parse_telegram_update): its message (or channel_post) when it is
  // a text message; anything else is acknowledged as ignored.
  auto message = object(
      {{"message_id", integer(), false},
       {"chat", object({{"id", integer()}}, false), false},
       {"text", text({}), false},
       {"from", object({{"first_name", text({}), false}, {"last_name", text({}), false}}, false),
        false},
       {"date", integer(), false}},
      false);
  message["if"] = object_t{{"properties", object_t{{"text", text({.min = 1})}}},
                           {"required", json::array{"text"}}};
  message["then"] =
      object({{"message_id", integer()}, {"chat", object({{"id", integer()}}, false)}}, false);
  define(r, "TelegramMessage", message);
  define(r, "TelegramUpdate",
         object({{"message", nullable(ref("TelegramMessage")), false},
                 {"channel_post", nullable(ref("TelegramMessage")), false}},
                false));
  define(r, "ChannelInboundIgnored", object({{"status", constant(ignored_status)}}));

  // Meta's webhook body (domain::whatsapp::parse_webhook): entries of changes; the "messages"
  // field's value holds the number's metadata, the senders' profiles, messages and statuses.
  auto wa_message = object({{"from", text_matching("^[0-9]{1,20}$")},
                            {"id", text({.min = 1, .max = rules::external_id_max})},
                            {"type", text({.min = 1})},
                            {"timestamp", text({}), false}},
                           false);
  auto wa_status = object({{"id", text({.min = 1, .max = rules::external_id_max})},
                           {"status", text({})},
                           {"errors", array_of(any_object()), false}},
                          false);
  auto wa_value = object({{"metadata", object({{"phone_number_id", text({})}}, false), false},
                          {"contacts", array_of(any_object()), false},
                          {"messages", array_of(wa_message), false},
                          {"statuses", array_of(wa_status), false}},
                         false);
  auto wa_change = object({{"field", text({}), false}, {"value", wa_value, false}}, false);
  define(r, "WhatsAppWebhook",
         object({{"object", text({}), false},
                 {"entry", array_of(object({{"changes", array_of(wa_change), false}}, false))}},
                false));
  define(r, "WhatsAppWebhookAck",
         object({{"status", constant(accepted_status)},
                 {"messages", array_of(ref("ChannelInboundAck"))},
                 {"statuses", integer()},
                 {"ignored", integer()}}));
  // Twilio's form (domain::twilio::parse_webhook): an incoming message (From, Body, media) or
  // a status callback (MessageStatus); other fields Twilio sends are taken and ignored.
  auto twilio = object({{"AccountSid", text({})},
                        {"MessageSid", text({.min = 1, .max = rules::external_id_max})},
                        {"From", text({}), false},
                        {"To", text({}), false},
                        {"Body", text({}), false},
                        {"NumMedia", text({}), false},
                        {"MessageStatus", text({}), false},
                        {"ErrorCode", text({}), false}},
                       false);
  define(r, "TwilioWebhook", twilio);
  // Mailgun's forwarded message (domain::email::parse_inbound); also as multipart/form-data
  // with attachments.
  define(r, "MailgunInbound",
         object({{"timestamp", text({})},
                 {"token", text({})},
                 {"signature", text({})},
                 {"sender", text({}), false},
                 {"from", text({}), false},
                 {"subject", text({}), false},
                 {"body-plain", text({}), false},
                 {"stripped-text", text({}), false},
                 {"Message-Id", text({})},
                 {"In-Reply-To", text({}), false},
                 {"References", text({}), false}},
                false));
  define(r, "WhatsAppTemplate",
         object({{"name", nullable(text({}))},
                 {"language", nullable(text({}))},
                 {"status", nullable(text({}))},
                 {"category", nullable(text({}))},
                 {"body", nullable(text({}))},
                 {"parameters", integer()}}));
  define(r, "WhatsAppTemplateList", object({{"items", array_of(ref("WhatsAppTemplate"))}}));
  define(r, "TelegramWebhookAnswer",
         object_t{{"oneOf", json::array{ref("ChannelInboundAck"), ref("ChannelInboundIgnored")}}});
}

constexpr const char* create_example = R"({
  "name": "Website chat",
  "type": "api",
  "config": {"outbound_url": "https://clinic.example/crm/outbound",
             "signing_secret": "a-long-signing-secret-0123"},
  "webhook_secret": "an-inbound-secret-0123456789",
  "is_active": true
})";
constexpr const char* inbound_example = R"({
  "event": "message.received",
  "contact": {"phone": "+15551234567", "name": "Ada Lovelace"},
  "message": {"text": "Can I book a check-up next week?", "external_message_id": "msg-1001"},
  "timestamp": "2025-01-15T10:30:00Z"
})";

// An inbound webhook's documentation: its secret headers and its bodies.
} // namespace

void add_channel_routes(router& r, services& s) {
  constexpr auto admin = domain::permission::administer;
  define_channel_schemas(r);
  r.add({verb::get, "/api/v1/channels", access::bearer, admin, bind(s, list),
         "List channels (page, per_page, type, is_active)", "channels"},
        route_doc("", "ChannelPage")
            .with_query(schema::paging())
            .with_query({schema::query("type", schema::one_of(rules::types), "only this type"),
                         schema::query("is_active", schema::boolean(),
                                       "only active (true) or inactive (false) channels")}));
  r.add({verb::post, "/api/v1/channels", access::bearer, admin, bind(s, create), "Create a channel",
         "channels", 201},
        route_doc("ChannelCreate", "Channel").with_example(create_example));
  r.add({verb::get, "/api/v1/channels/{id}", access::bearer, admin, bind(s, get), "Get a channel",
         "channels"},
        {"", "Channel"});
  r.add({verb::put, "/api/v1/channels/{id}", access::bearer, admin, bind(s, update),
         "Update a channel (fields sent)", "channels"},
        {"ChannelUpdate", "Channel"});
  r.add({verb::patch, "/api/v1/channels/{id}", access::bearer, admin, bind(s, update),
         "Update a channel (fields sent)", "channels"},
        {"ChannelUpdate", "Channel"});
  r.add({verb::del, "/api/v1/channels/{id}", access::bearer, admin, bind(s, remove),
         "Delete a channel with its conversations", "channels", 204});
  // 409: the channel is inactive.
  r.add({verb::post,
         "/api/v1/channels/{id}/api/webhook",
         access::open,
         {},
         bind(s, api_webhook),
         "Receive a message from an external system (header webhook_secret)",
         "channels"},
        route_doc("ChannelInboundMessage", "ChannelInboundAck")
            .with_secret_headers({"webhook_secret"})
            .fails_with({409})
            .with_example(inbound_example));
  r.add({verb::post,
         "/api/v1/channels/{id}/telegram/webhook",
         access::open,
         {},
         bind(s, telegram_webhook),
         "Receive a Telegram update (header X-Telegram-Bot-Api-Secret-Token)",
         "channels"},
        route_doc("TelegramUpdate", "TelegramWebhookAnswer")
            .with_secret_headers({"X-Telegram-Bot-Api-Secret-Token"})
            .fails_with({409}));
  r.add({verb::get,
         "/api/v1/channels/{id}/whatsapp/webhook",
         access::open,
         {},
         bind(s, whatsapp_verify),
         "Meta's webhook verification (hub.mode, hub.verify_token, hub.challenge)",
         "channels"},
        route_doc("", "")
            .with_query({schema::query("hub.mode", schema::constant("subscribe"), "subscribe"),
                         schema::query("hub.verify_token", schema::text({}),
                                       "the channel's config.verify_token"),
                         schema::query("hub.challenge", schema::text({.min = 1, .max = 256}),
                                       "echoed back as text when the token matches")})
            .with_media("", "text/plain")
            .fails_with({403}));
  r.add({verb::post,
         "/api/v1/channels/{id}/whatsapp/webhook",
         access::open,
         {},
         bind(s, whatsapp_webhook),
         "Receive WhatsApp messages and delivery statuses (header X-Hub-Signature-256)",
         "channels"},
        route_doc("WhatsAppWebhook", "WhatsAppWebhookAck")
            .with_secret_headers({"X-Hub-Signature-256"})
            .fails_with({409, 503}));
  r.add({verb::post,
         "/api/v1/channels/{id}/sms/webhook",
         access::open,
         {},
         bind(s, sms_webhook),
         "Receive an SMS, or a sent one's status, from Twilio (header X-Twilio-Signature)",
         "channels"},
        route_doc("TwilioWebhook", "")
            .with_media("application/x-www-form-urlencoded", "text/xml")
            .with_secret_headers({"X-Twilio-Signature"})
            .fails_with({409, 503}));
  r.add({verb::get,
         "/api/v1/media/{token}",
         access::open,
         {},
         bind(s, provider_fetch),
         "A file carecrm sends, for the provider to fetch (the capability URL it was given, "
         "valid an hour)",
         "conversations"},
        route_doc().with_media("", "application/octet-stream"));
  r.add(
      large_mail(
          {verb::post,
           "/api/v1/channels/{id}/email/webhook",
           access::open,
           {},
           bind(s, email_webhook),
           "Receive an e-mail a Mailgun route forwarded (signed with timestamp, token, signature)",
           "channels"}),
      route_doc("MailgunInbound", "ChannelInboundAck")
          .with_media("application/x-www-form-urlencoded", "application/json")
          .fails_with({401, 409}));
  r.add({verb::get, "/api/v1/channels/{id}/templates", access::bearer,
         domain::permission::write_records, bind(s, templates),
         "A WhatsApp channel's message templates, as the provider lists them", "channels"},
        route_doc("", "WhatsAppTemplateList").fails_with({409, 503}));
}

} // namespace crm::http
