// Calibration completes with progress, plots both paths with the crossover, and its
// recommended threshold becomes a reviewed draft for that worker that applies.
import { expect, test } from '@playwright/test';
import { openConsole, serveWithWorker } from './rig.ts';

const rig = serveWithWorker({
  runtime: 'tokenspeed',
  config: (url) => `multimodal_tensor_transport: auto\nhealth_check_interval_secs: 0.5\nworkers:\n  - url: ${url}\n`,
});

test('calibrate: the range it states is what it measures; one sample is no clear crossover; enough samples recommend a threshold that applies', async ({
  page,
}) => {
  const { serve, worker } = rig;
  test.setTimeout(240_000);
  await openConsole(page, serve, 'doctor');
  const plan = await serve.call<{ sizes: Array<{ nbytes: number }>; minSamplesForWinner: number; defaultSamples: number }>('transport.calibrationPlan', {
    url: worker.url,
  });
  await expect(page.getByTestId('calibration-plan')).toContainText(`${plan.sizes.length} encoder tensor sizes from`);
  const stated = /from (\S+ \S+) to (\S+ \S+)/.exec((await page.getByTestId('calibration-plan').textContent())!)!;
  await expect(page.getByRole('spinbutton', { name: 'Samples per size' })).toHaveValue(String(plan.defaultSamples));

  // One sample cannot tell the paths apart: the screen says so and recommends nothing.
  await page.getByRole('spinbutton', { name: 'Samples per size' }).fill('1');
  await page.getByRole('button', { name: 'Calibrate', exact: true }).click();
  await expect(page.getByRole('progressbar', { name: 'Calibration progress' })).toBeVisible();
  const result = page.getByTestId('calibration-result');
  await expect(result).toBeVisible({ timeout: 150_000 });
  await expect(result.getByRole('img', { name: /Inline and SHM latency by tensor size.*no clear crossover/ })).toBeVisible();
  await expect(result.getByTestId('crossover')).toHaveText('no clear crossover');
  await expect(result.getByTestId('calibration-note')).toContainText('No clear crossover');
  await expect(result.getByRole('button', { name: 'Use recommended threshold for this worker…' })).toBeDisabled();
  await expect(result.locator('tr[data-winner="tie"]')).toHaveCount(plan.sizes.length);
  // The range stated before the run is the range measured.
  await expect(result).toContainText(`${plan.sizes.length} sizes from ${stated[1]} to ${stated[2]}`);
  expect(Number(plan.sizes[0]!.nbytes)).toBeLessThan(64 * 1024);

  // With enough samples the large tensors separate: a crossover, each point with its spread.
  await page.getByRole('spinbutton', { name: 'Samples per size' }).fill(String(plan.minSamplesForWinner + 2));
  await page.getByRole('button', { name: 'Calibrate again' }).click();
  await expect(result.getByTestId('crossover')).toHaveText(/KiB|MiB/, { timeout: 200_000 });
  await expect(result.locator('tr[data-winner="shm"]').first()).toBeVisible();
  await expect(result.locator('tbody tr').first()).toContainText('–'); // the middle half shown with every median
  const recommended = (await result.getByTestId('recommended').textContent())!;
  expect(recommended).toMatch(/KiB|MiB/);

  await result.getByRole('button', { name: 'Use recommended threshold for this worker…' }).click();
  await expect(page.getByRole('heading', { level: 1, name: 'Precedence' })).toBeVisible();
  await expect(page.getByTestId('ladder-source')).toContainText('draft');
  const ladder = page.getByTestId('ladder-multimodal_shm_min_bytes');
  await expect(ladder.locator('[data-layer="worker"]')).toHaveAttribute('data-state', 'won');
  await expect(ladder.locator('[data-layer="worker"]')).toContainText('draft (not applied)');

  await page.getByRole('button', { name: 'Review & apply' }).click();
  const dialog = page.getByRole('dialog', { name: 'Review changes' });
  await expect(dialog.getByRole('table')).toContainText('multimodal_shm_min_bytes');
  await dialog.getByRole('button', { name: 'Apply', exact: true }).click();
  await expect(page.getByRole('status').filter({ hasText: /Applied revision/ })).toBeVisible();
  const view = await serve.call<{ config: { workers: Array<{ url: string; multimodal_shm_min_bytes?: number }> } }>('config.get');
  const bytes = view.config.workers.find((w) => w.url === worker.url)!.multimodal_shm_min_bytes!;
  expect(bytes % 1024).toBe(0);
  await expect(page.getByTestId('ladder-source')).toContainText('applied');
  await expect(ladder.locator('[data-layer="worker"]')).toHaveAttribute('data-state', 'won');
  await expect(ladder.locator('[data-layer="worker"]')).toContainText(bytes.toLocaleString('en-US'));
});
