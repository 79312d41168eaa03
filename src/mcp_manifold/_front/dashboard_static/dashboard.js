// The mcp-manifold dashboard: polls the JSON API under ./api/ and redraws each panel in place.
// Text from servers (names, descriptions, errors, stderr) only ever goes in as textContent.
"use strict";

const POLL_MS = 1000;
const MAX_CALLS = 100;
// `operator` until the overview answers 403: then only the caller's own tools and search are shown.
const view = { revision: null, lastCall: 0, tools: [], calls: [], operator: true };
const OPERATOR_PANELS = ["servers", "calls", "config"];

const $ = (id) => document.getElementById(id);

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

function row(cells, data) {
  const tr = document.createElement("tr");
  for (const [key, value] of Object.entries(data || {})) tr.dataset[key] = value;
  for (const cell of cells) tr.append(cell instanceof Node && (cell.tagName === "TD" || cell.tagName === "TH") ? cell : td(cell));
  return tr;
}

function td(content, className) {
  const cell = el("td", null, className);
  if (content instanceof Node) cell.append(content);
  else if (content !== undefined && content !== null) cell.textContent = String(content);
  return cell;
}

function badge(text, tone) {
  return el("span", text, "badge " + (tone || ""));
}

const STATE_TONE = { ready: "ok", starting: "warn", stopped: "off", failed: "bad", disabled: "off" };
const HEALTH_TONE = { active: "ok", connecting: "warn", retrying: "warn", dead: "bad", discovered: "off" };
const BREAKER_TONE = { closed: "ok", "half-open": "warn", open: "bad" };
// A tool's pin (`pinning`): approved as served, or changed / new / rejected, which quarantines it under enforce.
const PIN_TONE = { pinned: "ok", changed: "warn", new: "warn", rejected: "bad" };

function pinBadge(tool) {
  // Listed past `pin_max_tools`: pinned nowhere (held under enforce) until the server's pins are forgotten.
  if (tool.pin === "unpinned") {
    const cell = document.createElement("span");
    cell.append(
      badge(tool.quarantined ? "held unpinned" : "unpinned", tool.quarantined ? "bad" : "warn"),
      el("div", `past pin_max_tools: manifold pins forget ${tool.server}`, "hint"),
    );
    return cell;
  }
  if (tool.quarantined) return badge("quarantined", "bad");
  return tool.pin ? badge(tool.pin, PIN_TONE[tool.pin]) : "";
}

const OUTCOME_TONE = { ok: "ok", cached: "ok", error: "bad", input_required: "warn" };

// Behind the gateway's authentication the API answers 401: the page then asks for a token, keeps it for
// this tab only (sessionStorage), and sends it as a bearer token.
let token = sessionStorage.getItem("manifold-token");

async function getJSON(path) {
  const headers = token ? { Authorization: "Bearer " + token } : {};
  const response = await fetch(path, { cache: "no-store", headers });
  if (response.status === 401) {
    $("auth").hidden = false;
    throw new Error(token ? "the token was refused" : "the gateway asks for a token");
  }
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    const error = new Error(body.error_description || body.error || response.statusText);
    error.status = response.status;
    throw error;
  }
  return body;
}

function useToken(event) {
  event.preventDefault();
  token = $("auth-token").value.trim() || null;
  if (token) sessionStorage.setItem("manifold-token", token);
  else sessionStorage.removeItem("manifold-token");
  $("auth").hidden = true;
  view.revision = null; // fetch the tools again with the token
  view.operator = true; // and find out again whether it is an operator's
  for (const id of OPERATOR_PANELS) $(id).hidden = false;
}

// Not an operator: the servers, calls and config are not this caller's to see; its tools and search are.
function ownViewOnly(reason) {
  view.operator = false;
  view.revision = null;
  for (const id of OPERATOR_PANELS) $(id).hidden = true;
  $("summary").textContent = "your own view: the tools your profile allows (" + reason + ")";
}

function clock(seconds) {
  return new Date(seconds * 1000).toLocaleTimeString([], { hour12: false });
}

function duration(seconds) {
  const s = Math.floor(seconds);
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m " + (s % 60) + "s";
  return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
}

// --- panels ---------------------------------------------------------------------------------

// Clients by protocol era: session-era clients hold a session; 2026-07-28 clients send requests that
// each stand alone, and stay connected only while they listen for changes.
function clientsText(clients) {
  let text = `${clients.sessions} in a session`;
  text += ` · 2026-07-28: ${clients.stateless_requests} request(s)`;
  if (clients.stateless_requests && clients.last_stateless_request) {
    text += `, latest ${duration(Math.max(0, Date.now() / 1000 - clients.last_stateless_request))} ago`;
  }
  if (clients.listen_streams) text += `, ${clients.listen_streams} listening`;
  return text;
}

function renderSummary(gateway) {
  $("summary").textContent =
    `v${gateway.version} · up ${duration(gateway.uptime)} · expose ${gateway.expose.join(", ")} · ` +
    `${gateway.tools} tools · clients: ${clientsText(gateway.clients)}`;
}

function renderServers(servers) {
  const rows = servers.map((s) => {
    const detail = td(s.last_error || "", "detail");
    if (s.stderr_tail && s.stderr_tail.length) {
      const more = el("details");
      more.append(el("summary", `stderr (${s.stderr_tail.length} lines)`), el("pre", s.stderr_tail.slice(-20).join("\n")));
      detail.append(more);
    }
    const breaker = s.breaker === "open" && s.breaker_retry_in != null ? `open (${s.breaker_retry_in.toFixed(1)}s)` : s.breaker;
    // An OAuth server whose tokens stopped working is "ready", yet refuses each call until a login.
    const state = s.needs_login ? badge("needs login", "bad") : badge(s.state, STATE_TONE[s.state]);
    if (s.needs_login) detail.prepend(el("div", `needs an OAuth login: run \`manifold auth login ${s.name}\``));
    return row(
      [
        el("strong", s.name),
        td(state, "state"),
        td(s.health ? badge(s.health, HEALTH_TONE[s.health]) : "", "health"),
        td(s.restarts, "num restarts"),
        td(badge(breaker, BREAKER_TONE[s.breaker]), "breaker"),
        td(s.tools, "num tools"),
        td(s.server_info || "", "mono"),
        td(s.protocol || "", "mono protocol"),
        detail,
      ],
      { server: s.name, state: s.needs_login ? "needs login" : s.state },
    );
  });
  $("server-rows").replaceChildren(...rows);
}

// The hub's instances (`expose: hub`), as `manifold servers` shows them; none: the table is hidden.
function renderInstances(instances) {
  const list = instances || [];
  $("instances").hidden = list.length === 0;
  $("instance-rows").replaceChildren(
    ...list.map((i) =>
      row(
        [
          el("code", i.id),
          i.name,
          td(badge(i.state, HEALTH_TONE[i.state]), "state"),
          td(i.sessions, "num"),
          td(i.tools, "num"),
          td(i.endpoint || "", "mono"),
          td(i.last_error || "", "detail"),
        ],
        { instance: i.id, state: i.state },
      ),
    ),
  );
}

function renderTools() {
  const words = $("tool-filter").value.toLowerCase().split(/\s+/).filter(Boolean);
  const shown = view.tools.filter((t) => {
    const text = `${t.name} ${t.server} ${t.description}`.toLowerCase();
    return words.every((w) => text.includes(w));
  });
  $("tool-rows").replaceChildren(
    ...shown.map((t) =>
      row([el("code", t.name), t.server, td(pinBadge(t), "pin"), td(t.description, "description")], {
        tool: t.name,
        server: t.server,
        pin: t.pin === "unpinned" ? "unpinned" : t.quarantined ? "quarantined" : t.pin || "",
      }),
    ),
  );
  $("tool-count").textContent = shown.length === view.tools.length ? `(${view.tools.length})` : `(${shown.length} of ${view.tools.length})`;
}

function renderCalls() {
  $("call-rows").replaceChildren(
    ...view.calls.map((c) =>
      row(
        [
          clock(c.at),
          el("code", c.name),
          c.server,
          c.surface,
          td(c.ms.toFixed(1), "num"),
          td(badge(c.outcome, OUTCOME_TONE[c.outcome]), "outcome"),
          td(c.error || (c.outcome === "error" ? "the server answered with a tool error" : ""), "detail"),
        ],
        { call: c.n, tool: c.name, outcome: c.outcome },
      ),
    ),
  );
  $("calls-empty").hidden = view.calls.length > 0;
  $("call-count").textContent = view.calls.length ? `(last ${view.calls.length})` : "";
}

function renderConfig(config) {
  const body = $("config-body");
  const facts = el("dl");
  const add = (name, value) => facts.append(el("dt", name), value instanceof Node ? wrap("dd", value) : el("dd", value));
  add("file", config.path || "none");
  add("check", config.ok ? badge("OK", "ok") : badge(`${config.problems.length} problem(s)`, "bad"));
  add("reload", config.watching ? "on file change and SIGHUP" : "on SIGHUP (the file is not watched)");
  const parts = [facts];
  if (!config.ok) {
    const list = el("ul", null, "problems");
    list.id = "config-problems";
    list.append(...config.problems.map((p) => el("li", p)));
    parts.push(list);
  }
  if (config.reloads.length) {
    const table = el("table");
    const head = row(["time", "trigger", "result", "changes", "needs a restart"].map((h) => el("th", h)));
    table.append(wrap("thead", head));
    const rows = config.reloads.slice(0, 5).map((r) => {
      const changes = Object.entries(r.changes)
        .filter(([key, names]) => key !== "needs_restart" && names.length)
        .map(([key, names]) => `${key}: ${names.join(", ")}`)
        .join("; ");
      return row(
        [
          clock(r.at),
          r.trigger,
          td(r.applied ? badge("applied", "ok") : badge("refused", "bad"), "result"),
          td(r.applied ? changes || "no change" : r.problems.join("; "), "detail"),
          r.changes.needs_restart.join(", "),
        ],
        { reload: r.applied ? "applied" : "refused" },
      );
    });
    table.append(wrap("tbody", ...rows));
    parts.push(el("h3", "Reloads", "note"), table);
  }
  body.replaceChildren(...parts);
}

function wrap(tag, ...children) {
  const node = el(tag);
  node.append(...children);
  return node;
}

// --- data -------------------------------------------------------------------------------------

async function loadTools() {
  const data = await getJSON("api/tools");
  view.tools = data.tools;
  renderTools();
}

async function loadCalls() {
  const data = await getJSON(`api/calls?after=${view.lastCall}`);
  view.calls = [...data.calls.reverse(), ...view.calls].slice(0, MAX_CALLS);
  view.lastCall = data.last;
  renderCalls();
}

async function refreshOverview() {
  const overview = await getJSON("api/overview");
  renderSummary(overview.gateway);
  renderServers(overview.servers);
  renderInstances(overview.instances);
  renderConfig(overview.config);
  if (overview.gateway.revision !== view.revision) {
    view.revision = overview.gateway.revision;
    await loadTools();
  }
  if (overview.gateway.last_call !== view.lastCall) await loadCalls();
}

async function refreshOwnTools() {
  const data = await getJSON("api/tools");
  if (data.revision === view.revision) return;
  view.revision = data.revision;
  view.tools = data.tools;
  renderTools();
}

async function refresh() {
  const live = $("live");
  try {
    if (view.operator) {
      try {
        await refreshOverview();
      } catch (error) {
        if (error.status !== 403) throw error;
        ownViewOnly(error.message);
      }
    }
    if (!view.operator) await refreshOwnTools();
    live.className = "live ok";
    live.title = "live: updated " + new Date().toLocaleTimeString([], { hour12: false });
  } catch (error) {
    live.className = "live down";
    live.title = "not updating: " + error.message;
  } finally {
    setTimeout(refresh, POLL_MS);
  }
}

async function search(event) {
  event.preventDefault();
  const query = $("search-query").value.trim();
  if (!query) return;
  const note = $("search-note");
  try {
    const data = await getJSON(`api/search?q=${encodeURIComponent(query)}`);
    $("search-rows").replaceChildren(
      ...data.matches.map((m, i) =>
        row([td(i + 1, "num"), td(m.score.toFixed(3), "num"), el("code", m.name), m.server, td(m.description, "description")], {
          tool: m.name,
        }),
      ),
    );
    note.textContent = `${data.matches.length} tool(s) for “${data.query}” in ${data.ms} ms, ranked as retrieve_tools ranks them.`;
  } catch (error) {
    note.textContent = "Search failed: " + error.message;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("tool-filter").addEventListener("input", renderTools);
  $("search-form").addEventListener("submit", search);
  $("auth").addEventListener("submit", useToken);
  refresh();
});
