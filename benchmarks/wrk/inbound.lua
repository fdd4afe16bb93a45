-- Inbound messages through the api channels' webhooks: BENCH_CHANNELS (comma-separated ids, one
-- a tenant) with secret BENCH_SECRET, BENCH_SENDERS senders in all spread over them; each
-- request is one message from a random sender to its channel.
local channels = {}
for id in string.gmatch(os.getenv("BENCH_CHANNELS"), "[^,]+") do channels[#channels + 1] = id end
local senders = tonumber(os.getenv("BENCH_SENDERS") or "100")
local secret = os.getenv("BENCH_SECRET")
wrk.headers["Content-Type"] = "application/json"
wrk.headers["webhook_secret"] = secret
local n = 0
setup = function(thread) thread:set("thread_tag", tostring(math.random(1, 1000000))) end
request = function()
  n = n + 1
  local s = math.random(0, senders - 1)
  local ch = channels[(s % #channels) + 1]
  local body = string.format(
    '{"event":"message.received","contact":{"external_id":"sender-%d","name":"Sender %d"},' ..
    '"message":{"text":"Can I book a check-up? (%d)","external_message_id":"m-%s-%d"}}',
    s, s, n, thread_tag or "0", n)
  return wrk.format("POST", "/api/v1/channels/" .. ch .. "/api/webhook", nil, body)
end
