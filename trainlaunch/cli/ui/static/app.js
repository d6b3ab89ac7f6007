/* trainlaunch ui: a thin renderer over the server's JSON documents (docs/ui.md).
   Vanilla JS, no build step, no external asset. Text from apps only ever goes through
   textContent; charts are SVG drawn by the server (escaped there) and imported as nodes. */
"use strict";

const main = document.getElementById("main");
const notice = document.getElementById("notice");
const APPS_EVERY_MS = 2000;
const LOGS_EVERY_MS = 1000;
const CHARTS_EVERY_MS = 5000;
const SWEEP_EVERY_MS = 5000;

let timers = [];
let generation = 0; // bumped on every navigation: answers for an older page are dropped
const listFilters = { backend: "", state: "", sweep: "", name: "" };
let sweepMembers = { sweep: "", handles: null };
const listOrder = { key: null, asc: true };

// ---------- small helpers ----------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function enc(handle) { return encodeURIComponent(handle); }

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== "" && v !== null && v !== undefined) q.set(k, v);
  const s = q.toString();
  return s ? "?" + s : "";
}

async function api(path) {
  const res = await fetch(path, { credentials: "same-origin", cache: "no-store" });
  const type = res.headers.get("content-type") || "";
  if (!res.ok) {
    let msg = res.status + " " + res.statusText;
    if (type.includes("json")) {
      const doc = await res.json();
      msg = doc.error + (doc.hint ? " (" + doc.hint + ")" : "");
    }
    const err = new Error(msg);
    err.status = res.status;
    throw err;
  }
  return type.includes("json") ? res.json() : res.text();
}

function say(text, isError) {
  notice.textContent = text || "";
  notice.className = isError ? "error" : "";
}

function every(ms, fn) {
  const mine = generation;
  let busy = false;
  const tick = async () => {
    if (busy || mine !== generation) return;
    busy = true;
    try { await fn(); say("updated " + new Date().toLocaleTimeString()); }
    catch (e) { say(e.message, true); }
    finally { busy = false; }
  };
  tick();
  timers.push(setInterval(tick, ms));
}

function fmtNum(v, digits) {
  if (v === null || v === undefined || v === "") return "";
  if (typeof v !== "number") return String(v);
  if (Number.isInteger(v)) return String(v);
  return Math.abs(v) >= 1e4 || Math.abs(v) < 1e-3 ? v.toExponential(3) : v.toFixed(digits ?? 4);
}

function fmtAge(s) {
  if (s === null || s === undefined) return "";
  if (s < 60) return Math.round(s) + "s";
  if (s < 3600) return Math.floor(s / 60) + "m" + String(Math.round(s % 60)).padStart(2, "0") + "s";
  if (s < 86400) return Math.floor(s / 3600) + "h" + String(Math.floor((s % 3600) / 60)).padStart(2, "0") + "m";
  return Math.floor(s / 86400) + "d" + Math.floor((s % 86400) / 3600) + "h";
}

function fmtTime(t) { return t ? new Date(t * 1000).toLocaleString() : ""; }
function fmtBytes(b) { return b === null || b === undefined ? "" : (b / 1048576).toFixed(0) + " MiB"; }
function stateBadge(s) { return el("span", { class: "state " + s }, s); }

function table(columns, rows, onRow, order) {
  // columns: [{key, label, num, render(row) -> node|text, sort(row) -> value}]; order
  // ({key, asc}, the caller's) keeps the chosen sort across refreshes
  order = order || { key: null, asc: true };
  const thead = el("thead");
  const tbody = el("tbody");
  const draw = () => {
    const sorted = rows.slice();
    const col = columns.find(c => c.key === order.key);
    if (col) {
      const val = r => (col.sort ? col.sort(r) : r[col.key]);
      sorted.sort((a, b) => compare(val(a), val(b)) * (order.asc ? 1 : -1));
    }
    tbody.replaceChildren(...sorted.map(r => el("tr", {
      class: onRow ? "link" : null, onclick: onRow ? () => onRow(r) : null,
    }, columns.map(c => el("td", { class: c.num ? "num" : null }, c.render ? c.render(r) : fmtNum(r[c.key]))))));
    thead.replaceChildren(el("tr", {}, columns.map(c => el("th", {
      class: ["sortable", c.num ? "num" : "", order.key === c.key ? (order.asc ? "sorted-asc" : "sorted-desc") : ""].join(" "),
      "data-key": c.key,
      onclick: () => { order.asc = order.key === c.key ? !order.asc : true; order.key = c.key; draw(); },
    }, c.label))));
  };
  draw();
  return el("table", {}, thead, tbody);
}

function compare(a, b) {
  const na = a === null || a === undefined || a === "", nb = b === null || b === undefined || b === "";
  if (na || nb) return na === nb ? 0 : na ? 1 : -1; // blanks last
  const fa = typeof a === "number" ? a : parseFloat(a), fb = typeof b === "number" ? b : parseFloat(b);
  if (!isNaN(fa) && !isNaN(fb) && String(fa) === String(a).trim() && String(fb) === String(b).trim()) return fa - fb;
  if (typeof a === "number" && typeof b === "number") return a - b;
  return String(a).localeCompare(String(b), undefined, { numeric: true });
}

async function drawChart(box, path) {
  const text = await api(path);
  const doc = new DOMParser().parseFromString(text, "image/svg+xml");
  const svg = doc.documentElement;
  if (svg.nodeName !== "svg") throw new Error("chart: not an SVG");
  box.replaceChildren(document.importNode(svg, true));
}

function kv(pairs) {
  return el("dl", { class: "kv" }, pairs.filter(p => p[1] !== null && p[1] !== undefined && p[1] !== "")
    .flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
}

// ---------- the app list ----------

async function appsPage() {
  main.replaceChildren(el("h1", {}, "Apps"));
  const filters = el("div", { class: "filters" });
  const notes = el("div", { class: "muted" });
  const holder = el("div", { id: "apps" }, el("p", { class: "muted" }, "loading..."));
  main.append(el("section", {}, filters, notes, holder));
  const sweeps = await api("/api/sweeps").catch(() => []);
  let last = { apps: [], notes: [] };

  const select = (key, label, options) => {
    const s = el("select", { id: "filter-" + key, onchange: e => { listFilters[key] = e.target.value; render(); } },
      el("option", { value: "" }, "all"),
      options.map(o => el("option", { value: o[0], selected: listFilters[key] === o[0] }, o[1])));
    return el("label", {}, label, s);
  };
  const nameInput = el("input", { id: "filter-name", type: "search", placeholder: "part of a name or handle",
    value: listFilters.name, oninput: e => { listFilters.name = e.target.value; render(); } });

  let drawn = null;
  const drawFilters = () => {
    const backends = [...new Set(last.apps.map(a => a.backend))].map(b => [b, b]);
    const states = [...new Set(last.apps.map(a => a.state))].sort().map(s => [s, s]);
    const signature = JSON.stringify([backends, states]);
    if (signature === drawn) return; // redrawing would close an open list, lose the focus
    drawn = signature;
    filters.replaceChildren(select("backend", "backend", backends), select("state", "state", states),
      select("sweep", "sweep", sweeps.filter(s => s.handle).map(s => [s.handle, s.id + " (" + s.component + ")"])),
      el("label", {}, "name", nameInput));
  };

  const render = async () => {
    if (listFilters.sweep && sweepMembers.sweep !== listFilters.sweep) {
      const doc = await api("/api/sweeps/" + enc(listFilters.sweep));
      sweepMembers = { sweep: listFilters.sweep, handles: new Set(doc.points.map(p => p.handle).filter(Boolean)) };
    }
    const needle = listFilters.name.toLowerCase();
    const shown = last.apps.filter(a =>
      (!listFilters.backend || a.backend === listFilters.backend) &&
      (!listFilters.state || a.state === listFilters.state) &&
      (!listFilters.sweep || sweepMembers.handles.has(a.handle)) &&
      (!needle || (a.name || "").toLowerCase().includes(needle) || a.handle.toLowerCase().includes(needle)));
    notes.replaceChildren(...last.notes.map(n => el("div", {}, n)));
    if (!shown.length) {
      holder.replaceChildren(el("p", { class: "muted" }, last.apps.length ? "no app matches the filters" : "no apps yet"));
      return;
    }
    holder.replaceChildren(table([
      { key: "name", label: "name", render: a => el("a", { href: "#/app/" + enc(a.handle) }, a.name || a.app_id) },
      { key: "backend", label: "backend", render: a => a.backend },
      { key: "state", label: "state", render: a => stateBadge(a.state) },
      { key: "age_s", label: "age", num: true, render: a => fmtAge(a.age_s) },
      { key: "world", label: "ranks alive", num: true, sort: a => a.ranks_alive, render: a => a.world ? a.ranks_alive + "/" + a.world : "" },
      { key: "step", label: "step", num: true },
      { key: "steps_per_s", label: "steps/s", num: true, render: a => fmtNum(a.steps_per_s, 2) },
      { key: "idle_s", label: "since progress", num: true, render: a => fmtAge(a.idle_s) },
      { key: "flags", label: "flags", sort: a => (a.flags || []).join(), render: a => (a.flags || []).map(f => el("span", { class: "flag" }, f)) },
      { key: "requeues", label: "requeues", num: true },
      { key: "handle", label: "handle", render: a => el("span", { class: "mono muted" }, a.handle) },
    ], shown, a => { location.hash = "#/app/" + enc(a.handle); }, listOrder));
  };

  every(APPS_EVERY_MS, async () => {
    last = await api("/api/apps");
    drawFilters();
    await render();
  });
}

// ---------- one app ----------

const appPrefs = { log: false, ranks: "", lines: "200" };

async function appPage(handle) {
  const head = el("h1", {}, handle);
  const statusBox = el("section", { id: "status" }, el("h2", {}, "Status"));
  const ranksBox = el("section", { id: "ranks" }, el("h2", {}, "Ranks"));
  const chartsGrid = el("div", { class: "charts", id: "charts" });
  const logToggle = el("input", { type: "checkbox", id: "log-scale", checked: appPrefs.log,
    onchange: e => { appPrefs.log = e.target.checked; refreshCharts(); } });
  const metricsBox = el("section", { id: "metrics" }, el("h2", {}, "Metrics"),
    el("div", { class: "controls" }, el("label", {}, logToggle, " log scale")), chartsGrid);
  const logPre = el("pre", { class: "logs", id: "logs" });
  const rankInput = el("input", { id: "log-ranks", placeholder: "e.g. 0,2-3", value: appPrefs.ranks, size: 10,
    onchange: e => { appPrefs.ranks = e.target.value.trim(); refreshApp(); } });
  const logsNote = el("div", { class: "muted" });
  const logsBox = el("section", { id: "logs-section" }, el("h2", {}, "Logs"),
    el("div", { class: "controls" }, el("label", {}, "ranks ", rankInput), logsNote), logPre);
  const stackOut = el("div", { id: "stacks-out" });
  const hangBox = el("div", { id: "hang" });
  const stackButton = el("button", { id: "dump-stacks", onclick: () => dumpStacks() }, "dump stacks now");
  const stacksBox = el("section", { id: "stacks" }, el("h2", {}, "Stacks and hangs"), hangBox,
    el("div", { class: "controls" }, stackButton, el("span", { class: "muted" }, "py-spy, every rank at one moment")), stackOut);
  const describeBox = el("section", { id: "describe" }, el("h2", {}, "How it was submitted"));
  main.replaceChildren(head, statusBox, ranksBox, metricsBox, logsBox, stacksBox, describeBox);

  let names = [];
  let running = true;
  let loaded = false;
  const mine = generation;

  const refreshCharts = async () => {
    const boxes = names.map(n => {
      let box = chartsGrid.querySelector(`[data-metric="${CSS.escape(n)}"]`);
      if (!box) box = el("div", { class: "chart-box", "data-metric": n });
      return box;
    });
    chartsGrid.replaceChildren(...boxes);
    if (!names.length) chartsGrid.replaceChildren(el("p", { class: "muted" }, "no metrics logged yet"));
    await Promise.all(names.map((n, i) => drawChart(boxes[i],
      "/charts/app/" + enc(handle) + query({ metric: n, log: appPrefs.log ? "1" : "" }))));
  };

  const dumpStacks = async () => {
    stackOut.replaceChildren(el("p", { class: "muted" }, "dumping..."));
    try {
      const doc = await api("/api/stacks/" + enc(handle));
      const lines = [...(doc.collectives.lines || []), ...(doc.collectives.unavailable ? [doc.collectives.unavailable] : [])];
      stackOut.replaceChildren(el("div", { class: "muted" }, "taken " + fmtTime(doc.taken)),
        lines.length ? el("pre", { class: "block" }, lines.join("\n")) : "",
        el("pre", { class: "block", id: "stacks-text" }, doc.text));
    } catch (e) { stackOut.replaceChildren(el("p", { class: "error-box" }, e.message)); }
  };

  const refreshApp = async () => {
    const doc = await api("/api/apps/" + enc(handle) + query({ ranks: appPrefs.ranks, lines: appPrefs.lines, series: "0" }));
    if (mine !== generation) return;
    const st = doc.status;
    running = !st.is_terminal;
    loaded = true;
    head.replaceChildren((st.name || doc.describe.app_id) + " ", stateBadge(st.state),
      el("div", { class: "mono muted" }, handle));
    drawStatus(statusBox, doc);
    drawRanks(ranksBox, doc);
    drawHang(hangBox, st);
    stackButton.disabled = !running;
    drawDescribe(describeBox, doc.describe);
    const atBottom = logPre.scrollTop + logPre.clientHeight >= logPre.scrollHeight - 4;
    logPre.replaceChildren(...doc.logs.map(l => el("div", { class: l.urgent ? "urgent" : null },
      el("span", { class: "label" }, l.label + " "), l.line)));
    if (atBottom) logPre.scrollTop = logPre.scrollHeight;
    logsNote.textContent = doc.logs_note || (running ? "following (every " + LOGS_EVERY_MS / 1000 + "s)" : "the app has ended");
    const fresh = doc.metrics.names.join("\n") !== names.join("\n");
    names = doc.metrics.names;
    if (fresh) await refreshCharts();
  };

  every(LOGS_EVERY_MS, async () => { if (running || !loaded) await refreshApp(); });
  every(CHARTS_EVERY_MS, async () => { if (running && names.length) await refreshCharts(); });
}

function drawStatus(box, doc) {
  const st = doc.status, live = doc.live;
  const failure = st.failure ? (st.failure.summary || st.failure.kind || JSON.stringify(st.failure)) : "";
  box.replaceChildren(el("h2", {}, "Status"), el("div", { class: "row" },
    kv([
      ["state", stateBadge(st.state)], ["exit code", st.exit_code], ["message", st.msg],
      ["failed replica", st.failed_replica], ["failure", failure],
      ["ranks alive", live.world ? live.ranks_alive + "/" + live.world : ""],
      ["since progress", fmtAge(live.idle_s)], ["stall", live.stall],
      ["flags", (live.flags || []).length ? live.flags.map(f => el("span", { class: "flag" }, f)) : ""],
      ["restarts", st.num_restarts], ["requeues", st.num_requeues], ["sweep", live.sweep],
      ["logs", el("span", { class: "mono" }, st.log_dir || "")],
    ]),
    el("div", {}, el("h2", {}, "History"), table([
      { key: 0, label: "attempt", num: true, render: r => r[0] }, { key: 1, label: "reason", render: r => r[1] },
      { key: 2, label: "start", render: r => r[2] }, { key: 3, label: "end", render: r => r[3] },
    ], doc.history))));
}

const rankOrder = { key: null, asc: true };

function drawRanks(box, doc) {
  if (!doc.ranks.length) {
    box.replaceChildren(el("h2", {}, "Ranks"), el("p", { class: "muted" }, "no per-rank records (replicas: see status)"));
    return;
  }
  box.replaceChildren(el("h2", {}, "Ranks"), table([
    { key: "rank", label: "rank", num: true },
    { key: "replica_id", label: "replica", render: r => r.role + "/" + r.replica_id },
    { key: "pid", label: "pid", num: true },
    { key: "running", label: "running", render: r => r.running ? "yes" : "exited " + fmtNum(r.exit_code) },
    { key: "step", label: "step", num: true },
    { key: "steps_per_s", label: "steps/s", num: true, render: r => fmtNum(r.steps_per_s, 2) },
    { key: "idle_s", label: "since progress", num: true, render: r => fmtAge(r.idle_s) + (r.stalled ? " (straggler)" : "") },
    { key: "cpu_percent", label: "CPU %", num: true },
    { key: "rss", label: "RSS", num: true, render: r => fmtBytes(r.rss) },
    { key: "gpu", label: "GPU", sort: r => r.gpu && r.gpu.gpu, render: r => r.gpu ? "#" + r.gpu.gpu + " " + r.gpu.util + "% " + r.gpu.mem_mib + " MiB" : "" },
    { key: "last_line", label: "last line", render: r => el("span", { class: "mono" }, r.last_line) },
  ], doc.ranks, null, rankOrder));
}

function drawHang(box, st) {
  const parts = [];
  if (st.stall) parts.push(el("p", {}, "stall: " + st.stall));
  const hang = st.hang;
  if (hang) {
    const view = hang.collectives || {};
    const lines = [...(view.lines || []), ...(hang.summary || [])];
    parts.push(el("p", {}, `hang #${hang.hangs} at ${fmtTime(hang.at)}: no progress for ${hang.idle_s}s; action: ${hang.action}`),
      el("pre", { class: "block", id: "hang-report" }, lines.join("\n")),
      el("div", { class: "muted mono" }, "stacks: " + hang.dump));
  }
  if (!parts.length) parts.push(el("p", { class: "muted" }, "no hang reported"));
  box.replaceChildren(...parts);
}

function drawDescribe(box, d) {
  const app = d.app || { roles: [], metadata: {} };
  const run = (app.metadata || {}).trainlaunch_run || {};
  const meta = d.metadata || {};
  const snap = meta.snapshot;
  const snapshot = snap ? kv([
    ["kind", snap.kind], ["source", el("span", { class: "mono" }, snap.source)], ["commit", snap.commit],
    ["dirty", snap.dirty === null || snap.dirty === undefined ? "" : snap.dirty ? "yes (uncommitted changes included)" : "no"],
    ["files", snap.files], ["size", fmtBytes(snap.size)], ["working dir", snap.cwd_rel],
    ["left out (size)", (snap.skipped || []).join(", ")],
  ]) : el("p", { class: "muted" }, "no code snapshot (the app ran the working directory as it was)");
  box.replaceChildren(el("h2", {}, "How it was submitted"), el("div", { class: "row" },
    el("div", {}, kv([
      ["component", run.component], ["arguments", el("span", { class: "mono" }, (run.args || []).join(" "))],
      ["submitted from", el("span", { class: "mono" }, run.cwd || meta.cwd || "")], ["created", fmtTime(meta.created)],
      ["rank settings", Object.entries(meta.settings || {}).map(([k, v]) => k + "=" + v).join(", ")],
      ["options", Object.entries(d.cfg || {}).filter(([, v]) => v !== null).map(([k, v]) => k + "=" + v).join(", ")],
    ]), el("h2", {}, "Code snapshot"), snapshot),
    el("div", {}, app.roles.map(r => el("div", {}, el("h2", {}, "role " + r.name + " x" + r.num_replicas),
      el("pre", { class: "block" }, [r.entrypoint, ...r.args].join(" ")),
      el("pre", { class: "block", "data-role": r.name }, Object.entries(r.env).map(([k, v]) => k + "=" + v).join("\n")))))),
    el("details", {}, el("summary", {}, "describe --json (secrets masked)"),
      el("pre", { class: "block" }, JSON.stringify(d, null, 2))));
}

// ---------- sweeps ----------

async function sweepsPage() {
  const holder = el("section", {}, el("p", { class: "muted" }, "loading..."));
  main.replaceChildren(el("h1", {}, "Sweeps"), holder);
  every(SWEEP_EVERY_MS, async () => {
    const rows = await api("/api/sweeps");
    holder.replaceChildren(rows.length ? table([
      { key: "id", label: "sweep", render: s => el("a", { href: "#/sweep/" + enc(s.handle) }, s.id) },
      { key: "component", label: "component", render: s => s.component || s.error },
      { key: "points", label: "points", num: true }, { key: "max_parallel", label: "at once", num: true },
      { key: "created", label: "created", render: s => fmtTime(s.created) },
      { key: "handle", label: "handle", render: s => el("span", { class: "mono muted" }, s.handle) },
    ], rows, s => { location.hash = "#/sweep/" + enc(s.handle); }) : el("p", { class: "muted" }, "no sweeps yet"));
  });
}

const sweepPrefs = { metric: "", log: false, param: "", which: "last" };

async function sweepPage(handle) {
  const head = el("h1", {}, "Sweep");
  const controls = el("div", { class: "controls" });
  const tableBox = el("div", { id: "points" });
  const overlay = el("div", { class: "chart-box", id: "overlay" });
  const scatterBox = el("div", { class: "chart-box", id: "scatter" });
  main.replaceChildren(head, el("section", {}, controls),
    el("section", {}, el("h2", {}, "Points"), tableBox),
    el("section", {}, el("div", { class: "charts" }, overlay, scatterBox)));
  let doc = null;
  const pointOrder = { key: null, asc: true };

  let drawn = null;
  const drawControls = () => {
    const signature = JSON.stringify([doc.metrics, doc.params, sweepPrefs]);
    if (signature === drawn) return; // redrawing would close an open list
    drawn = signature;
    const pick = (id, label, key, options) => el("label", {}, label + " ", el("select", { id,
      onchange: e => { sweepPrefs[key] = e.target.value; refresh(); } },
      options.map(o => el("option", { value: o, selected: o === sweepPrefs[key] }, o))));
    controls.replaceChildren(pick("sweep-metric", "metric", "metric", doc.metrics),
      pick("sweep-param", "scatter against", "param", [...doc.params, "seed"]),
      pick("sweep-which", "value", "which", ["last", "best"]),
      el("label", {}, el("input", { type: "checkbox", id: "sweep-log", checked: sweepPrefs.log,
        onchange: e => { sweepPrefs.log = e.target.checked; refresh(); } }), " log scale"));
  };

  const drawTable = () => {
    const cols = [
      { key: "index", label: "#", num: true },
      ...doc.params.map(p => ({ key: "p:" + p, label: p, sort: r => r.params[p], render: r => r.params[p] })),
      { key: "seed", label: "seed", num: true },
      { key: "state", label: "state", render: r => stateBadge(r.state) },
      { key: "steps", label: "steps", num: true },
      ...doc.metrics.flatMap(m => [
        { key: "last:" + m, label: m + " last", num: true, sort: r => (r.last || {})[m], render: r => fmtNum((r.last || {})[m]) },
        { key: "best:" + m, label: m + " best" + (doc.lower_is_better[m] ? " (min)" : " (max)"), num: true, sort: r => (r.best || {})[m], render: r => fmtNum((r.best || {})[m]) },
      ]),
    ];
    tableBox.replaceChildren(table(cols, doc.points, r => { if (r.handle) location.hash = "#/app/" + enc(r.handle); }, pointOrder));
  };

  const refresh = async () => {
    doc = await api("/api/sweeps/" + enc(handle) + query({ metric: sweepPrefs.metric }));
    sweepPrefs.metric = doc.metric || "";
    if (!sweepPrefs.param) sweepPrefs.param = doc.params[0] || "seed";
    head.replaceChildren("Sweep " + handle.split(":").pop() + " ",
      el("span", { class: "muted" }, doc.component + " " + doc.args.join(" ")),
      el("div", { class: "mono muted" }, handle));
    drawControls();
    drawTable();
    const common = { metric: sweepPrefs.metric, log: sweepPrefs.log ? "1" : "" };
    await Promise.all([
      drawChart(overlay, "/charts/sweep/" + enc(handle) + query(common)),
      drawChart(scatterBox, "/charts/scatter/" + enc(handle) + query({ ...common, param: sweepPrefs.param, which: sweepPrefs.which })),
    ]);
  };
  every(SWEEP_EVERY_MS, refresh);
}

// ---------- routing ----------

function route() {
  generation += 1;
  timers.forEach(clearInterval);
  timers = [];
  say("");
  const hash = location.hash || "#/";
  const [, page, ...rest] = hash.split("/");
  const arg = decodeURIComponent(rest.join("/"));
  const pages = { "": appsPage, app: appPage, sweeps: sweepsPage, sweep: sweepPage };
  const show = pages[page] || appsPage;
  show(arg).catch(e => { main.replaceChildren(el("p", { class: "error-box" }, e.message)); say(e.message, true); });
}

window.addEventListener("hashchange", route);
route();
