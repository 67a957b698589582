// Disaggregated serving in the console: two encode workers (one sharing /dev/shm, one in a
// /dev/shm of its own), a prefill and a decode worker under `disaggregation: epd` and `auto`.
// Workers shows the topology with each encode worker's own verdict (SHM for the near one,
// inline for the far one); a client's request with two images shows on Traffic with each
// tensor's leg, and the event's details name its role and room.
import { expect, test } from '@playwright/test';
import { apiChatRequest, goTo, isRoot, openConsole, shot, startRoleWorker, startServe, waitHealthy, type Serve, type Worker } from './rig.ts';

test.skip(!isRoot, 'the far encode worker needs a mount namespace (root)');

const rig = {} as { near: Worker; far: Worker; prefill: Worker; decode: Worker; serve: Serve };
test.beforeAll(async () => {
  const [near, far, prefill, decode] = await Promise.all([startRoleWorker('encode'), startRoleWorker('encode', { privateShm: true }), startRoleWorker('prefill'), startRoleWorker('decode')]);
  Object.assign(rig, { near, far, prefill, decode });
  const entry = (w: Worker & { bootstrapPort: number | undefined }, type: string) => `  - url: ${w.url}\n    worker_type: ${type}\n${w.bootstrapPort ? `    bootstrap_port: ${w.bootstrapPort}\n` : ''}`;
  rig.serve = await startServe({ config: `disaggregation: epd\nencode_policy: round_robin\nmultimodal_tensor_transport: auto\nhealth_check_interval_secs: 0.5\nworkers:\n${entry(near, 'encode')}${entry(far, 'encode')}${entry(prefill, 'prefill')}${entry(decode, 'decode')}` });
  await waitHealthy(rig.serve, 4);
});
test.afterAll(async () => {
  const files = rig.serve?.shmFiles() ?? [];
  await rig.serve?.stop();
  for (const w of [rig.near, rig.far, rig.prefill, rig.decode]) await w?.stop();
  expect(files).toEqual([]);
});

test('EPD: the topology with each encode worker\'s own verdict, and Traffic rows by leg', async ({ page }, testInfo) => {
  const { serve, near, far } = rig;
  await openConsole(page, serve, 'workers');
  const topology = page.getByTestId('topology');
  await expect(topology.locator('[data-role="encode"]')).toContainText('(2)');
  await expect(topology.locator('[data-role="prefill"]')).toContainText('(1)');
  await expect(topology.locator('[data-role="decode"]')).toContainText("gets no pixel tensor");
  const encode = topology.locator('[data-role="encode"] li');
  await expect(encode.filter({ hasText: near.url.replace('grpc://', '') })).toContainText('SHM');
  await expect(encode.filter({ hasText: far.url.replace('grpc://', '') })).toContainText('inline');
  await expect(page.getByTestId('workers-table').locator(`tr[data-worker="${rig.decode.url}"]`).getByTestId('no-pixels')).toContainText('no pixel tensors: the encode workers get them');
  await expect(page.getByTestId('workers-table').locator(`tr[data-worker="${near.url}"]`).getByTestId('no-pixels')).toHaveCount(0);
  for (const scheme of ['light', 'dark'] as const) {
    await page.emulateMedia({ colorScheme: scheme });
    await shot(page, testInfo, 'workers-epd', { docs: true, scheme });
  }
  await page.emulateMedia({ colorScheme: 'light' });

  await goTo(page, 'overview');
  await expect(page.getByRole('region', { name: /^Warnings/ })).toContainText(`encode workers disagree about /dev/shm: ${near.url} gets its images by SHM, ${far.url} inline`);

  await goTo(page, 'traffic');
  // Two requests: round robin gives each encode worker one of them.
  for (let i = 0; i < 2; i++) expect((await apiChatRequest(serve, 320, 240)).status).toBe(200);
  const rows = page.getByTestId('event-table').getByRole('row').filter({ hasText: 'encoder_input' });
  await expect(rows.filter({ hasText: near.url.replace('grpc://', '') }).first().locator('.tag-leg')).toHaveText('encode');
  await expect(rows.filter({ hasText: near.url.replace('grpc://', '') }).first().locator('[data-path]')).toHaveAttribute('data-path', 'shm');
  await expect(rows.filter({ hasText: far.url.replace('grpc://', '') }).first().locator('[data-path]')).toHaveAttribute('data-path', 'inline');
  // The leg filter: only the encode workers' tensors.
  await page.getByLabel('Leg').selectOption('encode');
  await expect(page.getByTestId('event-table').getByRole('row').filter({ hasText: 'patches_per_image' }).locator('.tag-leg')).toHaveText(['encode', 'encode']);
  await rows.first().click();
  await expect(page.getByTestId('event-details')).toContainText("the request's encode worker, bootstrap room");
  await shot(page, testInfo, 'traffic-epd', { docs: true });
  expect(serve.shmFiles()).toEqual([]);
});
