// The WhatsApp Cloud API's wire format (docs/channels.md "WhatsApp"): Meta's webhook
// (https://developers.facebook.com/docs/graph-api/webhooks/getting-started, the WhatsApp
// "messages" field) and the Cloud API's messages and message_templates endpoints.
#include "domain/whatsapp.hpp"

#include "domain/crypto.hpp"
#include "domain/json_check.hpp"
#include "domain/json_nul.hpp"
#include "domain/json_parse.hpp"
#include "domain/validation.hpp"
#include "domain/workflow.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>

namespace crm::domain::whatsapp {
namespace json = boost::json;
using namespace detail;

namespace {

using channel_rules::external_id_max;
using channel_rules::text_max;

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// {base}/{version}/: the Graph API's root for the channel.
std::string graph_root(const channel& c) {
  auto base = config_string(c.config, "api_base_url").value_or(std::string(default_base_url));
  while (!base.empty() && base.back() == '/') base.pop_back();
  return base + "/" +
         config_string(c.config, "api_version").value_or(std::string(default_api_version)) + "/";
}

const json::string* string_at(const json::object& o, std::string_view key) {
  auto v = given(o, key);
  return v ? v->if_string() : nullptr;
}

// "image", "document"...: what staff read for a message whose content is not text.
std::string described(std::string_view type, const json::object& m) {
  std::string out = "[" + std::string(type) + "]";
  auto part = given(m, type);
  auto po = part ? part->if_object() : nullptr;
  if (po) {
    for (auto key : {"caption", "filename", "emoji"})
      if (auto s = string_at(*po, key); s && !s->empty()) {
        out += ' ';
        out += sv(*s);
      }
    if (auto id = string_at(*po, "id"); id && !id->empty())
      out += " (media " + std::string(sv(*id)) + ")";
    if (type == "location") {
      for (auto key : {"name", "address"})
        if (auto s = string_at(*po, key); s && !s->empty()) {
          out += ' ';
          out += sv(*s);
        }
      auto lat = given(*po, "latitude"), lon = given(*po, "longitude");
      if (lat && lon && lat->is_number() && lon->is_number()) {
        // Degrees as people write them ("-23.5"), not JSON's exponent form ("-2.35E1").
        char where[64];
        std::snprintf(where, sizeof where, " (%.6g, %.6g)", lat->to_number<double>(),
                      lon->to_number<double>());
        out += where;
      }
    }
  }
  return std::string(utf8_prefix(out, text_max));
}

// The text of a message: its body, the title of a button or list reply, else a description.
std::string message_text(const json::object& m, std::string_view type) {
  auto nested = [&](std::string_view part, std::string_view key) -> const json::string* {
    auto p = given(m, part);
    auto po = p ? p->if_object() : nullptr;
    return po ? string_at(*po, key) : nullptr;
  };
  const json::string* s = nullptr;
  if (type == "text") s = nested("text", "body");
  if (type == "button") s = nested("button", "text");
  if (type == "interactive") {
    auto i = given(m, "interactive");
    auto io = i ? i->if_object() : nullptr;
    for (auto reply : {"button_reply", "list_reply"}) {
      auto r = io ? given(*io, reply) : nullptr;
      if (auto ro = r ? r->if_object() : nullptr) s = string_at(*ro, "title");
      if (s) break;
    }
  }
  if (s && !trim(sv(*s)).empty()) return std::string(utf8_prefix(sv(*s), text_max));
  return described(type, m);
}

std::string error_text(const json::object& e) {
  std::string out;
  if (auto code = given(e, "code"))
    if (auto n = as_integer(*code)) out = std::to_string(*n);
  for (auto key : {"title", "message"})
    if (auto s = string_at(e, key); s && !s->empty()) {
      if (!out.empty()) out += ' ';
      out += sv(*s);
      break;
    }
  if (auto d = given(e, "error_data"); d && d->is_object())
    if (auto s = string_at(d->get_object(), "details"); s && !s->empty()) {
      out += ": ";
      out += sv(*s);
    }
  return std::string(utf8_prefix(out, 1000));
}

// Codes of the Cloud API that mean "try again later": throttling, a temporary fault.
constexpr std::array<std::int64_t, 10> retry_codes = {1,     2,      4,      17,     341,
                                                      80007, 130429, 131000, 131016, 133004};

} // namespace

// ---- The webhook ------------------------------------------------------------------------

std::string signature(std::string_view app_secret, std::string_view body) {
  return "sha256=" + hex_encode(as_bytes(hmac_sha256(app_secret, body)));
}

bool signature_matches(std::string_view app_secret, std::string_view body,
                       std::string_view header) {
  if (app_secret.empty()) return false;
  std::string lower = ascii_lower(trim(header));
  return constant_time_equal(lower, signature(app_secret, body));
}

bool verification_accepted(std::string_view mode, std::string_view token,
                           std::string_view verify_token) {
  return mode == "subscribe" && !verify_token.empty() && secrets_equal(token, verify_token);
}

std::optional<webhook_batch> parse_webhook(std::string_view body, std::string_view phone_number_id,
                                           std::vector<issue>& issues) {
  checker ck{issues};
  const auto before = issues.size();
  json::value doc;
  auto o = body_object(body, doc, issues);
  if (!o) return std::nullopt;
  const loc_path root = {std::string("body")};
  webhook_batch out;
  auto entries_v = member(*o, "entry");
  if (!entries_v) {
    ck.add(at(root, "entry"), "Field required", "missing");
    return std::nullopt;
  }
  auto entries = ck.array(*entries_v, at(root, "entry"));
  if (!entries) return std::nullopt;
  for (std::size_t e = 0; e < entries->size(); ++e) {
    auto le = at(at(root, "entry"), static_cast<std::int64_t>(e));
    auto entry = ck.object((*entries)[e], le);
    if (!entry) continue;
    auto changes_v = given(*entry, "changes");
    if (!changes_v) continue;
    auto changes = ck.array(*changes_v, at(le, "changes"));
    if (!changes) continue;
    for (std::size_t c = 0; c < changes->size(); ++c) {
      auto lc = at(at(le, "changes"), static_cast<std::int64_t>(c));
      auto change = ck.object((*changes)[c], lc);
      if (!change) continue;
      auto field = string_at(*change, "field");
      auto value_v = given(*change, "value");
      auto value = value_v ? value_v->if_object() : nullptr;
      if (!field || sv(*field) != "messages" || !value) {
        out.ignored++;
        continue;
      }
      auto lv = at(lc, "value");
      // Meta posts every number of the app to its one callback URL: another number's
      // messages are not this channel's.
      auto meta = given(*value, "metadata");
      auto number =
          meta && meta->is_object() ? string_at(meta->get_object(), "phone_number_id") : nullptr;
      if (!number || sv(*number) != phone_number_id) {
        out.ignored++;
        continue;
      }
      // The profile name of each sender, by WhatsApp id.
      std::vector<std::pair<std::string, std::string>> names;
      if (auto contacts = given(*value, "contacts"); contacts && contacts->is_array())
        for (auto& ct : contacts->get_array()) {
          auto co = ct.if_object();
          auto wa = co ? string_at(*co, "wa_id") : nullptr;
          auto profile = co ? given(*co, "profile") : nullptr;
          auto name =
              profile && profile->is_object() ? string_at(profile->get_object(), "name") : nullptr;
          if (wa && name && !trim(sv(*name)).empty())
            names.emplace_back(std::string(sv(*wa)), std::string(trim(sv(*name))));
        }
      if (auto messages_v = given(*value, "messages")) {
        auto messages = ck.array(*messages_v, at(lv, "messages"));
        for (std::size_t i = 0; messages && i < messages->size(); ++i) {
          auto lm = at(at(lv, "messages"), static_cast<std::int64_t>(i));
          auto m = ck.object((*messages)[i], lm);
          if (!m) continue;
          auto from = string_at(*m, "from");
          auto id = string_at(*m, "id");
          auto type = string_at(*m, "type");
          if (!from || !all_digits(sv(*from)) || from->size() > 20)
            ck.add(at(lm, "from"), "a WhatsApp id: 1-20 digits", "value_error");
          if (!id || id->empty() || utf8_length(sv(*id)) > external_id_max)
            ck.add(at(lm, "id"), "a message id of 1-200 characters", "value_error");
          if (!type || type->empty()) ck.add(at(lm, "type"), "Field required", "missing");
          if (issues.size() != before) continue;
          inbound_message in;
          in.external_message_id = std::string(sv(*id));
          in.contact.external_id = std::string(sv(*from));
          if (auto phone = "+" + std::string(sv(*from)); is_e164(phone)) in.contact.phone = phone;
          for (auto& [wa, name] : names)
            if (wa == sv(*from)) in.contact.name = std::string(utf8_prefix(name, 200));
          in.text = message_text(*m, sv(*type));
          // A file (image, document, audio, video, sticker): fetched by its media id.
          if (auto part = given(*m, sv(*type)); part && part->is_object())
            if (auto media_id = string_at(part->get_object(), "id");
                media_id && !media_id->empty() && media_id->size() <= external_id_max) {
              auto mime = string_at(part->get_object(), "mime_type");
              auto name = string_at(part->get_object(), "filename");
              in.media.push_back(
                  {std::string(sv(*media_id)), mime ? std::string(sv(*mime)) : std::string(),
                   name ? std::string(utf8_prefix(sv(*name), 200)) : std::string(), std::nullopt});
            }
          if (auto t = string_at(*m, "timestamp")) {
            std::int64_t secs = 0;
            auto s = sv(*t);
            auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), secs);
            if (ec == std::errc{} && p == s.data() + s.size() && secs > 0 &&
                secs < 100'000'000'000LL)
              in.timestamp = secs * 1'000'000;
          }
          out.messages.push_back(std::move(in));
        }
      }
      if (auto statuses_v = given(*value, "statuses")) {
        auto statuses = ck.array(*statuses_v, at(lv, "statuses"));
        for (std::size_t i = 0; statuses && i < statuses->size(); ++i) {
          auto ls = at(at(lv, "statuses"), static_cast<std::int64_t>(i));
          auto s = ck.object((*statuses)[i], ls);
          if (!s) continue;
          auto id = string_at(*s, "id");
          auto status = string_at(*s, "status");
          if (!id || id->empty() || utf8_length(sv(*id)) > external_id_max) {
            ck.add(at(ls, "id"), "a message id of 1-200 characters", "value_error");
            continue;
          }
          auto d = status ? parse_delivery(sv(*status)) : std::nullopt;
          if (!d) { // "deleted", "warning": nothing carecrm shows
            out.ignored++;
            continue;
          }
          status_update u;
          u.provider_message_id = std::string(sv(*id));
          u.status = *d;
          if (auto ref = string_at(*s, "biz_opaque_callback_data"))
            u.message_id = message_ref_of(sv(*ref));
          if (*d == delivery::failed) {
            std::string why;
            if (auto errors = given(*s, "errors"); errors && errors->is_array())
              for (auto& err : errors->get_array())
                if (auto eo = err.if_object()) {
                  if (!why.empty()) why += "; ";
                  why += error_text(*eo);
                }
            u.error = why.empty() ? std::string("whatsapp: failed") : "whatsapp: " + why;
          }
          out.statuses.push_back(std::move(u));
        }
      }
    }
  }
  if (issues.size() != before) return std::nullopt;
  return out;
}

// ---- Sending ----------------------------------------------------------------------------

std::optional<template_message> parse_template(const json::value& v, std::vector<loc_part> loc,
                                               std::vector<issue>& issues) {
  checker ck{issues};
  const auto before = issues.size();
  auto o = ck.object(v, loc);
  if (!o) return std::nullopt;
  ck.extra_keys(*o, {"name", "language", "parameters"}, loc);
  template_message t;
  auto name_v = member(*o, "name");
  if (!name_v) {
    ck.add(at(loc, "name"), "Field required", "missing");
  } else if (auto s = ck.string(*name_v, at(loc, "name"), 1, template_name_max)) {
    if (std::all_of(s->begin(), s->end(), [](char c) {
          return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
        }))
      t.name = std::string(*s);
    else
      ck.add(at(loc, "name"), "a template name: lower-case letters, digits and _", "value_error");
  }
  auto lang_v = member(*o, "language");
  if (!lang_v) {
    ck.add(at(loc, "language"), "Field required", "missing");
  } else if (auto s = ck.string(*lang_v, at(loc, "language"), 2, template_language_max)) {
    if (std::all_of(s->begin(), s->end(), [](char c) {
          return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
        }))
      t.language = std::string(*s);
    else
      ck.add(at(loc, "language"), "a language code such as pt_BR or en", "value_error");
  }
  if (auto p = given(*o, "parameters")) {
    auto where = at(loc, "parameters");
    if (auto a = ck.array(*p, where)) {
      if (a->size() > template_parameters_max)
        ck.too_long(a->size(), template_parameters_max, where, "List");
      for (std::size_t i = 0; i < a->size() && i < template_parameters_max; ++i)
        if (auto s = ck.string((*a)[i], at(where, static_cast<std::int64_t>(i)), 1,
                               template_parameter_max))
          t.parameters.emplace_back(*s);
    }
  }
  if (issues.size() != before) return std::nullopt;
  return t;
}

std::string template_to_json(const template_message& t) {
  json::array params;
  for (auto& p : t.parameters) params.emplace_back(p);
  return json::serialize(
      json::object{{"name", t.name}, {"language", t.language}, {"parameters", std::move(params)}});
}

std::optional<template_message> template_from_json(std::string_view text) {
  std::vector<issue> issues;
  boost::system::error_code ec;
  auto doc = parse_json(text, ec);
  if (ec) return std::nullopt;
  return parse_template(doc, {std::string("template")}, issues);
}

std::string template_text(const template_message& t) {
  std::string out = "[template " + t.name + " (" + t.language + ")]";
  for (std::size_t i = 0; i < t.parameters.size(); ++i) {
    out += i ? " | " : " ";
    out += t.parameters[i];
  }
  return std::string(utf8_prefix(out, text_max));
}

adapter_plan plan_send(const channel& c, const outbound_message& m,
                       const std::optional<template_message>& tpl) {
  adapter_plan plan;
  auto number = config_string(c.config, "phone_number_id");
  auto token = config_string(c.config, "access_token");
  if (!number || !token) {
    plan.error = "not configured: the channel has no phone_number_id or access_token";
    return plan;
  }
  std::string to;
  if (m.external_id && all_digits(*m.external_id))
    to = *m.external_id;
  else if (m.phone && m.phone->size() > 1 && (*m.phone)[0] == '+')
    to = m.phone->substr(1);
  if (!all_digits(to)) {
    plan.error = "the contact has no WhatsApp number (no phone, no WhatsApp id on the channel)";
    return plan;
  }
  json::object body{
      {"messaging_product", "whatsapp"}, {"recipient_type", "individual"}, {"to", to}};
  // Meta hands it back in the message's statuses: a send whose outcome carecrm lost is known
  // by it (after_unknown_send).
  if (m.message_id > 0) body["biz_opaque_callback_data"] = message_ref(m.message_id);
  if (tpl) {
    json::object language{{"code", tpl->language}};
    json::object t{{"name", tpl->name}, {"language", std::move(language)}};
    if (!tpl->parameters.empty()) {
      json::array params;
      for (auto& p : tpl->parameters) params.push_back(json::object{{"type", "text"}, {"text", p}});
      json::array components;
      components.push_back(json::object{{"type", "body"}, {"parameters", std::move(params)}});
      t["components"] = std::move(components);
    }
    body["type"] = "template";
    body["template"] = std::move(t);
  } else if (!m.files.empty()) {
    // A file by the link carecrm serves it at (one a message): an image or a document with
    // the text as its caption, an audio alone (checked before it was queued).
    auto& f = m.files.front();
    auto kind = f.content_type.starts_with("image/")   ? "image"
                : f.content_type.starts_with("audio/") ? "audio"
                                                       : "document";
    json::object media{{"link", f.url}};
    if (std::string_view(kind) != "audio" && !m.text.empty()) media["caption"] = m.text;
    if (std::string_view(kind) == "document" && !f.filename.empty()) media["filename"] = f.filename;
    body["type"] = kind;
    body[kind] = std::move(media);
  } else {
    body["type"] = "text";
    body["text"] = json::object{{"preview_url", false}, {"body", m.text}};
  }
  adapter_request req;
  req.url = graph_root(c) + *number + "/messages";
  req.body = json::serialize(body);
  req.headers.emplace_back("content-type", "application/json");
  req.headers.emplace_back("authorization", "Bearer " + *token);
  plan.request = std::move(req);
  return plan;
}

adapter_result read_send_response(int status, std::string_view body) {
  adapter_result r;
  boost::system::error_code ec;
  auto doc = parse_json(body, ec);
  auto o = ec ? nullptr : doc.if_object();
  if (status >= 200 && status < 300 && o) {
    auto messages = given(*o, "messages");
    if (messages && messages->is_array() && !messages->get_array().empty())
      if (auto mo = messages->get_array()[0].if_object())
        if (auto id = string_at(*mo, "id");
            id && !id->empty() && utf8_length(sv(*id)) <= external_id_max) {
          r.sent = true;
          r.provider_message_id = std::string(sv(*id));
          return r;
        }
  }
  r.retry = status == 429 || status >= 500 || status < 200;
  auto err = o ? given(*o, "error") : nullptr;
  if (auto eo = err ? err->if_object() : nullptr) {
    r.error = "whatsapp: " + error_text(*eo);
    if (auto code = given(*eo, "code"))
      if (auto n = as_integer(*code))
        r.retry =
            r.retry || std::find(retry_codes.begin(), retry_codes.end(), *n) != retry_codes.end();
    return r;
  }
  // A 2xx without a message id: nothing says it went; another attempt may tell.
  r.retry = true;
  r.error = "whatsapp answered " + std::to_string(status);
  return r;
}

bool outside_window(std::int64_t last_inbound, std::int64_t now) {
  return last_inbound <= 0 || now - last_inbound >= window_micros;
}

adapter_plan plan_list_templates(const channel& c) {
  adapter_plan plan;
  auto account = config_string(c.config, "business_account_id");
  auto token = config_string(c.config, "access_token");
  if (!account || !token) {
    plan.error = "not configured: the channel has no business_account_id or access_token";
    return plan;
  }
  adapter_request req;
  req.method = "GET";
  req.url = graph_root(c) + *account +
            "/message_templates?fields=name,language,status,category,components&limit=200";
  req.headers.emplace_back("authorization", "Bearer " + *token);
  plan.request = std::move(req);
  return plan;
}

outcome<std::string> read_templates(int status, std::string_view body) {
  boost::system::error_code ec;
  auto doc = parse_json(body, ec);
  auto o = ec ? nullptr : doc.if_object();
  if (status < 200 || status >= 300 || !o) {
    auto err = o ? given(*o, "error") : nullptr;
    auto why = err && err->is_object() ? error_text(err->get_object())
                                       : "answered " + std::to_string(status);
    // The provider refusing the channel's credentials is the channel's configuration; the
    // provider failing is the provider's.
    return failure::of(status >= 400 && status < 500 ? errc::conflict : errc::service_unavailable,
                       "whatsapp: " + why);
  }
  json::array items;
  if (auto data = given(*o, "data"); data && data->is_array())
    for (auto& t : data->get_array()) {
      auto to = t.if_object();
      if (!to) continue;
      json::object item;
      for (auto key : {"name", "language", "status", "category"}) {
        auto s = string_at(*to, key);
        item[key] = s ? json::value(*s) : json::value(nullptr);
      }
      std::string text;
      if (auto comps = given(*to, "components"); comps && comps->is_array())
        for (auto& comp : comps->get_array())
          if (auto co = comp.if_object())
            if (auto type = string_at(*co, "type"); type && ascii_lower(sv(*type)) == "body")
              if (auto s = string_at(*co, "text")) text = std::string(sv(*s));
      // {{1}}, {{2}}...: the highest number is how many parameters the body takes.
      std::int64_t params = 0;
      for (std::size_t at = text.find("{{"); at != std::string::npos;
           at = text.find("{{", at + 2)) {
        std::int64_t n = 0;
        auto start = text.data() + at + 2;
        auto [p, e] = std::from_chars(start, text.data() + text.size(), n);
        if (e == std::errc{} && p != start && std::string_view(p).starts_with("}}"))
          params = std::max(params, n);
      }
      item["body"] = text.empty() ? json::value(nullptr) : json::value(text);
      item["parameters"] = params;
      items.push_back(std::move(item));
    }
  return json::serialize(json::object{{"items", std::move(items)}});
}

} // namespace crm::domain::whatsapp
