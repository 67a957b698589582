// The settings forms in a browser: every field shows the draft (Discard resets each one to the
// applied value, a list and the labels too), a blank number is refused by name rather than
// standing blank over a default that applies, and the worker's priority has one rule on Add
// and on Edit.
import { expect, test } from '@playwright/test';
import { goTo, openConsole, startServe, startWorker, waitHealthy, type Serve, type Worker } from './rig.ts';

let worker: Worker;
let serve: Serve;

test.beforeAll(async () => {
  worker = await startWorker('tokenspeed');
  serve = await startServe({ config: `health_check_interval_secs: 0.5\nworkers:\n  - url: ${worker.url}\n    labels: {zone: a}\n` });
  await waitHealthy(serve, 1);
});

test.afterAll(async () => {
  await serve?.stop();
  await worker?.stop();
});

test('Discard resets every field to the applied value: a list, a number left blank, the labels', async ({ page }) => {
  await openConsole(page, serve, 'router');
  const pending = page.getByRole('region', { name: 'Unapplied changes' });
  const apply = pending.getByRole('button', { name: 'Review & apply' });

  // allowed_media_domains: typed, then discarded. A field still showing the host over an
  // applied [] would be a restriction that looks active and is not.
  const domains = page.getByLabel('allowed_media_domains', { exact: true });
  await domains.pressSequentially('images.example.com');
  await expect(pending).toContainText('1 unapplied change');
  await pending.getByRole('button', { name: 'Discard' }).click();
  await expect(pending).toHaveCount(0);
  await expect(domains).toHaveValue('');
  expect((await serve.call<{ config: { allowed_media_domains: string[] } }>('config.get')).config.allowed_media_domains).toEqual([]);

  await domains.pressSequentially('images.example.com');
  // body_timeout_secs left blank: refused by name, never "0 unapplied changes" over the default.
  const body = page.getByLabel('body_timeout_secs', { exact: true });
  await body.fill('');
  await expect(page.getByText("invalid value '' for body_timeout_secs: expected a number of seconds from 1 to 3600").first()).toBeVisible();
  await expect(pending).toContainText('1 problem');
  await expect(pending).toContainText('body_timeout_secs');
  await expect(apply).toBeDisabled();

  await pending.getByRole('button', { name: 'Discard' }).click();
  await expect(pending).toHaveCount(0);
  await expect(domains).toHaveValue('');
  await expect(body).toHaveValue('30');
  expect((await serve.call<{ config: { allowed_media_domains: string[] } }>('config.get')).config.allowed_media_domains).toEqual([]);

  // The labels of a worker: typed over, then discarded.
  await goTo(page, 'workers');
  await page.getByTestId('workers-table').locator(`tr[data-worker="${worker.url}"]`).getByRole('button', { name: /^Edit/ }).click();
  const labels = page.getByLabel('Labels (one name=value per line)');
  await expect(labels).toHaveValue('zone=a');
  await labels.fill('zone=b');
  await expect(pending).toContainText('1 unapplied change');
  // Half-typed labels stand in the draft: apply is off until they parse.
  await labels.fill('zone');
  await expect(page.getByText("invalid value 'zone' for labels (line 1): expected name=value")).toBeVisible();
  await expect(apply).toBeDisabled();
  await pending.getByRole('button', { name: 'Discard' }).click();
  await expect(pending).toHaveCount(0);
  await expect(labels).toHaveValue('zone=a');
});

test("a worker's priority: one rule on Add and on Edit (blank and 1e2 refused by name, never a silent 0 or 100)", async ({ page }) => {
  await openConsole(page, serve, 'workers');
  await page.getByRole('button', { name: 'Add worker…' }).click();
  const add = page.getByRole('region', { name: 'Add a worker' });
  await add.getByRole('textbox', { name: 'URL' }).fill('grpc://127.0.0.1:1');
  const priority = add.getByLabel(/^Priority/);
  await expect(priority).toHaveValue('50');
  const submit = add.getByRole('button', { name: 'Review and add…' });
  for (const [typed, quoted] of [
    ['', "''"],
    ['1e2', "'1e2'"],
  ] as const) {
    await priority.fill(typed);
    await expect(add.getByText(`invalid value ${quoted} for priority: expected an integer priority 0-100`)).toBeVisible();
    await expect(submit).toBeDisabled();
  }
  await priority.fill('7');
  await expect(submit).toBeEnabled();
  await add.getByRole('button', { name: 'Cancel' }).click();

  await page.getByTestId('workers-table').locator(`tr[data-worker="${worker.url}"]`).getByRole('button', { name: /^Edit/ }).click();
  const edit = page.getByRole('region', { name: /Edit worker/ });
  const pending = page.getByRole('region', { name: 'Unapplied changes' });
  for (const [typed, quoted] of [
    ['', "''"],
    ['1e2', "'1e2'"],
  ] as const) {
    await edit.getByLabel('Priority (0–100)').fill(typed);
    await expect(edit.getByText(`invalid value ${quoted} for priority: expected an integer priority 0-100`)).toBeVisible();
    await expect(pending.getByRole('button', { name: 'Review & apply' })).toBeDisabled();
  }
  await pending.getByRole('button', { name: 'Discard' }).click();
  await expect(edit.getByLabel('Priority (0–100)')).toHaveValue('50');
});
