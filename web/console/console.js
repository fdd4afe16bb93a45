// The operator console (docs/operations.md "Console"): polls GET /console/data every second
// with the operator token (kept in sessionStorage: this tab only; sent in a header, never in
// a URL), turns counters into rates between two polls, and draws the last 15 minutes with
// uPlot. Every value from the server is set as text, never as markup.
"use strict";

const KEY = "carecrm.operator.token";
const HISTORY = 900; // seconds of chart history
const $ = (id) => document.getElementById(id);

let timer = null;
let previous = null; // the last snapshot, for rates
let sortKey = "rate";
const history = { t: [], requests: [], commits: [], tenants: [], mailbox: [] };
const charts = {};

function token() { return sessionStorage.getItem(KEY); }

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

function showSignIn(message) {
  clearTimeout(timer);
  $("console").hidden = true;
  $("signout").hidden = true;
  $("signin").hidden = false;
  $("signin-error").textContent = message || "";
  $("token").focus();
}

function showConsole() {
  $("signin").hidden = true;
  $("console").hidden = false;
  $("signout").hidden = false;
}

async function api(method, path, body) {
  const headers = { Authorization: "Bearer " + token() };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(path, { method, headers, cache: "no-store",
                                  body: body === undefined ? undefined : JSON.stringify(body) });
  if (res.status === 401) {
    sessionStorage.removeItem(KEY);
    showSignIn("The token was refused.");
    throw new Error("401");
  }
  return res;
}

// ---- metrics: sums and rates -----------------------------------------------------------

function samples(m, name, match) {
  return (m[name] || []).filter((s) => !match || Object.entries(match).every(
    ([k, v]) => s.labels[k] === v));
}
function total(m, name, match) {
  return samples(m, name, match).reduce((a, s) => a + s.value, 0);
}
function rate(now, before, name, match, dt) {
  if (!before) return 0;
  return Math.max(0, total(now, name, match) - total(before, name, match)) / dt;
}
// A quantile between two snapshots of a histogram family (seconds; by default the HTTP
// requests'), from its buckets.
function quantile(now, before, q, match, family = "carecrm_http_request_duration_seconds") {
  const le = new Map();
  for (const s of samples(now, family + "_bucket", match))
    le.set(s.labels.le, (le.get(s.labels.le) || 0) + s.value);
  if (before)
    for (const s of samples(before, family + "_bucket", match))
      le.set(s.labels.le, (le.get(s.labels.le) || 0) - s.value);
  const bounds = [...le.keys()].sort((a, b) => parseFloat(a) - parseFloat(b));
  const count = le.get("+Inf") || 0;
  if (count <= 0) return null;
  for (const b of bounds) if (le.get(b) >= q * count) return b === "+Inf" ? Infinity : parseFloat(b);
  return null;
}
function ms(seconds) {
  if (seconds === null) return "–";
  if (seconds === Infinity) return "> 10 s";
  return seconds < 0.001 ? "≤ " + (seconds * 1000).toFixed(1) + " ms"
                         : "≤ " + (seconds * 1000).toFixed(seconds < 0.01 ? 1 : 0) + " ms";
}
function num(x, digits = 1) {
  return x >= 1000 ? Math.round(x).toLocaleString("en") : x.toFixed(x % 1 ? digits : 0);
}

// ---- rendering -------------------------------------------------------------------------

function card(label, value, bad) {
  const c = el("div", undefined, "card");
  c.append(el("div", label, "label"), el("div", value, "value" + (bad ? " bad" : "")));
  return c;
}

function renderCards(d, dt) {
  const m = d.metrics, p = previous && previous.metrics;
  const tx = rate(m, p, "carecrm_group_commit_transactions_total", null, dt);
  const writes = rate(m, p, "carecrm_group_commit_writes_total", null, dt);
  const refused = rate(m, p, "carecrm_http_requests_total", { status: "429" }, dt);
  const errors = rate(m, p, "carecrm_http_requests_total", { status: "500" }, dt) +
                 rate(m, p, "carecrm_http_requests_total", { status: "503" }, dt);
  $("cards").replaceChildren(
    card("HTTP requests/s", num(rate(m, p, "carecrm_http_requests_total", null, dt))),
    card("HTTP p99", ms(quantile(m, p, 0.99))),
    card("5xx/s", num(errors), errors > 0),
    card("429 refusals/s", num(refused), refused > 0),
    card("Commits/s", num(tx)),
    card("Writes per commit", tx > 0 ? (writes / tx).toFixed(1) : "–"),
    card("Commit p99", ms(quantile(m, p, 0.99, null, "carecrm_group_commit_seconds"))),
    card("Commit failures", num(total(m, "carecrm_group_commit_failures_total")),
         total(m, "carecrm_group_commit_failures_total") > 0),
    card("Audit rows buffered", num(total(m, "carecrm_audit_rows_buffered"))),
    card("Audit flush p99", ms(quantile(m, p, 0.99, null, "carecrm_audit_flush_seconds"))),
    card("Audit writer failures", num(total(m, "carecrm_audit_writer_failures_total")),
         total(m, "carecrm_audit_writer_failures_total") > 0),
    card("DB queue", num(total(m, "carecrm_db_queue_depth"))),
    card("Tenants live", num(d.actors.tenants_live)),
    card("Tenants passivated", num(total(m, "carecrm_tenants_passivated_total"))),
    card("Actor restarts", num(total(m, "carecrm_actor_restarts_total")),
         total(m, "carecrm_actor_restarts_total") > 0));
}

function chart(key, title, series) {
  if (!window.uPlot) return;
  const data = [history.t, history[key]];
  if (!charts[key]) {
    const box = el("div", undefined, "chart");
    box.id = "chart-" + key;
    $("charts").append(box);
    charts[key] = new uPlot({ title, width: Math.max(240, box.clientWidth - 8), height: 160,
                              scales: { x: { time: true } },
                              series: [{}, { label: series, stroke: "#3461c1", width: 1.5 }],
                              axes: [{}, { size: 50 }] }, data, box);
  } else {
    charts[key].setData(data);
  }
}

function renderCharts(d, dt) {
  const m = d.metrics, p = previous && previous.metrics;
  let mailbox = 0;
  for (const t of d.actors.tenants) mailbox += t.mailbox + t.children.reduce((a, c) => a + c.mailbox, 0);
  history.t.push(d.at / 1e6);
  history.requests.push(rate(m, p, "carecrm_http_requests_total", null, dt));
  history.commits.push(rate(m, p, "carecrm_group_commit_transactions_total", null, dt));
  history.tenants.push(d.actors.tenants_live);
  history.mailbox.push(mailbox);
  for (const k in history) if (history[k].length > HISTORY) history[k].shift();
  chart("requests", "HTTP requests/s", "requests/s");
  chart("commits", "Group commits/s", "commits/s");
  chart("tenants", "Live tenants", "tenants");
  chart("mailbox", "Mailboxes (shown tenants)", "messages waiting");
}

function renderCluster(d) {
  const c = d.cluster;
  $("single-node").hidden = !!c;
  $("nodes").hidden = !c;
  $("node").textContent = c ? "node " + c.node + (c.fresh ? "" : " (membership stale)") : "";
  if (!c) { $("leases").textContent = ""; return; }
  $("nodes").tBodies[0].replaceChildren(...c.nodes.map((n) => {
    const tr = el("tr");
    tr.dataset.node = n.node_id;
    tr.append(el("td", n.node_id + (n.node_id === c.node ? " (this node)" : "")),
              el("td", n.state, n.state === "live" ? "" : "bad"),
              el("td", n.heartbeat_age_seconds + " s"), el("td", String(n.tenants)),
              el("td", n.http_address), el("td", n.actor_address));
    return tr;
  }));
  $("leases").textContent = "This node holds " + c.leases.length + " tenant lease" +
    (c.leases.length === 1 ? "" : "s") + ".";
}

// A quantile of a child's message times from its histogram (counts below each bound, then
// above the last): the bound it falls under, in ms.
function busyQuantile(counts, bounds, q) {
  const n = counts.reduce((a, x) => a + x, 0);
  if (n <= 0) return null;
  let seen = 0;
  for (let i = 0; i < counts.length; i++) {
    seen += counts[i];
    if (seen >= q * n) return i < bounds.length ? bounds[i] / 1000 : Infinity;
  }
  return Infinity;
}
function busyText(x) {
  if (x === null) return "–";
  return x === Infinity ? "> 100 ms" : "≤ " + (x < 1 ? x.toFixed(2).replace(/0+$/, "") : x) + " ms";
}

function childRates(d, dt) {
  const before = new Map();
  if (previous)
    for (const t of previous.actors.tenants)
      for (const c of t.children) before.set(t.tenant_id + "/" + c.name, c);
  for (const t of d.actors.tenants) {
    t.rate = 0; t.restarts = 0; t.mailbox_all = t.mailbox;
    for (const c of t.children) {
      const b = before.get(t.tenant_id + "/" + c.name);
      c.rate = b ? Math.max(0, c.messages - b.messages) / dt : 0;
      const handled = b ? c.messages - b.messages : c.messages;
      const busy = b ? c.busy_ms - b.busy_ms : c.busy_ms;
      c.mean_ms = handled > 0 ? busy / handled : null;
      // Over the last second when it handled something, else over the child's life.
      const window = b && handled > 0 ? c.busy_times.map((x, i) => x - b.busy_times[i]) : c.busy_times;
      c.p50 = busyQuantile(window, d.actors.busy_bounds_us, 0.5);
      c.p99 = busyQuantile(window, d.actors.busy_bounds_us, 0.99);
      t.rate += c.rate; t.restarts += c.restarts; t.mailbox_all += c.mailbox;
    }
  }
}

// The drills: each confirmed first, each audited by the server in the tenant's trail.
async function drill(question, path, done) {
  if (!confirm(question)) return;
  const res = await api("POST", path);
  $("updated").textContent = res.status === 202 ? done : "the drill was refused (" + res.status + ")";
}
function fail(tenant, child) {
  return drill("Fail the " + child + " actor of tenant " + tenant +
               "? It restarts from Postgres on its next message.",
               "/actors/" + tenant + "/" + child + "/fail", "failed " + child + " of tenant " + tenant);
}
async function move(tenant, nodes) {
  const to = prompt("Move tenant " + tenant + " to which node? (" + nodes.join(", ") + ")");
  if (!to) return;
  const res = await api("POST", "/tenants/" + tenant + "/move", { to: to.trim() });
  $("updated").textContent = res.status === 202 ? "moving tenant " + tenant + " to " + to
                                                 : "the move was refused (" + res.status + ")";
}
function passivate(tenant) {
  return drill("Passivate tenant " + tenant + "? Its actors finish their mailboxes and stop; " +
               "its next request starts them again.", "/actors/" + tenant + "/passivate",
               "passivated tenant " + tenant);
}

function renderTenants(d) {
  const key = { tenant_id: (t) => -t.tenant_id, rate: (t) => t.rate, mailbox: (t) => t.mailbox_all,
                restarts: (t) => t.restarts }[sortKey];
  const rows = [...d.actors.tenants].sort((a, b) => key(b) - key(a) || a.tenant_id - b.tenant_id);
  for (const b of document.querySelectorAll("#tenants th button"))
    b.toggleAttribute("aria-sort", b.dataset.sort === sortKey);
  $("tenant-count").textContent = rows.length + " shown of " + d.actors.tenants_live + " live";
  $("tenants").tBodies[0].replaceChildren(...rows.map((t) => {
    const tr = el("tr");
    tr.dataset.tenant = t.tenant_id;
    const children = el("td");
    for (const c of t.children) {
      const chip = el("span", undefined, "child" + (c.alive ? "" : " down"));
      chip.dataset.child = c.name;
      chip.append(el("b", c.name), el("span", String(c.mailbox), "mailbox"),
                  el("span", num(c.rate), "rate"),
                  el("span", "p50 " + busyText(c.p50) + " · p99 " + busyText(c.p99), "times"),
                  el("span", String(c.restarts), c.restarts ? "restarts" : ""));
      const drill = el("button", "fail");
      drill.type = "button";
      drill.title = "Fail this actor (a drill: it restarts from Postgres)";
      drill.addEventListener("click", () => fail(t.tenant_id, c.name));
      chip.append(drill);
      children.append(chip);
    }
    const id = el("td", String(t.tenant_id) + " ");
    const stop = el("button", "passivate", "passivate");
    stop.type = "button";
    stop.title = "Passivate this tenant now (a drill)";
    stop.addEventListener("click", () => passivate(t.tenant_id));
    id.append(stop);
    if (d.cluster) {
      const others = d.cluster.nodes.filter((n) => n.state === "live" && n.node_id !== d.cluster.node)
        .map((n) => n.node_id);
      const go = el("button", "move", "move");
      go.type = "button";
      go.title = "Move this tenant to another node";
      go.disabled = others.length === 0;
      go.addEventListener("click", () => move(t.tenant_id, others));
      id.append(go);
    }
    tr.append(id, el("td", num(t.rate), "rate"),
              el("td", String(t.mailbox_all)), el("td", String(t.restarts), "restarts"), children);
    return tr;
  }));
}

function renderIncidents(d) {
  $("no-incidents").hidden = d.incidents.length > 0;
  $("incidents").replaceChildren(...[...d.incidents].reverse().map((i) =>
    el("li", i.at + " · tenant " + i.tenant_id + " · " + i.child + " · " + i.reason)));
}

function renderRoutes(d, dt) {
  const m = d.metrics, p = previous && previous.metrics;
  const routes = new Map();
  for (const s of samples(m, "carecrm_http_requests_total"))
    routes.set(s.labels.method + " " + s.labels.route, { method: s.labels.method, route: s.labels.route });
  const rows = [...routes.values()].map((r) => {
    const match = { method: r.method, route: r.route };
    r.rate = rate(m, p, "carecrm_http_requests_total", match, dt);
    r.errors = ["500", "502", "503"].reduce((a, st) =>
      a + rate(m, p, "carecrm_http_requests_total", { ...match, status: st }, dt), 0);
    r.p50 = quantile(m, p, 0.5, match);
    r.p99 = quantile(m, p, 0.99, match);
    return r;
  }).filter((r) => r.rate > 0).sort((a, b) => b.rate - a.rate).slice(0, 25);
  $("routes").tBodies[0].replaceChildren(...rows.map((r) => {
    const tr = el("tr");
    tr.append(el("td", r.method + " " + (r.route || "(no route)")), el("td", num(r.rate)),
              el("td", ms(r.p50)), el("td", ms(r.p99)), el("td", num(r.errors), r.errors ? "bad" : ""));
    return tr;
  }));
}

async function poll() {
  clearTimeout(timer);
  try {
    const q = new URLSearchParams({ limit: "200" });
    const search = $("search").value.trim();
    if (search) q.set("search", search);
    const res = await api("GET", "/console/data?" + q);
    if (!res.ok) throw new Error("GET /console/data answered " + res.status);
    const d = await res.json();
    showConsole();
    const dt = previous ? Math.max(0.001, (d.at - previous.at) / 1e6) : 1;
    childRates(d, dt);
    renderCards(d, dt);
    renderCharts(d, dt);
    renderCluster(d);
    renderTenants(d);
    renderIncidents(d);
    renderRoutes(d, dt);
    previous = d;
    $("updated").textContent = "updated " + new Date(d.at / 1000).toLocaleTimeString();
    document.body.dataset.polls = String(Number(document.body.dataset.polls || 0) + 1);
  } catch (e) {
    if (e.message === "401") return;
    $("updated").textContent = "not updated: " + e.message;
  }
  timer = setTimeout(poll, 1000);
}

$("signin-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  sessionStorage.setItem(KEY, $("token").value);
  $("token").value = "";
  previous = null;
  poll();
});
$("signout").addEventListener("click", () => {
  sessionStorage.removeItem(KEY);
  showSignIn("");
});
for (const b of document.querySelectorAll("#tenants th button"))
  b.addEventListener("click", () => { sortKey = b.dataset.sort; if (previous) renderTenants(previous); });
$("search").addEventListener("input", () => { previous = null; poll(); });

if (token()) poll(); else showSignIn("");
