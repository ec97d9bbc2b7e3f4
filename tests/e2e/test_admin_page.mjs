// Drives the admin page in headless Chromium (run by test_admin_page.sh).
// usage: node test_admin_page.mjs BASE_URL OUT_DIR UPLOAD_FILE CHROMIUM
// Prints one line per failed check and "N passed, N failed"; exit 77 when the
// browser cannot start.
import { chromium } from 'playwright-core';
import path from 'node:path';
import fs from 'node:fs';

const [base, out, uploadFile, exe, expectedFile] = process.argv.slice(2);
const expected = JSON.parse(fs.readFileSync(expectedFile, 'utf8'));
const num = t => Number(String(t).replace(/[^0-9.\-]/g, ''));
let passed = 0, failed = 0;
function check(cond, what) {
  if (cond) passed++;
  else { failed++; console.log('FAILED: ' + what); }
}

let browser;
try {
  browser = await chromium.launch({
    executablePath: exe,
    args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    timeout: 60000,
  });
} catch (e) {
  console.log('skip: chromium could not start: ' + String(e.message || e).split('\n')[0]);
  process.exit(77);
}

const problems = [];
async function newPage(width, height) {
  const ctx = await browser.newContext({ viewport: { width, height } });
  const page = await ctx.newPage();
  // API answers of 4xx are part of the test (a query with a syntax error);
  // the page's own files must all load
  page.on('console', m => {
    if (m.type() === 'error' && !/the server responded with a status of 4\d\d/.test(m.text()))
      problems.push('console: ' + m.text());
  });
  page.on('response', r => {
    const p = new URL(r.url()).pathname;
    if (r.status() >= 400 && (p === '/' || p.startsWith('/admin/')))
      problems.push('asset ' + p + ': ' + r.status());
  });
  page.on('pageerror', e => problems.push('page error: ' + e.message));
  page.on('requestfailed', r => problems.push('request failed: ' + r.url()));
  page.setDefaultTimeout(15000);
  return page;
}
const shot = (page, name) => page.screenshot({ path: path.join(out, name), fullPage: true });

try {
  const page = await newPage(1280, 860);
  await page.goto(base + '/');
  // overview: cards, the tables list, the live chart
  await page.waitForSelector('#overview-tables tbody tr[data-t="packages"]');
  const docs = await page.textContent('#overview-tables tbody tr[data-t="packages"] td:nth-child(2)');
  check(docs.replace(/,/g, '') === '3000', 'overview shows 3000 docs for packages (' + docs + ')');
  check((await page.$$('#cards .card')).length >= 8, 'overview cards');
  check(await page.isVisible('#chart'), 'live chart canvas visible');
  await page.waitForTimeout(2300); // a second stats sample makes the chart draw lines
  await shot(page, 'overview-1280.png');

  // keyboard: "3" opens the search tab, "/" focuses the query box
  await page.keyboard.press('3');
  check(await page.getAttribute('#tab-search', 'aria-selected') === 'true', 'key 3 selects Search');
  await page.keyboard.press('1');
  await page.keyboard.press('/');
  check(await page.evaluate(() => document.activeElement && document.activeElement.id) === 'q',
    '"/" focuses the query box');
  await page.keyboard.type('terminal emulator');
  await page.fill('#s-fields', 'title^2,body');
  await page.keyboard.press('Enter');
  await page.waitForSelector('#hits li');
  const summary = await page.textContent('#s-summary');
  check(/matches/.test(summary) && /ms/.test(summary), 'search summary with took ms: ' + summary);
  check((await page.$$('#hits li')).length === 10, '10 ranked hits');
  check((await page.$$('#hits mark')).length > 0, 'highlights are marked');
  const firstTitle = await page.textContent('#hits li .hit-title');
  check(/terminal|emulator/i.test(firstTitle), 'first hit is about terminals: ' + firstTitle);
  await shot(page, 'search-1280.png');
  await page.click('#s-next');
  await page.waitForFunction(() => /showing 11/.test(document.querySelector('#s-summary').textContent));
  check(true, 'next page');
  // a syntax error is shown with a caret under the position
  await page.fill('#q', 'window AND (manager');
  await page.keyboard.press('Enter');
  await page.waitForSelector('#s-error:not([hidden])');
  const err = await page.textContent('#s-error');
  check(/syntax_error/.test(err) && /\^/.test(err), 'query error shown with a caret');

  // facets, and a facet bucket narrowing the search through the filter
  await page.fill('#q', 'library');
  await page.fill('#s-facets', 'terms:section:5,stats:installed_size_kb');
  await page.keyboard.press('Enter');
  await page.waitForSelector('#facets:not([hidden]) .facet button');
  const before = num((await page.textContent('#s-summary')).split('matches')[0]);
  const bucket = await page.$eval('#facets .facet button', b => ({ key: JSON.parse(b.dataset.key), n: b.querySelector('.n').textContent }));
  check(before > 0 && /count/.test(await page.textContent('#facets .facet-stats')), 'facets shown (terms and stats)');
  await page.click('#facets .facet button');
  await page.waitForFunction(k => document.querySelector('#s-filter').value.includes(k) && /matches/.test(document.querySelector('#s-summary').textContent), bucket.key);
  const after = num((await page.textContent('#s-summary')).split('matches')[0]);
  check(after === num(bucket.n) && after < before, 'a facet bucket narrows the search to its count: ' + before + ' -> ' + after + ' (bucket ' + bucket.n + ')');
  const filtered = await page.evaluate(async f => {
    const r = await fetch('/tables/packages/search', { method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ q: 'library', filter: f, limit: 1000, doc: ['section'] }) });
    return (await r.json()).hits.map(h => h.doc.section);
  }, await page.inputValue('#s-filter'));
  check(filtered.length === after && filtered.every(x => x === bucket.key), 'every filtered hit is in the bucket');
  await shot(page, 'search-facets-1280.png');
  // a filter error points into the filter text
  await page.fill('#s-filter', 'installed_size_kb >> 3');
  await page.keyboard.press('Enter');
  await page.waitForSelector('#s-error:not([hidden])');
  const ferr = await page.textContent('#s-error');
  check(/installed_size_kb >> 3/.test(ferr) && /\^/.test(ferr), 'filter error shown with a caret under the filter: ' + ferr.split('\n')[0]);
  // sort with search_after paging: page 2 continues in order
  await page.fill('#s-filter', '');
  await page.fill('#s-facets', '');
  await page.fill('#s-sort', 'installed_size_kb:desc');
  await page.keyboard.press('Enter');
  await page.waitForSelector('#hits li .hit-sort');
  const sorts1 = await page.$$eval('#hits .hit-sort', e => e.map(x => JSON.parse(x.textContent.replace(/^sort /, ''))[0]));
  await page.click('#s-next');
  await page.waitForFunction(() => /showing 11/.test(document.querySelector('#s-summary').textContent));
  const sorts2 = await page.$$eval('#hits .hit-sort', e => e.map(x => JSON.parse(x.textContent.replace(/^sort /, ''))[0]));
  const all = sorts1.concat(sorts2);
  check(all.length === 20 && all.every((v, i) => i === 0 || all[i - 1] >= v), 'sorted pages through search_after stay in order');
  await page.fill('#s-sort', '');

  // tables view: schema and statistics
  await page.click('#tab-tables');
  await page.waitForSelector('#table-detail table.grid tbody tr');
  const fields = await page.$$eval('#table-detail table.grid tbody tr td:first-child', tds => tds.map(t => t.textContent));
  check(fields.includes('title') && fields.includes('maintainer'), 'schema fields listed');
  check(/3,000/.test(await page.textContent('#table-detail .stats')), 'table stats show 3,000 docs');
  // column statistics against the file itself
  const col = await page.$$eval('#columns tbody tr', trs => trs.map(t => Array.from(t.children).map(c => c.textContent)));
  const size = col.find(r => r[0] === 'installed_size_kb');
  check(size && num(size[2]) === expected.size_min && num(size[3]) === expected.size_max,
    'installed_size_kb min/max match the file: ' + (size && size.slice(2, 4)) + ' vs ' + expected.size_min + '/' + expected.size_max);
  check(size && num(size[5].split('(')[0]) === expected.size_nulls, 'installed_size_kb nulls match the file');
  const sec = col.find(r => r[0] === 'section');
  check(sec && num(sec[4].replace(/\(.*/, '').replace('≈', '')) === expected.sections_distinct && /yes/.test(sec[9]),
    'section: distinct count matches the file and its B-tree is shown: ' + (sec && sec.join('|')));
  check(/segments/.test(await page.textContent('#index-sizes')), 'index sizes listed');
  const wide = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  check(wide <= 1, 'table view fits 1280px (' + wide + 'px too wide)');
  await shot(page, 'table-1280.png');

  // import: upload a file with one bad line, see the progress and the report
  await page.click('#tab-import');
  await page.fill('#i-table', 'uploaded');
  await page.setInputFiles('#i-file', uploadFile);
  await page.click('#i-go');
  await page.waitForSelector('#i-errors tbody tr');
  const line = await page.textContent('#i-errors tbody tr td:first-child');
  check(line.trim() === '2', 'the bad line is reported as line 2');
  check(/2\s*imported/.test(await page.textContent('#i-report .counts')), '2 imported');
  check(await page.evaluate(() => document.querySelector('#i-progress').value) === 1, 'progress bar full');
  await shot(page, 'import-1280.png');

  // query history: the search above is listed with its latency
  await page.click('#tab-queries');
  await page.waitForSelector('#shapes tbody tr[data-q]');
  const qs = await page.$$eval('#shapes tbody tr', trs => trs.map(t => t.dataset.shape));
  check(qs.includes('(terminal emulator)'), 'query history lists the search in canonical form: ' + qs.slice(0, 5));
  const plans = await page.$$eval('#shapes tbody tr[data-kind="search"] td:last-child', tds => tds.map(t => t.textContent));
  check(plans.some(p => /wand|and|exhaustive|filter|sort/.test(p)), 'history shows the plan used: ' + plans.slice(0, 3));
  await shot(page, 'queries-1280.png');
  // clicking a shape runs it in the search console
  await page.click('#shapes tbody tr[data-shape="(terminal emulator)"]');
  await page.waitForSelector('#view-search:not([hidden]) #hits li');
  check(await page.inputValue('#q') === 'terminal emulator', 'history row opens the search as last typed');

  // SQL console: results as a table (checked against the file)
  await page.keyboard.press('Escape');
  await page.keyboard.press('6');
  await page.click('#sql');
  await page.keyboard.type('SELECT section, count(*) AS n FROM packages GROUP BY section ORDER BY n DESC, section LIMIT 5');
  await page.keyboard.press('Control+Enter');
  await page.waitForSelector('#sql-result-box:not([hidden]) #sql-result tbody tr');
  const rows = await page.$$eval('#sql-result tbody tr', trs => trs.map(t => Array.from(t.children).map(c => c.textContent)));
  check(JSON.stringify(rows.map(r => [r[0], Number(r[1])])) === JSON.stringify(expected.top_sections),
    'SQL console rows equal the file\'s top sections: ' + JSON.stringify(rows) + ' vs ' + JSON.stringify(expected.top_sections));
  check(/SELECT 5/.test(await page.textContent('#sql-summary')), 'SQL summary shows the command tag');
  await shot(page, 'sql-1280.png');
  // an error marks its position in the statement
  await page.fill('#sql', 'SELECT id\nFROM packages\nWHERE nope > 1');
  await page.click('#sql-run');
  await page.waitForSelector('#sql-error:not([hidden])');
  const serr = await page.textContent('#sql-error');
  const caretLine = serr.split('\n').slice(-2);
  check(/42703/.test(serr) && /line 3: WHERE nope > 1/.test(serr) && caretLine[1].indexOf('^') === caretLine[0].indexOf('nope'),
    'SQL error with SQLSTATE and a caret under the column: ' + JSON.stringify(serr));
  // EXPLAIN ANALYZE drawn as a tree with estimated and actual rows
  await page.fill('#sql', "SELECT id FROM packages WHERE body @@ 'library' AND installed_size_kb > 100 ORDER BY installed_size_kb DESC LIMIT 5");
  await page.click('#sql-explain');
  await page.waitForSelector('#sql-plan-box:not([hidden]) .pnode');
  const nodes = await page.$$eval('#sql-plan .pnode', ns => ns.map(n => ({ t: n.querySelector('.pt').textContent,
    est: n.querySelector('.est-rows') && n.querySelector('.est-rows').textContent, act: n.querySelector('.act-rows') && n.querySelector('.act-rows').textContent,
    depth: (function d(e) { let k = 0; while ((e = e.parentElement.closest('ul'))) k++; return k; })(n) })));
  const scan = nodes.find(n => / on packages$/.test(n.t));
  const limit = nodes.find(n => /^Limit/.test(n.t));
  check(nodes.length >= 3 && limit && scan && scan.depth > limit.depth, 'plan tree: Limit above the scan: ' + JSON.stringify(nodes));
  check(scan && scan.est !== null && scan.act !== null, 'scan node shows estimated and actual rows');
  const trueRows = await page.evaluate(async () => {
    const r = await fetch('/sql', { method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ query: "SELECT count(*) FROM packages WHERE body @@ 'library' AND installed_size_kb > 100" }) });
    return (await r.json()).rows[0][0];
  });
  check(scan && num(scan.act) === Number(trueRows), 'actual rows of the scan equal count(*): ' + (scan && scan.act) + ' vs ' + trueRows);
  await shot(page, 'explain-1280.png');
  // SQL statements join the history, normalized
  await page.keyboard.press('Escape');
  await page.keyboard.press('5');
  // (rows of the PG port's statements may be drawn already: wait for the console's)
  await page.waitForFunction(() => [...document.querySelectorAll('#shapes tbody tr[data-kind="sql"]')].some(t => /GROUP BY section/.test(t.dataset.shape)));
  const sqlq = await page.$$eval('#shapes tbody tr[data-kind="sql"]', trs => trs.map(t => t.dataset.shape));
  check(sqlq.some(q => /LIMIT \$\d/.test(q) && /GROUP BY section/.test(q)), 'SQL statements in the history with constants as $n: ' + sqlq.slice(0, 3));
  // statements psql sent over the PG port (test_admin_page.sh) are there too,
  // with the table accesses they ran; the failed one with its error status
  const pgOk = process.env.PG_OK, pgBad = process.env.PG_BAD;
  await page.waitForSelector('#recent tbody tr[data-via="pg"]');
  const pgRows = await page.$$eval('#recent tbody tr[data-via="pg"]', trs => trs.map(t => ({ q: t.dataset.q, cells: Array.from(t.children).map(c => c.textContent) })));
  const okRow = pgRows.find(r => r.q === pgOk), badRow = pgRows.find(r => r.q === pgBad);
  check(okRow && /PG port/.test(okRow.cells[1]) && okRow.cells[5] === '3' && okRow.cells[6] === '200' && /packages:/.test(okRow.cells[7]),
    'PG-port statement in the history with its rows and plan: ' + JSON.stringify(okRow || pgRows));
  check(badRow && Number(badRow.cells[6]) >= 400, 'failed PG-port statement with its error status: ' + JSON.stringify(badRow || pgRows));
  // opening it shows the statement and its plan tree (EXPLAIN, nothing run)
  await page.evaluate(q => [...document.querySelectorAll('#recent tbody tr[data-via="pg"]')].find(t => t.dataset.q === q).click(), pgOk);
  await page.waitForSelector('#view-sql:not([hidden]) #sql-plan-box:not([hidden]) .pnode');
  const ptitles = await page.$$eval('#sql-plan .pnode .pt', ns => ns.map(n => n.textContent));
  check(await page.inputValue('#sql') === pgOk && ptitles.some(t => / on packages$/.test(t)) && ptitles.some(t => /^Limit/.test(t)),
    'a PG-port history row opens with its plan: ' + JSON.stringify(ptitles));
  await shot(page, 'history-plan-1280.png');

  // a bookmarked search runs when opened, exactly as named
  const bm = await newPage(1280, 860);
  const mark = { table: 'packages', q: 'terminal emulator', filter: 'installed_size_kb > 100' };
  await bm.goto(base + '/#search?' + new URLSearchParams(mark).toString());
  await bm.waitForSelector('#view-search:not([hidden]) #hits li');
  const apiTotal = f => bm.evaluate(async b => (await (await fetch('/tables/packages/search', { method: 'POST',
    headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(b) })).json()).total, f);
  const bmTotal = num((await bm.textContent('#s-summary')).split('matches')[0]);
  const want = await apiTotal({ q: mark.q, filter: mark.filter, limit: 0 });
  check(bmTotal === want && await bm.inputValue('#q') === mark.q && await bm.inputValue('#s-filter') === mark.filter &&
    await bm.getAttribute('#tab-search', 'aria-selected') === 'true', 'bookmark opens the search and runs it: ' + bmTotal + ' vs ' + want);
  // another bookmark in the same tab (hashchange) replaces the search
  await bm.evaluate(() => { location.hash = '#search?table=packages&q=python'; });
  await bm.waitForFunction(() => document.querySelector('#q').value === 'python' && /matches/.test(document.querySelector('#s-summary').textContent));
  const pyTotal = num((await bm.textContent('#s-summary')).split('matches')[0]);
  check(pyTotal === await apiTotal({ q: 'python', limit: 0 }) && await bm.inputValue('#s-filter') === '',
    'a second bookmark runs its own search without the old filter: ' + pyTotal);
  // and a search typed in the page leaves its own bookmarkable address
  await bm.fill('#q', 'library');
  await bm.keyboard.press('Enter');
  await bm.waitForFunction(() => new URLSearchParams(location.hash.split('?')[1] || '').get('q') === 'library');
  check(true, 'the address names the search typed');

  // phone width: no horizontal scrolling, search usable
  const phone = await newPage(390, 844);
  await phone.goto(base + '/#search');
  await phone.waitForSelector('#s-table option', { state: 'attached' });
  await phone.fill('#q', 'terminal');
  await phone.keyboard.press('Enter');
  await phone.waitForSelector('#hits li');
  const overflow = await phone.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  check(overflow <= 1, 'no horizontal overflow at 390px (' + overflow + 'px)');
  await shot(phone, 'search-390.png');
  await phone.goto(base + '/#sql');
  await phone.fill('#sql', "SELECT id, installed_size_kb FROM packages WHERE body @@ 'terminal' ORDER BY installed_size_kb DESC LIMIT 3");
  await phone.click('#sql-explain');
  await phone.waitForSelector('#sql-plan .pnode');
  const overflow2 = await phone.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  check(overflow2 <= 1, 'no horizontal overflow of the plan at 390px (' + overflow2 + 'px)');
  await shot(phone, 'explain-390.png');
  await phone.goto(base + '/#overview');
  await phone.waitForSelector('#overview-tables tbody tr');
  await shot(phone, 'overview-390.png');
} catch (e) {
  check(false, 'browser run: ' + (e.stack || e));
}
check(problems.length === 0, 'no console errors, page errors or failed requests: ' + problems.slice(0, 5).join(' | '));
await browser.close();
console.log(passed + ' passed, ' + failed + ' failed');
process.exit(failed ? 1 : 0);
