// A worker that advertises another /dev/shm (same boot_id, different st_dev, as a container
// without the host's /dev/shm): Doctor shows the token mismatch with its remedy, and auto
// traffic to it goes inline.
import { expect, test } from '@playwright/test';
import { goTo, openConsole, otherShmToken, serveWithWorker } from './rig.ts';

const rig = serveWithWorker({
  runtime: 'vllm',
  workerArgs: ['--shm-namespace-id', otherShmToken()],
  config: (url) => `multimodal_tensor_transport: auto\nhealth_check_interval_secs: 0.5\nworkers:\n  - url: ${url}\n`,
});

test('wrong --shm-namespace-id: Doctor shows the mismatch and its remedy, auto goes inline', async ({ page }) => {
  const { serve, worker } = rig;
  await openConsole(page, serve, 'workers');
  const row = page.getByTestId('workers-table').locator(`tr[data-worker="${worker.url}"]`);
  await expect(row).toContainText('other /dev/shm');

  await goTo(page, 'doctor');
  await page.getByRole('button', { name: 'Run checks' }).click();
  const list = page.getByTestId('checklist');
  await expect(list.locator('[data-step="same_boot_id"]')).toHaveAttribute('data-ok', 'true');
  const stDev = list.locator('[data-step="same_st_dev"]');
  await expect(stDev).toHaveAttribute('data-ok', 'false');
  await expect(stDev).toContainText('fail');
  await expect(stDev).toContainText("run the worker container with --ipc=host or mount the host's /dev/shm into it");
  await expect(page.getByTestId('diagnose-verdict')).toContainText('auto_different_shm');

  await page.getByRole('button', { name: 'Send test tensor' }).click();
  // vLLM calls the encoder input pixel_values.
  const encoder = page.getByTestId('test-result').locator('tr[data-tensor="pixel_values"]');
  await expect(encoder).toHaveAttribute('data-path', 'inline');
  await expect(encoder).toContainText('auto_different_shm');

  await goTo(page, 'precedence');
  const chain = page.getByTestId('decision-chain');
  await expect(chain).toContainText('other /dev/shm');
  await expect(page.getByTestId('verdict')).toContainText('inline');
  await expect(page.getByTestId('verdict')).toContainText('--ipc=host');
});
