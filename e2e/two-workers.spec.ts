// The two-worker rig an operator has: worker A shares the router's /dev/shm, worker B runs in a
// private tmpfs over /dev/shm (a container without --ipc=host; root only). Through the screens,
// at 1024 and 1440 px, what the console says must be what happens:
//   1. mode shm forced on B: the editor, the review, Workers, Precedence, Overview and Traffic
//      say SHM will be attempted and fail over to inline, and the first request does exactly
//      that (attempt 2 of the same tensors, reason shm_worker_read_failed, its cause shown);
//   2. "Reset the SHM lane" is refused while the checks still fail, naming them; "Reset
//      anyway" resets;
//   3. a router setting a flag gave at start, changed here: the review and the toast say a
//      restart with that flag sets it back, Overview's sync state says so, and a restart does;
//   4. a broken lane reaches Overview within a second, and Overview never paints "All clear"
//      or idle rates over a state that is not;
//   5. per-worker verdicts in words on Overview and Traffic; the histogram counts the table's rows;
// and a reload keeps the tab's token, a newly printed URL pasted into the tab is taken without a
// reload, and focus lands somewhere sensible after Apply.
import { expect, test, type Page } from '@playwright/test';
import { apiChat, goTo, isRoot, openConsole, shot, startServe, startWorker, startWorkerInPrivateShm, type Serve, type Worker } from './rig.ts';

test.describe.configure({ mode: 'serial' });
test.skip(!isRoot, 'needs root: worker B gets a private tmpfs over /dev/shm (unshare --mount)');

let a: Worker;
let b: Worker;
let serve: Serve;
const FLAGS = ['--multimodal-tensor-transport', 'auto'];

test.beforeAll(async () => {
  a = await startWorker('tokenspeed');
  b = await startWorkerInPrivateShm('vllm');
  // The file says inline; the flag at start says auto, and wins for this run.
  serve = await startServe({
    config: `multimodal_tensor_transport: inline\npolicy: round_robin\nhealth_check_interval_secs: 0.5\nworkers:\n  - url: ${a.url}\n    runtime: tokenspeed\n  - url: ${b.url}\n    runtime: vllm\n`,
    flags: FLAGS,
  });
  for (let i = 0; i < 100; i++) {
    const r = await serve.call<{ workers: Array<{ health: string }> }>('workers.list');
    if (r.workers.length === 2 && r.workers.every((w) => w.health === 'healthy')) break;
    await new Promise((res) => setTimeout(res, 200));
  }
});

test.afterAll(async () => {
  const files = serve?.shmFiles() ?? [];
  await serve?.stop();
  await a?.stop();
  await b?.stop();
  expect(files).toEqual([]);
});

const row = (page: Page, url: string) => page.getByTestId('workers-table').locator(`tr[data-worker="${url}"]`);

test('mode shm forced on the worker in another /dev/shm: every view says it will fail over, and it does', async ({ page }, testInfo) => {
  await page.setViewportSize({ width: 1024, height: 700 });
  await openConsole(page, serve, 'workers');
  // Under auto, B (another st_dev) is inline from the start, and every view says why.
  await expect(row(page, b.url).getByTestId('next-request')).toHaveAttribute('data-outcome', 'inline');
  await expect(row(page, b.url)).toContainText('auto: worker has another /dev/shm');

  await page.getByRole('button', { name: `Edit ${b.url}` }).click();
  const editor = page.locator('#worker-editor-title').locator('xpath=ancestor::section');
  await editor.getByRole('group', { name: 'Transport mode override' }).getByRole('radio', { name: /^shm / }).check();
  // The editor says it before anything is applied.
  const said = editor.getByTestId('editor-verdict');
  await expect(said).toHaveAttribute('role', 'alert');
  await expect(said).toContainText('SHM attempted, then inline');
  await expect(said).toContainText('SHM will be attempted, the worker will not find the files, and the request goes again inline');

  const bar = page.getByRole('region', { name: 'Unapplied changes' });
  const review = bar.getByRole('button', { name: 'Review & apply' });
  await review.click();
  const dialog = page.getByRole('dialog', { name: 'Review changes' });
  const warning = dialog.getByTestId('review-warnings');
  await expect(warning).toContainText(b.url);
  await expect(warning.locator(`li[data-worker="${b.url}"]`)).toHaveAttribute('data-reason', 'shm_worker_other_shm');
  await shot(page, testInfo, 'review-shm-warning-1024', { docs: true });
  const before = (await serve.call<{ revision: number }>('config.get')).revision;
  await dialog.getByRole('button', { name: 'Apply', exact: true }).click();
  await expect(page.getByRole('status').filter({ hasText: `Applied revision ${before + 1}` })).toBeVisible();
  // Focus is not lost to the page body: the control that opened the review is gone with its draft, so the heading has it.
  await expect.poll(() => page.evaluate(() => document.activeElement?.tagName)).not.toBe('BODY');
  await expect(page.locator('#main h1')).toBeFocused();

  await expect(row(page, b.url).getByTestId('next-request')).toHaveAttribute('data-outcome', 'shm_then_inline');
  await expect(row(page, b.url).getByTestId('next-request')).toContainText('SHM, then inline');
  await expect(row(page, a.url).getByTestId('next-request')).toHaveAttribute('data-outcome', 'shm');

  await page.getByRole('link', { name: `Precedence of ${b.url}` }).click();
  const chain = page.getByTestId('decision-chain');
  await expect(chain.locator('li.step').nth(3)).toHaveAttribute('data-state', 'warn');
  await expect(chain.locator('li.step').nth(3)).toContainText('other /dev/shm');
  await expect(page.getByTestId('verdict')).toHaveAttribute('data-outcome', 'shm_then_inline');
  await expect(page.getByTestId('verdict')).toContainText('SHM attempted, then inline');
  await expect(page.getByTestId('verdict')).not.toContainText('SHM for tensors');

  await goTo(page, 'overview');
  const verdicts = page.getByTestId('verdicts');
  await expect(verdicts.locator(`tr[data-worker="${b.url}"]`)).toHaveAttribute('data-outcome', 'shm_then_inline');
  await expect(verdicts.locator(`tr[data-worker="${b.url}"]`)).toContainText('SHM will be attempted');
  await expect(page.locator('li[data-kind="shm_will_fail"]')).toContainText(b.url);

  // The first request does what the screens said.
  await goTo(page, 'doctor');
  await page.getByRole('combobox', { name: 'Worker' }).selectOption(b.url);
  await page.getByRole('button', { name: 'Send test tensor' }).click();
  const result = page.getByTestId('test-result');
  await expect(result).toContainText('HTTP 200');
  await expect(result.locator('tbody[data-attempt="unread"] tr[data-tensor="pixel_values"]')).toHaveAttribute('data-path', 'shm');
  const final = result.locator('tbody[data-attempt="final"] tr[data-tensor="pixel_values"]');
  await expect(final).toHaveAttribute('data-path', 'inline');
  await expect(final).toContainText('shm_worker_read_failed');
  await expect(result).not.toContainText('auto_worker_read_failed');
  await expect(result.locator('tbody[data-attempt="final"]')).toContainText(/ENOENT|No such file/);

  // Traffic: the retry is attempt 2 of the same tensors, its cause on the row; the verdict strip in words.
  await goTo(page, 'traffic');
  await page.getByRole('checkbox', { name: /show console traffic/ }).check();
  const table = page.getByRole('table', { name: 'Tensor events, newest first' });
  const retry = table.locator('[role="row"][data-attempt="2"]').filter({ hasText: 'pixel_values' }).first();
  await expect(retry).toContainText('attempt 2/2');
  await expect(retry).toContainText('worker cannot read /dev/shm');
  await expect(retry).toContainText(/ENOENT|No such file/);
  const first = table.locator('[role="row"][data-attempt="1"]').filter({ hasText: 'pixel_values' }).first();
  await expect(first).toContainText('attempt 1/2');
  await expect(first).toContainText('written, not read');
  await retry.getByRole('button', { name: /^Details of pixel_values/ }).click();
  await expect(page.getByTestId('event-details')).toContainText('2 of 2: the same tensor sent again inline');
  const strip = page.getByTestId('traffic-verdicts');
  await expect(strip.locator(`li[data-worker="${b.url}"]`)).toHaveAttribute('data-outcome', 'inline');
  await expect(strip.locator(`li[data-worker="${b.url}"]`)).toContainText("could not read the router's /dev/shm files");
  await expect(strip.locator(`li[data-worker="${a.url}"]`)).toContainText("auto: the worker shares the router's /dev/shm");

  // The histogram counts exactly the table's rows, whatever the filter.
  await page.getByTestId('filter-path-shm').check();
  await expect
    .poll(async () => (await page.getByTestId('histogram-count').textContent())?.match(/^(\d+)/)?.[1])
    .toBe((await page.getByTestId('row-count').textContent())?.trim());
  await page.getByTestId('filter-path-inline').check();
  await expect
    .poll(async () => (await page.getByTestId('histogram-count').textContent())?.match(/^(\d+)/)?.[1])
    .toBe((await page.getByTestId('row-count').textContent())?.trim());
  await shot(page, testInfo, 'traffic-retry-1024', { docs: true });

  // The same at 1440.
  await page.setViewportSize({ width: 1440, height: 900 });
  await goTo(page, 'workers');
  await expect(row(page, b.url).getByTestId('next-request')).toHaveAttribute('data-outcome', 'inline');
  await expect(row(page, b.url).getByTestId('shm-lane-broken')).toBeVisible();
});

test('resetting the broken lane is refused while the checks fail, naming them; reset anyway resets', async ({ page }) => {
  await page.setViewportSize({ width: 1024, height: 700 });
  await openConsole(page, serve, 'doctor');
  await page.getByRole('combobox', { name: 'Worker' }).selectOption(b.url);
  await page.getByRole('button', { name: /Run checks|Check again/ }).click();
  const lane = page.getByTestId('checklist').locator('[data-step="shm_lane"]');
  await expect(lane).toHaveAttribute('data-ok', 'false');
  await lane.getByRole('button', { name: 'Reset the SHM lane' }).click();
  const refused = page.getByTestId('reset-refused');
  await expect(refused).toContainText('Not reset');
  await expect(refused.locator('li[data-step="same_st_dev"]')).toBeVisible();
  await expect(refused.locator('li[data-step="probe_file_read"]')).toContainText(/ENOENT|No such file/);
  const list = await serve.call<{ workers: Array<{ url: string; shmLane: unknown }> }>('workers.list');
  expect(list.workers.find((w) => w.url === b.url)?.shmLane).not.toBeNull();
  await refused.getByRole('button', { name: 'Reset anyway' }).click();
  await expect(page.getByTestId('checklist').locator('[data-step="shm_lane"]')).toHaveCount(0);
  const after = await serve.call<{ workers: Array<{ url: string; shmLane: unknown }> }>('workers.list');
  expect(after.workers.find((w) => w.url === b.url)?.shmLane).toBeNull();
});

test('a broken lane reaches Overview within a second; Overview never paints a state that is not so', async ({ page }) => {
  await page.setViewportSize({ width: 1024, height: 700 });
  // The lane was reset: the warning is not there. Open Overview and watch for it.
  await openConsole(page, serve, 'overview');
  await expect(page.locator('li[data-kind="shm_read_failed"]')).toHaveCount(0);
  // When the warning is first on the page (checked every 20 ms).
  const seen = page.waitForFunction(() => (document.querySelector('li[data-kind="shm_read_failed"]') ? Date.now() : 0), undefined, {
    polling: 20,
    timeout: 5000,
  });
  const test = await serve.call<{ status: number }>('traffic.sendTestRequest', { url: b.url, width: 448, height: 448, format: 'png' });
  const brokeAt = Date.now();
  expect(test.status).toBe(200);
  const warnedAt = await (await seen).jsonValue();
  expect(warnedAt - brokeAt, 'the warning reached the screen').toBeLessThan(1000);
  await expect(page.locator('li[data-kind="shm_read_failed"]')).toBeVisible();

  // All clear again (the lane reset), then away to another screen; meanwhile the lane breaks and
  // traffic flows. Coming back, "All clear" must never show, nor idle rates.
  // B back on auto, with the operator's (wrong) label that it shares our /dev/shm: nothing to warn about until a request proves otherwise.
  const view = await serve.call<{ revision: number; config: { workers: Array<Record<string, unknown>> } }>('config.get');
  const token = (await serve.call<{ host: { token: string } }>('overview')).host.token;
  const workers = view.config.workers.map((w) => (w.url === b.url ? { ...w, multimodal_tensor_transport: undefined, labels: { shm_namespace_id: token } } : w));
  await serve.call('config.apply', { draft: { ...view.config, workers }, expectedRevision: view.revision });
  await serve.call('workers.resetShmLane', { url: b.url, force: true });
  await expect(page.locator('#warnings-title').locator('xpath=ancestor::section')).toContainText('All clear');
  await goTo(page, 'router');
  expect((await serve.call<{ status: number }>('traffic.sendTestRequest', { url: b.url, width: 448, height: 448, format: 'png' })).status).toBe(200);
  for (let i = 0; i < 4; i++) expect(await apiChat(serve, 320, 240)).toBe(200);
  // Watch every frame from the click on: "All clear" must never be on the screen.
  const claimed = page
    .waitForFunction(() => document.body.textContent?.includes('All clear') === true, undefined, { polling: 'raf', timeout: 2500 })
    .then(
      () => 'All clear was shown',
      () => 'never',
    );
  await goTo(page, 'overview');
  const rates = page.locator('#rates-title').locator('xpath=ancestor::section');
  // Traffic went through in the last five seconds: the first paint does not say 0.0/s for both paths.
  const shown = await rates.locator('tbody td.num').allTextContents();
  expect(
    shown.some((t) => !/^0\.0\/s$/.test(t.trim())),
    `rates on first paint: ${shown.join(', ')}`,
  ).toBe(true);
  expect(await claimed).toBe('never');
  await expect(page.locator('li[data-kind="shm_read_failed"]')).toBeVisible();
});

test('a router setting a start flag gave, changed in the console: the review, the toast and Overview say a restart sets it back, and it does', async ({
  page,
}, testInfo) => {
  await page.setViewportSize({ width: 1024, height: 700 });
  await openConsole(page, serve, 'router');
  await expect(page.getByTestId('start-flag-multimodal_tensor_transport')).toContainText('--multimodal-tensor-transport auto');
  await page
    .getByRole('group', { name: 'multimodal_tensor_transport' })
    .getByRole('radio', { name: /^inline / })
    .check();
  await page.getByRole('region', { name: 'Unapplied changes' }).getByRole('button', { name: 'Review & apply' }).click();
  const dialog = page.getByRole('dialog', { name: 'Review changes' });
  const untilRestart = dialog.getByTestId('review-until-restart');
  await expect(untilRestart).toContainText('Until the next restart only');
  await expect(untilRestart).toContainText('--multimodal-tensor-transport auto');
  await shot(page, testInfo, 'review-until-restart-1024', { docs: true });
  await dialog.getByRole('button', { name: 'Apply', exact: true }).click();
  const toast = page.getByRole('status').filter({ hasText: /Applied revision/ });
  await expect(toast).toContainText('Until the next restart only');
  await expect(toast).toContainText(`written to ${serve.configFile}`);
  await goTo(page, 'overview');
  await expect(page.getByTestId('sync-state')).toContainText('a restart changes 1 setting');
  await expect(page.getByTestId('sync-state')).toContainText('"inline" now, "auto" after a restart');
  await expect(page.locator('li[data-kind="until_restart"]')).toContainText('--multimodal-tensor-transport auto');

  // The token: a reload of the tab keeps it.
  await page.reload();
  await expect(page.getByRole('heading', { level: 1, name: 'Overview' })).toBeVisible();
  await expect(page.getByText('This page needs the console token')).toHaveCount(0);

  // What Overview said: a restart with the same flags sets it back to auto, the file keeps the change.
  const dir = serve.dir;
  await serve.stop({ keep: true });
  serve = await startServe({ config: '', flags: FLAGS, again: serve });
  expect(serve.dir).toBe(dir);
  const view = await serve.call<{ config: { multimodal_tensor_transport: string } }>('config.get');
  expect(view.config.multimodal_tensor_transport).toBe('auto');

  // The new console URL pasted into the open tab: taken without a reload (the page keeps its marker).
  await page.evaluate(() => ((window as unknown as { __sameDocument: boolean }).__sameDocument = true));
  // Same origin (the same console port), a new fragment: the browser does not reload the page.
  await page.goto(`${serve.url}#token=${serve.token}`);
  await expect(page.getByRole('heading', { level: 1, name: 'Overview' })).toBeVisible();
  expect(page.url()).not.toContain('token');
  await expect(page.getByTestId('verdicts')).toBeVisible();
  await expect(page.getByText(/missing or wrong console token/)).toHaveCount(0);
  expect(await page.evaluate(() => (window as unknown as { __sameDocument?: boolean }).__sameDocument)).toBe(true);
});
