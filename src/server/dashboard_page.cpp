// The dashboard page's text (see dashboard_page.h).
#include "server/dashboard_page.h"

namespace keel::server {
namespace {

constexpr std::string_view kPage = R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>keel fleet</title>
<style>
body { font: 14px system-ui, sans-serif; margin: 16px 24px; color: #1d2330; background: #f6f7f9; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 15px; margin: 18px 0 6px; }
section { background: #fff; border: 1px solid #dde1e7; border-radius: 6px; padding: 8px 12px; margin-bottom: 12px; }
table { border-collapse: collapse; width: 100%; } th, td { text-align: left; padding: 3px 8px; border-bottom: 1px solid #eceef2; }
th { font-weight: 600; color: #566; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
th.num { text-align: right; } .idle { color: #667; } .busy { color: #2e7d32; }
tr.down td { color: #b3261e; } .role { display: inline-block; padding: 0 6px; border-radius: 8px; color: #fff; }
.colocated { background: #3b6fd8; } .prefill { background: #d8893b; } .decode { background: #2e9b62; }
.bar { width: 120px; height: 10px; background: #e6e9ee; border-radius: 5px; overflow: hidden; display: inline-block; }
.fill { height: 100%; background: #3b6fd8; } .kv .fill { background: #8a5cd8; }
.cards { display: flex; gap: 12px; flex-wrap: wrap; } .card { min-width: 110px; }
.card b { display: block; font-size: 20px; } #status { color: #667; } #decisions li { font-family: monospace; }
.charts { display: flex; gap: 16px; flex-wrap: wrap; } figure { margin: 0; }
figcaption { font-size: 12px; color: #445; margin-bottom: 2px; }
</style>
</head>
<body>
<h1>keel fleet</h1>
<div id="status">connecting&hellip;</div>
<section><h2>Task executors</h2>
<table><thead><tr><th>id</th><th>role</th><th>state</th><th class="num">waiting</th>
<th class="num">running</th><th class="num">pending tokens</th><th>KV use</th><th>prefix hit rate</th>
<th class="num">prompt / generated tokens</th></tr></thead>
<tbody id="te-rows"></tbody></table></section>
<section><h2>Jobs</h2><div class="cards" id="jobs"></div></section>
<section><h2>Router</h2><div class="cards" id="router"></div>
<h2>Recent decisions</h2><ol id="decisions"></ol></section>
<section><h2>Latency and errors</h2>
<div class="charts">
<figure><figcaption id="ttft-label">TTFT</figcaption>
<svg id="chart-ttft" width="340" height="110" role="img" aria-label="TTFT p50 and p99 over time"></svg></figure>
<figure><figcaption id="tpot-label">TPOT</figcaption>
<svg id="chart-tpot" width="340" height="110" role="img" aria-label="TPOT p50 and p99 over time"></svg></figure>
<figure><figcaption id="errors-label">Errors</figcaption>
<svg id="chart-errors" width="340" height="110" role="img" aria-label="error and abort rates over time"></svg></figure>
</div></section>
<section><h2>Autoscaler</h2>
<table><thead><tr><th>group</th><th class="num">desired</th><th class="num">ready</th>
<th class="num">held requests</th><th>panic</th><th class="num">decisions</th>
<th class="num">drains</th></tr></thead>
<tbody id="autoscaler"></tbody></table></section>
<section><h2>Scale-out</h2>
<svg id="timeline" width="720" height="110" role="img" aria-label="fleet size over time"></svg>
<table><thead><tr><th>phase</th><th class="num">scale-outs</th><th class="num">mean seconds</th></tr></thead>
<tbody id="phases"></tbody></table></section>
<script>
'use strict';
const key = new URLSearchParams(location.hash.slice(1)).get('key');
const headers = key ? { Authorization: 'Bearer ' + key } : {};
const ROLES = ['prefill', 'decode', 'colocated'];
const history = [];
const decisions = [];
let lastRouter = null;

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const k of kids) e.append(k instanceof Node ? k : String(k));
  return e;
}
const pct = (x) => (100 * x).toFixed(1) + '%';
function bar(x, cls) {
  const fill = el('div', { class: 'fill' });
  fill.style.width = pct(Math.max(0, Math.min(1, x || 0)));
  return el('div', { class: 'bar ' + (cls || '') }, fill);
}
const num = (v) => el('td', { class: 'num' }, v === undefined ? '-' : v);
function cards(id, entries) {
  document.getElementById(id).replaceChildren(
    ...entries.map(([name, v]) => el('div', { class: 'card' }, el('b', {}, v), name)));
}

// What a TE is doing: idle or busy from its load report (its queue), else why it is out.
function teState(te) {
  if (!te.healthy) return te.state === 'hung' || te.state === 'dead' ? te.state : 'unhealthy';
  return (te.waiting || 0) + (te.running || 0) > 0 ? 'busy' : 'idle';
}

function renderTes(tes) {
  const rows = tes.slice().sort((a, b) =>
    ROLES.indexOf(a.role) - ROLES.indexOf(b.role) || a.id.localeCompare(b.id));
  document.getElementById('te-rows').replaceChildren(...rows.map((te) => el('tr',
    { id: 'te-' + te.id, 'data-te': te.id, class: te.healthy ? 'up' : 'down' },
    el('td', {}, te.id), el('td', {}, el('span', { class: 'role ' + te.role }, te.role)),
    el('td', { class: 'state ' + teState(te) }, teState(te)), num(te.waiting), num(te.running),
    num(te.pending_tokens),
    el('td', {}, bar(te.kv_usage, 'kv'), ' ', pct(te.kv_usage || 0),
       ` (${te.kv_blocks_used}/${te.kv_blocks_total})`),
    el('td', {}, bar(te.prefix_hit_rate), ' ', pct(te.prefix_hit_rate || 0)),
    num(`${te.prompt_tokens_total} / ${te.generation_tokens_total}`))));
}

function renderRouter(router) {
  const branches = ['locality', 'least_load', 'round_robin', 'no_capacity', 'pd_disaggregated'];
  cards('router', branches.map((b) => [b, router[b] || 0])
    .concat([['matched blocks', router.matched_blocks || 0]]));
  if (lastRouter) {
    const changed = branches.filter((b) => (router[b] || 0) > (lastRouter[b] || 0))
      .map((b) => `${b} +${router[b] - (lastRouter[b] || 0)}`);
    if (changed.length) {
      decisions.unshift(new Date().toLocaleTimeString() + '  ' + changed.join(', '));
      decisions.length = Math.min(decisions.length, 15);
    }
  }
  lastRouter = router;
  const list = decisions.length ? decisions : ['(none since the page opened)'];
  document.getElementById('decisions').replaceChildren(...list.map((d) => el('li', {}, d)));
}

function parseMetrics(text) {
  const out = {};
  for (const line of text.split('\n')) {
    const m = line.match(/^([A-Za-z_:][\w:]*)(\{[^}]*\})?\s+(\S+)/);
    if (m) (out[m[1]] = out[m[1]] || []).push({ labels: m[2] || '', value: Number(m[3]) });
  }
  return out;
}
function metric(metrics, name, label) {
  const s = (metrics[name] || []).find((x) => !label || x.labels.includes(label));
  return s ? s.value : 0;
}

function renderPhases(metrics) {
  const rows = ['scaler_pre', 'pre_load', 'load', 'post_load', 'announce'].map((p) => {
    const label = `phase="${p}"`;
    const n = metric(metrics, 'keel:scale_out_phase_seconds_count', label);
    const sum = metric(metrics, 'keel:scale_out_phase_seconds_sum', label);
    return [p, n, n ? (sum / n).toFixed(3) : '-'];
  });
  const n = metric(metrics, 'keel:scale_out_first_token_seconds_count');
  const sum = metric(metrics, 'keel:scale_out_first_token_seconds_sum');
  rows.push(['decision → first token', n, n ? (sum / n).toFixed(3) : '-']);
  document.getElementById('phases').replaceChildren(
    ...rows.map(([p, c, m]) => el('tr', {}, el('td', {}, p), num(c), num(m))));
}

// One row per autoscaler group (role) that /metrics reports.
function renderAutoscaler(metrics) {
  const sum = (name, label) => (metrics[name] || [])
    .filter((x) => x.labels.includes(label)).reduce((a, x) => a + x.value, 0);
  const rows = ROLES.filter((role) => (metrics['keel:autoscaler_desired_replicas'] || [])
    .some((x) => x.labels.includes(`role="${role}"`))).map((role) => {
    const label = `role="${role}"`;
    return el('tr', { id: 'autoscaler-' + role },
      el('td', {}, el('span', { class: 'role ' + role }, role)),
      num(metric(metrics, 'keel:autoscaler_desired_replicas', label)),
      num(metric(metrics, 'keel:autoscaler_ready_replicas', label)),
      num(metric(metrics, 'keel:autoscaler_held_requests', label)),
      el('td', {}, metric(metrics, 'keel:autoscaler_panic', label) ? 'panic' : '-'),
      num(sum('keel:autoscaler_decisions_total', label)),
      num(sum('keel:autoscaler_drains_total', label)));
  });
  document.getElementById('autoscaler').replaceChildren(...(rows.length ? rows :
    [el('tr', {}, el('td', { colspan: 7 },
      'no autoscaler (cluster up --max, or --max-prefill / --max-decode)'))]));
}

// Latency and error rates over time, from the cumulative /metrics counters of each poll: a point
// covers the last WINDOW polls (since the gateway started while the page is younger).
const WINDOW = 30;
const snapshots = [];
const latency = [];
function histogram(metrics, name) {
  const out = new Map();
  for (const s of metrics[name + '_bucket'] || []) {
    const m = s.labels.match(/le="([^"]+)"/);
    if (!m) continue;
    const le = m[1] === '+Inf' ? Infinity : Number(m[1]);
    out.set(le, (out.get(le) || 0) + s.value);
  }
  return [...out.entries()].sort((a, b) => a[0] - b[0]);
}
function finishedByReason(metrics) {
  const out = {};
  for (const s of metrics['keel:request_success_total'] || []) {
    const m = s.labels.match(/finished_reason="([^"]+)"/);
    if (m) out[m[1]] = (out[m[1]] || 0) + s.value;
  }
  return out;
}
// The q-quantile of what was observed between two cumulative histograms, linear within a bucket
// (as Prometheus' histogram_quantile); null when nothing was.
function quantile(q, now, then) {
  const before = new Map(then);
  const counts = now.map(([le, n]) => [le, Math.max(0, n - (before.get(le) || 0))]);
  const total = counts.length ? counts[counts.length - 1][1] : 0;
  if (total <= 0) return null;
  const rank = q * total;
  let prevLe = 0, prevN = 0;
  for (const [le, n] of counts) {
    if (n >= rank) {
      if (le === Infinity) return prevLe;
      return prevLe + (le - prevLe) * (n > prevN ? (rank - prevN) / (n - prevN) : 0);
    }
    prevLe = le; prevN = n;
  }
  return prevLe;
}
function sampleLatency(metrics) {
  const snap = { ttft: histogram(metrics, 'keel:time_to_first_token_seconds'),
    tpot: histogram(metrics, 'keel:inter_token_latency_seconds'),
    finished: finishedByReason(metrics) };
  snapshots.push(snap);
  const full = snapshots.length > WINDOW;
  const base = full ? snapshots[snapshots.length - 1 - WINDOW] : { ttft: [], tpot: [], finished: {} };
  if (snapshots.length > WINDOW + 1) snapshots.shift();
  const d = (r) => Math.max(0, (snap.finished[r] || 0) - (base.finished[r] || 0));
  const n = ['stop', 'length', 'abort', 'error'].reduce((a, r) => a + d(r), 0);
  const ms = (x) => (x === null ? null : 1000 * x);
  latency.push({ full, finished: n,
    ttft50: ms(quantile(0.5, snap.ttft, base.ttft)), ttft99: ms(quantile(0.99, snap.ttft, base.ttft)),
    tpot50: ms(quantile(0.5, snap.tpot, base.tpot)), tpot99: ms(quantile(0.99, snap.tpot, base.tpot)),
    errors: n ? (100 * d('error')) / n : null, aborts: n ? (100 * d('abort')) / n : null });
  if (latency.length > 120) latency.shift();
}
// Lines of `series` ([{name, color, key}]) over the latency points (the newest at the right
// edge, one per poll), gaps where a value is null.
function lineChart(id, series, unit) {
  const svg = document.getElementById(id);
  const ns = 'http://www.w3.org/2000/svg';
  const w = 340, h = 110, pad = 16, step = (w - 2 * pad) / 119;
  const values = latency.flatMap((p) => series.map((s) => p[s.key])).filter((v) => v !== null);
  const top = Math.max(unit === '%' ? 1 : 0.001, ...values) * 1.1;
  const axis = document.createElementNS(ns, 'path');
  axis.setAttribute('d', `M${pad},${h - pad} L${w - pad},${h - pad}`);
  axis.setAttribute('stroke', '#c5cad3');
  const kids = [axis];
  const x = (i) => (w - pad - (latency.length - 1 - i) * step).toFixed(1);
  series.forEach((s, k) => {
    let d = '', pen = 'M';
    latency.forEach((p, i) => {
      const v = p[s.key];
      if (v === null) { pen = 'M'; return; }
      d += `${pen}${x(i)},${(h - pad - (v / top) * (h - 2 * pad)).toFixed(1)} `;
      pen = 'L';
    });
    const path = document.createElementNS(ns, 'path');
    path.setAttribute('d', d || 'M0,0'); path.setAttribute('fill', 'none');
    path.setAttribute('stroke', s.color); path.setAttribute('stroke-width', 1.5);
    path.setAttribute('class', 'series ' + s.key);
    const legend = document.createElementNS(ns, 'text');
    legend.setAttribute('x', pad + 70 * k); legend.setAttribute('y', 11);
    legend.setAttribute('font-size', 10); legend.setAttribute('fill', s.color);
    legend.textContent = s.name;
    kids.push(path, legend);
    const last = latency.length ? latency[latency.length - 1][s.key] : null;
    if (last !== null) {  // the newest value as a dot (a lone point draws no line)
      const dot = document.createElementNS(ns, 'circle');
      dot.setAttribute('cx', x(latency.length - 1)); dot.setAttribute('r', 2.5);
      dot.setAttribute('cy', (h - pad - (last / top) * (h - 2 * pad)).toFixed(1));
      dot.setAttribute('fill', s.color);
      kids.push(dot);
    }
  });
  const scale = document.createElementNS(ns, 'text');
  scale.setAttribute('x', w - pad); scale.setAttribute('y', 11); scale.setAttribute('font-size', 10);
  scale.setAttribute('text-anchor', 'end');
  scale.textContent = 'max ' + (top / 1.1).toFixed(unit === '%' ? 1 : 2) + ' ' + unit;
  kids.push(scale);
  svg.replaceChildren(...kids);
}
function renderLatency() {
  const last = latency[latency.length - 1];
  if (!last) return;
  const span = last.full ? `last ${WINDOW} s` : 'since the gateway started';
  const f = (x) => (x === null ? '-' : x.toFixed(x < 10 ? 2 : 1));
  document.getElementById('ttft-label').textContent = last.ttft50 === null
    ? `TTFT: no requests (${span})` : `TTFT p50 ${f(last.ttft50)} ms, p99 ${f(last.ttft99)} ms (${span})`;
  document.getElementById('tpot-label').textContent = last.tpot50 === null
    ? `TPOT: no tokens (${span})` : `TPOT p50 ${f(last.tpot50)} ms, p99 ${f(last.tpot99)} ms (${span})`;
  document.getElementById('errors-label').textContent = last.finished === 0
    ? `Errors: no finished requests (${span})`
    : `errors ${last.errors.toFixed(1)}%, aborted ${last.aborts.toFixed(1)}% of ${last.finished} ` +
      `finished requests (${span})`;
  lineChart('chart-ttft', [{ name: 'p50', color: '#3b6fd8', key: 'ttft50' },
    { name: 'p99', color: '#b3261e', key: 'ttft99' }], 'ms');
  lineChart('chart-tpot', [{ name: 'p50', color: '#3b6fd8', key: 'tpot50' },
    { name: 'p99', color: '#b3261e', key: 'tpot99' }], 'ms');
  lineChart('chart-errors', [{ name: 'errors', color: '#b3261e', key: 'errors' },
    { name: 'aborted', color: '#d8893b', key: 'aborts' }], '%');
}

function renderTimeline() {
  const svg = document.getElementById('timeline');
  const ns = 'http://www.w3.org/2000/svg';
  const w = 720, h = 110, pad = 18;
  const max = Math.max(2, ...history.map((x) => x.total));
  const kids = [];
  const step = (w - 2 * pad) / 120;
  history.forEach((x, i) => {
    let y = h - pad;
    for (const role of ROLES) {
      const n = x.roles[role] || 0;
      if (!n) continue;
      const r = document.createElementNS(ns, 'rect');
      const bh = (n / max) * (h - 2 * pad);
      r.setAttribute('x', pad + i * step); r.setAttribute('width', Math.max(1, step - 1));
      r.setAttribute('y', y - bh); r.setAttribute('height', bh); r.setAttribute('class', role);
      r.setAttribute('fill', { prefill: '#d8893b', decode: '#2e9b62', colocated: '#3b6fd8' }[role]);
      kids.push(r); y -= bh;
    }
  });
  const label = document.createElementNS(ns, 'text');
  label.setAttribute('x', pad); label.setAttribute('y', 12); label.setAttribute('font-size', 11);
  const last = history[history.length - 1];
  label.textContent = `TEs over the last ${history.length} s (now ${last ? last.total : 0}, ` +
    `${last ? last.healthy : 0} healthy; max ${max})`;
  kids.push(label);
  svg.replaceChildren(...kids);
}

async function poll() {
  try {
    const [s, m] = await Promise.all([
      fetch('/v1/cluster/status', { headers }).then((r) => {
        if (!r.ok) throw new Error('/v1/cluster/status: HTTP ' + r.status);
        return r.json();
      }),
      fetch('/metrics', { headers }).then((r) => (r.ok ? r.text() : '')),
    ]);
    const tes = s.task_executors || [];
    renderTes(tes);
    const jobs = s.jobs || {};
    cards('jobs', [['active', jobs.active || 0], ['total', jobs.total || 0],
      ['re-driven', jobs.redriven || 0], ['failed', jobs.failed || 0],
      ['waiting (all TEs)', tes.reduce((a, t) => a + (t.waiting || 0), 0)],
      ['running (all TEs)', tes.reduce((a, t) => a + (t.running || 0), 0)]]);
    renderRouter(s.router || {});
    const roles = {};
    for (const t of tes) roles[t.role] = (roles[t.role] || 0) + 1;
    history.push({ total: tes.length, healthy: tes.filter((t) => t.healthy).length, roles });
    if (history.length > 120) history.shift();
    renderTimeline();
    const metrics = parseMetrics(m);
    renderPhases(metrics);
    renderAutoscaler(metrics);
    sampleLatency(metrics);
    renderLatency();
    const down = (s.job_executors || []).filter((j) => j.state !== 'up').map((j) => j.id);
    document.getElementById('status').textContent =
      `job executors ${s.je}${down.length ? ' (down: ' + down.join(', ') + ')' : ''}: ` +
      `${tes.length} TEs; updated ${new Date().toLocaleTimeString()}`;
  } catch (e) {
    document.getElementById('status').textContent = 'error: ' + e.message;
  }
}
poll();
setInterval(poll, 1000);
</script>
</body>
</html>
)HTML";

}  // namespace

std::string_view dashboard_html() { return kPage; }

}  // namespace keel::server
