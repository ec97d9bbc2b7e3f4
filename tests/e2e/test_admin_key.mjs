// The admin page against a server that requires API keys (run by
// test_admin_page.sh): the page asks for a key on the first 401, keeps it for
// the tab, sends it with every later request, and shows the server's error
// when the prompt is cancelled or the key is wrong — never a prompt loop.
// usage: node test_admin_key.mjs BASE_URL CHROMIUM KEY TABLE DOCS
import { chromium } from 'playwright-core';

const [base, exe, key, table, docsWant] = process.argv.slice(2);
let passed = 0, failed = 0;
function check(cond, what) {
  if (cond) passed++;
  else { failed++; console.log('FAILED: ' + what); }
}

let browser;
try {
  browser = await chromium.launch({
    executablePath: exe,
    args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    timeout: 60000,
  });
} catch (e) {
  console.log('skip: chromium could not start: ' + String(e.message || e).split('\n')[0]);
  process.exit(77);
}

// A fresh tab whose prompts are answered by `answer(n)` (a string to type,
// or null to cancel); the prompts' texts are collected.
async function tab(answer) {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  const page = await ctx.newPage();
  page.setDefaultTimeout(15000);
  const prompts = [];
  const errors = [];
  page.on('pageerror', e => errors.push(e.message));
  const t = { ctx, page, prompts, errors, closing: false };
  page.on('dialog', async d => {
    prompts.push(d.message());
    const a = answer(prompts.length);
    try {
      if (d.type() === 'prompt' && a !== null) await d.accept(a);
      else await d.dismiss();
    } catch (e) {
      // a prompt still open when the test closes the tab (the page polls)
      // cannot be answered any more; before that it is an error
      if (!t.closing) errors.push('dialog: ' + e.message);
    }
  });
  t.close = async () => { t.closing = true; await ctx.close(); };
  return t;
}

try {
  // 1. the right key: one prompt, then everything works without asking again
  {
    const t = await tab(() => key);
    await t.page.goto(base + '/#overview');
    await t.page.waitForSelector('#overview-tables tbody tr[data-t="' + table + '"]');
    const docs = await t.page.textContent('#overview-tables tbody tr[data-t="' + table + '"] td:nth-child(2)');
    check(docs.replace(/,/g, '') === docsWant, 'with the key the overview lists ' + table + ' with ' + docsWant + ' docs (' + docs + ')');
    check(t.prompts.length === 1, 'asked for the key exactly once (' + t.prompts.length + ')');
    check(/API key/.test(t.prompts[0] || ''), 'the prompt says what it wants: ' + t.prompts[0]);
    const stored = await t.page.evaluate(() => sessionStorage.getItem('quarry.apiKey'));
    check(stored === key, 'the key is kept in sessionStorage for this tab');
    // the SQL console and the table view reuse the key
    await t.page.goto(base + '/#sql');
    await t.page.fill('#sql', 'SELECT count(*) FROM ' + table);
    await t.page.click('#sql-run');
    await t.page.waitForSelector('#sql-result-box:not([hidden]) #sql-result tbody tr');
    const n = await t.page.textContent('#sql-result tbody tr td');
    check(n.replace(/,/g, '') === docsWant, 'SQL console answers with the stored key: ' + n);
    await t.page.goto(base + '/#tables/' + table);
    await t.page.waitForSelector('#table-detail .panel-head h2');
    check(t.prompts.length === 1, 'no further prompts after the first (' + t.prompts.length + ')');
    check(t.errors.length === 0, 'no page errors: ' + t.errors.slice(0, 3).join(' | '));
    await t.close();
  }
  // 2. cancelling the prompt: the page shows the server's 401 message
  {
    const t = await tab(() => null);
    await t.page.goto(base + '/#tables/' + table);
    await t.page.waitForSelector('#table-detail pre.error');
    const msg = await t.page.textContent('#table-detail pre.error');
    check(/key|unauthori/i.test(msg), 'a cancelled prompt leaves the 401 error on the page: ' + msg.slice(0, 120));
    check(t.prompts.length >= 1 && t.prompts.length <= 4, 'prompts when cancelled stay few (' + t.prompts.length + ')');
    check(t.errors.length === 0, 'no page errors when cancelled: ' + t.errors.slice(0, 3).join(' | '));
    await t.close();
  }
  // 3. a wrong key: the retry fails once and the error shows; no loop
  {
    const t = await tab(() => 'qk_not_a_real_key');
    await t.page.goto(base + '/#tables/' + table);
    await t.page.waitForSelector('#table-detail pre.error');
    const msg = await t.page.textContent('#table-detail pre.error');
    check(/key|unauthori/i.test(msg), 'a wrong key shows the 401 error: ' + msg.slice(0, 120));
    await t.page.waitForTimeout(1500);   // the page polls: a loop would prompt again and again
    check(t.prompts.length >= 1 && t.prompts.length <= 4, 'a wrong key does not make a prompt loop (' + t.prompts.length + ' prompts)');
    await t.close();
  }
} catch (e) {
  check(false, 'browser run: ' + (e.stack || e));
}
await browser.close();
console.log(passed + ' passed, ' + failed + ' failed');
process.exit(failed ? 1 : 0);
