// The channel actor's media (docs/channels.md "Media"): after a message is stored, each file
// its provider keeps is fetched (WhatsApp: the Graph API's media lookup, then the file; Twilio:
// the media URL, redirects followed), checked (≤ 16 MiB, an allowed type) and stored with the
// message, or refused or failed with why. A fetch that may succeed later is tried again (three
// attempts); a file still pending when the actor stops is fetched at its next load.
#include "actors/channels_internal.hpp"

#include "domain/media.hpp"

namespace crm::actors::channels_impl {
namespace {

constexpr int max_media_attempts = 3;
constexpr std::array<std::int64_t, 2> media_retry_ms = {2000, 10000};
constexpr std::chrono::seconds media_timeout{60};

void save(ch_actor* self, persistence::media_outcome o, persistence::pending_media m) {
  db<domain::done>(
      self,
      [tid = self->state.env.tenant_id, o](persistence::pg_conn& c) {
        persistence::save_media(c, tid, o);
        return domain::done{};
      },
      [self, status = o.status, attempts = o.attempts, m](domain::outcome<domain::done> r) mutable {
        auto& st = self->state;
        st.fetching.erase({m.message_id, m.n});
        if (st.stopping) return;
        // Not saved: still pending in Postgres; tried again later (or at the next load).
        std::int64_t delay = 5000;
        if (r) {
          if (status != "pending") return;
          m.attempts = attempts;
          delay = media_retry_ms[static_cast<std::size_t>(
              std::min<int>(attempts - 1, media_retry_ms.size() - 1))];
        }
        self->delayed_send(self, std::chrono::milliseconds(delay), media_atom::value, m);
      });
}

// The fetch of `m` ended without the file: failed for good, or pending for another attempt.
void not_fetched(ch_actor* self, const persistence::pending_media& m, std::string why, bool retry) {
  persistence::media_outcome o;
  o.message_id = m.message_id;
  o.n = m.n;
  o.attempts = m.attempts + 1;
  o.error = std::move(why);
  o.status = retry && o.attempts < max_media_attempts ? "pending" : "failed";
  save(self, std::move(o), m);
}

void request(ch_actor* self, persistence::pending_media m, domain::channel ch, int step,
             domain::adapter_request req) {
  net::client_request r;
  r.method = req.method;
  r.url = req.url;
  r.headers = req.headers;
  r.max_body = domain::media::max_bytes + 1;
  r.timeout = media_timeout;
  auto done = in_actor<net::client_response>(
      self,
      [self, m, ch = std::move(ch), step, req = std::move(req)](net::client_response res) mutable {
        if (!res.ok) return not_fetched(self, m, res.error, true);
        auto s = domain::media::next(ch, step, req, res.status, res.content_type, res.location,
                                     std::move(res.body), res.truncated);
        if (s.request) return request(self, m, std::move(ch), step + 1, std::move(*s.request));
        if (!s.data) return not_fetched(self, m, s.error, s.retry);
        persistence::media_outcome o;
        o.message_id = m.message_id;
        o.n = m.n;
        o.attempts = m.attempts + 1;
        o.content_type = s.content_type;
        if (auto no = domain::media::refusal(s.content_type, s.data->size())) {
          o.status = "refused";
          o.error = std::move(*no);
        } else {
          o.status = "stored";
          o.data = std::move(*s.data);
        }
        save(self, std::move(o), m);
      });
  self->state.opts->client->send(std::move(r), std::move(done));
}

} // namespace

std::vector<persistence::pending_media> pending_refs(std::int64_t channel_id,
                                                     const std::vector<domain::media_ref>& media) {
  std::vector<persistence::pending_media> out;
  for (std::size_t i = 0; i < media.size(); ++i)
    if (!media[i].data) out.push_back({0, static_cast<int>(i), channel_id, media[i].source, 0});
  return out;
}

void fetch_media_of(ch_actor* self, std::int64_t message_id,
                    std::vector<persistence::pending_media> media) {
  for (auto& m : media) {
    m.message_id = message_id;
    fetch_media(self, std::move(m));
  }
}

void fetch_media(ch_actor* self, persistence::pending_media m) {
  auto& st = self->state;
  if (st.stopping || !st.fetching.insert({m.message_id, m.n}).second) return;
  auto ch = st.channels.find(m.channel_id);
  if (ch == st.channels.end()) return not_fetched(self, m, "the channel was deleted", false);
  if (!st.opts || !st.opts->client)
    return not_fetched(self, m, "outbound HTTP is not set up", false);
  auto first = domain::media::plan_first(ch->second, m.source);
  if (!first.request) return not_fetched(self, m, first.error, false);
  request(self, m, ch->second, 1, std::move(*first.request));
}

} // namespace crm::actors::channels_impl
