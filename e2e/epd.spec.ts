// Disaggregated serving in the console: two encode workers (one sharing /dev/shm, one in a
// /dev/shm of its own), a prefill and a decode worker under `disaggregation: epd` and `auto`.
// Workers shows the topology with each encode worker's own verdict (SHM for the near one,
// inline for the far one); a client's request with two images shows on Traffic with each
// tensor's leg, and the event's details name its role and room.
import { expect, test, type Page, type TestInfo } from '@playwright/test';
import { apiChatRequest, goTo, isRoot, layoutProblems, openConsole, shot, startRoleWorker, startServe, waitHealthy, type Serve } from './rig.ts';

test.skip(!isRoot, 'the far encode worker needs a mount namespace (root)');

type RoleWorker = Awaited<ReturnType<typeof startRoleWorker>>;

/** docs/screenshots/<name>-light.png and -dark.png of the page as it is, then back to light. */
async function bothSchemes(page: Page, testInfo: TestInfo, name: string): Promise<void> {
  for (const scheme of ['light', 'dark'] as const) {
    await page.emulateMedia({ colorScheme: scheme });
    await shot(page, testInfo, name, { docs: true, scheme });
  }
  await page.emulateMedia({ colorScheme: 'light' });
}
const rig = {} as { near: RoleWorker; far: RoleWorker; prefill: RoleWorker; decode: RoleWorker; serve: Serve };
test.beforeAll(async () => {
  const [near, far, prefill, decode] = await Promise.all([
    startRoleWorker('encode'),
    startRoleWorker('encode', { privateShm: true }),
    startRoleWorker('prefill'),
    startRoleWorker('decode'),
  ]);
  Object.assign(rig, { near, far, prefill, decode });
  const entry = (w: RoleWorker, type: string) =>
    `  - url: ${w.url}\n    worker_type: ${type}\n${w.bootstrapPort ? `    bootstrap_port: ${w.bootstrapPort}\n` : ''}`;
  rig.serve = await startServe({
    config: `disaggregation: epd\nencode_policy: round_robin\nmultimodal_tensor_transport: auto\nhealth_check_interval_secs: 0.5\nworkers:\n${entry(near, 'encode')}${entry(far, 'encode')}${entry(prefill, 'prefill')}${entry(decode, 'decode')}`,
  });
  await waitHealthy(rig.serve, 4);
});
test.afterAll(async () => {
  const files = rig.serve?.shmFiles() ?? [];
  await rig.serve?.stop();
  for (const w of [rig.near, rig.far, rig.prefill, rig.decode]) await w?.stop();
  expect(files).toEqual([]);
});

test("EPD: the topology with each encode worker's own verdict, and Traffic rows by leg", async ({ page }, testInfo) => {
  const { serve, near, far } = rig;
  await openConsole(page, serve, 'workers');
  const topology = page.getByTestId('topology');
  await expect(topology.locator('[data-role="encode"]')).toContainText('(2)');
  await expect(topology.locator('[data-role="prefill"]')).toContainText('(1)');
  await expect(topology.locator('[data-role="decode"]')).toContainText('gets no pixel tensor');
  const encode = topology.locator('[data-role="encode"] li');
  await expect(encode.filter({ hasText: near.url.replace('grpc://', '') })).toContainText('SHM');
  await expect(encode.filter({ hasText: far.url.replace('grpc://', '') })).toContainText('inline');
  await expect(page.getByTestId('workers-table').locator(`tr[data-worker="${rig.decode.url}"]`).getByTestId('no-pixels')).toContainText(
    'no pixel tensors: the encode workers get them',
  );
  await expect(page.getByTestId('workers-table').locator(`tr[data-worker="${near.url}"]`).getByTestId('no-pixels')).toHaveCount(0);
  await bothSchemes(page, testInfo, 'workers-epd');

  await goTo(page, 'overview');
  await expect(page.getByRole('region', { name: /^Warnings/ })).toContainText(
    `encode workers disagree about /dev/shm: ${near.url} gets its images by SHM, ${far.url} inline`,
  );
  await bothSchemes(page, testInfo, 'overview-epd');

  // Each worker's role beside its verdict; the decode and the prefill get no pixel tensor.
  const verdictRow = (w: RoleWorker) => page.getByTestId('verdicts').locator(`tr[data-worker="${w.url}"]`);
  await expect(verdictRow(rig.decode).locator('.tag-leg')).toHaveText('decode');
  await expect(verdictRow(rig.decode).getByTestId('no-pixels')).toBeVisible();
  await expect(verdictRow(rig.prefill).getByTestId('no-pixels')).toBeVisible();
  await expect(verdictRow(near).locator('.tag-leg')).toHaveText('encode');
  await expect(verdictRow(near).getByTestId('no-pixels')).toHaveCount(0);

  await goTo(page, 'traffic');
  // Two requests: round robin gives each encode worker one of them.
  for (let i = 0; i < 2; i++) expect((await apiChatRequest(serve, 320, 240)).status).toBe(200);
  // The throughput chart shows them once their second is complete, with no traffic after them.
  await expect
    .poll(async () => Number(await page.getByRole('img', { name: 'Bytes per second through inline and SHM over the last minute' }).getAttribute('data-sum')), {
      timeout: 5_000,
    })
    .toBeGreaterThan(0);
  const rows = page.getByTestId('event-table').getByRole('row').filter({ hasText: 'encoder_input' });
  await expect(
    rows
      .filter({ hasText: near.url.replace('grpc://', '') })
      .first()
      .locator('.tag-leg'),
  ).toHaveText('encode');
  await expect(
    rows
      .filter({ hasText: near.url.replace('grpc://', '') })
      .first()
      .locator('[data-path]'),
  ).toHaveAttribute('data-path', 'shm');
  await expect(
    rows
      .filter({ hasText: far.url.replace('grpc://', '') })
      .first()
      .locator('[data-path]'),
  ).toHaveAttribute('data-path', 'inline');
  // The leg filter: only the encode workers' tensors.
  await page.getByLabel('Leg').selectOption('encode');
  await expect(page.getByTestId('event-table').getByRole('row').filter({ hasText: 'patches_per_image' }).locator('.tag-leg')).toHaveText(['encode', 'encode']);
  await rows.first().click();
  await expect(page.getByTestId('event-details')).toContainText("the request's encode worker, bootstrap room");
  await bothSchemes(page, testInfo, 'traffic-epd');
  expect(serve.shmFiles()).toEqual([]);
});

test("EPD: Router's serving mode, an encode worker's bootstrap port, and Precedence, Doctor's checks, test tensor and calibration against each encode worker", async ({
  page,
}, testInfo) => {
  test.setTimeout(240_000);
  const { serve, near, far, prefill, decode } = rig;
  await openConsole(page, serve, 'router');
  const mode = page.getByLabel('Serving mode (disaggregation)');
  await expect(mode).toHaveValue('epd');
  await expect(page.getByTestId('role-counts')).toContainText('Workers for epd: 2 encode, 1 prefill, 1 decode.');
  await expect(page.getByLabel('Encode worker policy')).toHaveValue('round_robin');
  await expect(page.getByLabel('Prefill worker policy')).toHaveValue('');
  // A mode whose roles the workers do not have: the validation's message, naming the key, before any apply.
  await mode.selectOption('pd');
  await expect(page.getByTestId('role-counts')).toContainText('2 of another role, which pd does not route to');
  await expect(page.getByText(/an encode worker takes no part under disaggregation pd/).first()).toBeVisible();
  await mode.selectOption('epd');
  await expect(page.getByTestId('role-counts')).not.toContainText('another role');
  await bothSchemes(page, testInfo, 'router-epd');

  // The encode worker's editor shows its bootstrap port; the decode worker's has none.
  await goTo(page, 'workers');
  const row = (w: RoleWorker) => page.getByTestId('workers-table').locator(`tr[data-worker="${w.url}"]`);
  await row(near).getByRole('button', { name: /^Edit/ }).click();
  const port = page.getByLabel('Bootstrap port');
  const applied = String(near.bootstrapPort ?? '');
  await expect(port).toHaveValue(applied);
  // Typed key by key, "7000" is valid on the way to "70000": the draft holds what the field
  // says (the pending bar names it and apply is off), never the last valid value.
  const pending = page.getByRole('region', { name: 'Unapplied changes' });
  for (const typed of ['70000', '1e3', '0x1F']) {
    await port.fill('');
    await port.pressSequentially(typed);
    await expect(
      page.getByText(`invalid value ${typed === '70000' ? typed : `'${typed}'`} for bootstrap_port: expected an integer port 1-65535`).first(),
    ).toBeVisible();
    await expect(pending).toContainText('bootstrap_port');
    await expect(pending.getByRole('button', { name: 'Review & apply' })).toBeDisabled();
  }
  // Discard puts the applied port back in the field, not the text typed before.
  await pending.getByRole('button', { name: 'Discard' }).click();
  await expect(pending).toHaveCount(0);
  await expect(port).toHaveValue(applied);
  await expect(page.getByText('for bootstrap_port: expected')).toHaveCount(0);
  await page
    .getByRole('region', { name: /Edit worker/ })
    .getByRole('button', { name: 'Close' })
    .click();
  // The Add form: an encode worker with a port out of range cannot be added.
  await page.getByRole('button', { name: 'Add worker…' }).click();
  await page.getByRole('textbox', { name: 'URL' }).fill('grpc://127.0.0.1:1');
  await page.getByRole('combobox', { name: 'Role' }).selectOption('encode');
  await page.getByLabel('Bootstrap port').pressSequentially('70000');
  await expect(page.getByText('invalid value 70000 for bootstrap_port: expected an integer port 1-65535')).toBeVisible();
  await expect(page.getByRole('button', { name: 'Review and add…' })).toBeDisabled();
  await page.getByLabel('Bootstrap port').press('Backspace');
  await expect(page.getByRole('button', { name: 'Review and add…' })).toBeEnabled();
  await page.getByRole('region', { name: 'Add a worker' }).getByRole('button', { name: 'Cancel' }).click();
  await row(decode).getByRole('button', { name: /^Edit/ }).click();
  await expect(page.getByLabel('Bootstrap port')).toHaveCount(0);
  await page
    .getByRole('region', { name: /Edit worker/ })
    .getByRole('button', { name: 'Close' })
    .click();

  // Precedence and Doctor: each encode worker gets its own verdict (near SHM, far inline).
  for (const [w, outcome, path] of [
    [near, 'shm', 'shm'],
    [far, 'inline', 'inline'],
  ] as const) {
    await goTo(page, 'precedence');
    await page.getByLabel('Worker', { exact: true }).selectOption(w.url);
    await expect(page.getByTestId('verdict')).toHaveAttribute('data-outcome', outcome);
    if (w === far) await bothSchemes(page, testInfo, 'precedence-epd');
    await goTo(page, 'doctor');
    await page.getByLabel('Worker', { exact: true }).selectOption(w.url);
    await page.getByRole('button', { name: 'Run checks' }).click();
    await expect(page.getByTestId('diagnose-verdict')).toHaveAttribute('data-outcome', outcome, { timeout: 20_000 });
    await page.getByRole('button', { name: 'Send test tensor' }).click();
    const result = page.getByTestId('test-result');
    await expect(result).toContainText('HTTP 200', { timeout: 20_000 });
    // The pixels went to this encode worker, by its own transport; prefill and decode got none.
    const encoder = result.locator('tr[data-tensor^="encoder_input"]');
    await expect(encoder).toHaveCount(1);
    await expect(encoder).toHaveAttribute('data-leg', 'encode');
    await expect(encoder).toHaveAttribute('data-worker', w.url);
    await expect(encoder).toHaveAttribute('data-path', path);
    await expect(encoder).toContainText('this worker');
    await expect(
      result.locator(`tr[data-worker="${prefill.url}"][data-tensor^="encoder_input"], tr[data-worker="${decode.url}"][data-tensor^="encoder_input"]`),
    ).toHaveCount(0);
    // Calibration measures the near one; the far one has no SHM path to measure, and says so.
    if (w === near) {
      await expect(page.getByTestId('calibration-plan')).toContainText('encoder tensor sizes from');
      await expect(page.getByTestId('calibration-refused')).toHaveCount(0);
      // It runs through the encode legs: every size measured both ways (one sample: no winner).
      const plan = await serve.call<{ sizes: unknown[] }>('transport.calibrationPlan', { url: near.url });
      await page.getByRole('spinbutton', { name: 'Samples per size' }).fill('1');
      await page.getByRole('button', { name: 'Calibrate', exact: true }).click();
      const calibration = page.getByTestId('calibration-result');
      await expect(calibration).toBeVisible({ timeout: 150_000 });
      await expect(calibration.locator('tr[data-winner="tie"]')).toHaveCount(plan.sizes.length);
      await expect(calibration.getByTestId('crossover')).toHaveText('no clear crossover');
    } else await expect(page.getByTestId('calibration-refused')).toContainText(`with SHM forced, worker ${far.url}'s requests would not go through /dev/shm`);
  }
  await bothSchemes(page, testInfo, 'doctor-epd');
  // A decode worker reads no pixels: its test tensor's pixels went to an encode worker, and
  // calibration says whom to calibrate instead of timing a transport it does not have.
  await page.getByLabel('Worker', { exact: true }).selectOption(decode.url);
  await page.getByRole('button', { name: 'Send test tensor' }).click();
  const result = page.getByTestId('test-result');
  await expect(result).toContainText('HTTP 200', { timeout: 20_000 });
  await expect(result.locator('tr[data-tensor^="encoder_input"]')).toHaveAttribute('data-leg', 'encode');
  await expect(result.locator(`tr[data-worker="${decode.url}"][data-tensor^="encoder_input"]`)).toHaveCount(0);
  await expect(page.getByTestId('calibration-refused')).toContainText(
    `worker ${decode.url} is a decode worker under disaggregation epd: it reads no pixel tensors`,
  );
  await expect(page.getByTestId('calibration-refused')).toContainText(`calibrate one of the encode workers (${near.url}, ${far.url})`);

  // The EPD views hold at 1024 px: topology, Traffic's leg column, the serving mode, Doctor's tables.
  await page.setViewportSize({ width: 1024, height: 700 });
  for (const screen of ['workers', 'traffic', 'router', 'doctor'] as const) {
    await goTo(page, screen);
    if (screen === 'traffic') await page.getByRole('checkbox', { name: /show console traffic/ }).check();
    await page.waitForTimeout(300);
    expect(await layoutProblems(page), `${screen} at 1024 px`).toEqual([]);
    if (screen === 'workers' || screen === 'doctor') await shot(page, testInfo, `${screen}-epd-1024`, { docs: true });
  }
  expect(serve.shmFiles()).toEqual([]);
});
