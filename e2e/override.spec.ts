// A worker override to shm: edit → review → apply → the ladder shows the worker layer
// winning, and the next test request's encoder tensor goes through /dev/shm, as the
// traffic table shows.
import { expect, test } from '@playwright/test';
import { goTo, openConsole, serveWithWorker } from './rig.ts';

const rig = serveWithWorker({
  runtime: 'tokenspeed',
  config: (url) => `multimodal_tensor_transport: inline\nhealth_check_interval_secs: 0.5\nworkers:\n  - url: ${url}\n`,
});

test('worker override to shm: review, apply, ladder shows worker winning, next request via SHM', async ({ page }) => {
  const { serve, worker } = rig;
  await openConsole(page, serve, 'workers');
  // The token never stays in the address bar.
  expect(page.url()).not.toContain('token');
  await page.getByRole('button', { name: `Edit ${worker.url}` }).click();
  const editor = page.locator('#worker-editor-title').locator('xpath=ancestor::section');
  await editor.getByRole('group', { name: 'Transport mode override' }).getByRole('radio', { name: /^shm / }).check();

  const bar = page.getByRole('region', { name: 'Unapplied changes' });
  await expect(bar).toContainText('1 unapplied change');
  await bar.getByRole('button', { name: 'Review & apply' }).click();
  const dialog = page.getByRole('dialog', { name: 'Review changes' });
  await expect(dialog.getByRole('table')).toContainText('multimodal_tensor_transport');
  await expect(dialog.getByRole('table')).toContainText('shm');
  const before = (await serve.call<{ revision: number }>('config.get')).revision;
  await dialog.getByRole('button', { name: 'Apply', exact: true }).click();
  await expect(page.getByRole('status').filter({ hasText: `Applied revision ${before + 1}` })).toBeVisible();
  await expect(dialog).toBeHidden();

  await page.getByRole('link', { name: `Precedence of ${worker.url}` }).click();
  await expect(page.getByTestId('ladder-source')).toContainText('applied');
  const ladder = page.getByTestId('ladder-multimodal_tensor_transport');
  await expect(ladder.locator('[data-layer="worker"]')).toHaveAttribute('data-state', 'won');
  await expect(ladder.locator('[data-layer="router"]')).toHaveAttribute('data-state', 'beaten');
  await expect(ladder.locator('[data-layer="router"] del')).toContainText('inline');
  await expect(page.getByTestId('verdict')).toContainText('shm_writable');

  await goTo(page, 'doctor');
  await page.getByRole('button', { name: 'Send test tensor' }).click();
  await expect(page.getByTestId('test-result').locator('tr[data-tensor="encoder_input"]')).toHaveAttribute('data-path', 'shm');

  await goTo(page, 'traffic');
  const table = page.getByRole('table', { name: 'Tensor events, newest first' });
  // The console's own traffic is hidden by default …
  await expect(table).not.toContainText('encoder_input');
  await page.getByRole('checkbox', { name: /show console traffic/ }).check();
  await page.getByRole('radio', { name: 'SHM', exact: true }).check();
  const row = table.getByRole('row').filter({ hasText: 'encoder_input' }).first();
  await expect(row).toContainText('SHM');
  await expect(row).toContainText('console');
  await expect(row).toContainText(String(before + 1));
});
