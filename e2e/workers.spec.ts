// Workers added and removed from the console (workers.add / workers.remove, each reviewed),
// undo from the toast (a reviewed rollback), a worker drained and returned to rotation, the
// traffic table's pause/resume catching up from the server, and the keyboard path into the page.
import { expect, test } from '@playwright/test';
import { apiChatRequest, goTo, openConsole, shot, startServe, startWorker, waitHealthy, type Serve, type Worker } from './rig.ts';

let worker: Worker;
let serve: Serve;

test.beforeAll(async () => {
  worker = await startWorker('vllm');
  // No worker configured: the serve runs its embedded reference worker.
  serve = await startServe({ config: 'health_check_interval_secs: 0.5\n' });
});

test.afterAll(async () => {
  const files = serve?.shmFiles() ?? [];
  await serve?.stop();
  await worker?.stop();
  expect(files).toEqual([]);
});

test('add a worker (reviewed), undo it from the toast, remove it', async ({ page }, testInfo) => {
  await openConsole(page, serve, 'workers');
  const table = page.getByTestId('workers-table');
  await expect(table).toContainText('embedded reference worker');
  const embedded = (await serve.call<{ workers: Array<{ url: string; embedded: boolean }> }>('workers.list')).workers.find((w) => w.embedded)!;
  await expect(table.locator(`tr[data-worker="${embedded.url}"]`)).toContainText('embedded reference worker');
  await page.getByRole('button', { name: 'Add worker…' }).click();
  // The add dialog says up front that the new worker replaces the embedded one.
  await expect(page.getByTestId('replaces-embedded')).toContainText(`replaces the embedded reference worker (${embedded.url})`);
  await page.getByRole('textbox', { name: 'URL' }).fill('grpc://nowhere');
  await expect(page.getByText('expected grpc://host:port or unix:///path/to/socket')).toBeVisible();
  await page.getByRole('textbox', { name: 'URL' }).fill(worker.url);
  await page.getByRole('combobox', { name: 'Runtime' }).selectOption('vllm');
  await shot(page, testInfo, 'workers-add', { docs: true });
  await page.getByRole('button', { name: 'Review and add…' }).click();
  const dialog = page.getByRole('dialog', { name: `Add worker ${worker.url}` });
  await expect(dialog.getByRole('table')).toContainText('worker added');
  await expect(dialog).toContainText('It replaces the embedded reference worker');
  await expect(dialog.getByRole('row').filter({ hasText: embedded.url })).toContainText('worker removed'); // the embedded stand-in
  const start = (await serve.call<{ revision: number }>('config.get')).revision;
  await dialog.getByRole('button', { name: 'Add worker' }).click();
  const toast = page.getByRole('status').filter({ hasText: `Applied revision ${start + 1}` });
  await expect(toast).toBeVisible();
  await expect(table.locator(`tr[data-worker="${worker.url}"]`)).toContainText('healthy');
  await expect(table).not.toContainText('embedded reference worker');

  // Undo is a reviewed rollback to the revision the change was based on.
  await toast.getByRole('button', { name: `Undo (roll back to ${start})` }).click();
  const undo = page.getByRole('dialog', { name: `Undo revision ${start + 1}` });
  await expect(undo.getByRole('table')).toContainText('worker removed');
  await undo.getByRole('button', { name: `Roll back to revision ${start}` }).click();
  await expect(page.getByRole('status').filter({ hasText: `Applied revision ${start + 2}` })).toBeVisible();
  await expect(table).not.toContainText(worker.url);
  // The revision it went back to configured no worker: the embedded worker stands in again, as itself.
  await expect(table.locator(`tr[data-worker="${embedded.url}"]`)).toContainText('embedded reference worker');

  // Add again through the API, remove through the console.
  const view = await serve.call<{ revision: number }>('config.get');
  await serve.call('workers.add', { worker: { url: worker.url }, expectedRevision: view.revision });
  await expect(table).toContainText(worker.url);
  await page.getByRole('button', { name: `Remove ${worker.url}` }).click();
  const remove = page.getByRole('dialog', { name: `Remove worker ${worker.url}` });
  await expect(remove.getByRole('table')).toContainText('worker removed');
  await remove.getByRole('button', { name: 'Remove worker' }).click();
  await expect(page.getByRole('status').filter({ hasText: `Applied revision ${view.revision + 2}` })).toBeVisible();
  await expect(table).not.toContainText(worker.url);
  // The last configured worker removed: the embedded worker stands in again, as at start.
  await expect(table.locator(`tr[data-worker="${embedded.url}"]`)).toContainText('embedded reference worker');
});

test("the worker editor's sentence reads as written to assistive technology: no space before its commas and full stop", async ({ page }) => {
  await openConsole(page, serve, 'workers');
  const embedded = (await serve.call<{ workers: Array<{ url: string; embedded: boolean }> }>('workers.list')).workers.find((w) => w.embedded)!;
  await page.getByRole('button', { name: `Edit ${embedded.url}` }).click();
  const sentence = page.locator('p', { hasText: 'With the applied config: mode' });
  // What a screen reader is given: before, "… from built-in default , threshold … from built-in default ."
  const read = await sentence.ariaSnapshot();
  expect(read).toMatch(/from [a-z-]+(?: [a-z-]+)*, threshold/);
  expect(read).not.toMatch(/ [,.]/);
});

test('traffic: pause holds the table, resume catches up from the server', async ({ page }) => {
  await openConsole(page, serve, 'traffic');
  const table = page.getByRole('table', { name: 'Tensor events, newest first' });
  // The rows of one request's encoder input (rows are identified by the request id the router gave it).
  const encoderRowsOf = (id: string | undefined) =>
    table
      .getByRole('row')
      .filter({ hasText: 'encoder_input' })
      .filter({ hasText: id ?? 'no id' });
  const first = await apiChatRequest(serve, 256, 256);
  expect(first.status).toBe(200);
  await expect(encoderRowsOf(first.id)).toHaveCount(1);
  await page.getByRole('button', { name: /Pause/ }).click();
  const second = await apiChatRequest(serve, 320, 240);
  expect(second.status).toBe(200);
  await expect(page.getByText(/new events not shown/)).toBeVisible();
  await expect(encoderRowsOf(second.id)).toHaveCount(0);
  await expect(encoderRowsOf(first.id)).toHaveCount(1);
  await page.getByRole('button', { name: /Resume/ }).click();
  await expect(encoderRowsOf(second.id)).toHaveCount(1);
  await expect(encoderRowsOf(first.id)).toHaveCount(1);
  await expect(page.getByTestId('dropped')).toContainText('0 dropped');
});

test('keyboard: skip link, navigation and visible focus', async ({ page }) => {
  await openConsole(page, serve);
  await page.keyboard.press('Tab');
  await expect(page.getByRole('link', { name: 'Skip to content' })).toBeFocused();
  await page.keyboard.press('Tab');
  const first = page.getByRole('navigation', { name: 'Screens' }).getByRole('link').first();
  await expect(first).toBeFocused();
  const outline = await first.evaluate((el) => getComputedStyle(el).outlineStyle);
  expect(outline).not.toBe('none');
  await page.keyboard.press('Tab');
  await page.keyboard.press('Enter');
  await expect(page.getByRole('heading', { level: 1, name: 'Router settings' })).toBeVisible();
  await goTo(page, 'overview');
});

test("a worker's sampling defaults on Workers; a request's tensor details show the sampling its worker was sent", async ({ page }, testInfo) => {
  const view = await serve.call<{ revision: number }>('config.get');
  await serve.call('workers.add', { worker: { url: worker.url, runtime: 'vllm' }, expectedRevision: view.revision });
  await openConsole(page, serve, 'workers');
  const row = page.getByTestId('workers-table').locator(`tr[data-worker="${worker.url}"]`);
  await expect(row).toContainText('healthy');
  // The vLLM reference worker publishes the bundled model's generation_config.json.
  await expect(row.getByTestId('sampling-defaults')).toHaveText('sampling defaults: temperature 0.01, top_p 0.001, top_k 1, repetition_penalty 1.05');
  await shot(page, testInfo, 'workers-sampling-defaults', { docs: true });

  // A test request to this worker (the console's own, through the same pipeline).
  const sent = await serve.call<{ status: number; requestId: string }>('traffic.sendTestRequest', { url: worker.url, width: 200, height: 150, format: 'png' });
  expect(sent.status).toBe(200);
  await goTo(page, 'traffic');
  await page.getByRole('checkbox', { name: /show console traffic/ }).check();
  const table = page.getByRole('table', { name: 'Tensor events, newest first' });
  const pixelRow = table.getByRole('row').filter({ hasText: 'pixel_values' }).filter({ hasText: sent.requestId });
  await pixelRow.getByRole('button', { name: /^Details of pixel_values/ }).click();
  const sampling = page.getByTestId('event-details').getByTestId('request-sampling');
  // What the request left out came from the model's defaults; its max_tokens (512) was its own.
  await expect(sampling).toContainText('temperature 0.01 (model default)');
  await expect(sampling).toContainText('repetition_penalty 1.05 (model default)');
  await expect(sampling).toContainText('max_tokens 512');
  await expect(sampling).not.toContainText('max_tokens 512 (model default)');
  await shot(page, testInfo, 'traffic-request-sampling', { docs: true });

  const now = await serve.call<{ revision: number }>('config.get');
  await serve.call('workers.remove', { url: worker.url, expectedRevision: now.revision });
});

test('drain one of two workers from its row: every request goes to the other, until it is returned to rotation', async ({ page }) => {
  const second = await startWorker('tokenspeed');
  try {
    const view = await serve.call<{ revision: number; config: Record<string, unknown> }>('config.get');
    const applied = await serve.call<{ revision: number }>('config.apply', {
      draft: { ...view.config, workers: [{ url: worker.url, runtime: 'vllm' }, { url: second.url }] },
      expectedRevision: view.revision,
    });
    await waitHealthy(serve, 2);
    await openConsole(page, serve, 'workers');
    const table = page.getByTestId('workers-table');
    const drainedRow = table.locator(`tr[data-worker="${worker.url}"]`);
    await page.getByRole('button', { name: `Drain ${worker.url}` }).click();
    await expect(drainedRow.getByTestId('drained')).toContainText(/drained since \d\d:\d\d:\d\d\.\d{3}, nothing in flight$/);
    await expect(page.getByRole('button', { name: `Return to rotation ${worker.url}` })).toBeVisible();
    await expect(table.locator(`tr[data-worker="${second.url}"]`).getByTestId('drained')).toHaveCount(0);

    const servedBy = async () => {
      const sent = await apiChatRequest(serve, 64, 64);
      expect(sent.status).toBe(200);
      return (await serve.call<{ worker?: string } | null>('traffic.request', { requestId: sent.id }))?.worker;
    };
    const during: Array<string | undefined> = [];
    for (let i = 0; i < 4; i++) during.push(await servedBy());
    expect(during).toEqual([second.url, second.url, second.url, second.url]);

    await page.getByRole('button', { name: `Return to rotation ${worker.url}` }).click();
    await expect(drainedRow.getByTestId('drained')).toHaveCount(0);
    await expect(page.getByRole('button', { name: `Drain ${worker.url}` })).toBeVisible();
    const after = new Set([await servedBy(), await servedBy()]);
    expect(after).toEqual(new Set([worker.url, second.url]));

    await serve.call('config.apply', { draft: view.config, expectedRevision: applied.revision });
  } finally {
    await second.stop();
  }
});
