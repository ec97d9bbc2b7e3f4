// Drives the admin page in headless Chromium (run by test_admin_page.sh).
// usage: node test_admin_page.mjs BASE_URL OUT_DIR UPLOAD_FILE CHROMIUM
// Prints one line per failed check and "N passed, N failed"; exit 77 when the
// browser cannot start.
import { chromium } from 'playwright-core';
import path from 'node:path';

const [base, out, uploadFile, exe] = process.argv.slice(2);
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

  // tables view: schema and statistics
  await page.click('#tab-tables');
  await page.waitForSelector('#table-detail table.grid tbody tr');
  const fields = await page.$$eval('#table-detail table.grid tbody tr td:first-child', tds => tds.map(t => t.textContent));
  check(fields.includes('title') && fields.includes('maintainer'), 'schema fields listed');
  check(/3,000/.test(await page.textContent('#table-detail .stats')), 'table stats show 3,000 docs');
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
  const qs = await page.$$eval('#shapes tbody tr', trs => trs.map(t => t.dataset.q));
  check(qs.includes('terminal emulator'), 'query history lists the search: ' + qs.slice(0, 5));
  await shot(page, 'queries-1280.png');
  // clicking a shape runs it in the search console
  await page.click('#shapes tbody tr[data-q="terminal emulator"]');
  await page.waitForSelector('#view-search:not([hidden]) #hits li');
  check(await page.inputValue('#q') === 'terminal emulator', 'history row opens the search');

  // SQL placeholder
  await page.keyboard.press('Escape');
  await page.click('#tab-sql');
  check(/arrives with the SQL issue/.test(await page.textContent('#view-sql')), 'SQL placeholder tab');

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
