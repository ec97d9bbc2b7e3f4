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
  search: { table: '', q: '', fields: '', op: 'or', limit: 10, offset: 0, total: 0 },
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

async function api(method, path, body) {
  const opt = { method, headers: {} };
  if (body !== undefined) {
    opt.headers['Content-Type'] = 'application/json';
    opt.body = JSON.stringify(body);
  }
  const r = await fetch(path, opt);
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
  if (query !== undefined && i.position) {
    const col = Math.max(0, Math.min(query.length, i.position - 1));
    s += '\n\n  ' + query + '\n  ' + ' '.repeat(col) + '^';
  }
  return s;
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

function route() {
  const h = decodeURIComponent(location.hash.replace(/^#/, ''));
  const [view, rest] = h.split(/\/(.*)/s);
  if (view === 'tables' && rest) state.detail = rest;
  show(view || 'overview');
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
    '<p class="note">Column statistics (min/max, distinct, nulls) appear here once the column store is exposed by the engine.</p>' +
    '<div class="actions"><button type="button" class="ghost" data-act="search">Search this table</button>' +
    '<button type="button" class="ghost" data-act="flush">Flush</button><button type="button" class="ghost" data-act="merge">Merge segments</button>' +
    '<button type="button" class="danger" data-act="drop">Drop…</button></div><p class="msg" id="detail-msg" role="status"></p>';
  box.dataset.t = d.name;
  renderTableList();
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

async function runSearch(offset) {
  const s = state.search;
  s.table = $('#s-table').value;
  s.q = $('#q').value;
  s.fields = $('#s-fields').value.trim();
  s.op = $('#s-op').value;
  s.limit = Number($('#s-limit').value);
  s.offset = offset || 0;
  if (!s.table || !s.q.trim()) { $('#s-summary').textContent = s.table ? 'Type a query.' : 'No table to search yet.'; return; }
  const body = { q: s.q, limit: s.limit, offset: s.offset, default_operator: s.op, highlight: { pre: HL_PRE, post: HL_POST } };
  if (s.fields) body.fields = s.fields;
  $('#s-error').hidden = true;
  $('#s-summary').textContent = 'Searching…';
  try {
    const r = await api('POST', '/tables/' + encodeURIComponent(s.table) + '/search', body);
    s.total = r.total;
    const from = r.hits.length ? s.offset + 1 : 0;
    $('#s-summary').textContent = fmtNum(r.total) + ' matches · ' + (r.hits.length ? 'showing ' + from + '–' + (s.offset + r.hits.length) + ' · ' : '') + fmtNum(r.took_ms) + ' ms';
    $('#hits').innerHTML = r.hits.map((h, k) => {
      const title = hitTitle(h.doc);
      return '<li><div class="hit-head"><span class="hit-rank">' + (s.offset + k + 1) + '.</span><span class="hit-id mono">' +
        esc(JSON.stringify(h.id)) + '</span><span class="hit-score">score ' + h.score.toFixed(4) + '</span></div>' +
        (title ? '<div class="hit-title">' + esc(title) + '</div>' : '') +
        (h.highlight ? '<div class="hit-snippet">' + snippetHtml(h.highlight) + '</div>' : '') +
        (h.doc ? '<details class="doc"><summary>document</summary><pre>' + esc(JSON.stringify(h.doc, null, 2)) + '</pre></details>' : '') + '</li>';
    }).join('');
    $('#s-prev').disabled = s.offset === 0;
    $('#s-next').disabled = s.offset + s.limit >= r.total;
    const hash = 'search?' + new URLSearchParams({ table: s.table, q: s.q }).toString();
    history.replaceState(null, '', '#' + hash);
  } catch (e) {
    $('#hits').innerHTML = '';
    $('#s-summary').textContent = 'The search failed.';
    $('#s-error').textContent = errorText(e, s.q);
    $('#s-error').hidden = false;
    $('#s-prev').disabled = $('#s-next').disabled = true;
  }
}

$('#search-form').addEventListener('submit', ev => { ev.preventDefault(); runSearch(0); });
$('#s-prev').addEventListener('click', () => runSearch(Math.max(0, state.search.offset - state.search.limit)));
$('#s-next').addEventListener('click', () => runSearch(state.search.offset + state.search.limit));

function searchFromHash() {
  const m = location.hash.match(/^#search\?(.*)$/);
  if (!m) return;
  const p = new URLSearchParams(m[1]);
  if (p.get('q')) $('#q').value = p.get('q');
  if (p.get('table')) { state.search.table = p.get('table'); $('#s-table').value = p.get('table'); }
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
  $('#shapes tbody').innerHTML = r.shapes.slice(0, 50).map(s => '<tr class="link" tabindex="0" data-t="' + esc(s.table) + '" data-q="' + esc(s.query) +
    '"><td class="q">' + esc(s.query) + '</td><td>' + esc(s.table) + '</td><td>' + esc(s.fields || '') + '</td><td class="num">' + fmtNum(s.count) +
    '</td><td class="num">' + s.p50_ms.toFixed(2) + '</td><td class="num">' + s.p99_ms.toFixed(2) + '</td><td class="num">' + s.max_ms.toFixed(2) +
    '</td><td class="num' + (s.errors ? ' bad' : '') + '">' + fmtNum(s.errors) + '</td><td class="num">' + fmtNum(s.last_total) + '</td></tr>').join('') ||
    '<tr><td colspan="9" class="empty">No searches yet.</td></tr>';
  $('#recent tbody').innerHTML = r.recent.slice(0, 100).map(q => '<tr class="link" tabindex="0" data-t="' + esc(q.table) + '" data-q="' + esc(q.q) +
    '"><td>' + esc(new Date(q.at_ms).toLocaleTimeString()) + '</td><td class="q">' + esc(q.q) + '</td><td>' + esc(q.table) +
    '</td><td class="num">' + q.took_ms.toFixed(2) + '</td><td class="num">' + fmtNum(q.total) + '</td><td class="num' + (q.status >= 400 ? ' bad' : '') + '">' +
    q.status + '</td></tr>').join('') || '<tr><td colspan="6" class="empty">No searches yet.</td></tr>';
}
const openQuery = tr => {
  $('#q').value = tr.dataset.q;
  state.search.table = tr.dataset.t;
  $('#s-table').value = tr.dataset.t;
  go('search');
  runSearch(0);
};
rowActivate($('#shapes tbody'), openQuery);
rowActivate($('#recent tbody'), openQuery);

// ---- start ----

(async function start() {
  await poll();
  searchFromHash();
  route();
  setInterval(poll, 2000);
  setInterval(() => { if (state.view === 'queries' && !document.hidden) refreshQueries(); }, 3000);
})();
