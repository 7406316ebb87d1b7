// The shardcounter dashboard: a few screens over the HTTP API, each
// answering one question. Every number comes from /v1; nothing is fetched
// from anywhere else. The bearer token, when the server needs one, lives
// in this tab's sessionStorage and travels only in Authorization headers
// (never in a URL), which is why the live value is read with fetch and
// a small event-stream parser rather than EventSource: EventSource cannot
// send headers.
'use strict';

const TOKEN_KEY = 'shardcounter-token';
const WATCH_INTERVAL = '1s';
const WATCH_INTERVAL_MS = 1000;
const CHART_SPAN_MS = 5 * 60 * 1000; // the rate chart shows the last 5 minutes
const ENGINE_POLL_MS = 2000;
const ENGINE_WINDOW_MS = 10000; // rates over the last 10 s
const SHARDS_POLL_MS = 5000;
const PAGE_SIZE = 50;

// ---- small helpers -------------------------------------------------------

// h builds an element. Text is always set as text, never as HTML: counter
// ids and documents are user data.
function h(tag, attrs, ...children) {
  const svg = ['svg', 'polyline', 'line', 'text', 'rect', 'path'].includes(tag);
  const el = svg ? document.createElementNS('http://www.w3.org/2000/svg', tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'text') el.textContent = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const fmtInt = (n) => Number(n).toLocaleString('en-US');
function fmtNum(x, digits) {
  if (x === null || x === undefined || !isFinite(x)) return '–';
  return x.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
}
function fmtTime(iso) {
  const d = new Date(iso);
  return isNaN(d) ? iso : d.toLocaleTimeString('en-GB', { hour12: false }) + '.' + String(d.getMilliseconds()).padStart(3, '0');
}
function fmtDate(iso) {
  const d = new Date(iso);
  return isNaN(d) ? iso : d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
}

// escapeID escapes a counter id as one path segment, as the API wants:
// "." and ".." too, which URL path cleaning would otherwise resolve.
function escapeID(id) {
  if (id === '.') return '%2E';
  if (id === '..') return '%2E%2E';
  return encodeURIComponent(id);
}

const token = () => sessionStorage.getItem(TOKEN_KEY) || '';

// ApiError is a failed API call: the API's error code and message.
class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function errorOf(resp) {
  let body = null;
  try { body = await resp.json(); } catch (e) { /* not the API's error body */ }
  if (body && body.error) return new ApiError(resp.status, body.error.code, body.error.message);
  return new ApiError(resp.status, 'internal', `the server replied ${resp.status} ${resp.statusText}`);
}

// api calls the API. A 401 sends the user to the login screen.
async function api(method, path, body, signal) {
  const headers = { Accept: 'application/json' };
  if (token()) headers.Authorization = 'Bearer ' + token();
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const resp = await fetch(path, {
    method, headers, signal, cache: 'no-store',
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (resp.status === 401) {
    needLogin();
    throw await errorOf(resp);
  }
  if (!resp.ok) throw await errorOf(resp);
  return resp.status === 204 ? null : resp.json();
}

const sleep = (ms, signal) => new Promise((resolve) => {
  const t = setTimeout(resolve, ms);
  signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
});

// every runs fn now and then every ms until signal aborts.
async function every(ms, signal, fn) {
  while (!signal.aborted) {
    try { await fn(); } catch (e) { if (signal.aborted) return; }
    await sleep(ms, signal);
  }
}

// ---- the live value: GET /v1/counters/{id}/watch ----------------------------

// watch reads a counter's event stream (the WHATWG text/event-stream
// format) and calls onReading for each reading, onStatus('live' |
// 'reconnecting' | 'error', message, error code) as the connection goes. It
// reconnects as EventSource would: after the server's retry delay, with
// Last-Event-ID, so a reconnection repeats nothing.
async function watch(id, signal, onReading, onStatus) {
  let lastID = null;
  let retry = 1000;
  while (!signal.aborted) {
    try {
      const headers = { Accept: 'text/event-stream' };
      if (token()) headers.Authorization = 'Bearer ' + token();
      if (lastID !== null) headers['Last-Event-ID'] = lastID;
      const resp = await fetch(`/v1/counters/${escapeID(id)}/watch?interval=${WATCH_INTERVAL}`, { headers, signal, cache: 'no-store' });
      if (resp.status === 401) { needLogin(); return; }
      if (!resp.ok) {
        const e = await errorOf(resp);
        if (resp.status !== 503) { onStatus('error', e.message, e.code); return; }
        throw e;
      }
      onStatus('live');
      const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      let data = [];
      let type = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let m;
        while ((m = /\r\n|\r|\n/.exec(buf)) !== null) {
          if (m[0] === '\r' && m.index === buf.length - 1) break; // maybe half of a CRLF
          const line = buf.slice(0, m.index);
          buf = buf.slice(m.index + m[0].length);
          if (line === '') { // dispatch
            if (data.length > 0) {
              const text = data.join('\n');
              if (type === '' || type === 'message') onReading(JSON.parse(text));
              else if (type === 'error') {
                const e = JSON.parse(text).error;
                onStatus('error', e.message, e.code);
                if (e.code === 'not_found') return;
              }
            }
            data = [];
            type = '';
            continue;
          }
          if (line[0] === ':') continue; // heartbeat
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          let val = colon < 0 ? '' : line.slice(colon + 1);
          if (val[0] === ' ') val = val.slice(1);
          if (field === 'data') data.push(val);
          else if (field === 'event') type = val;
          else if (field === 'id' && !val.includes('\0')) lastID = val;
          else if (field === 'retry' && /^\d+$/.test(val)) retry = Number(val);
        }
      }
    } catch (e) {
      if (signal.aborted) return;
    }
    onStatus('reconnecting');
    await sleep(retry, signal);
  }
}

// ---- the rate chart ----------------------------------------------------------

// RateSeries turns readings into the counter's change per second, timed
// by the readings' as_of. The stream sends a reading only when the value
// changed, and the server reads every WATCH_INTERVAL_MS: a gap of several
// intervals means the value stood still until the last of them.
class RateSeries {
  constructor() { this.last = null; this.points = []; }
  add(reading) {
    const t = Date.parse(reading.as_of);
    if (this.last && t > this.last.t) {
      const dv = reading.value - this.last.v;
      let from = this.last.t;
      if (t - from > 1.5 * WATCH_INTERVAL_MS) {
        this.points.push({ t0: from, t: t - WATCH_INTERVAL_MS, rate: 0 });
        from = t - WATCH_INTERVAL_MS;
      }
      this.points.push({ t0: from, t, rate: dv * 1000 / (t - from) });
    }
    this.last = { t, v: reading.value };
    const cutoff = t - CHART_SPAN_MS;
    while (this.points.length && this.points[0].t < cutoff) this.points.shift();
  }
}

// niceCeil rounds x up to 1, 2 or 5 times a power of ten, for axis ticks.
function niceCeil(x) {
  const p = Math.pow(10, Math.floor(Math.log10(x)));
  for (const m of [1, 2, 5, 10]) if (m * p >= x) return m * p;
  return 10 * p;
}

// fmtTick writes an axis tick with the decimals it needs and no more:
// 1, 0.5 and 0 on an axis up to 1 /s, never two ticks that read alike.
const fmtTick = (v) => v.toLocaleString('en-US', { maximumFractionDigits: 3 });

function fmtSpan(ms) {
  const s = Math.round(ms / 1000);
  return s < 120 ? `${s} s` : `${Math.round(s / 60)} min`;
}

// drawChart draws the series as steps from the first reading (at most
// CHART_SPAN_MS ago) up to now. Past an interval with no reading the
// counter stood still: the rate is 0 there.
function drawChart(svg, series, now) {
  const W = Math.max(320, svg.clientWidth || 640), H = 180, L = 64, R = 10, T = 10, B = 22;
  svg.replaceChildren();
  svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
  const first = series.points.length ? series.points[0].t0 : (series.last ? series.last.t : now);
  const t1 = now, t0 = Math.max(now - CHART_SPAN_MS, Math.min(first, now - 10000));
  const rates = series.points.filter((p) => p.t >= t0).map((p) => p.rate);
  const hi = niceCeil(Math.max(1, ...rates));
  const lo = Math.min(0, ...rates) < 0 ? -niceCeil(-Math.min(...rates)) : 0;
  const x = (t) => L + (W - L - R) * Math.max(0, t - t0) / (t1 - t0);
  const y = (v) => T + (H - T - B) * (hi - v) / (hi - lo);
  for (const v of lo < 0 ? [hi, 0, lo] : [hi, hi / 2, 0]) {
    svg.append(h('line', { x1: L, x2: W - R, y1: y(v), y2: y(v), stroke: '#d9dee3' }));
    svg.append(h('text', { x: L - 6, y: y(v) + 4, 'text-anchor': 'end', text: fmtTick(v) + ' /s' }));
  }
  svg.append(h('text', { x: L, y: H - 6, text: '−' + fmtSpan(t1 - t0) }));
  svg.append(h('text', { x: W - R, y: H - 6, 'text-anchor': 'end', text: 'now' }));
  const pts = [];
  for (const p of series.points) {
    if (p.t < t0) continue;
    pts.push(`${x(p.t0)},${y(p.rate)}`, `${x(p.t)},${y(p.rate)}`);
  }
  if (series.last && t1 - series.last.t > 1.5 * WATCH_INTERVAL_MS) pts.push(`${x(series.last.t)},${y(0)}`, `${x(t1)},${y(0)}`);
  if (pts.length) svg.append(h('polyline', { points: pts.join(' '), fill: 'none', stroke: '#1f6feb', 'stroke-width': 1.5 }));
}

// ---- screens -----------------------------------------------------------------

const main = () => document.getElementById('main');
let current = null; // the AbortController of the screen on show

function show(title, ...content) {
  main().replaceChildren(...content);
  document.title = title + ' · shardcounter';
}

function errorLine(e) {
  return h('p', { class: 'error', role: 'alert', text: e.message || String(e) });
}

function stat(label, n, unit, testid) {
  return h('div', { class: 'stat' }, h('div', { class: 'label', text: label }),
    h('div', {}, h('span', { class: 'n', 'data-testid': testid, text: n }), h('span', { class: 'unit', text: unit })));
}

// Which counters are there? GET /v1/counters, by prefix, a page at a time.
async function countersScreen(params, signal) {
  const prefix = params.get('prefix') || '';
  const page = params.get('page') || '';
  const input = h('input', { type: 'text', name: 'prefix', value: prefix, placeholder: 'id prefix, e.g. post/', 'aria-label': 'Counter id prefix' });
  const form = h('form', { class: 'inline', role: 'search', onsubmit: (ev) => {
    ev.preventDefault();
    location.hash = '#/counters?' + new URLSearchParams(input.value ? { prefix: input.value } : {});
  } }, h('label', {}, 'Search counters', input), h('button', { class: 'primary', type: 'submit', text: 'Search' }));
  const body = h('div', {}, h('p', { class: 'note', text: 'Loading…' }));
  show('Counters', h('h1', { text: 'Counters' }), form, body);
  const q = new URLSearchParams({ limit: PAGE_SIZE });
  if (prefix) q.set('prefix', prefix);
  if (page) q.set('page_token', page);
  let list;
  try {
    list = await api('GET', '/v1/counters?' + q, undefined, signal);
  } catch (e) {
    body.replaceChildren(errorLine(e));
    return;
  }
  if (list.counters.length === 0) {
    body.replaceChildren(h('p', { class: 'note', text: prefix ? `No counter id starts with “${prefix}”.` : 'No counters yet: create one with shardcounter create ID, or write to one.' }));
    return;
  }
  // The page's values in one batch read, cached: the engine's rollups,
  // cheap for the store. A counter deleted since the listing shows its
  // error code.
  let values;
  try {
    const r = await api('POST', '/v1/reads', { counters: list.counters.map((c) => c.id), consistency: 'cached' }, signal);
    values = new Map(r.readings.map((x) => [x.id, x]));
  } catch (e) {
    body.replaceChildren(errorLine(e));
    return;
  }
  const valueCell = (id) => {
    const x = values.get(id);
    return h('td', { class: 'num', title: x && x.as_of ? `as of ${fmtTime(x.as_of)}` : undefined, text: x && x.error ? x.error.code : x ? fmtInt(x.value) : '' });
  };
  const rows = list.counters.map((c) => h('tr', {},
    h('td', { class: 'id' }, h('a', { href: '#/counter/' + encodeURIComponent(c.id), text: c.id })),
    valueCell(c.id),
    h('td', { text: c.kind || 'sum' }),
    h('td', { class: 'num', text: fmtInt(c.shards) }),
    h('td', { text: fmtDate(c.created_at) })));
  const pager = h('div', { class: 'pager' });
  if (page) pager.append(h('a', { href: '#/counters?' + new URLSearchParams(prefix ? { prefix } : {}), text: '← First page' }));
  if (list.next_page_token) {
    const next = new URLSearchParams({ page: list.next_page_token });
    if (prefix) next.set('prefix', prefix);
    pager.append(h('a', { href: '#/counters?' + next, rel: 'next', text: 'Next page →' }));
  }
  let stale = 0;
  for (const x of values.values()) stale = Math.max(stale, x.max_staleness_ms || 0);
  pager.append(h('span', { class: 'note', text: `${list.counters.length} counters on this page; values are cached reads, at most ${fmtInt(stale)} ms old` }));
  body.replaceChildren(
    h('table', { 'data-testid': 'counters' },
      h('thead', {}, h('tr', {}, h('th', { text: 'Counter' }), h('th', { class: 'num', text: 'Value' }),
        h('th', { text: 'Kind' }), h('th', { class: 'num', text: 'Shards' }), h('th', { text: 'Created' }))),
      h('tbody', {}, rows)),
    pager);
}

// counterMeta is a line of a counter's kind, shards, creation and bounds.
function counterMeta(c) {
  const meta = h('div', { class: 'meta' },
    h('span', {}, 'kind ', h('b', { text: c.kind || 'sum' })),
    h('span', {}, 'shards ', h('b', { 'data-testid': 'shard-count', text: fmtInt(c.shards) })),
    h('span', {}, 'created ', h('b', { text: fmtDate(c.created_at) })));
  if (c.min !== undefined) meta.append(h('span', {}, 'min ', h('b', { text: fmtInt(c.min) })));
  if (c.max !== undefined) meta.append(h('span', {}, 'max ', h('b', { text: fmtInt(c.max) })));
  if (c.window) meta.append(h('span', {}, 'window ', h('b', { text: `${c.window.bucket} buckets, ${c.window.retention} kept` })));
  return meta;
}

// shardsTable is a counter's placement: a row a shard, and the total.
function shardsTable(p) {
  const total = p.placement.reduce((s, x) => s + x.value, 0);
  const slots = p.placement.some((x) => x.slot !== undefined);
  return h('table', { 'data-testid': 'shards' },
    h('thead', {}, h('tr', {}, h('th', { class: 'num', text: 'Shard' }), h('th', { class: 'num', text: 'Value' }), h('th', { text: 'Node' }), slots ? h('th', { class: 'num', text: 'Slot' }) : null)),
    h('tbody', {}, p.placement.map((x) => h('tr', {},
      h('td', { class: 'num', text: x.shard }),
      h('td', { class: 'num', text: fmtInt(x.value) }),
      h('td', { class: 'id', text: x.node }),
      slots ? h('td', { class: 'num', text: x.slot ?? '' }) : null))),
    h('tfoot', {}, h('tr', {}, h('td', { text: 'Total' }), h('td', { class: 'num', 'data-testid': 'shards-total', text: fmtInt(total) }), h('td', { text: `${p.shards} shards, as of ${fmtTime(p.as_of)}` }), slots ? h('td') : null)));
}

// How is this counter doing? Its live value and rate (watch), its shards
// and where they live (placement), and the write path serving it. A
// counter that does not exist, or is deleted while on show, gets a line
// saying so and the way back, not a page of empty panels.
async function counterScreen(id, parentSignal) {
  const crumb = () => h('p', { class: 'note' }, h('a', { href: '#/', text: 'Counters' }), ' / counter');
  show(id, crumb(), h('h1', { text: id }), h('p', { class: 'note', text: 'Loading…' }));
  // Metadata: the list's entry for this id, which sorts first among the
  // ids it prefixes.
  let c;
  try {
    const list = await api('GET', '/v1/counters?' + new URLSearchParams({ prefix: id, limit: 1 }), undefined, parentSignal);
    c = list.counters[0];
  } catch (e) {
    if (!parentSignal.aborted) show(id, crumb(), h('h1', { text: id }), errorLine(e));
    return;
  }
  if (parentSignal.aborted) return;
  // The screen's own signal, so that a deletion seen later stops its polls.
  const screen = new AbortController();
  const signal = screen.signal;
  parentSignal.addEventListener('abort', () => screen.abort(), { once: true });
  const missing = () => {
    if (parentSignal.aborted) return; // another screen is on show
    screen.abort();
    show(id, crumb(), h('h1', { text: id }),
      h('p', { class: 'error', role: 'alert', 'data-testid': 'not-found', text: `There is no counter “${id}”: it was never created, or it has been deleted.` }),
      h('p', {}, h('a', { href: '#/', 'data-testid': 'back', text: '← Back to the counters' })));
  };
  if (!c || c.id !== id) {
    missing();
    return;
  }

  const valueEl = h('div', { class: 'value', 'data-testid': 'value', text: '…' });
  const asOf = h('span', { 'data-testid': 'as-of' });
  const status = h('span', { class: 'status', 'data-testid': 'watch-status', text: 'connecting…' });
  const svg = h('svg', { class: 'chart', role: 'img', 'aria-label': 'Change per second, up to the last 5 minutes', 'data-testid': 'rate-chart' });
  const rateNow = h('span', { 'data-testid': 'rate' , text: '–' });
  const shards = h('div', {}, h('p', { class: 'note', text: 'Loading…' }));
  const engine = h('div', { class: 'stats' });
  show(id,
    crumb(),
    h('h1', { text: id }),
    counterMeta(c),
    h('section', { class: 'panel' },
      h('div', { class: 'note', text: 'Value (strong read, live)' }),
      valueEl,
      h('div', { class: 'meta' }, h('span', {}, 'as of ', asOf), status)),
    h('section', { class: 'panel' },
      h('div', { class: 'meta' }, h('span', {}, 'Change per second, net of increments and decrements, over the last 5 min at most. Latest: ', h('b', {}, rateNow, ' /s'))),
      svg),
    h('h2', { text: 'Shards and where they live' }),
    shards,
    h('h2', { text: 'Write path (whole server, last 10 s)' }),
    engine);

  const series = new RateSeries();
  const redraw = () => {
    drawChart(svg, series, Date.now());
    const p = series.points[series.points.length - 1];
    const stale = !series.last || Date.now() - series.last.t > 2000;
    rateNow.textContent = p && !stale ? fmtNum(p.rate, 1) : '0';
  };
  redraw();
  watch(id, signal, (r) => {
    valueEl.textContent = fmtInt(r.value);
    asOf.textContent = fmtTime(r.as_of);
    series.add(r);
    redraw();
  }, (s, msg, code) => {
    if (code === 'not_found') {
      missing();
      return;
    }
    status.className = 'status ' + s;
    status.textContent = s === 'live' ? `● live, at most every ${WATCH_INTERVAL}` : s === 'reconnecting' ? 'reconnecting…' : msg;
  });
  // The time axis moves with the clock; the data only with readings.
  every(1000, signal, async () => redraw());

  every(SHARDS_POLL_MS, signal, async () => {
    let p;
    try {
      p = await api('GET', `/v1/counters/${escapeID(id)}/shards`, undefined, signal);
    } catch (e) {
      if (e.code === 'not_found') missing();
      else shards.replaceChildren(errorLine(e));
      return;
    }
    shards.replaceChildren(shardsTable(p));
  });

  engineStats(signal, (s) => engine.replaceChildren(
    stat('Writes per commit', fmtNum(s.writesPerCommit, 1), 'writes', 'batch-size'),
    stat('Commit time', fmtNum(s.commitMs, 1), 'ms', 'commit-ms'),
    stat('Commits', fmtNum(s.commitsPerSec, 1), '/s'),
    stat('Writes', fmtNum(s.writesPerSec, 0), '/s')), (e) => engine.replaceChildren(errorLine(e)));
}

// engineStats polls GET /v1/engine and calls onStats with rates over the
// last ENGINE_WINDOW_MS (or since the first sample, at the start).
function engineStats(signal, onStats, onError) {
  const samples = [];
  every(ENGINE_POLL_MS, signal, async () => {
    let s;
    try {
      s = await api('GET', '/v1/engine', undefined, signal);
    } catch (e) {
      onError(e);
      return;
    }
    s.t = Date.parse(s.as_of);
    samples.push(s);
    while (samples.length > 1 && s.t - samples[1].t >= ENGINE_WINDOW_MS) samples.shift();
    const a = samples[0];
    const secs = (s.t - a.t) / 1000;
    const commits = s.commits - a.commits;
    onStats({
      now: s,
      secs,
      writesPerSec: secs > 0 ? (s.writes_applied - a.writes_applied) / secs : null,
      commitsPerSec: secs > 0 ? commits / secs : null,
      writesPerCommit: commits > 0 ? (s.writes_applied - a.writes_applied) / commits : null,
      itemsPerCommit: commits > 0 ? (s.store_increments - a.store_increments) / commits : null,
      commitMs: commits > 0 ? (s.commit_seconds - a.commit_seconds) * 1000 / commits : null,
    });
  });
}

// Is the write path keeping up? The engine's batches and commits.
function engineScreen(params, signal) {
  const recent = h('div', { class: 'stats' }, h('p', { class: 'note', text: 'Loading…' }));
  const totals = h('div', {});
  show('Write engine', h('h1', { text: 'Write engine' }),
    h('p', { class: 'note', text: 'Group commit at work: concurrent writes share one store commit. Rates over the last 10 s; – while there were no commits.' }),
    recent, h('h2', { text: 'Since the server started' }), totals);
  engineStats(signal, (s) => {
    recent.replaceChildren(
      stat('Writes per commit', fmtNum(s.writesPerCommit, 1), 'writes', 'batch-size'),
      stat('Commit time', fmtNum(s.commitMs, 1), 'ms', 'commit-ms'),
      stat('Commits', fmtNum(s.commitsPerSec, 1), '/s', 'commits-per-sec'),
      stat('Writes applied', fmtNum(s.writesPerSec, 0), '/s', 'writes-per-sec'),
      stat('Store increments per commit', fmtNum(s.itemsPerCommit, 1), 'rows', 'items-per-commit'),
      stat('Queued now', fmtInt(s.now.writes_queued), 'writes', 'queued'));
    const n = s.now;
    totals.replaceChildren(h('table', { 'data-testid': 'engine-totals' }, h('tbody', {},
      h('tr', {}, h('td', { text: 'Writes applied' }), h('td', { class: 'num', text: fmtInt(n.writes_applied) })),
      h('tr', {}, h('td', { text: 'Writes refused as duplicates (request id seen)' }), h('td', { class: 'num', text: fmtInt(n.writes_duplicate) })),
      h('tr', {}, h('td', { text: 'Writes failed' }), h('td', { class: 'num', text: fmtInt(n.writes_failed) })),
      h('tr', {}, h('td', { text: 'Commits' }), h('td', { class: 'num', text: fmtInt(n.commits) })),
      h('tr', {}, h('td', { text: 'Store increments (after folding writes to one counter)' }), h('td', { class: 'num', text: fmtInt(n.store_increments) })),
      h('tr', {}, h('td', { text: 'Time in commits' }), h('td', { class: 'num', text: fmtNum(n.commit_seconds, 3) + ' s' })))));
  }, (e) => recent.replaceChildren(errorLine(e)));
}

// What is in this collection? A collection by name and a query form.
async function collectionsScreen(name, params, signal) {
  const nameInput = h('input', { type: 'text', name: 'collection', value: name || '', placeholder: 'e.g. trades', 'aria-label': 'Collection name' });
  const pick = h('form', { class: 'inline', onsubmit: (ev) => {
    ev.preventDefault();
    if (nameInput.value) location.hash = '#/collections/' + encodeURIComponent(nameInput.value);
  } }, h('label', {}, 'Collection', nameInput), h('button', { class: 'primary', type: 'submit', text: 'Open' }));
  const body = h('div', {});
  show(name ? name : 'Collections', h('h1', { text: name ? `Collection ${name}` : 'Collections' }), pick, body);
  if (!name) {
    body.append(h('p', { class: 'note', text: 'Give a collection’s name (the API has no list of collections).' }));
    return;
  }
  let c;
  try {
    c = await api('GET', '/v1/collections/' + escapeID(name), undefined, signal);
  } catch (e) {
    body.append(errorLine(e));
    return;
  }
  body.append(h('div', { class: 'meta' },
    h('span', {}, 'shards ', h('b', { text: fmtInt(c.shards) })),
    h('span', {}, 'timestamp field ', h('b', { text: c.timestamp_field })),
    h('span', {}, 'indexes ', h('b', { text: (c.indexes || []).join(', ') || 'none' })),
    h('span', {}, 'shard key ', h('b', { text: c.shard_key })),
    h('span', {}, 'created ', h('b', { text: fmtDate(c.created_at) }))));

  const field = h('select', { name: 'field', 'aria-label': 'Filter field' }, h('option', { value: '', text: '(no filter)' }),
    (c.indexes || []).map((f) => h('option', { value: f, text: f, selected: params.get('field') === f })));
  const value = h('input', { type: 'text', name: 'value', value: params.get('value') || '', placeholder: 'value (JSON or text)' });
  const after = h('input', { type: 'text', name: 'after', value: params.get('after') || '', placeholder: 'RFC 3339' });
  const before = h('input', { type: 'text', name: 'before', value: params.get('before') || '', placeholder: 'RFC 3339' });
  const order = h('select', { name: 'order' }, ['desc', 'asc'].map((o) => h('option', { value: o, text: o === 'desc' ? 'newest first' : 'oldest first', selected: params.get('order') === o })));
  const limit = h('input', { type: 'number', name: 'limit', min: 1, max: 1000, value: params.get('limit') || 20 });
  const form = h('form', { class: 'inline query', onsubmit: (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    for (const [k, el] of Object.entries({ field, value, after, before, order, limit })) if (el.value) q.set(k, el.value);
    location.hash = `#/collections/${encodeURIComponent(name)}?${q}`;
  } }, h('label', {}, 'Where', field), h('label', {}, '==', value), h('label', {}, 'After', after), h('label', {}, 'Before', before),
  h('label', {}, 'Order', order), h('label', {}, 'Limit', limit), h('button', { class: 'primary', type: 'submit', text: 'Query' }));
  const results = h('div', {});
  body.append(h('h2', { text: 'Query' }), form, results);
  if (![...params.keys()].length) return;

  const query = { order: params.get('order') || 'desc', limit: Number(params.get('limit') || 20) };
  if (params.get('field')) {
    let v = params.get('value') || '';
    try { v = JSON.parse(v); } catch (e) { /* plain text is a string */ }
    query.where = [{ field: params.get('field'), op: '==', value: v }];
  }
  for (const k of ['after', 'before']) if (params.get(k)) query[k] = params.get(k);
  if (params.get('page')) query.page_token = params.get('page');
  let page;
  try {
    page = await api('POST', `/v1/collections/${escapeID(name)}/query`, query, signal);
  } catch (e) {
    results.append(errorLine(e));
    return;
  }
  if (page.documents.length === 0) {
    results.append(h('p', { class: 'note', text: 'No documents match.' }));
    return;
  }
  results.append(h('table', { 'data-testid': 'documents' },
    h('thead', {}, h('tr', {}, h('th', { text: 'Timestamp' }), h('th', { text: 'Id' }), h('th', { class: 'num', text: 'Shard' }), h('th', { text: 'Data' }))),
    h('tbody', {}, page.documents.map((d) => h('tr', {},
      h('td', { text: d.timestamp }), h('td', { class: 'id', text: d.id }), h('td', { class: 'num', text: d.shard }),
      h('td', { class: 'json', text: JSON.stringify(d.data) }))))));
  if (page.next_page_token) {
    const next = new URLSearchParams(params);
    next.set('page', page.next_page_token);
    results.append(h('div', { class: 'pager' }, h('a', { href: `#/collections/${encodeURIComponent(name)}?${next}`, rel: 'next', text: 'Next page →' })));
  }
}

// Does this server need a token? The login screen keeps it for this tab.
let afterLogin = '#/';
function needLogin() {
  if (!location.hash.startsWith('#/login')) afterLogin = location.hash || '#/';
  location.hash = '#/login';
}

function loginScreen() {
  const input = h('input', { type: 'password', name: 'token', autocomplete: 'off', 'aria-label': 'Bearer token' });
  const msg = h('p', { class: 'note' });
  const form = h('form', { class: 'inline', onsubmit: async (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, input.value.trim());
    try {
      await fetch('/v1/counters?limit=1', { headers: { Authorization: 'Bearer ' + token() }, cache: 'no-store' }).then((r) => {
        if (r.status === 401) throw new Error('The server refused this token: check it against the server’s --auth-token-file.');
      });
    } catch (e) {
      sessionStorage.removeItem(TOKEN_KEY);
      msg.className = 'error';
      msg.textContent = e.message;
      return;
    }
    renderAuth();
    location.hash = afterLogin === '#/login' ? '#/' : afterLogin;
  } }, h('label', {}, 'Bearer token', input), h('button', { class: 'primary', type: 'submit', text: 'Sign in' }));
  show('Sign in', h('h1', { text: 'Sign in' }),
    h('p', { text: 'This server needs a bearer token, one of the lines of its --auth-token-file.' }),
    form, msg,
    h('p', { class: 'note', text: 'The token stays in this browser tab (session storage) until you sign out or close the tab, and is sent only in Authorization headers.' }));
  input.focus();
}

function renderAuth() {
  const el = document.getElementById('auth');
  if (!token()) { el.replaceChildren(); return; }
  el.replaceChildren('signed in with a token',
    h('button', { type: 'button', text: 'Sign out', onclick: () => {
      sessionStorage.removeItem(TOKEN_KEY);
      renderAuth();
      route();
    } }));
}

// ---- routing -----------------------------------------------------------------

// route shows the screen the location's hash names: #/, #/counters?...,
// #/counter/ID, #/engine, #/rankings[/NAME], #/collections[/NAME?...],
// #/login.
function route() {
  if (current) current.abort();
  current = new AbortController();
  const signal = current.signal;
  const hash = location.hash.replace(/^#/, '') || '/';
  const [pathPart, query] = hash.split('?');
  const params = new URLSearchParams(query || '');
  const parts = pathPart.split('/').filter(Boolean);
  const screen = parts[0] || 'counters';
  for (const a of document.querySelectorAll('nav a')) a.classList.toggle('current', a.dataset.screen === (screen === 'counter' ? 'counters' : screen));
  const arg = parts.length > 1 ? decodeURIComponent(parts.slice(1).join('/')) : '';
  switch (screen) {
    case 'counters': return countersScreen(params, signal);
    case 'counter': return counterScreen(arg, signal);
    case 'engine': return engineScreen(params, signal);
    case 'collections': return collectionsScreen(arg, params, signal);
    case 'rankings': return rankingsScreen(arg, signal);
    case 'login': return loginScreen();
  }
  show('Not found', h('h1', { text: 'No such screen' }), h('p', {}, h('a', { href: '#/', text: 'Go to the counters' })));
}

window.addEventListener('hashchange', route);
window.addEventListener('DOMContentLoaded', () => {
  renderAuth();
  route();
});
