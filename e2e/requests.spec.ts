// Requests in the console, against real `mmtc serve` processes and reference workers: a request
// that fails (a worker slower than request_timeout_secs: 504) shows as failed with its error on
// Requests and on Traffic (its tensor rows marked, the row's request opening it in Requests),
// and the waterfall of an EPD request shows every leg (the image's encode, the prefill, the
// decode) with its worker.
import { expect, test } from '@playwright/test';
import { apiChatRequest, goTo, openConsole, shot, startRoleWorker, startServe, startWorker, waitHealthy, type Serve, type Worker } from './rig.ts';

type RoleWorker = Awaited<ReturnType<typeof startRoleWorker>>;
const rig = {} as { slow: Worker; slowServe: Serve; encode: RoleWorker; prefill: RoleWorker; decode: RoleWorker; epdServe: Serve };

test.beforeAll(async () => {
  const [slow, encode, prefill, decode] = await Promise.all([
    startWorker('tokenspeed', ['--delay-ms', '4000']),
    startRoleWorker('encode'),
    startRoleWorker('prefill'),
    startRoleWorker('decode'),
  ]);
  Object.assign(rig, { slow, encode, prefill, decode });
  rig.slowServe = await startServe({ config: `request_timeout_secs: 1\nhealth_check_interval_secs: 0.5\nworkers:\n  - url: ${slow.url}\n` });
  const entry = (w: RoleWorker, type: string) =>
    `  - url: ${w.url}\n    worker_type: ${type}\n${w.bootstrapPort ? `    bootstrap_port: ${w.bootstrapPort}\n` : ''}`;
  rig.epdServe = await startServe({
    config: `disaggregation: epd\nmultimodal_tensor_transport: auto\nhealth_check_interval_secs: 0.5\nworkers:\n${entry(encode, 'encode')}${entry(prefill, 'prefill')}${entry(decode, 'decode')}`,
  });
  await waitHealthy(rig.slowServe, 1);
  await waitHealthy(rig.epdServe, 3);
});
test.afterAll(async () => {
  const files = [...(rig.slowServe?.shmFiles() ?? []), ...(rig.epdServe?.shmFiles() ?? [])];
  await rig.slowServe?.stop();
  await rig.epdServe?.stop();
  for (const w of [rig.slow, rig.encode, rig.prefill, rig.decode]) await w?.stop();
  expect(files).toEqual([]);
});

test('a failed request shows as failed with its error on Requests and on Traffic, and Traffic opens it in Requests', async ({ page }, testInfo) => {
  const { slowServe: serve } = rig;
  await openConsole(page, serve, 'requests');
  const reply = await apiChatRequest(serve, 320, 240);
  expect(reply.status).toBe(504);
  // The failed request's id and error, as the router kept them.
  const listed = await serve.call<{ requests: Array<{ id: string; status: number; error?: string }> }>('requests.list', { status: 'failed' });
  const failed = listed.requests[0]!;
  expect(failed.status).toBe(504);
  const error = failed.error!;
  expect(error).toMatch(/./);

  const row = page.getByTestId('request-table').locator(`[data-request="${failed.id}"]`);
  await expect(row.getByTestId('request-failed')).toHaveText('failed 504');
  await expect(row).toContainText(error);
  // Filters: Failed keeps it, OK does not.
  await page.getByTestId('filter-status-ok').check({ force: true });
  await expect(row).toHaveCount(0);
  await page.getByTestId('filter-status-failed').check({ force: true });
  await expect(row).toBeVisible();
  await row.click();
  const details = page.getByTestId('request-details');
  await expect(details.getByTestId('request-outcome')).toContainText(`failed 504 ${error}`);
  const leg = details.getByTestId('waterfall-leg');
  await expect(leg).toHaveCount(1);
  await expect(leg).toContainText(rig.slow.url.replace('grpc://', ''));
  await expect(leg.getByTestId('leg-outcome')).toContainText(`failed: ${error}`);
  await shot(page, testInfo, 'requests-failed', { docs: true });

  // Traffic: its tensor rows are marked failed, with the error; the row's request opens Requests.
  await goTo(page, 'traffic');
  const tensorRows = page.getByTestId('event-table').getByRole('row').filter({ hasText: failed.id });
  await expect(tensorRows.first().getByTestId('request-failed')).toHaveText('failed 504');
  await expect(tensorRows.first().getByTestId('request-failed')).toHaveAttribute('title', `its request failed: HTTP 504, ${error}`);
  await tensorRows.first().click();
  await expect(page.getByTestId('event-details')).toContainText(`HTTP 504 · ${error}`);
  await tensorRows
    .first()
    .getByRole('link', { name: `Request ${failed.id} in Requests` })
    .click();
  await page.getByRole('heading', { level: 1, name: 'Requests' }).waitFor();
  await expect(page.getByTestId('request-details')).toContainText(failed.id);
  await expect(page.getByTestId('request-details').getByTestId('request-outcome')).toContainText(error);
  expect(serve.shmFiles()).toEqual([]);
});

test('the waterfall of an EPD request shows every leg: the encode of its image, the prefill, the decode, each on its worker', async ({ page }, testInfo) => {
  const { epdServe: serve, encode, prefill, decode } = rig;
  await openConsole(page, serve, 'requests');
  const reply = await apiChatRequest(serve, 320, 240);
  expect(reply.status).toBe(200);
  const row = page.getByTestId('request-table').locator(`[data-request="${reply.id}"]`);
  await expect(row).toContainText('200');
  await expect(row).toContainText(`encode 0 ${encode.url.replace('grpc://', '')}`);
  await row.click();
  const legs = page.getByTestId('request-details').getByTestId('waterfall-leg');
  await expect(legs).toHaveCount(3);
  await expect(legs.nth(0)).toHaveAttribute('data-leg', 'encode');
  await expect(legs.nth(0)).toContainText('(image 0)');
  await expect(legs.nth(0)).toContainText(encode.url.replace('grpc://', ''));
  await expect(legs.nth(1)).toHaveAttribute('data-leg', 'prefill');
  await expect(legs.nth(1)).toContainText(prefill.url.replace('grpc://', ''));
  await expect(legs.nth(2)).toHaveAttribute('data-leg', 'decode');
  await expect(legs.nth(2)).toContainText(decode.url.replace('grpc://', ''));
  await expect(legs.nth(2)).toContainText('first token after');
  for (let i = 0; i < 3; i++) await expect(legs.nth(i).getByTestId('leg-outcome')).toHaveText('ok');
  // The leg filter keeps it (it had an encode leg).
  await page.getByLabel('Leg').selectOption('encode');
  await expect(row).toBeVisible();
  await shot(page, testInfo, 'requests-epd', { docs: true });
  expect(serve.shmFiles()).toEqual([]);
});
