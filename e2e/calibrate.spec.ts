// Calibration completes with progress, plots both paths with the crossover, and its
// recommended threshold becomes a reviewed draft for that worker that applies.
import { expect, test } from '@playwright/test';
import { openConsole, serveWithWorker } from './rig.ts';

const rig = serveWithWorker({ runtime: 'tokenspeed', config: (url) => `multimodal_tensor_transport: auto\nhealth_check_interval_secs: 0.5\nworkers:\n  - url: ${url}\n` });

test('calibrate completes and its recommendation applies to the worker', async ({ page }) => {
  const { serve, worker } = rig;
  test.setTimeout(180_000);
  await openConsole(page, serve, 'doctor');
  await page.getByRole('spinbutton', { name: 'Samples per size' }).fill('1');
  await page.getByRole('button', { name: 'Calibrate', exact: true }).click();
  await expect(page.getByRole('progressbar', { name: 'Calibration progress' })).toBeVisible();
  const result = page.getByTestId('calibration-result');
  await expect(result).toBeVisible({ timeout: 150_000 });
  await expect(result.getByRole('img', { name: /Inline and SHM latency by tensor size/ })).toBeVisible();
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
