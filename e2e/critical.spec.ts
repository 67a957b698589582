// Critical states on a running `mmtc serve` under EPD: the encode worker killed (kill -9)
// turns the banner on whatever screen is open, and /health, to degraded within 5 s, naming
// the worker and that every request with an image fails; an image request then gets 503;
// the worker started again on its address, both are back to ok within 30 s.
import { expect, test } from '@playwright/test';
import { apiChat, goTo, openConsole, startRoleWorker, startServe, waitHealthy, type Serve } from './rig.ts';

type RoleWorker = Awaited<ReturnType<typeof startRoleWorker>>;
const rig = {} as { encode: RoleWorker; prefill: RoleWorker; decode: RoleWorker; serve: Serve; routerUrl: string };

test.beforeAll(async () => {
  const [encode, prefill, decode] = await Promise.all([startRoleWorker('encode'), startRoleWorker('prefill'), startRoleWorker('decode')]);
  Object.assign(rig, { encode, prefill, decode });
  const entry = (w: RoleWorker, type: string) =>
    `  - url: ${w.url}\n    worker_type: ${type}\n${w.bootstrapPort ? `    bootstrap_port: ${w.bootstrapPort}\n` : ''}`;
  rig.serve = await startServe({
    config: `disaggregation: epd\nmultimodal_tensor_transport: auto\nhealth_check_interval_secs: 0.5\nworkers:\n${entry(encode, 'encode')}${entry(prefill, 'prefill')}${entry(decode, 'decode')}`,
  });
  await waitHealthy(rig.serve, 3);
  rig.routerUrl = (await rig.serve.call<{ router: { url: string } }>('overview')).router.url;
});
test.afterAll(async () => {
  const files = rig.serve?.shmFiles() ?? [];
  await rig.serve?.stop();
  for (const w of [rig.encode, rig.prefill, rig.decode]) await w?.stop();
  expect(files).toEqual([]);
});

async function health(): Promise<{ httpStatus: number; status: string; critical: Array<{ role: string | null; message: string }> }> {
  const res = await fetch(`${rig.routerUrl}/health`);
  return { httpStatus: res.status, ...((await res.json()) as { status: string; critical: Array<{ role: string | null; message: string }> }) };
}

test('EPD: the encode worker killed turns the banner and /health to degraded within 5 s, and back within 30 s of its return', async ({ page }) => {
  test.setTimeout(120_000);
  const { serve, encode } = rig;
  await openConsole(page, serve, 'traffic');
  const banner = page.getByTestId('critical-banner');
  await expect(banner).toHaveCount(0);
  expect(await health()).toMatchObject({ httpStatus: 200, status: 'ok', critical: [] });
  expect(await apiChat(serve, 320, 240)).toBe(200);

  const port = Number(new URL(encode.url.replace('grpc:', 'http:')).port);
  encode.kill();
  const killedAt = Date.now();
  await expect(banner).toBeVisible({ timeout: 5_000 });
  await expect(banner).toContainText('Degraded: requests are failing');
  await expect(banner).toContainText(`no healthy encode worker: every request with an image fails with 503 (${encode.url}: `);
  await expect(banner).toContainText('What to do: restart or bring back the encode worker');
  const down = await health();
  expect(Date.now() - killedAt).toBeLessThan(5_000);
  expect(down.httpStatus).toBe(200);
  expect(down.status).toBe('degraded');
  expect(down.critical.map((c) => c.role)).toEqual(['encode']);
  // Every screen shows it, and a client's image request is refused as it says.
  for (const screen of ['overview', 'workers', 'doctor'] as const) {
    await goTo(page, screen);
    await expect(banner).toContainText('no healthy encode worker');
  }
  expect(await apiChat(serve, 320, 240)).toBe(503);

  rig.encode = await startRoleWorker('encode', { port, ...(encode.bootstrapPort ? { bootstrapPort: encode.bootstrapPort } : {}) });
  const backAt = Date.now();
  await expect(banner).toHaveCount(0, { timeout: 30_000 });
  await expect.poll(async () => (await health()).status, { timeout: 30_000 - (Date.now() - backAt) }).toBe('ok');
  expect(Date.now() - backAt).toBeLessThan(30_000);
  expect(await apiChat(serve, 320, 240)).toBe(200);
});
