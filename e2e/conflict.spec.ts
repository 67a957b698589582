// Two tabs edit the same revision: the first apply wins, the second sees a conflict that
// says what changed meanwhile, and can carry its edit onto the new revision.
import { expect, test } from '@playwright/test';
import { goTo, openConsole, shot, startServe, startWorker, waitHealthy, type Serve, type Worker } from './rig.ts';

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
  await a
    .getByRole('group', { name: 'multimodal_tensor_transport' })
    .getByRole('radio', { name: /^auto / })
    .check();
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
  expect(
    (await serve.call<{ revision: number; config: { multimodal_tensor_transport?: string } }>('config.get')).config.multimodal_tensor_transport,
  ).toBeUndefined();

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

test('a number typed key by key that ends invalid stands in the draft by name, never the valid value on the way to it', async ({ page }, testInfo) => {
  await openConsole(page, serve, 'router');
  const pending = page.getByRole('region', { name: 'Unapplied changes' });
  const apply = pending.getByRole('button', { name: 'Review & apply' });
  // The threshold: "1" then "1.5" in bytes (1 B was valid on the way).
  const thr = page.getByRole('group', { name: 'multimodal_shm_min_bytes' });
  await thr.getByRole('radio', { name: /^set here/ }).check();
  await thr.getByRole('combobox', { name: 'Threshold: unit' }).selectOption('B');
  const field = thr.getByRole('textbox', { name: 'Threshold' });
  await field.fill('');
  await field.pressSequentially('1.5');
  await expect(thr.getByRole('alert')).toContainText(
    "invalid value '1.5 B' for multimodal_shm_min_bytes: expected a whole number of bytes; 1.5 B is 1.5 bytes",
  );
  await expect(pending).toContainText('multimodal_shm_min_bytes');
  await expect(apply).toBeDisabled();
  // A schema-driven setting: 1000 on the way to "1000x".
  const body = page.getByLabel('max_body_bytes', { exact: true });
  await body.fill('');
  await body.pressSequentially('1000x');
  await expect(page.getByText("invalid value '1000x' for max_body_bytes: expected an integer number of bytes of at least 1024 (1 KiB)").first()).toBeVisible();
  const timeout = page.getByLabel('Request timeout');
  const timeoutApplied = await timeout.inputValue();
  await timeout.fill('');
  await timeout.pressSequentially('30x');
  await expect(page.getByText("invalid value '30x' for request_timeout_secs: expected a number of seconds from 1 to 86400").first()).toBeVisible();
  await expect(pending).toContainText('3 problem');
  await expect(apply).toBeDisabled();
  // Precedence says its ladder is from before the problem; back on Router the entry is still there as typed.
  await goTo(page, 'precedence');
  await expect(page.getByTestId('ladder-source')).toContainText('draft has a problem');
  await goTo(page, 'router');
  await expect(thr.getByRole('textbox', { name: 'Threshold' })).toHaveValue('1.5');
  await expect(thr.getByRole('combobox', { name: 'Threshold: unit' })).toHaveValue('B');
  await expect(thr.getByRole('alert')).toContainText('expected a whole number of bytes; 1.5 B is 1.5 bytes');
  await expect(body).toHaveValue('1000x');
  await shot(page, testInfo, 'router-invalid-entries');
  // Discard: the applied values come back into both fields.
  const applied = (await serve.call<{ config: { max_body_bytes?: number; multimodal_shm_min_bytes?: number } }>('config.get')).config;
  await pending.getByRole('button', { name: 'Discard' }).click();
  await expect(pending).toHaveCount(0);
  if (applied.multimodal_shm_min_bytes === undefined) await expect(thr.getByRole('radio', { name: /^inherit/ })).toBeChecked();
  else await expect(thr).toContainText(`${applied.multimodal_shm_min_bytes.toLocaleString('en-US')} bytes`);
  await expect(thr.getByRole('alert')).toHaveCount(0);
  await expect(body).toHaveValue(String(applied.max_body_bytes ?? ''));
  await expect(timeout).toHaveValue(timeoutApplied);
  expect((await serve.call<{ config: Record<string, unknown> }>('config.get')).config).toEqual(applied);
});
