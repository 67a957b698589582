// The Workers screen's rates (docs/console.md, "Rates and latency"): requests through the API to
// the embedded reference worker show as its row, with requests/s and errors over the last
// minute, and the window selector asks for 15 minutes and shows them.
import { expect, test } from '@playwright/test';
import { apiChatRequest, openConsole, shot, startServe, type Serve } from './rig.ts';

let serve: Serve;

test.beforeAll(async () => {
  serve = await startServe({ config: 'health_check_interval_secs: 0.5\n' });
});

test.afterAll(async () => {
  const files = serve?.shmFiles() ?? [];
  await serve?.stop();
  expect(files).toEqual([]);
});

test('requests through the API show per worker, over the window chosen', async ({ page }, testInfo) => {
  for (let i = 0; i < 3; i++) expect((await apiChatRequest(serve, 64, 48)).status).toBe(200);
  const embedded = (await serve.call<{ workers: Array<{ url: string; embedded: boolean }> }>('workers.list')).workers.find((w) => w.embedded)!;
  await openConsole(page, serve, 'workers');
  const panel = page.getByRole('region', { name: 'Requests per worker over the last minute' });
  const row = panel.getByTestId('rates-table').getByRole('row').filter({ hasText: embedded.url });
  await expect(row).toContainText('0 % (0 of 3)');
  await expect(panel.getByRole('img', { name: 'Requests/s per worker over the last minute' })).toBeVisible();
  await panel.getByText('15 min').click();
  const quarter = page.getByRole('region', { name: 'Requests per worker over the last 15 minutes' });
  await expect(quarter.getByTestId('rates-table').getByRole('row').filter({ hasText: embedded.url })).toContainText('0 % (0 of 3)');
  await shot(page, testInfo, 'workers-rates');
});
