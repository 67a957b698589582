// An SGLang worker (its protocol has no /dev/shm lane) under mode shm: every screen says its
// tensors travel inline and why (runtime_inline_only), none claims SHM or warns that SHM will
// fail: Workers, Precedence (the chain stops at the protocol), Doctor (the checklist and a test
// tensor), Traffic (the verdict strip and the events).
import { expect, test } from '@playwright/test';
import { apiChatRequest, goTo, openConsole, serveWithWorker, shot } from './rig.ts';

const rig = serveWithWorker({
  runtime: 'sglang',
  config: (url) => `multimodal_tensor_transport: shm\nhealth_check_interval_secs: 0.5\nworkers:\n  - url: ${url}\n`,
});

test('an SGLang worker under shm: inline with runtime_inline_only on Workers, Precedence, Doctor and Traffic', async ({ page }, testInfo) => {
  const { serve, worker } = rig;
  await openConsole(page, serve, 'workers');
  const row = page.getByTestId('workers-table').locator(`tr[data-worker="${worker.url}"]`);
  await expect(row).toContainText('sglang');
  await expect(row.getByTestId('next-request')).toHaveAttribute('data-outcome', 'inline');
  await expect(row.getByTestId('next-request')).toContainText('protocol is inline only');

  await goTo(page, 'overview');
  await expect(page.getByTestId('verdicts')).toContainText("this worker's protocol carries tensors inline only");
  await expect(page.getByRole('region', { name: /^Warnings/ })).not.toContainText('SHM will be attempted');

  await goTo(page, 'precedence');
  const chain = page.getByTestId('decision-chain');
  const protocol = chain.locator('li.step').nth(1);
  await expect(protocol).toHaveAttribute('data-state', 'fail');
  await expect(protocol).toContainText("this worker's protocol carries tensors inline only");
  await expect(chain.locator('li.step').nth(4)).toHaveAttribute('data-state', 'skip');
  await expect(page.getByTestId('verdict')).toHaveAttribute('data-outcome', 'inline');
  await expect(page.getByTestId('verdict')).toContainText('runtime_inline_only');
  await expect(
    page.getByText('SGLang carries tensors inline only (its TensorData has no /dev/shm handle): mode shm travels inline (runtime_inline_only)'),
  ).toBeVisible();
  await shot(page, testInfo, 'precedence-sglang', { docs: true });

  await goTo(page, 'doctor');
  await page.getByRole('button', { name: 'Run checks' }).click();
  const list = page.getByTestId('checklist');
  await expect(list.locator('[data-step="protocol_lane"]')).toHaveAttribute('data-ok', 'false');
  await expect(list.locator('[data-step="protocol_lane"]')).toContainText('SGLang carries tensors inline only');
  await expect(list.locator('[data-step="token_advertised"]')).toHaveAttribute('data-ok', 'null');
  await expect(page.getByTestId('diagnose-verdict')).toContainText('runtime_inline_only');
  await page.getByRole('button', { name: 'Send test tensor' }).click();
  const pixels = page.getByTestId('test-result').locator('tr[data-tensor="pixel_values"]');
  await expect(pixels).toHaveAttribute('data-path', 'inline');
  await expect(pixels).toContainText('runtime_inline_only');
  await expect(page.getByTestId('calibration-refused')).toContainText('SGLang, whose protocol carries tensors inline only: there is no SHM path to measure');
  await expect(page.getByRole('button', { name: 'Calibrate' })).toBeDisabled();
  await shot(page, testInfo, 'doctor-sglang', { docs: true });

  await goTo(page, 'traffic');
  // A client's request: its three tensors show, inline, with the reason in words.
  expect((await apiChatRequest(serve, 320, 240)).status).toBe(200);
  await expect(page.getByTestId('traffic-verdicts').locator(`li[data-worker="${worker.url}"]`)).toHaveAttribute('data-outcome', 'inline');
  const events = page.getByTestId('event-table');
  await expect(events.getByRole('row').filter({ hasText: 'pixel_values' }).first()).toContainText('protocol is inline only');
  expect(serve.shmFiles()).toEqual([]);
});
