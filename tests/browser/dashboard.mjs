// dashboard.mjs drives the shardcounter dashboard in Debian's Chromium, as
// a person would: sign in when the server has a token, search counters and
// page through them, watch a counter's value move while the Go test
// writes to it, read its shard table, the write engine's numbers and a
// collection query. browser_test.go runs it with node and a server of its
// own; it is not meant to be run by hand (but can be: see the variables).
//
//   SC_URL          the server, e.g. http://127.0.0.1:8080
//   SC_TOKEN        the bearer token, when the server has one
//   SC_PREFIX       a prefix that PAGE_SIZE+ counters share (paging)
//   SC_COUNTER      the counter being written to (under SC_PREFIX)
//   SC_SHARDS       its shard count
//   SC_IDLE         a counter nobody writes to, which the script deletes
//   SC_COLLECTION   a collection with documents and an index SC_INDEX
//   SC_INDEX, SC_INDEX_VALUE   a filter that matches some documents
//   SC_RANKING      a ranking whose counters include SC_COUNTER
//   SC_PROFILE      a fresh directory for Chromium's profile
//   SC_SCREENSHOTS  where the screenshots go
//
// It prints one line of JSON with what it saw and exits 0, or prints the
// failure and exits 1.
import { chromium } from 'playwright-core';
import { join } from 'node:path';

const env = (name, def) => {
  const v = process.env[name] ?? def;
  if (v === undefined) throw new Error(`${name} is not set`);
  return v;
};
const URL = env('SC_URL');
const TOKEN = env('SC_TOKEN', '');
const PREFIX = env('SC_PREFIX');
const COUNTER = env('SC_COUNTER');
const SHARDS = Number(env('SC_SHARDS'));
const IDLE = env('SC_IDLE');
const COLLECTION = env('SC_COLLECTION');
const INDEX = env('SC_INDEX');
const INDEX_VALUE = env('SC_INDEX_VALUE');
const RANKING = env('SC_RANKING');
const PROFILE = env('SC_PROFILE');
const SHOTS = env('SC_SCREENSHOTS');
const TIMEOUT = 20000;

const seen = { values: [] };
const problems = [];
let deleted = false; // after the script deletes IDLE, its 404s are expected

function check(cond, what) {
  if (!cond) throw new Error(what);
}

const num = (s) => Number(String(s).replace(/,/g, ''));

const context = await chromium.launchPersistentContext(PROFILE, {
  executablePath: '/usr/bin/chromium',
  headless: true,
  viewport: { width: 1200, height: 820 },
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
    '--disable-sync', '--no-first-run', '--disable-quic'],
});
let exit = 0;
try {
  const page = context.pages()[0] ?? await context.newPage();
  page.setDefaultTimeout(TIMEOUT);
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    // Chromium logs every 401 as a failed load; the login flow causes them.
    if (TOKEN && /status of 401/.test(m.text())) return;
    if (deleted && /status of 404/.test(m.text())) return;
    problems.push(`console error: ${m.text()}`);
  });
  page.on('request', (r) => {
    if (!r.url().startsWith(URL) && !r.url().startsWith('data:')) problems.push(`request to another origin: ${r.url()}`);
    if (TOKEN && r.url().includes(TOKEN)) problems.push(`the token is in a URL: ${r.url()}`);
  });

  // The page loads without a token; a server that has one asks for it.
  await page.goto(URL + '/ui/');
  if (TOKEN) {
    await page.waitForSelector('input[name=token]');
    check(page.url().endsWith('#/login'), `with a token set, the first screen is ${page.url()}, want the login`);
    await page.fill('input[name=token]', 'not-' + TOKEN);
    await page.click('button[type=submit]');
    await page.waitForSelector('p.error');
    seen.wrongToken = await page.textContent('p.error');
    await page.screenshot({ path: join(SHOTS, 'dashboard-login.png') });
    await page.fill('input[name=token]', TOKEN);
    await page.click('button[type=submit]');
    await page.waitForSelector('#auth button');
    seen.signedIn = true;
  }

  // Counters: search by prefix, then page.
  await page.waitForSelector('input[name=prefix]');
  await page.fill('input[name=prefix]', PREFIX);
  await page.click('form[role=search] button');
  await page.waitForSelector('[data-testid=counters] tbody tr');
  const firstPage = await page.$$eval('[data-testid=counters] tbody tr td.id', (tds) => tds.map((td) => td.textContent));
  // Each row's value, from one batch read.
  const listValues = await page.$$eval('[data-testid=counters] tbody tr td:nth-child(2)', (tds) => tds.map((td) => td.textContent));
  check(listValues.length === firstPage.length && listValues.every((v) => /^[\d,]+$/.test(v) && v !== '0'), `value column ${listValues}, want the values written`);
  await page.screenshot({ path: join(SHOTS, 'dashboard-counters.png') });
  await page.click('a[rel=next]');
  await page.waitForFunction((first) => {
    const td = document.querySelector('[data-testid=counters] tbody tr td.id');
    return td && td.textContent !== first;
  }, firstPage[0]);
  const secondPage = await page.$$eval('[data-testid=counters] tbody tr td.id', (tds) => tds.map((td) => td.textContent));
  check(secondPage.length > 0 && secondPage.every((id) => id > firstPage[firstPage.length - 1]), `second page ${secondPage} does not follow the first`);
  check(secondPage.includes(COUNTER) || firstPage.includes(COUNTER), `${COUNTER} is on neither page`);
  seen.pages = [firstPage.length, secondPage.length];

  // The counter: its value moves while the test writes.
  await page.goBack();
  await page.waitForSelector('[data-testid=counters] tbody tr');
  await page.fill('input[name=prefix]', COUNTER);
  await page.click('form[role=search] button');
  await page.waitForFunction((id) => [...document.querySelectorAll('[data-testid=counters] td.id')].some((td) => td.textContent === id), COUNTER);
  await page.click(`[data-testid=counters] a:text-is("${COUNTER}")`);
  await page.waitForFunction(() => /^-?[\d,]+$/.test(document.querySelector('[data-testid=value]')?.textContent ?? ''));
  for (let i = 0; i < 3; i++) {
    const before = await page.textContent('[data-testid=value]');
    seen.values.push(num(before));
    await page.waitForFunction((b) => document.querySelector('[data-testid=value]').textContent !== b, before);
  }
  seen.values.push(num(await page.textContent('[data-testid=value]')));
  check(seen.values.every((v, i) => i === 0 || v > seen.values[i - 1]), `values ${seen.values} do not grow`);
  check(/live/.test(await page.textContent('[data-testid=watch-status]')), 'the watch status does not say live');
  await page.waitForSelector('[data-testid=rate-chart] polyline');

  // Its shards: one row each, on the bolt file, adding up.
  await page.waitForSelector('[data-testid=shards] tbody tr');
  const shards = await page.$$eval('[data-testid=shards] tbody tr', (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
  check(shards.length === SHARDS, `shard table has ${shards.length} rows, want ${SHARDS}`);
  check(shards.every((r, i) => num(r[0]) === i && r[2] === 'shardcounter-data/shardcounter.db'), `shard rows ${JSON.stringify(shards)}: want shards 0..n-1 on the bolt file shardcounter-data/shardcounter.db`);
  const total = num(await page.textContent('[data-testid=shards-total]'));
  check(total === shards.reduce((s, r) => s + num(r[1]), 0), `shards total ${total} is not the sum of the rows`);
  check(total >= seen.values[0], `shards total ${total} is below a value shown before, ${seen.values[0]}`);
  seen.shards = shards.length;

  // The write path's numbers, on the counter page.
  await page.waitForFunction(() => /^[\d,.]+$/.test(document.querySelector('[data-testid=batch-size]')?.textContent ?? ''));
  seen.batchSize = num(await page.textContent('[data-testid=batch-size]'));
  seen.commitMs = num(await page.textContent('[data-testid=commit-ms]'));
  await page.waitForTimeout(6000); // a few more points on the chart for the screenshot
  await page.screenshot({ path: join(SHOTS, 'dashboard-counter.png'), fullPage: true });

  // An idle counter: its rate chart's y-axis up to 1 /s reads 1, 0.5, 0,
  // not two ticks of "1 /s".
  await page.goto(`${URL}/ui/#/counter/${encodeURIComponent(IDLE)}`);
  await page.waitForFunction(() => /live/.test(document.querySelector('[data-testid=watch-status]')?.textContent ?? ''));
  const ticks = await page.$$eval('[data-testid=rate-chart] text', (ts) => ts.map((t) => t.textContent).filter((t) => t.endsWith(' /s')));
  check(JSON.stringify(ticks) === JSON.stringify(['1 /s', '0.5 /s', '0 /s']), `idle counter's rate ticks ${JSON.stringify(ticks)}, want 1, 0.5 and 0 /s`);
  seen.idleTicks = ticks;

  // Deleted while on show: the page says so and links back, and the panels go.
  deleted = true;
  const status = await page.evaluate(async ([id, token]) => {
    const headers = token ? { Authorization: 'Bearer ' + token } : {};
    return (await fetch('/v1/counters/' + encodeURIComponent(id), { method: 'DELETE', headers })).status;
  }, [IDLE, TOKEN]);
  check(status === 204, `deleting ${IDLE} from the page: status ${status}`);
  await page.waitForSelector('[data-testid=not-found]');
  check(await page.$('[data-testid=value]') === null && await page.$('[data-testid=rate-chart]') === null, `the deleted counter's panels are still drawn`);

  // A counter that never existed: the same line and link, nothing half-drawn.
  await page.goto(`${URL}/ui/#/counter/${encodeURIComponent('no/such/counter')}`);
  await page.waitForSelector('[data-testid=not-found]');
  seen.notFound = await page.textContent('[data-testid=not-found]');
  check(seen.notFound.includes('no/such/counter'), `not-found line ${seen.notFound} does not name the counter`);
  check(await page.$('[data-testid=value]') === null && await page.$('[data-testid=shards]') === null && await page.$('[data-testid=batch-size]') === null,
    'a counter that does not exist is half-drawn');
  await page.click('[data-testid=back]');
  await page.waitForSelector('[data-testid=counters] tbody tr');

  // The write engine.
  await page.click('nav a[data-screen=engine]');
  await page.waitForFunction(() => /^[\d,.]+$/.test(document.querySelector('[data-testid=writes-per-sec]')?.textContent ?? ''));
  seen.engineWritesPerSec = num(await page.textContent('[data-testid=writes-per-sec]'));
  check(seen.engineWritesPerSec > 0, 'the engine shows no writes while the test writes');
  await page.screenshot({ path: join(SHOTS, 'dashboard-engine.png'), fullPage: true });

  // A collection and a query.
  await page.click('nav a[data-screen=collections]');
  await page.fill('input[name=collection]', COLLECTION);
  await page.click('form button');
  await page.waitForSelector('select[name=field]');
  await page.selectOption('select[name=field]', INDEX);
  await page.fill('input[name=value]', INDEX_VALUE);
  await page.click('form:has(select[name=field]) button');
  await page.waitForSelector('[data-testid=documents] tbody tr');
  const docs = await page.$$eval('[data-testid=documents] tbody tr td.json', (tds) => tds.map((td) => JSON.parse(td.textContent)));
  check(docs.length > 0 && docs.every((d) => String(d[INDEX]) === INDEX_VALUE), `query where ${INDEX}==${INDEX_VALUE} gave ${JSON.stringify(docs)}`);
  seen.documents = docs.length;
  await page.screenshot({ path: join(SHOTS, 'dashboard-collection.png'), fullPage: true });

  // The rankings: the list, then one ranking whose entry for the counter
  // being written moves live, the entries in order.
  await page.click('nav a[data-screen=rankings]');
  await page.click(`[data-testid=rankings] a:text-is("${RANKING}")`);
  const row = `[data-testid=top] tr[data-id="${COUNTER}"] td.value`;
  await page.waitForSelector(row);
  seen.ranked = [];
  for (let i = 0; i < 3; i++) {
    const before = await page.textContent(row);
    seen.ranked.push(num(before));
    await page.waitForFunction(([sel, b]) => document.querySelector(sel)?.textContent !== b, [row, before]);
  }
  check(seen.ranked.every((v, i) => i === 0 || v > seen.ranked[i - 1]), `the ranking shows ${COUNTER} at ${seen.ranked}: it does not grow`);
  const entries = await page.$$eval('[data-testid=top] tbody tr td.value', (tds) => tds.map((td) => td.textContent));
  check(entries.length === 10 && entries.every((v, i) => i === 0 || num(v) <= num(entries[i - 1])), `ranking entries ${entries} are not 10 in descending order`);
  await page.screenshot({ path: join(SHOTS, 'dashboard-ranking.png'), fullPage: true });

  // Without a token, the browser's own EventSource reads the stream too:
  // the format is the standard's, not just what our reader accepts.
  if (!TOKEN) {
    seen.eventSource = await page.evaluate((id) => new Promise((resolve, reject) => {
      const es = new EventSource(`/v1/counters/${encodeURIComponent(id)}/watch?interval=100ms`);
      const t = setTimeout(() => { es.close(); reject(new Error('EventSource got no message')); }, 10000);
      es.onmessage = (ev) => {
        clearTimeout(t);
        es.close();
        resolve({ value: JSON.parse(ev.data).value, lastEventId: ev.lastEventId });
      };
    }), COUNTER);
    check(String(seen.eventSource.value) === seen.eventSource.lastEventId, `EventSource: id ${seen.eventSource.lastEventId} is not the value ${seen.eventSource.value}`);
  }

  // Signing out forgets the token.
  if (TOKEN) {
    await page.click('#auth button');
    check(await page.evaluate(() => sessionStorage.length) === 0, 'the token is still in session storage after signing out');
  }
  check(problems.length === 0, problems.join('\n'));
  console.log(JSON.stringify({ ok: true, ...seen }));
} catch (e) {
  console.log(JSON.stringify({ ok: false, error: e.message, problems, ...seen }));
  exit = 1;
} finally {
  await context.close();
}
process.exit(exit);
