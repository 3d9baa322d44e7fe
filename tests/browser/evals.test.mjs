// The Evals pages in Debian's Chromium, driven by playwright-core; run by
// tests/integration/eval_review.sh, which makes two eval runs (RUN_A, RUN_B)
// and a blind review batch over RUN_B (BATCH). Prints one "PASS name" or
// "FAIL name: why" line per check, and saves screenshots to $OUT_DIR.
//
// Environment: WARREN_URL, TOKEN (an admin's), RUN_A, RUN_B, BATCH, OUT_DIR,
// CHROMIUM (default /usr/bin/chromium).

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const env = (k, d) => {
  const v = process.env[k] ?? d;
  if (v === undefined) {
    console.log(`FAIL environment: ${k} is not set`);
    process.exit(2);
  }
  return v;
};
const BASE = env('WARREN_URL').replace(/\/$/, '');
const TOKEN = env('TOKEN');
const RUN_A = env('RUN_A');
const RUN_B = env('RUN_B');
const BATCH = env('BATCH');
const OUT = env('OUT_DIR');
const CHROMIUM = env('CHROMIUM', '/usr/bin/chromium');
const STEP_MS = 20000;
mkdirSync(OUT, { recursive: true });

let failures = 0;
const oneLine = (s) => String(s).replace(/\x1b\[[0-9;]*m/g, '').split('\n').filter(Boolean).slice(0, 3).join(' | ').slice(0, 400);
async function check(name, fn) {
  try {
    const r = await fn();
    if (typeof r === 'string') throw new Error(r);
    console.log(`PASS ${name}`);
    return true;
  } catch (e) {
    failures++;
    console.log(`FAIL ${name}: ${oneLine(e && e.message ? e.message : e)}`);
    return false;
  }
}
const assert = (c, why) => {
  if (!c) throw new Error(why);
};

// off the network, as web.test.mjs
const ARGS = [
  '--no-sandbox',
  '--headless=new',
  '--proxy-server=http://127.0.0.1:9',
  '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-default-apps',
  '--disable-breakpad',
  '--no-first-run',
  '--no-default-browser-check',
  '--disable-dev-shm-usage',
  '--disable-gpu',
];

async function main() {
  let browser;
  try {
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS, timeout: 60000 });
  } catch (e) {
    console.log(`FAIL Chromium starts: ${oneLine(e.message)}`);
    return;
  }
  const problems = [];
  try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    page.on('pageerror', (e) => problems.push(e.message));
    page.on('console', (m) => {
      if (m.type() === 'error' && !/status of (401|403|404|409)/.test(m.text())) problems.push(m.text());
    });
    await page.goto(`${BASE}/#/evals`);
    await page.locator('#token').fill(TOKEN);
    await page.locator('form.signin-card button[type=submit]').click();
    await page.locator('#nav:not([hidden])').waitFor({ timeout: STEP_MS });

    await check('the Evals page lists both runs', async () => {
      await page.locator(`tr[data-run="${RUN_A}"]`).waitFor({ timeout: STEP_MS });
      await page.locator(`tr[data-run="${RUN_B}"]`).waitFor({ timeout: STEP_MS });
      assert(await page.locator('#nav a[href="#/evals"]').isVisible(), 'no Evals link in the navigation');
      await page.screenshot({ path: join(OUT, 'evals.png'), fullPage: true });
    });

    await check("a run's page draws its report as SVG charts (resolve rate per task with bars, review)", async () => {
      await page.goto(`${BASE}/#/evals/${RUN_A}`);
      const svg = page.locator('#chart-resolve svg.chart');
      await svg.waitFor({ timeout: STEP_MS });
      assert((await svg.locator('title').first().textContent()) === 'Resolve rate per task', 'the chart has no title');
      const bars = await svg.locator('rect.ch-bar').count();
      assert(bars === 2, `${bars} bars for 2 tasks`);
      await page.locator('#chart-cost svg.chart').waitFor({ timeout: STEP_MS });
      await page.locator('#chart-time svg.chart').waitFor({ timeout: STEP_MS });
      await page.locator('#chart-review svg.chart').waitFor({ timeout: STEP_MS });
      const tiles = await page.locator('.eval-summary .tile-value').allTextContents();
      assert(tiles[0] === '4 of 4', `resolved tile says ${tiles[0]}`);
      await page.waitForTimeout(250);
      await page.screenshot({ path: join(OUT, 'eval-run.png'), fullPage: true });
    });

    await check('compare: two runs side by side, both series in the chart', async () => {
      await page.locator('#eval-compare').selectOption(RUN_B);
      await page.waitForURL(/compare=/, { timeout: STEP_MS });
      await page.locator('.eval-summary').nth(1).waitFor({ timeout: STEP_MS });
      assert((await page.locator('.eval-summary').count()) === 2, 'not two summaries');
      const svg = page.locator('#chart-resolve svg.chart');
      await svg.waitFor({ timeout: STEP_MS });
      assert((await svg.locator('rect.ch-bar.tone-review').count()) >= 1, "no bar of the second run's");
      const b = await page.locator('.eval-summary').nth(1).locator('.tile-value').first().textContent();
      assert(b === '2 of 4', `B's resolved tile says ${b}`);
      await page.waitForTimeout(250);
      await page.screenshot({ path: join(OUT, 'eval-compare.png'), fullPage: true });
    });

    await check('the blind review page shows the prompt (as text) and the diff, and no configuration', async () => {
      await page.goto(`${BASE}/#/reviews/${BATCH}`);
      const item = page.locator('.review-item');
      await item.waitFor({ timeout: STEP_MS });
      await item.locator('.diff-body').first().waitFor({ timeout: STEP_MS });
      const prompt = await item.locator('.review-prompt').textContent();
      assert(prompt.includes('<b>NOTE.txt</b>'), `the prompt is not shown as text: ${prompt}`);
      assert((await item.locator('.review-prompt b').count()) === 0, 'the prompt became markup');
      const text = await page.locator('#main').textContent();
      for (const bad of [RUN_A, RUN_B, 'agent', 'cost', 'echo beta']) assert(!text.includes(bad), `the page shows "${bad}"`);
      assert(!/s-[0-9a-f]{16}/.test(text), 'the page shows a session id');
      assert(text.includes('NOTE.txt'), 'no diff of NOTE.txt');
      await page.screenshot({ path: join(OUT, 'blind-review.png'), fullPage: true });
    });

    await check('a click records the verdict and the next change comes up', async () => {
      const before = await page.locator('.review-item').getAttribute('data-item');
      await page.waitForTimeout(400);
      await page.locator('.review-verdicts button[data-verdict="merge"]').click();
      await page.locator('.review-progress').getByText('1 of 2 reviewed').waitFor({ timeout: STEP_MS });
      await page.locator(`.review-item:not([data-item="${before}"])`).waitFor({ timeout: STEP_MS });
      const res = await page.evaluate(
        async ([b, t]) => (await fetch(`/api/v1/evals/reviews/${b}`, { headers: { Authorization: `Bearer ${t}` } })).json(),
        [BATCH, TOKEN],
      );
      const got = res.items.find((i) => i.item === before);
      assert(got && got.verdict === 'merge', `the item's verdict is ${got && got.verdict}`);
    });
    await check("at a phone's width the eval pages do not scroll sideways", async () => {
      const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
      const pp = await phone.newPage();
      pp.on('pageerror', (e) => problems.push(e.message));
      await pp.goto(`${BASE}/#/evals`);
      await pp.locator('#token').fill(TOKEN);
      await pp.locator('form.signin-card button[type=submit]').click();
      await pp.locator(`tr[data-run="${RUN_A}"]`).waitFor({ timeout: STEP_MS });
      const wide = () => pp.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      const over = [];
      if ((await wide()) > 1) over.push(`evals by ${await wide()} px`);
      await pp.goto(`${BASE}/#/evals/${RUN_A}?compare=${RUN_B}`);
      await pp.locator('#chart-resolve svg.chart').waitFor({ timeout: STEP_MS });
      await pp.waitForTimeout(300);
      if ((await wide()) > 1) over.push(`compare by ${await wide()} px`);
      await pp.screenshot({ path: join(OUT, 'phone-eval-compare.png'), fullPage: true });
      await pp.goto(`${BASE}/#/reviews/${BATCH}`);
      await pp.locator('.review-item').waitFor({ timeout: STEP_MS });
      if ((await wide()) > 1) over.push(`review by ${await wide()} px`);
      await pp.screenshot({ path: join(OUT, 'phone-blind-review.png'), fullPage: true });
      await phone.close();
      return over.length ? over.join(', ') : undefined;
    });
    await check('no script error or CSP violation', () => (problems.length ? problems.slice(0, 3).join(' | ') : undefined));
    await context.close();
  } finally {
    await browser.close();
  }
}

main()
  .catch((e) => {
    failures++;
    console.log(`FAIL the browser check runs: ${oneLine(e.message || e)}`);
  })
  .finally(() => process.exit(failures ? 1 : 0));
