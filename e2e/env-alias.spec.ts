// The environment layer as the server read it at start: a deprecated alias set in the
// serve's own environment shows with its badge, decides the mode (no router value), and is
// warned about on the Overview with its remedy.
import { expect, test } from '@playwright/test';
import { goTo, openConsole, serveWithWorker } from './rig.ts';

const rig = serveWithWorker({
  runtime: 'tokenspeed',
  config: (url) => `health_check_interval_secs: 0.5\nworkers:\n  - url: ${url}\n`,
  env: { SMG_TOKENSPEED_MM_TENSOR_TRANSPORT: 'shm' },
});

test('a deprecated env alias in the server environment shows in the env layer and the ladder', async ({ page }) => {
  const { serve } = rig;
  await openConsole(page, serve);
  await expect(page.locator('.warnings')).toContainText('SMG_TOKENSPEED_MM_TENSOR_TRANSPORT is deprecated');
  await expect(page.locator('.warnings')).toContainText('set SMG_MM_TENSOR_TRANSPORT instead');

  await goTo(page, 'router');
  const alias = page.getByTestId('env-table').getByRole('row').filter({ hasText: 'SMG_TOKENSPEED_MM_TENSOR_TRANSPORT' });
  await expect(alias).toContainText('deprecated alias');
  await expect(alias).toContainText('"shm"');
  await expect(alias).toContainText('valid');
  await expect(page.getByRole('group', { name: 'multimodal_tensor_transport' })).toContainText(
    'shm from SMG_TOKENSPEED_MM_TENSOR_TRANSPORT (deprecated alias)',
  );

  await goTo(page, 'precedence');
  const ladder = page.getByTestId('ladder-multimodal_tensor_transport');
  await expect(ladder.locator('[data-layer="env_legacy"]')).toHaveAttribute('data-state', 'won');
  await expect(ladder.locator('[data-layer="env_legacy"]')).toContainText('SMG_TOKENSPEED_MM_TENSOR_TRANSPORT');
  await expect(ladder.locator('[data-layer="env"]')).toHaveAttribute('data-state', 'unset');
  await expect(ladder.locator('[data-layer="default"]')).toHaveAttribute('data-state', 'beaten');
});
