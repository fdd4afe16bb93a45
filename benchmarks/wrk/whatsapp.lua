-- Signed WhatsApp webhook POSTs (benchmarks/whatsapp): BENCH_BODIES is a file of
-- "<channel id>\t<signature>\t<body>" lines (benchmarks/whatsapp_bodies.py); each thread takes
-- every BENCH_THREADS-th line from its own offset, so no message is sent twice until a thread
-- has used all of its lines.
local lines = {}
local next_line = 1
function setup(thread)
  setup_count = (setup_count or 0) + 1
  thread:set("offset", setup_count - 1)
end
function init(args)
  local step = tonumber(os.getenv("BENCH_THREADS") or "2")
  local i = 0
  for line in io.lines(os.getenv("BENCH_BODIES")) do
    if i % step == offset then
      local ch, sig, body = line:match("^([^\t]+)\t([^\t]+)\t(.*)$")
      lines[#lines + 1] = {"/api/v1/channels/" .. ch .. "/whatsapp/webhook", sig, body}
    end
    i = i + 1
  end
end
function request()
  local l = lines[next_line]
  next_line = next_line % #lines + 1
  return wrk.format("POST", l[1], {["Content-Type"] = "application/json",
                                   ["X-Hub-Signature-256"] = l[2]}, l[3])
end
