// The SHM lane failing for real. A reference worker running as nobody cannot open the
// router's /dev/shm files (0600, owned by root): its first request is retried inline and
// its lane is marked broken, which the Workers table, Overview and Doctor show with the
// error, and Doctor's "Reset the SHM lane" clears (workers.resetShmLane, then the checklist
// again). And a full SHM budget (multimodal_shm_max_outstanding_bytes below one encoder
// tensor): the tensor goes inline as shm_budget_exceeded, which the traffic table and its
// reason filter show, and Overview's in-flight gauge names the limit.
import { expect, test } from '@playwright/test';
import { goTo, isRoot, openConsole, shot, startServe, startWorker, startWorkerAsNobody, waitHealthy, type Serve, type Worker } from './rig.ts';

// How the worker says it could not open the router's file: its reader's errno, or, for a bfloat16
// encoder input its TokenSpeed scheduler attaches read-write, Python's PermissionError.
const CANNOT_OPEN = /EACCES|\[Errno 13\] Permission denied/;

let normal: Worker;
let nobody: Worker | undefined;
let serve: Serve;

test.beforeAll(async () => {
  normal = await startWorker('tokenspeed');
  if (isRoot) nobody = await startWorkerAsNobody();
  const workers = [normal, ...(nobody ? [nobody] : [])].map((w) => `  - url: ${w.url}\n    runtime: tokenspeed\n`).join('');
  serve = await startServe({ config: `multimodal_tensor_transport: shm\nhealth_check_interval_secs: 0.5\nworkers:\n${workers}` });
  await waitHealthy(serve, nobody ? 2 : 1);
});

test.afterAll(async () => {
  const files = serve?.shmFiles() ?? [];
  await serve?.stop();
  await normal?.stop();
  await nobody?.stop();
  expect(files).toEqual([]);
});

test('a worker that cannot read our files: lane broken on Workers, Overview and Doctor; reset clears it', async ({ page }, testInfo) => {
  test.skip(!isRoot, "needs root: only a root router's 0600 files in /dev/shm are unreadable to a worker started as nobody (setpriv)");
  const url = nobody!.url;
  await openConsole(page, serve, 'doctor');
  await page.getByRole('combobox', { name: 'Worker' }).selectOption(url);
  await page.getByRole('button', { name: 'Send test tensor' }).click();
  // The request still succeeds: the router wrote the file, the worker could not open it, and
  // the router sent the tensor again inline.
  const result = page.getByTestId('test-result');
  await expect(result).toContainText('HTTP 200');
  await expect(result.locator('tbody[data-attempt="unread"]')).toContainText('the worker could not read it');
  await expect(result.locator('tbody[data-attempt="unread"] tr[data-tensor="encoder_input"]')).toHaveAttribute('data-path', 'shm');
  const final = result.locator('tbody[data-attempt="final"] tr[data-tensor="encoder_input"]');
  await expect(final).toHaveAttribute('data-path', 'inline');
  // The serve runs mode shm: the retry's reason says so (not auto_…).
  await expect(final).toContainText('shm_worker_read_failed');
  await expect(result.locator('tbody[data-attempt="final"]')).toContainText(CANNOT_OPEN);

  await goTo(page, 'workers');
  const row = page.getByTestId('workers-table').locator(`tr[data-worker="${url}"]`);
  const badge = row.getByTestId('shm-lane-broken');
  await expect(badge).toContainText('SHM lane broken');
  await expect(badge).toHaveAttribute('title', CANNOT_OPEN);
  await expect(row).toContainText('worker cannot read /dev/shm');
  await badge.click();
  await expect(page.getByTestId('workers-table').getByTestId('shm-lane-note')).toContainText(CANNOT_OPEN);
  await shot(page, testInfo, 'workers-shm-lane', { docs: true });
  // The worker that can read them is not affected.
  await expect(page.getByTestId('workers-table').locator(`tr[data-worker="${normal.url}"]`).getByTestId('shm-lane-broken')).toHaveCount(0);

  await goTo(page, 'overview');
  await expect(page.locator('#warnings-title').locator('xpath=ancestor::section').locator('li[data-kind="shm_read_failed"]')).toContainText('SHM lane broken');

  await goTo(page, 'doctor');
  await page.getByRole('combobox', { name: 'Worker' }).selectOption(url);
  // Before a check, the note says it (with the reset); the checklist then carries it.
  await expect(page.getByTestId('shm-lane-note')).toContainText(CANNOT_OPEN);
  await page.getByRole('button', { name: /Run checks|Check again/ }).click();
  const lane = page.getByTestId('checklist').locator('[data-step="shm_lane"]');
  await expect(lane).toHaveAttribute('data-ok', 'false');
  await expect(lane).toContainText(CANNOT_OPEN);
  await expect(page.getByTestId('shm-lane-note')).toHaveCount(0);
  await expect(page.getByRole('button', { name: 'Reset the SHM lane' })).toHaveCount(1);
  await shot(page, testInfo, 'doctor-shm-lane', { docs: true });
  await lane.getByRole('button', { name: 'Reset the SHM lane' }).click();
  // The uid is unchanged, so the probe still fails: the reset is refused, naming it.
  const refused = page.getByTestId('reset-refused');
  await expect(refused.locator('li[data-step="probe_file_read"]')).toContainText(CANNOT_OPEN);
  await refused.getByRole('button', { name: 'Reset anyway' }).click();
  // Reset, then checked again: the lane step is gone (the probe still fails, honestly).
  await expect(page.getByTestId('checklist').locator('[data-step="shm_lane"]')).toHaveCount(0);
  await expect(page.getByTestId('checklist').locator('[data-step="probe_file_read"]')).toHaveAttribute('data-ok', 'false');
  await expect(page.getByTestId('diagnose-verdict')).not.toContainText('shm_worker_read_failed');

  await goTo(page, 'workers');
  await expect(row.getByTestId('shm-lane-broken')).toHaveCount(0);
  const list = await serve.call<{ workers: Array<{ url: string; shmLane: unknown }> }>('workers.list');
  expect(list.workers.find((w) => w.url === url)?.shmLane).toBeNull();
});

test('a full SHM budget: the encoder tensor goes inline as shm_budget_exceeded, in the table and the reason filter', async ({ page }) => {
  const view = await serve.call<{ revision: number; config: Record<string, unknown> }>('config.get');
  await serve.call('config.apply', { draft: { ...view.config, multimodal_shm_max_outstanding_bytes: 4096 }, expectedRevision: view.revision });
  const r = await serve.call<{ status: number; events: Array<{ tensor: string; path: string; reason: string }> }>('traffic.sendTestRequest', {
    url: normal.url,
    width: 448,
    height: 448,
    format: 'png',
  });
  expect(r.status).toBe(200);
  expect(r.events.find((e) => e.tensor === 'encoder_input')).toMatchObject({ path: 'inline', reason: 'shm_budget_exceeded' });

  await openConsole(page, serve, 'overview');
  await expect(page.getByTestId('outstanding')).toContainText('of 4.00 KiB');

  await goTo(page, 'traffic');
  await page.getByRole('checkbox', { name: /show console traffic/ }).check();
  const reason = page.getByRole('combobox', { name: 'Reason' });
  await expect(reason.locator('option', { hasText: 'shm_budget_exceeded' })).toHaveCount(1);
  await reason.selectOption({ label: (await reason.locator('option', { hasText: 'shm_budget_exceeded' }).textContent())! });
  const table = page.getByRole('table', { name: 'Tensor events, newest first' });
  const row = table.getByRole('row').filter({ hasText: 'encoder_input' }).first();
  // The reason in words on the row, its code in the cell's title.
  await expect(row).toContainText('/dev/shm budget full');
  await expect(row.locator('.reason-fallback')).toHaveAttribute('title', /^shm_budget_exceeded: /);
  await expect(table.getByRole('row').filter({ hasText: 'below the threshold' })).toHaveCount(0);
});
