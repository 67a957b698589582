// Roll back to an older revision from History (a reviewed apply): the next request follows
// the older settings.
import { expect, test } from '@playwright/test';
import { goTo, openConsole, serveWithWorker } from './rig.ts';

const rig = serveWithWorker({
  runtime: 'tokenspeed',
  config: (url) => `multimodal_tensor_transport: inline\nhealth_check_interval_secs: 0.5\nworkers:\n  - url: ${url}\n`,
});

test('roll back a revision: the next request follows the older settings', async ({ page }) => {
  const { serve } = rig;
  const inlineRevision = (await serve.call<{ revision: number }>('config.get')).revision;
  await openConsole(page, serve, 'router');
  await page.getByRole('group', { name: 'multimodal_tensor_transport' }).getByRole('radio', { name: /^shm / }).check();
  await page.getByRole('button', { name: 'Review & apply' }).click();
  await page.getByRole('dialog', { name: 'Review changes' }).getByRole('button', { name: 'Apply', exact: true }).click();
  await expect(page.getByRole('status').filter({ hasText: `Applied revision ${inlineRevision + 1}` })).toBeVisible();

  await goTo(page, 'doctor');
  await page.getByRole('button', { name: 'Send test tensor' }).click();
  await expect(page.getByTestId('test-result').locator('tr[data-tensor="encoder_input"]')).toHaveAttribute('data-path', 'shm');

  await goTo(page, 'history');
  const row = page.getByTestId('history-table').locator(`tr[data-revision="${inlineRevision}"]`);
  await row.getByRole('button', { name: `Roll back to revision ${inlineRevision}` }).click();
  const dialog = page.getByRole('dialog', { name: `Roll back to revision ${inlineRevision}` });
  // The preview (config.diff against the revision's kept configuration) says exactly what
  // the rollback changes: the mode, and nothing else.
  const history = await serve.call<{ entries: Array<{ revision: number; config?: { multimodal_tensor_transport?: string } }> }>('config.history');
  expect(history.entries.find((e) => e.revision === inlineRevision)?.config?.multimodal_tensor_transport).toBe('inline');
  await expect(dialog.getByRole('table')).toContainText('multimodal_tensor_transport');
  await expect(dialog.getByRole('table')).toContainText('inline');
  await expect(dialog.getByRole('table').locator('tbody tr')).toHaveCount(1);
  await dialog.getByRole('button', { name: `Roll back to revision ${inlineRevision}` }).click();
  await expect(page.getByRole('status').filter({ hasText: `Applied revision ${inlineRevision + 2}` })).toBeVisible();
  await expect(page.getByTestId('history-table').locator(`tr[data-revision="${inlineRevision + 2}"]`)).toContainText('browser console');

  await goTo(page, 'doctor');
  await page.getByRole('button', { name: 'Send test tensor' }).click();
  const encoder = page.getByTestId('test-result').locator('tr[data-tensor="encoder_input"]');
  await expect(encoder).toHaveAttribute('data-path', 'inline');
  await expect(encoder).toContainText('mode_inline');
  await expect(page.getByTestId('test-result')).toContainText(`revision ${inlineRevision + 2}`);
});
