/**
 * End to end: Debian's headless Chromium loads /docs from a listening app,
 * finds the read endpoints, authorises with a key and runs a request from the
 * page. Every request the page makes must stay on the service's origin (the
 * page must work with no internet). Screenshot: test-artifacts/docs.png.
 * Needs Chromium (HDS_TEST_CHROMIUM, by default Debian's /usr/bin/chromium):
 * without it the test is skipped, saying how to get it, except under
 * CI=true, where it fails. Nothing is installed from here.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import type { Sql } from '../src/db/client.js';
import type { App } from '../src/app.js';
import { requireChromium, ROOT, teamWithUsers, testApp, testSql, TEST_CHROMIUM, type TeamWithUsers } from './helpers.js';

const chromiumBinary = await requireChromium();
const CHROMIUM_ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];
const ARTIFACTS = path.join(ROOT, 'test-artifacts');

describe('/docs in headless Chromium', chromiumBinary.options, () => {
  let sql: Sql;
  let app: App;
  let origin: string;
  let team: TeamWithUsers;
  let userDataDir: string;
  let context: BrowserContext;
  let page: Page;
  const offOrigin: string[] = [];
  const pageErrors: string[] = [];

  before(async () => {
    chromiumBinary.ensure();
    sql = testSql();
    app = await testApp(sql);
    origin = await app.listen({ port: 0, host: '127.0.0.1' });
    team = await teamWithUsers(sql, 3);

    userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hds-chromium-'));
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: TEST_CHROMIUM, headless: true, args: CHROMIUM_ARGS, viewport: { width: 1280, height: 900 },
    });
    page = context.pages()[0] ?? await context.newPage();
    page.on('request', (req) => {
      const url = req.url();
      if (!url.startsWith(`${origin}/`) && !url.startsWith('data:')) offOrigin.push(url);
    });
    page.on('pageerror', (err) => pageErrors.push(err.message));
    page.on('console', (msg) => { if (msg.type() === 'error') pageErrors.push(msg.text()); });
  });
  after(async () => {
    await context?.close();
    if (userDataDir) fs.rmSync(userDataDir, { recursive: true, force: true });
    await app?.close();
    await sql?.end();
  });

  it('loads the page, shows both read endpoints, and runs one with a key', async () => {
    const res = await page.goto(`${origin}/docs`);
    assert.equal(res?.status(), 200);
    const getUser = page.locator('.opblock-get:has([data-path="/v2/user/{user_id}"])');
    const listUsers = page.locator('.opblock-get:has([data-path="/v2/user/"])');
    await getUser.waitFor({ timeout: 20_000 });
    assert.equal(await listUsers.count(), 1, 'GET /v2/user/ is listed');
    assert.equal(await getUser.count(), 1, 'GET /v2/user/{user_id} is listed');
    assert.equal(await page.locator('.opblock-get:has([data-path="/v2/user/resolve/{client_user_id}"])').count(), 1);

    // Authorise through the page's own dialog.
    await page.locator('.btn.authorize').first().click();
    const dialog = page.locator('.dialog-ux');
    // The first scheme, x-service-api-key (the second is the upstream's header).
    await dialog.locator('input').first().fill(team.key);
    await dialog.locator('button.authorize').first().click();
    await dialog.locator('button.btn-done').first().click();

    // Run GET /v2/user/{user_id} from the page.
    const user = team.users[1]!;
    await getUser.locator('.opblock-summary').first().click();
    const tryOut = getUser.locator('button.try-out__btn');
    if (await tryOut.count() > 0 && /try it out/i.test(await tryOut.innerText())) await tryOut.click();
    await getUser.locator('input[placeholder="user_id"]').fill(user.user_id);
    const [answer] = await Promise.all([
      page.waitForResponse((r) => r.url() === `${origin}/v2/user/${user.user_id}`),
      getUser.locator('button.execute').click(),
    ]);
    assert.equal(answer.status(), 200);
    assert.equal((await answer.request().allHeaders())['x-service-api-key'], team.key, 'the page sent the key it was given');
    assert.equal((await answer.json()).user_id, user.user_id);
    const shownStatus = getUser.locator('.live-responses-table tr.response .response-col_status').first();
    await shownStatus.waitFor();
    assert.equal((await shownStatus.innerText()).trim(), '200');
    assert.match(await getUser.locator('.live-responses-table tr.response .response-col_description').first().innerText(), new RegExp(user.user_id));

    // The curl example shows the key in clear: keep it out of the artifact.
    await page.locator('.curl-command').evaluateAll((els) => els.forEach((el) => { (el as HTMLElement).style.visibility = 'hidden'; }));
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    const shot = path.join(ARTIFACTS, 'docs.png');
    await page.screenshot({ path: shot, fullPage: true });
    assert.ok(fs.statSync(shot).size > 10_000, 'screenshot written');

    assert.deepEqual(offOrigin, [], 'the docs page reached only the service itself');
    assert.deepEqual(pageErrors, [], 'no script errors or blocked resources');
  });
});
