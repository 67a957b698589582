// Two tabs edit the same revision: the first apply wins, the second sees a conflict that
// says what changed meanwhile, and can carry its edit onto the new revision.
import { expect, test } from '@playwright/test';
import { goTo, openConsole, startServe, startWorker, waitHealthy, type Serve, type Worker } from './rig.ts';

let worker: Worker;
let serve: Serve;

test.beforeAll(async () => {
  worker = await startWorker('tokenspeed');
  serve = await startServe({ config: `health_check_interval_secs: 0.5\nworkers:\n  - url: ${worker.url}\n` });
  await waitHealthy(serve, 1);
});

test.afterAll(async () => {
  await serve?.stop();
  await worker?.stop();
});

test('two tabs apply conflicting edits: the second sees the conflict and what changed', async ({ browser }) => {
  const a = await (await browser.newContext()).newPage();
  const b = await (await browser.newContext()).newPage();
  await openConsole(a, serve, 'router');
  await openConsole(b, serve, 'router');
  const start = (await serve.call<{ revision: number }>('config.get')).revision;

  // Tab A: mode auto. Tab B: threshold 1 MiB. Both based on the same revision.
  await a.getByRole('group', { name: 'multimodal_tensor_transport' }).getByRole('radio', { name: /^auto / }).check();
  const thr = b.getByRole('group', { name: 'multimodal_shm_min_bytes' });
  await thr.getByRole('radio', { name: /^set here/ }).check();
  await thr.getByRole('textbox', { name: 'Threshold' }).fill('1');
  await thr.getByRole('combobox', { name: 'Threshold: unit' }).selectOption('MiB');
  await expect(b.getByRole('region', { name: 'Unapplied changes' })).toContainText('1 unapplied change');

  await b.getByRole('button', { name: 'Review & apply' }).click();
  await b.getByRole('dialog', { name: 'Review changes' }).getByRole('button', { name: 'Apply', exact: true }).click();
  await expect(b.getByRole('status').filter({ hasText: `Applied revision ${start + 1}` })).toBeVisible();

  await a.getByRole('button', { name: 'Review & apply' }).click();
  const dialog = a.getByRole('dialog', { name: 'Review changes' });
  await dialog.getByRole('button', { name: 'Apply', exact: true }).click();
  const conflict = dialog.getByTestId('conflict');
  await expect(conflict).toContainText('Conflict: nothing was applied');
  await expect(conflict).toContainText(`revision ${start + 1}`);
  await expect(conflict.getByRole('table')).toContainText('multimodal_shm_min_bytes');
  await expect(conflict.getByRole('table')).toContainText('1,048,576');
  expect((await serve.call<{ revision: number; config: { multimodal_tensor_transport?: string } }>('config.get')).config.multimodal_tensor_transport).toBeUndefined();

  // Rebase: A's edit on top of B's, reviewed again, applied.
  await dialog.getByRole('button', { name: /Rebase my edits/ }).click();
  const again = a.getByRole('dialog', { name: 'Review changes' });
  await expect(again).toContainText(`on top of revision ${start + 1}`);
  await expect(again.getByRole('table')).toContainText('auto');
  await expect(again.getByRole('table')).not.toContainText('1,048,576');
  await again.getByRole('button', { name: 'Apply', exact: true }).click();
  await expect(a.getByRole('status').filter({ hasText: `Applied revision ${start + 2}` })).toBeVisible();
  const final = await serve.call<{ config: { multimodal_tensor_transport?: string; multimodal_shm_min_bytes?: number } }>('config.get');
  expect(final.config).toMatchObject({ multimodal_tensor_transport: 'auto', multimodal_shm_min_bytes: 1048576 });

  // Tab B heard the new revision without a reload.
  await goTo(b, 'history');
  await expect(b.getByTestId('history-table')).toContainText(String(start + 2));
});
