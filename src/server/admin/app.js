// Quarry admin page: a small single-page app over the JSON API.
// No framework and no external code: the page must work offline and under a
// strict Content-Security-Policy (no inline script or style).
'use strict';

const $ = (sel, root) => (root || document).querySelector(sel);
const $$ = (sel, root) => Array.from((root || document).querySelectorAll(sel));
const HL_PRE = '\u0001', HL_POST = '\u0002'; // highlight markers, replaced after escaping
const VIEWS = ['overview', 'tables', 'search', 'import', 'queries', 'sql'];
const state = {
  view: 'overview', tables: [], stats: null, samples: [], detail: null,
  search: { table: '', q: '', fields: '', op: 'or', limit: 10, offset: 0, total: 0, filter: '', sort: '', facets: '', cursors: [] },
};

// ---- helpers ----

function esc(s) {
  return String(s).replace(/[&<>"']/g, c => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
}
function fmtNum(n) {
  if (n === undefined || n === null || isNaN(n)) return '–';
  return Number(n).toLocaleString('en-US', { maximumFractionDigits: n < 10 ? 2 : n < 100 ? 1 : 0 });
}
function fmtBytes(n) {
  if (!n) return '0 B';
  const u = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(n < 10 ? 1 : 0) : n) + ' ' + u[i];
}
function el(tag, attrs, html) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (html !== undefined) e.innerHTML = html;
  return e;
}

class ApiError extends Error {
  constructor(status, body) {
    const e = (body && body.error) || {};
    super(e.message || ('HTTP ' + status));
    this.status = status;
    this.info = e;
  }
}

// API key (docs/security.md): asked for when the server answers 401 and kept
// in sessionStorage, so it lasts for this tab only.
const KEY_SLOT = 'quarry.apiKey';
function apiKey() {
  try { return sessionStorage.getItem(KEY_SLOT) || ''; } catch (e) { return ''; }
}
function askApiKey(message) {
  const k = window.prompt((message ? message + '\n\n' : '') +
    'This server needs an API key (quarry key add NAME --scope search|write|admin).', '');
  if (k === null) return false;
  try { sessionStorage.setItem(KEY_SLOT, k.trim()); } catch (e) { /* private mode */ }
  return k.trim() !== '';
}

async function api(method, path, body, retried) {
  const opt = { method, headers: {} };
  if (body !== undefined) {
    opt.headers['Content-Type'] = 'application/json';
    opt.body = JSON.stringify(body);
  }
  const key = apiKey();
  if (key) opt.headers['Authorization'] = 'Bearer ' + key;
  const r = await fetch(path, opt);
  if (r.status === 401 && !retried) {
    // another request may have asked for the key meanwhile: use it
    if (apiKey() && apiKey() !== key) return api(method, path, body, true);
    let msg = '';
    try { msg = ((await r.json()).error || {}).message || ''; } catch (e) { /* not JSON */ }
    if (askApiKey(msg)) return api(method, path, body, true);
    throw new ApiError(401, { error: { code: 'unauthorized', message: msg || 'an API key is required' } });
  }
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = { error: { message: text.slice(0, 200) } }; }
  if (!r.ok) throw new ApiError(r.status, data);
  return data;
}

function errorText(err, query) {
  const i = err.info || {};
  let s = (err.status ? err.status + ' ' : '') + (i.code ? i.code + ': ' : '') + err.message;
  if (i.detail) s += '\ndetail: ' + i.detail;
  if (i.hint) s += '\nhint: ' + i.hint;
  if (query !== undefined && i.position) s += '\n\n' + caretText(query, i.position);
  return s;
}

// The line of `text` holding 1-based character `pos`, with a caret under it.
function caretText(text, pos) {
  const chars = Array.from(text);
  const at = Math.max(0, Math.min(chars.length, pos - 1));
  let start = at, end = at;
  while (start > 0 && chars[start - 1] !== '\n') start--;
  while (end < chars.length && chars[end] !== '\n') end++;
  const line = chars.slice(start, end).join('');
  const lineNo = chars.slice(0, start).filter(c => c === '\n').length + 1;
  const prefix = lineNo > 1 || end < chars.length ? 'line ' + lineNo + ': ' : '  ';
  return prefix + line + '\n' + ' '.repeat(prefix.length + (at - start)) + '^';
}

// ---- views and keyboard ----

function show(view, focusTab) {
  if (!VIEWS.includes(view)) view = 'overview';
  state.view = view;
  for (const v of VIEWS) {
    $('#view-' + v).hidden = v !== view;
    const tab = $('#tab-' + v);
    tab.setAttribute('aria-selected', v === view ? 'true' : 'false');
    tab.tabIndex = v === view ? 0 : -1;
  }
  if (focusTab) $('#tab-' + view).focus();
  if (view === 'queries') refreshQueries();
  if (view === 'tables') refreshTables();
  if (view === 'overview') drawChart();
}

// "#search?table=t&q=..." (a bookmark, or the address after a search) opens
// the search view with those parameters and runs it.
function route() {
  const raw = location.hash.replace(/^#/, '');
  const qs = raw.indexOf('?');
  const h = decodeURIComponent(qs >= 0 ? raw.slice(0, qs) : raw);
  const [view, rest] = h.split(/\/(.*)/s);
  if (view === 'tables' && rest) state.detail = rest;
  show(view || 'overview');
  if (view === 'search' && qs >= 0 && searchFromHash()) runSearch('first');
}

// Switch synchronously (so focus can follow at once) and keep the address
// bar in step; back and forward come through hashchange.
function go(hash) {
  if (location.hash !== '#' + hash) history.pushState(null, '', '#' + hash);
  route();
}

function typing(t) {
  return t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA' || t.tagName === 'SELECT' || t.isContentEditable);
}

document.addEventListener('keydown', ev => {
  if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
  if (typing(ev.target)) {
    if (ev.key === 'Escape') ev.target.blur();
    return;
  }
  if (ev.key >= '1' && ev.key <= String(VIEWS.length)) {
    go(VIEWS[Number(ev.key) - 1]);
    ev.preventDefault();
  } else if (ev.key === '/') {
    go('search');
    $('#q').focus();
    ev.preventDefault();
  }
});

$('.tabs').addEventListener('keydown', ev => {
  const i = VIEWS.indexOf(state.view);
  if (ev.key === 'ArrowRight' || ev.key === 'ArrowLeft') {
    const n = (i + (ev.key === 'ArrowRight' ? 1 : VIEWS.length - 1)) % VIEWS.length;
    go(VIEWS[n]);
    setTimeout(() => $('#tab-' + VIEWS[n]).focus(), 0);
    ev.preventDefault();
  }
});
for (const b of $$('.tabs button')) b.addEventListener('click', () => go(b.dataset.view));
window.addEventListener('hashchange', route);

// ---- overview: stats polling, cards, chart ----

async function poll() {
  try {
    const s = await api('GET', '/stats');
    state.stats = s;
    state.tables = s.tables;
    const now = performance.now();
    const sum = k => s.tables.reduce((a, t) => a + (t[k] || 0), 0);
    state.samples.push({ t: now, searches: sum('searches'), ms: sum('search_ms_total'), ingested: sum('ingested') });
    if (state.samples.length > 91) state.samples.shift();
    $('#conn').textContent = s.address + ' · up ' + fmtDuration(s.uptime_s);
    $('#conn').className = 'conn ok';
    $('#foot').textContent = 'Quarry ' + s.version + ' · ' + s.threads + ' threads · ' + s.connections + ' connections';
    renderOverview();
    fillTableChoices();
  } catch (e) {
    $('#conn').textContent = 'server unreachable';
    $('#conn').className = 'conn bad';
  }
}

function fmtDuration(s) {
  if (s < 90) return Math.round(s) + ' s';
  if (s < 5400) return Math.round(s / 60) + ' min';
  if (s < 172800) return (s / 3600).toFixed(1) + ' h';
  return (s / 86400).toFixed(1) + ' d';
}

function rates() {
  const a = state.samples;
  if (a.length < 2) return { q: 0, i: 0, ms: 0 };
  const x = a[a.length - 2], y = a[a.length - 1], dt = (y.t - x.t) / 1000 || 1;
  const dq = y.searches - x.searches;
  return { q: dq / dt, i: (y.ingested - x.ingested) / dt, ms: dq > 0 ? (y.ms - x.ms) / dq : 0 };
}

function renderOverview() {
  const s = state.stats;
  const sum = k => s.tables.reduce((a, t) => a + (t[k] || 0), 0);
  const r = rates();
  const cards = [
    ['Tables', fmtNum(s.tables.length)], ['Documents', fmtNum(sum('docs'))],
    ['Size on disk', fmtBytes(sum('disk_bytes'))], ['WAL', fmtBytes(sum('wal_bytes'))],
    ['Segments', fmtNum(sum('segments'))], ['Merges running', fmtNum(sum('merges_running'))],
    ['Queries/s', fmtNum(r.q)], ['Ingest docs/s', fmtNum(r.i)],
    ['Avg search', r.ms ? fmtNum(r.ms) + ' ms' : '–'], ['Connections', fmtNum(s.connections)],
  ];
  $('#cards').innerHTML = cards.map(([k, v]) => '<div class="card"><div class="v">' + esc(v) + '</div><div class="k">' + esc(k) + '</div></div>').join('');
  const tb = $('#overview-tables tbody');
  tb.innerHTML = s.tables.map(t => '<tr class="link" tabindex="0" data-t="' + esc(t.name) + '"><td>' + esc(t.name) +
    '</td><td class="num">' + fmtNum(t.docs) + '</td><td class="num">' + fmtNum(t.segments) +
    '</td><td class="num">' + fmtBytes(t.disk_bytes) + '</td><td class="num">' + fmtBytes(t.wal_bytes) +
    '</td><td class="num">' + fmtNum(t.merges_running) + ' / ' + fmtNum(t.merges_done) +
    '</td><td class="num">' + fmtNum(t.searches) + '</td><td class="num">' + fmtNum(t.ingested) + '</td></tr>').join('');
  $('#overview-empty').hidden = s.tables.length > 0;
  if (state.view === 'overview') drawChart();
  if (state.view === 'tables') renderTableList();
}

function rowActivate(tbody, fn) {
  tbody.addEventListener('click', ev => { const tr = ev.target.closest('tr'); if (tr) fn(tr); });
  tbody.addEventListener('keydown', ev => {
    if (ev.key === 'Enter') { const tr = ev.target.closest('tr'); if (tr) fn(tr); }
  });
}
rowActivate($('#overview-tables tbody'), tr => go('tables/' + tr.dataset.t));

function drawChart() {
  const c = $('#chart');
  if (!c || c.offsetParent === null) return;
  const dpr = window.devicePixelRatio || 1;
  const w = c.clientWidth, h = 180;
  c.width = w * dpr;
  c.height = h * dpr;
  const g = c.getContext('2d');
  g.scale(dpr, dpr);
  g.clearRect(0, 0, w, h);
  const css = getComputedStyle(document.documentElement);
  const pad = { l: 8, r: 8, t: 18, b: 18 };
  g.strokeStyle = css.getPropertyValue('--line');
  g.lineWidth = 1;
  for (let k = 0; k <= 4; k++) {
    const y = pad.t + (h - pad.t - pad.b) * k / 4;
    g.beginPath(); g.moveTo(pad.l, y); g.lineTo(w - pad.r, y); g.stroke();
  }
  const a = state.samples;
  const pts = [];
  for (let k = 1; k < a.length; k++) {
    const dt = (a[k].t - a[k - 1].t) / 1000 || 1, dq = a[k].searches - a[k - 1].searches;
    pts.push({ q: dq / dt, i: (a[k].ingested - a[k - 1].ingested) / dt, l: dq > 0 ? (a[k].ms - a[k - 1].ms) / dq : 0 });
  }
  g.font = '11px system-ui, sans-serif';
  g.fillStyle = css.getPropertyValue('--muted');
  g.fillText('last ' + Math.round(pts.length * 2) + ' s · each line on its own scale', pad.l, 12);
  const series = [['q', '--q', '/s'], ['i', '--i', ' docs/s'], ['l', '--l', ' ms']];
  let lx = w - pad.r;
  for (const [key, color, unit] of series.slice().reverse()) {
    const max = Math.max(1e-9, ...pts.map(p => p[key]));
    g.strokeStyle = css.getPropertyValue(color);
    g.lineWidth = 2;
    g.beginPath();
    pts.forEach((p, k) => {
      const x = pad.l + (w - pad.l - pad.r) * (pts.length === 1 ? 1 : k / (pts.length - 1));
      const y = h - pad.b - (h - pad.t - pad.b) * (p[key] / max);
      if (k) g.lineTo(x, y); else g.moveTo(x, y);
    });
    g.stroke();
    const label = 'max ' + fmtNum(pts.length ? max : 0) + unit;
    const tw = g.measureText(label).width;
    lx -= tw + 12;
    g.fillStyle = css.getPropertyValue(color);
    g.fillText(label, lx, 12);
  }
}
window.addEventListener('resize', drawChart);

function fillTableChoices() {
  const names = state.tables.map(t => t.name);
  const sel = $('#s-table');
  const cur = sel.value || state.search.table;
  const opts = names.map(n => '<option' + (n === cur ? ' selected' : '') + '>' + esc(n) + '</option>').join('');
  if (sel.dataset.names !== names.join(',')) {
    sel.innerHTML = opts;
    sel.dataset.names = names.join(',');
    $('#table-names').innerHTML = names.map(n => '<option value="' + esc(n) + '">').join('');
  }
}

// ---- tables view ----

async function refreshTables() {
  try {
    const r = await api('GET', '/tables');
    state.tables = r.tables.map(t => Object.assign({}, state.tables.find(x => x.name === t.name) || {}, t));
  } catch (e) { /* poll shows the connection state */ }
  renderTableList();
  if (!state.detail && state.tables.length) state.detail = state.tables[0].name;
  if (state.detail) renderDetail(state.detail);
}

function renderTableList() {
  $('#table-list').innerHTML = state.tables.map(t => '<li><button type="button" data-t="' + esc(t.name) + '"' +
    (t.name === state.detail ? ' aria-current="true"' : '') + '><span>' + esc(t.name) + '</span><span class="n">' +
    fmtNum(t.docs) + '</span></button></li>').join('') || '<li class="empty">No tables.</li>';
}
$('#table-list').addEventListener('click', ev => {
  const b = ev.target.closest('button');
  if (b) go('tables/' + b.dataset.t);
});

async function renderDetail(name) {
  const box = $('#table-detail');
  let d;
  try {
    d = await api('GET', '/tables/' + encodeURIComponent(name));
  } catch (e) {
    box.innerHTML = '<pre class="error">' + esc(errorText(e)) + '</pre>';
    return;
  }
  const s = d.stats;
  const stat = (k, v) => '<div><b>' + esc(v) + '</b><span>' + esc(k) + '</span></div>';
  const fields = d.schema.fields.map(f => '<tr><td>' + esc(f.name) + '</td><td>' + esc(f.type) + '</td><td>' +
    esc(f.type === 'text' ? (f.language || '') : '') + '</td><td class="num">' + esc(f.type === 'text' ? f.weight : '') +
    '</td><td>' + esc(f.type === 'text' ? ((f.stopwords ? 'stopwords ' : '') + (f.accent_fold ? 'accent-fold' : '')) : (f.index || '')) + '</td></tr>').join('');
  box.innerHTML = '<div class="panel-head"><h2>' + esc(d.name) + '</h2><span class="note">primary key <code>' +
    esc(d.schema.primary_key) + '</code> · BM25 k1 ' + esc(Number(d.schema.bm25.k1).toFixed(2)) + ', b ' + esc(d.schema.bm25.b) + '</span></div>' +
    '<div class="stats">' + stat('documents', fmtNum(s.docs)) + stat('stored (incl. deleted)', fmtNum(s.docs_total)) +
    stat('segments', fmtNum(s.segments)) + stat('size on disk', fmtBytes(s.disk_bytes)) + stat('WAL', fmtBytes(s.wal_bytes)) +
    stat('merges done', fmtNum(s.merges_done)) + stat('merges running', fmtNum(s.merges_running)) + stat('commits', fmtNum(s.commits)) + '</div>' +
    '<h2>Schema</h2><div class="scroll"><table class="grid"><thead><tr><th>Field</th><th>Type</th><th>Language</th><th class="num">Weight</th><th>Options</th></tr></thead><tbody>' +
    fields + '</tbody></table></div>' +
    columnsHtml(d) + filesHtml(d) +
    '<div class="actions"><button type="button" class="ghost" data-act="search">Search this table</button>' +
    '<button type="button" class="ghost" data-act="flush">Flush</button><button type="button" class="ghost" data-act="merge">Merge segments</button>' +
    '<button type="button" class="danger" data-act="drop">Drop…</button></div><p class="msg" id="detail-msg" role="status"></p>';
  box.dataset.t = d.name;
  renderTableList();
}

// Column statistics: what the planner costs filters with.
function columnsHtml(d) {
  if (!d.columns) return '';
  if (!d.columns.length) return '<h2>Columns</h2><p class="note">No column fields (text fields are searched through the inverted index).</p>';
  const v = x => x === null || x === undefined ? '–' : typeof x === 'string' ? x : JSON.stringify(x);
  const distinct = c => c.distinct.at_least === c.distinct.at_most ? fmtNum(c.distinct.at_least)
    : '≈' + fmtNum(c.distinct.estimate) + ' <span class="note">(' + fmtNum(c.distinct.at_least) + '–' + fmtNum(c.distinct.at_most) + ')</span>';
  return '<h2>Columns</h2><div class="scroll"><table class="grid" id="columns"><thead><tr><th>Column</th><th>Type</th><th>Min</th><th>Max</th>' +
    '<th class="num">Distinct</th><th class="num">Nulls</th><th class="num">Rows</th><th class="num">Blocks</th><th>Sorted</th><th>B-tree</th></tr></thead><tbody>' +
    d.columns.map(c => '<tr><td>' + esc(c.name) + '</td><td>' + esc(c.type) + '</td><td class="mono">' + esc(v(c.min)) + '</td><td class="mono">' + esc(v(c.max)) +
      '</td><td class="num">' + distinct(c) + '</td><td class="num">' + fmtNum(c.nulls) + (c.rows ? ' <span class="note">(' + (100 * c.nulls / c.rows).toFixed(c.nulls && c.nulls < c.rows / 100 ? 2 : 0) + '%)</span>' : '') +
      '</td><td class="num">' + fmtNum(c.rows) + '</td><td class="num">' + fmtNum(c.blocks) + '</td><td>' + c.segments_sorted + ' of ' + c.segments +
      '</td><td>' + (c.btree ? 'yes, ' + c.segments_btree + ' of ' + c.segments + ' segments' : 'no') + '</td></tr>').join('') + '</tbody></table></div>';
}

const plural = (n, w) => fmtNum(n) + ' ' + w + (n === 1 ? '' : 's');

// Bytes on disk: segments (postings, columns, stored documents), B-trees per field.
function filesHtml(d) {
  const f = d.files;
  if (!f) return '';
  const rows = [['segments (postings, columns, documents)', plural(f.segments.count, 'file'), f.segments.bytes]]
    .concat(f.btrees.map(b => ['B-tree on ' + b.field, plural(b.files, 'file'), b.bytes]))
    .concat([['write-ahead log', '', d.stats.wal_bytes]]);
  if (f.other_bytes) rows.push(['other', '', f.other_bytes]);
  return '<h2>Index sizes</h2><div class="scroll"><table class="grid" id="index-sizes"><thead><tr><th>Part</th><th>Files</th><th class="num">Size</th></tr></thead><tbody>' +
    rows.map(r => '<tr><td>' + esc(r[0]) + '</td><td>' + esc(r[1]) + '</td><td class="num">' + fmtBytes(r[2]) + '</td></tr>').join('') + '</tbody></table></div>';
}

$('#table-detail').addEventListener('click', async ev => {
  const b = ev.target.closest('button[data-act]');
  if (!b) return;
  const t = $('#table-detail').dataset.t, msg = $('#detail-msg'), act = b.dataset.act;
  if (act === 'search') { state.search.table = t; $('#s-table').value = t; go('search'); $('#q').focus(); return; }
  if (act === 'drop' && prompt('Type the table name to drop "' + t + '" and all its documents') !== t) return;
  b.disabled = true;
  msg.textContent = act + '…';
  try {
    const p = '/tables/' + encodeURIComponent(t);
    const r = act === 'drop' ? await api('DELETE', p) : await api('POST', p + '/' + act);
    msg.textContent = act === 'drop' ? 'dropped' : act + ' done in ' + fmtNum(r.took_ms) + ' ms';
    if (act === 'drop') { state.detail = null; go('tables'); }
    else renderDetail(t);
  } catch (e) {
    msg.textContent = errorText(e);
    msg.className = 'msg bad';
  } finally { b.disabled = false; }
});

$('#create-form').addEventListener('submit', async ev => {
  ev.preventDefault();
  const f = ev.target, msg = $('#create-msg');
  msg.className = 'msg';
  let schema;
  try { schema = JSON.parse(f.schema.value); } catch (e) { msg.textContent = 'schema is not valid JSON: ' + e.message; msg.className = 'msg bad'; return; }
  try {
    await api('POST', '/tables', { name: f.name.value, schema });
    msg.textContent = 'created';
    await poll();
    go('tables/' + f.name.value);
  } catch (e) { msg.textContent = errorText(e); msg.className = 'msg bad'; }
});

// ---- search console ----

function snippetHtml(s) {
  return esc(s).split(HL_PRE).join('<mark>').split(HL_POST).join('</mark>');
}

function hitTitle(doc) {
  if (!doc) return '';
  for (const k of ['title', 'name', 'subject', 'headline']) if (typeof doc[k] === 'string') return doc[k];
  for (const v of Object.values(doc)) if (typeof v === 'string' && v.length < 200) return v;
  return '';
}

// "terms:symbol:5,histogram:views:100,stats:views" -> the JSON form.
function parseFacets(text) {
  const out = [];
  for (const part of text.split(',').map(x => x.trim()).filter(Boolean)) {
    const [type, field, arg] = part.split(':').map(x => x.trim());
    if (!['terms', 'histogram', 'stats'].includes(type) || !field)
      throw new Error('facet "' + part + '": write terms:FIELD[:SIZE], histogram:FIELD:INTERVAL or stats:FIELD');
    const f = { type, field };
    if (type === 'terms' && arg) f.size = Number(arg);
    if (type === 'histogram') f.interval = Number(arg);
    out.push(f);
  }
  return out;
}

// page: 'first', 'next', 'prev', or an offset (offset paging without a sort).
async function runSearch(page) {
  const s = state.search;
  s.table = $('#s-table').value;
  s.q = $('#q').value;
  s.fields = $('#s-fields').value.trim();
  s.op = $('#s-op').value;
  s.limit = Number($('#s-limit').value);
  s.filter = $('#s-filter').value.trim();
  s.sort = $('#s-sort').value.trim();
  s.facets = $('#s-facets').value.trim();
  // with a sort, pages follow search_after cursors (any depth); else offsets
  if (typeof page === 'number') s.offset = page;
  else if (page === 'next') { if (s.sort) s.cursors.push(s.lastSort); s.offset += s.limit; }
  else if (page === 'prev') { if (s.sort) s.cursors.pop(); s.offset = Math.max(0, s.offset - s.limit); }
  else { s.offset = 0; s.cursors = []; }
  if (!s.table) { $('#s-summary').textContent = 'No table to search yet.'; return; }
  if (!s.q.trim() && !s.filter && !s.sort) { $('#s-summary').textContent = 'Type a query, a filter or a sort.'; return; }
  const body = { limit: s.limit, default_operator: s.op, highlight: { pre: HL_PRE, post: HL_POST } };
  if (s.q.trim()) body.q = s.q;
  if (s.fields) body.fields = s.fields;
  if (s.filter) body.filter = s.filter;
  if (s.sort) body.sort = s.sort;
  if (s.sort && s.cursors.length) body.search_after = s.cursors[s.cursors.length - 1];
  else if (!s.sort) body.offset = s.offset;
  $('#s-error').hidden = true;
  try { if (s.facets) body.facets = parseFacets(s.facets); } catch (e) {
    $('#s-error').textContent = e.message;
    $('#s-error').hidden = false;
    return;
  }
  $('#s-summary').textContent = 'Searching…';
  try {
    const r = await api('POST', '/tables/' + encodeURIComponent(s.table) + '/search', body);
    s.total = r.total;
    const from = r.hits.length ? s.offset + 1 : 0;
    $('#s-summary').textContent = fmtNum(r.total) + ' matches · ' + (r.hits.length ? 'showing ' + from + '–' + (s.offset + r.hits.length) + ' · ' : '') + fmtNum(r.took_ms) + ' ms';
    $('#hits').innerHTML = r.hits.map((h, k) => {
      const title = hitTitle(h.doc);
      return '<li><div class="hit-head"><span class="hit-rank">' + (s.offset + k + 1) + '.</span><span class="hit-id mono">' +
        esc(JSON.stringify(h.id)) + '</span>' + (h.sort ? '<span class="hit-sort mono">sort ' + esc(JSON.stringify(h.sort)) + '</span>' : '') +
        '<span class="hit-score">score ' + h.score.toFixed(4) + '</span></div>' +
        (title ? '<div class="hit-title">' + esc(title) + '</div>' : '') +
        (h.highlight ? '<div class="hit-snippet">' + snippetHtml(h.highlight) + '</div>' : '') +
        (h.doc ? '<details class="doc"><summary>document</summary><pre>' + esc(JSON.stringify(h.doc, null, 2)) + '</pre></details>' : '') + '</li>';
    }).join('');
    s.lastSort = r.hits.length ? r.hits[r.hits.length - 1].sort : null;
    $('#s-prev').disabled = s.offset === 0;
    $('#s-next').disabled = s.offset + s.limit >= r.total || (s.sort && !s.lastSort);
    renderFacets(r.facets);
    const p = { table: s.table, q: s.q };
    if (s.filter) p.filter = s.filter;
    if (s.sort) p.sort = s.sort;
    if (s.facets) p.facets = s.facets;
    history.replaceState(null, '', '#search?' + new URLSearchParams(p).toString());
  } catch (e) {
    $('#hits').innerHTML = '';
    renderFacets(null);
    $('#s-summary').textContent = 'The search failed.';
    const inFilter = e.info && e.info.detail === 'in the filter';
    $('#s-error').textContent = errorText(e, inFilter ? s.filter : s.q);
    $('#s-error').hidden = false;
    $('#s-prev').disabled = $('#s-next').disabled = true;
  }
}

// SQL literal for a facet key (a JSON value) in a filter.
function sqlLiteral(v) {
  if (v === null) return 'NULL';
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  return "'" + String(v).replace(/'/g, "''") + "'";
}

function renderFacets(facets) {
  const box = $('#facets');
  const names = facets ? Object.keys(facets) : [];
  box.hidden = names.length === 0;
  box.innerHTML = names.map(name => {
    const f = facets[name];
    let html = '<h3>' + esc(name) + ' <span class="note">' + esc(f.type) + '</span></h3>';
    if (f.type === 'stats') {
      html += '<div class="facet-stats">' + (f.count ? 'count ' + fmtNum(f.count) + ' · min ' + fmtNum(f.min) + ' · max ' + fmtNum(f.max) + ' · avg ' + fmtNum(f.avg) : 'no values') + '</div>';
    } else {
      html += '<ul class="facet">' + (f.buckets || []).map(b => '<li><button type="button" data-field="' + esc(f.field) + '" data-type="' + esc(f.type) +
        '" data-key="' + esc(JSON.stringify(b.key)) + '" data-interval="' + esc(f.interval || '') + '"><span>' + esc(typeof b.key === 'string' ? b.key : JSON.stringify(b.key)) +
        '</span><span class="n">' + fmtNum(b.count) + '</span></button></li>').join('') + '</ul>';
      if (f.other) html += '<div class="note">' + fmtNum(f.other) + ' other</div>';
    }
    if (f.missing) html += '<div class="note">' + fmtNum(f.missing) + ' without a value</div>';
    return html;
  }).join('');
}

// Clicking a bucket narrows the search to it (added to the filter with AND).
$('#facets').addEventListener('click', ev => {
  const b = ev.target.closest('button[data-field]');
  if (!b) return;
  const key = JSON.parse(b.dataset.key), field = b.dataset.field;
  let cond = field + ' = ' + sqlLiteral(key);
  if (b.dataset.type === 'histogram' && typeof key === 'number' && b.dataset.interval)
    cond = field + ' >= ' + key + ' AND ' + field + ' < ' + (key + Number(b.dataset.interval));
  const cur = $('#s-filter').value.trim();
  $('#s-filter').value = cur ? '(' + cur + ') AND ' + cond : cond;
  runSearch('first');
});

$('#search-form').addEventListener('submit', ev => { ev.preventDefault(); runSearch('first'); });
$('#s-prev').addEventListener('click', () => runSearch('prev'));
$('#s-next').addEventListener('click', () => runSearch('next'));

// The search of a "#search?..." address into the form; false when there is
// none.  Parameters absent from the address are cleared, so the bookmark
// runs exactly what it names.
function searchFromHash() {
  const m = location.hash.match(/^#search\?(.*)$/);
  if (!m) return false;
  const p = new URLSearchParams(m[1]);
  $('#q').value = p.get('q') || '';
  for (const k of ['filter', 'sort', 'facets']) $('#s-' + k).value = p.get(k) || '';
  if (p.get('table')) {
    state.search.table = p.get('table');
    fillTableChoices();
    $('#s-table').value = p.get('table');
  }
  return true;
}

// ---- import ----

$('#import-form').addEventListener('submit', ev => {
  ev.preventDefault();
  const table = $('#i-table').value.trim(), file = $('#i-file').files[0];
  if (!file) return;
  const q = new URLSearchParams({ batch: $('#i-batch').value || '10000' });
  if ($('#i-strict').checked) q.set('strict', 'true');
  const xhr = new XMLHttpRequest();
  const bar = $('#i-progress'), status = $('#i-status'), go_ = $('#i-go');
  xhr.open('POST', '/tables/' + encodeURIComponent(table) + '/documents?' + q.toString());
  xhr.setRequestHeader('Content-Type', 'application/x-ndjson');
  if (/\.gz$/i.test(file.name)) xhr.setRequestHeader('Content-Encoding', 'gzip');
  if (apiKey()) xhr.setRequestHeader('Authorization', 'Bearer ' + apiKey());
  bar.hidden = false;
  bar.value = 0;
  go_.disabled = true;
  $('#i-report').innerHTML = '';
  const t0 = performance.now();
  xhr.upload.onprogress = e => {
    if (!e.lengthComputable) return;
    bar.value = e.loaded / e.total;
    status.textContent = 'Uploading ' + fmtBytes(e.loaded) + ' of ' + fmtBytes(e.total) + ' (' + Math.round(100 * e.loaded / e.total) + '%)';
  };
  xhr.upload.onload = () => { status.textContent = 'Uploaded; committing…'; };
  xhr.onerror = () => { status.textContent = 'The upload failed: connection lost.'; go_.disabled = false; };
  xhr.onload = () => {
    go_.disabled = false;
    bar.value = 1;
    let r;
    try { r = JSON.parse(xhr.responseText); } catch (e) { status.textContent = 'Unexpected answer (' + xhr.status + ')'; return; }
    const secs = (performance.now() - t0) / 1000;
    status.textContent = (xhr.status < 300 ? 'Done' : 'Failed') + ' in ' + secs.toFixed(1) + ' s';
    let html = '';
    if (r.error) html += '<pre class="error">' + esc(errorText(new ApiError(xhr.status, r))) + '</pre>';
    if (r.imported !== undefined) {
      html += '<div class="counts"><span><b>' + fmtNum(r.imported) + '</b> imported</span><span><b>' + fmtNum(r.replaced) +
        '</b> replaced</span><span' + (r.rejected ? ' class="bad"' : '') + '><b>' + fmtNum(r.rejected) + '</b> rejected</span><span><b>' +
        fmtNum(r.acked) + '</b> committed</span><span><b>' + fmtNum(r.lines) + '</b> lines</span></div>';
      if (r.table_created) html += '<p class="note">Table "' + esc(table) + '" was created' + (r.schema_inferred ? ' with an inferred schema (see Tables).' : '.') + '</p>';
      if (r.errors && r.errors.length) {
        html += '<h2>Rejected lines' + (r.errors_truncated ? ' (first ' + r.errors.length + ')' : '') + '</h2><div class="scroll"><table class="grid" id="i-errors"><thead><tr><th class="num">Line</th><th>Code</th><th>Message</th><th>Detail</th></tr></thead><tbody>' +
          r.errors.map(e => '<tr><td class="num">' + e.line + '</td><td>' + esc(e.code) + '</td><td>' + esc(e.message) + '</td><td>' + esc(e.detail || '') + '</td></tr>').join('') + '</tbody></table></div>';
      }
    }
    $('#i-report').innerHTML = html;
    poll();
  };
  status.textContent = 'Uploading…';
  xhr.send(file);
});

// ---- query history ----

async function refreshQueries() {
  let r;
  try { r = await api('GET', '/stats/queries'); } catch (e) { return; }
  const planCell = s => {
    if (!s.plan) return '<td class="note">–</td>';
    const when = s.plan_since_ms ? new Date(s.plan_since_ms).toLocaleTimeString() : '';
    return s.plan_changes ? '<td class="changed" title="was: ' + esc(s.previous_plan) + '">⚠ ' + esc(s.plan) + ' <span class="note">since ' + esc(when) + ', was ' + esc(s.previous_plan) + '</span></td>'
      : '<td>' + esc(s.plan) + '</td>';
  };
  $('#shapes tbody').innerHTML = r.shapes.slice(0, 50).map(s => '<tr class="link" tabindex="0" data-kind="' + esc(s.kind) + '" data-t="' + esc(s.table) + '" data-shape="' + esc(s.query) +
    '" data-q="' + esc(s.last_query) + '" data-filter="' + esc(s.last_filter || '') + '"><td>' + esc(s.kind) + '</td><td class="q">' + esc(s.query) +
    (s.fields ? ' <span class="note">in ' + esc(s.fields) + '</span>' : '') + (s.default_operator === 'and' ? ' <span class="note">AND</span>' : '') +
    (s.sort ? ' <span class="note">sort ' + esc(s.sort) + '</span>' : '') + '</td><td>' + esc(s.table) + '</td><td class="q">' + esc(s.filter || '') + '</td><td class="num">' + fmtNum(s.count) +
    '</td><td class="num">' + s.p50_ms.toFixed(2) + '</td><td class="num">' + s.p99_ms.toFixed(2) + '</td><td class="num">' + s.max_ms.toFixed(2) +
    '</td><td class="num' + (s.errors ? ' bad' : '') + '">' + fmtNum(s.errors) + '</td><td class="num">' + fmtNum(s.avg_rows) + '</td>' + planCell(s) + '</tr>').join('') ||
    '<tr><td colspan="11" class="empty">No queries yet.</td></tr>';
  $('#recent tbody').innerHTML = r.recent.slice(0, 100).map(q => '<tr class="link" tabindex="0" data-kind="' + esc(q.kind) + '" data-via="' + esc(q.via || '') + '" data-t="' + esc(q.table) + '" data-q="' + esc(q.q) +
    '" data-filter="' + esc(q.filter || '') + '"><td>' + esc(new Date(q.at_ms).toLocaleTimeString()) + '</td><td>' + esc(q.kind) + (q.via === 'pg' ? ' <span class="note">PG port</span>' : '') + '</td><td class="q">' + esc(q.q) +
    (q.filter ? ' <span class="note">where ' + esc(q.filter) + '</span>' : '') + '</td><td>' + esc(q.table) +
    '</td><td class="num">' + q.took_ms.toFixed(2) + '</td><td class="num">' + fmtNum(q.rows) + '</td><td class="num' + (q.status >= 400 ? ' bad' : '') + '">' +
    q.status + '</td><td>' + esc(q.plan || '') + '</td></tr>').join('') || '<tr><td colspan="8" class="empty">No queries yet.</td></tr>';
}
// A history row opens its query: a search runs again; an SQL statement goes
// to the console with its plan drawn (EXPLAIN without ANALYZE, so nothing
// runs) when it is a read without $n parameters.
const openQuery = tr => {
  if (tr.dataset.kind === 'sql') {
    $('#sql').value = tr.dataset.q;
    go('sql');
    $('#sql').focus();
    if (/^\s*(select|with|values|table)\b/i.test(tr.dataset.q) && !/\$\d/.test(tr.dataset.q)) runSql('plan');
    return;
  }
  $('#q').value = tr.dataset.q;
  $('#s-filter').value = tr.dataset.filter || '';
  state.search.table = tr.dataset.t;
  $('#s-table').value = tr.dataset.t;
  go('search');
  runSearch('first');
};
rowActivate($('#shapes tbody'), openQuery);
rowActivate($('#recent tbody'), openQuery);

// ---- SQL console ----

// EXPLAIN's text form (PostgreSQL's) -> a tree.  A node line is the first
// one, one after "->  ", or a "SubPlan" heading; lines indented past a
// node's label with "Key: value" are its properties; "Execution Time:",
// "Planning Time:" and "Rows:" at the margin close the plan.
function parsePlan(lines) {
  const roots = [], stack = [], summary = [];
  for (const raw of lines) {
    const m = raw.match(/^( *)(->  )?(.*)$/);
    const arrow = !!m[2], text = m[3], col = m[1].length + (arrow ? 4 : 0);
    if (!arrow && m[1].length === 0 && /^(Execution Time|Planning Time|Rows):/.test(text)) { summary.push(text); continue; }
    const top = stack[stack.length - 1];
    const nodeLine = arrow || !top || /\((cost|actual time)=|\(never executed\)|^SubPlan \(/.test(text);
    if (!nodeLine && top && col > top.col) { top.props.push(text.trim()); continue; }
    const node = { col, text, props: [], kids: [] };
    node.title = text.split(/  \(/)[0].trim();
    const est = text.match(/\(cost=[\d.]+\.\.[\d.]+ rows=(\d+)/);
    const act = text.match(/\(actual time=[\d.]+\.\.([\d.]+) rows=(\d+) loops=(\d+)\)/);
    node.est = est ? Number(est[1]) : null;
    node.actual = act ? Number(act[2]) : null;
    node.ms = act ? Number(act[1]) : null;
    node.info = '';
    while (stack.length && stack[stack.length - 1].col >= col) stack.pop();
    if (stack.length) stack[stack.length - 1].kids.push(node); else roots.push(node);
    stack.push(node);
  }
  (function info(ns) {
    for (const n of ns) {
      const p = n.props.find(x => /^Access Path: /.test(x));
      if (p) n.info = 'path ' + p.slice(13);
      info(n.kids);
    }
  })(roots);
  return { roots, summary };
}

function planHtml(nodes, maxRows) {
  return '<ul>' + nodes.map(n => {
    const off = n.est !== null && n.actual !== null && Math.max(n.est, 1) / Math.max(n.actual, 1) > 10 || Math.max(n.actual || 1, 1) / Math.max(n.est || 1, 1) > 10 && n.est !== null && n.actual !== null;
    const bar = (v, cls) => v === null ? '' : '<span class="' + cls + '" data-w="' + Math.max(1, Math.round(100 * Math.log1p(v) / Math.log1p(maxRows))) + '"></span>';
    return '<li><div class="pnode" tabindex="0"><div class="pt">' + esc(n.title) + '</div><div class="pr' + (off ? ' off' : '') + '">' +
      (n.est !== null ? '<span>estimated <b class="est-rows">' + fmtNum(n.est) + '</b> rows</span>' : '') +
      (n.actual !== null ? '<span>actual <b class="act-rows">' + fmtNum(n.actual) + '</b> rows</span>' : '') +
      (n.ms !== null ? '<span><b>' + fmtNum(n.ms) + '</b> ms</span>' : '') + (n.info ? '<span>' + esc(n.info) + '</span>' : '') + '</div>' +
      (n.est !== null || n.actual !== null ? '<div class="pbar" aria-hidden="true">' + bar(n.actual, 'act') + bar(n.est, 'est') + '</div>' : '') +
      (n.props.length ? '<div class="pp">' + esc(n.props.join('\n')) + '</div>' : '') + '</div>' +
      (n.kids.length ? planHtml(n.kids, maxRows) : '') + '</li>';
  }).join('') + '</ul>';
}

const NUMERIC = /^(int[248]|float[48]|numeric|oid)$/;
function sqlCell(v, type) {
  if (v === null) return '<td class="null">NULL</td>';
  return '<td' + (NUMERIC.test(type) ? ' class="num"' : '') + '>' + esc(typeof v === 'string' ? v : JSON.stringify(v)) + '</td>';
}

// explain: false runs the statement, true runs EXPLAIN ANALYZE of it, 'plan'
// EXPLAIN alone (the plan without running it).
async function runSql(explain) {
  const text = $('#sql').value;
  if (!text.trim()) { $('#sql-summary').textContent = 'Type a statement.'; return; }
  const query = explain && !/^\s*explain\b/i.test(text) ? (explain === 'plan' ? 'EXPLAIN ' : 'EXPLAIN ANALYZE ') + text : text;
  const shift = query.length - text.length; // error positions count from the text typed
  $('#sql-error').hidden = true;
  $('#sql-summary').textContent = 'Running…';
  $('#sql-run').disabled = $('#sql-explain').disabled = true;
  try {
    const r = await api('POST', '/sql', { query });
    const isPlan = r.columns.length === 1 && r.columns[0].name === 'QUERY PLAN';
    $('#sql-summary').textContent = (r.command || 'done') + ' · ' + fmtNum(r.took_ms) + ' ms';
    $('#sql-plan-box').hidden = !isPlan;
    $('#sql-result-box').hidden = isPlan || !r.columns.length;
    if (isPlan) {
      const lines = r.rows.map(x => x[0]);
      const p = parsePlan(lines);
      const all = [];
      const walk = ns => ns.forEach(n => { all.push(n.est || 0, n.actual || 0); walk(n.kids); });
      walk(p.roots);
      $('#sql-plan').innerHTML = planHtml(p.roots, Math.max(1, ...all));
      // widths through the CSSOM: the page's CSP allows no inline style attributes
      for (const b of $$('#sql-plan .pbar span')) b.style.width = b.dataset.w + '%';
      $('#sql-plan-sum').textContent = p.summary.join(' · ');
      $('#sql-plan-text').textContent = lines.join('\n');
    } else if (r.columns.length) {
      $('#sql-result thead').innerHTML = '<tr>' + r.columns.map(c => '<th title="' + esc(c.type) + '"' + (NUMERIC.test(c.type) ? ' class="num"' : '') + '>' + esc(c.name) + '</th>').join('') + '</tr>';
      $('#sql-result tbody').innerHTML = r.rows.slice(0, 1000).map(row => '<tr>' + row.map((v, k) => sqlCell(v, r.columns[k].type)).join('') + '</tr>').join('');
      if (r.rows.length > 1000) $('#sql-summary').textContent += ' · first 1,000 of ' + fmtNum(r.rows.length) + ' rows shown';
    }
  } catch (e) {
    $('#sql-plan-box').hidden = $('#sql-result-box').hidden = true;
    $('#sql-summary').textContent = 'The statement failed.';
    if (e.info && e.info.position) e.info.position = Math.max(1, e.info.position - shift);
    $('#sql-error').textContent = (e.info && e.info.sqlstate ? 'SQLSTATE ' + e.info.sqlstate + ' · ' : '') + errorText(e, text);
    $('#sql-error').hidden = false;
  } finally {
    $('#sql-run').disabled = $('#sql-explain').disabled = false;
  }
}

$('#sql-form').addEventListener('submit', ev => { ev.preventDefault(); runSql(false); });
$('#sql-explain').addEventListener('click', () => runSql(true));
$('#sql').addEventListener('keydown', ev => {
  if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); runSql(ev.shiftKey); }
});

// ---- start ----

(async function start() {
  await poll();
  route();
  setInterval(poll, 2000);
  setInterval(() => { if (state.view === 'queries' && !document.hidden) refreshQueries(); }, 3000);
})();
