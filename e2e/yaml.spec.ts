// YAML: an import with an error shows the error at its line and applies nothing; export
// downloads exactly what `mmtc config export` prints for the same file and flags.
import { readFileSync } from 'node:fs';
import { expect, test } from '@playwright/test';
import { cliExport, openConsole, serveWithWorker } from './rig.ts';

const rig = serveWithWorker({
  runtime: 'tokenspeed',
  config: (url) => `# written by hand\nmultimodal_tensor_transport: auto\nhealth_check_interval_secs: 0.5\nworkers:\n  - url: ${url}\n    priority: 70\n`,
});

test('import YAML with an error: shown at its line, nothing applied', async ({ page }) => {
  const { serve, worker } = rig;
  const before = await serve.call<{ revision: number }>('config.get');
  const fileBefore = readFileSync(serve.configFile, 'utf8');
  await openConsole(page, serve, 'yaml');
  const editor = page.getByRole('textbox', { name: 'YAML to import' });
  await editor.fill(`multimodal_tensor_transport: shm\nworkers:\n  - url: ${worker.url}\n    priority: high\n`);
  const issues = page.getByTestId('yaml-issues');
  await expect(issues).toContainText('line 4:15');
  await expect(issues).toContainText('workers[0].priority');
  await expect(page.getByTestId('import-status')).toContainText('1 error');
  await expect(page.locator('.gutter-bad')).toHaveText(/4/);
  await expect(page.getByRole('button', { name: 'Review and apply…' })).toBeDisabled();
  // Jumping to the line selects it in the editor.
  await issues.getByRole('button', { name: 'line 4:15' }).click();
  await expect(editor).toBeFocused();
  expect((await serve.call<{ revision: number }>('config.get')).revision).toBe(before.revision);
  expect(readFileSync(serve.configFile, 'utf8')).toBe(fileBefore);

  // Fixed, it reviews and applies.
  await editor.fill(`multimodal_tensor_transport: shm\nhealth_check_interval_secs: 0.5\nworkers:\n  - url: ${worker.url}\n    priority: 90\n`);
  await expect(page.getByTestId('import-status')).toContainText('valid');
  // The YAML leaves out port, which the serve got as --port 0: a setting given by a flag that
  // an imported YAML leaves out keeps its running value, so it is no change at all.
  await expect(page.getByTestId('restart-only')).toHaveCount(0);
  await expect(page.getByTestId('import-status')).toContainText('2 changes');
  await expect(page.getByRole('table', { name: 'What applying this YAML would change' })).not.toContainText('30000');
  await page.getByRole('button', { name: 'Review and apply…' }).click();
  const dialog = page.getByRole('dialog', { name: 'Apply imported YAML' });
  await expect(dialog).toContainText('priority');
  await expect(dialog.getByRole('table')).not.toContainText('30000');
  await dialog.getByRole('button', { name: 'Apply YAML' }).click();
  await expect(page.getByRole('status').filter({ hasText: `Applied revision ${before.revision + 1}` })).toBeVisible();
  expect(readFileSync(serve.configFile, 'utf8')).toContain('# written by hand');
  expect((await serve.call<{ config: { port: number } }>('config.get')).config.port).toBe(0);

  // A restart-only setting the YAML writes differently is named, and its running value kept.
  await editor.fill(`host: 0.0.0.0\nmultimodal_tensor_transport: shm\nhealth_check_interval_secs: 0.5\nworkers:\n  - url: ${worker.url}\n    priority: 90\n`);
  await expect(page.getByTestId('restart-only')).toContainText('changes host (127.0.0.1 → 0.0.0.0)');
  await expect(page.getByTestId('restart-only')).toContainText('host: 127.0.0.1');
  await expect(page.getByTestId('import-status')).toContainText('0 changes');
  await expect(page.getByRole('button', { name: 'Review and apply…' })).toBeDisabled();
});

test('export: the downloaded router.yaml equals mmtc config export, with the runtime the router detected', async ({ page }) => {
  const { serve, worker } = rig;
  await openConsole(page, serve, 'yaml');
  const exportPanel = page.locator('#export-title').locator('xpath=ancestor::section');
  await expect(exportPanel.getByRole('region', { name: /Exported YAML/ }).or(exportPanel.locator('pre'))).toContainText(worker.url);
  const [download] = await Promise.all([page.waitForEvent('download'), exportPanel.getByRole('button', { name: 'Download router.yaml' }).click()]);
  expect(download.suggestedFilename()).toBe('router.yaml');
  const text = readFileSync(await download.path(), 'utf8');
  // The same bytes as the CLI's export of the same file, but for what only the running router knows: the runtime
  // it detected on a worker whose entry leaves it unspecified, written with a comment (docs/console.md).
  const offline = cliExport(serve.routerFlags);
  expect(offline).toContain('runtime: unspecified\n');
  expect(text).toBe(
    offline.replace('runtime: unspecified\n', 'runtime: tokenspeed # detected by the router (the applied configuration leaves it unspecified)\n'),
  );

  const gateway = page.getByTestId('gateway-command');
  await expect(gateway).toContainText('smg launch');
  await expect(gateway).toContainText(`--worker-urls ${worker.url}`);
  // Which of the two registrations to use, and what using both does.
  await expect(page.getByTestId('gateway-usage')).toContainText('Register each worker one way, not both');
});

test('a file edited on disk shows as drift with its diff and reloads as a reviewed apply', async ({ page }) => {
  const { serve } = rig;
  const { writeFileSync } = await import('node:fs');
  const before = await serve.call<{ revision: number }>('config.get');
  writeFileSync(serve.configFile, readFileSync(serve.configFile, 'utf8').replace(/request_timeout_secs: \d+\n|$/, '') + 'request_timeout_secs: 77\n');
  await openConsole(page, serve, 'yaml');
  const drift = page.locator('#drift-title').locator('xpath=ancestor::section');
  await expect(drift).toContainText('The configuration file changed on disk');
  await expect(drift.getByRole('table')).toContainText('request_timeout_secs');
  await expect(drift.getByRole('table')).toContainText('77');
  // port came from --port at start: reloading keeps it, so it is not shown as a change.
  await expect(drift.getByRole('table')).not.toContainText('30000');
  await drift.getByRole('button', { name: 'Review and reload file…' }).click();
  const dialog = page.getByRole('dialog', { name: 'Reload the configuration file' });
  await dialog.getByRole('button', { name: 'Reload file' }).click();
  await expect(page.getByRole('status').filter({ hasText: `Applied revision ${before.revision + 1}` })).toBeVisible();
  await expect(drift).toBeHidden();
  expect((await serve.call<{ config: { request_timeout_secs: number; port: number } }>('config.get')).config).toMatchObject({
    request_timeout_secs: 77,
    port: 0,
  });
});
