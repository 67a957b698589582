// The pixel cache in the console, against `mmtc serve` with its embedded reference worker under
// `auto` (it shares our /dev/shm, so a hit goes as a hard link to the cached file): the same
// image sent twice by a client of the API is one miss and one hit on Overview (50 %, one
// entry, the bytes held against the default budget) and a `cache hit` tag on the second
// request's tensor on Traffic, where the cache filter keeps only it; Flush asks first, drops the
// one entry and says so, and Overview then shows 0 entries; a budget of 0 shows the cache off
// with what turns it on.
import AxeBuilder from '@axe-core/playwright';
import { expect, test, type Page } from '@playwright/test';
import { apiChatRequest, goTo, openConsole, shot, startServe, waitHealthy, type Serve } from './rig.ts';

let serve: Serve;

test.beforeAll(async () => {
  // No worker configured: the serve runs its embedded reference worker.
  serve = await startServe({ config: 'multimodal_tensor_transport: auto\nhealth_check_interval_secs: 0.5\n' });
  await waitHealthy(serve, 1);
});

test.afterAll(async () => {
  const files = serve?.shmFiles() ?? [];
  await serve?.stop();
  expect(files).toEqual([]);
});

/** Serious or critical axe violations on the page as it is. */
async function axeProblems(page: Page, what: string): Promise<string[]> {
  const results = await new AxeBuilder({ page }).analyze();
  return results.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map(
      (v) =>
        `${what}: ${v.id} ${v.help} — ${v.nodes
          .slice(0, 3)
          .map((n) => n.target.join(' '))
          .join(' | ')}`,
    );
}

/** The content column does not scroll sideways and the card's button is inside its panel. */
async function expectFits(page: Page, width: number): Promise<void> {
  await page.waitForTimeout(500); // the charts follow a resize a frame or two later
  const problems = await page.evaluate(() => {
    const out: string[] = [];
    const m = document.getElementById('main')!;
    if (m.scrollWidth > m.clientWidth + 1) out.push(`main scrolls sideways (${m.scrollWidth} > ${m.clientWidth})`);
    for (const b of document.querySelectorAll<HTMLElement>('#main button')) {
      if (b.offsetParent === null) continue;
      const box = b.getBoundingClientRect();
      const panel = b.closest('.panel')?.getBoundingClientRect();
      if (box.right > window.innerWidth + 0.5 || (panel && box.right > panel.right + 0.5)) out.push(`button "${b.textContent}" is clipped`);
    }
    return out;
  });
  expect(problems, `at ${width} px`).toEqual([]);
}

interface CacheView {
  entries: number;
  hits: number;
  misses: number;
  heldBytes: number;
}

test('the same image twice: a miss then a hit on Overview and Traffic; Flush drops the entry', async ({ page }, testInfo) => {
  await openConsole(page, serve);
  const card = page.getByTestId('pixel-cache');
  await expect(card.getByTestId('pixel-cache-budget')).toHaveText(
    'Budget 512 MiB, from the built-in default (neither multimodal_pixel_cache_mb nor SMG_MM_PIXEL_CACHE_MB is set).',
  );
  await expect(card.getByTestId('pixel-cache-rate')).toHaveText('–');

  const first = await apiChatRequest(serve, 320, 240);
  const second = await apiChatRequest(serve, 320, 240);
  expect([first.status, second.status]).toEqual([200, 200]);

  // Overview, from the live overview stream.
  await expect(card.getByTestId('pixel-cache-rate')).toHaveText('50 %');
  await expect(card.getByTestId('pixel-cache-counts')).toHaveText('1 hit · 1 miss');
  await expect(card.getByTestId('pixel-cache-entries')).toHaveText('1');
  const held = (await serve.call<{ pixelCache: CacheView }>('overview')).pixelCache.heldBytes;
  expect(held).toBeGreaterThan(0);
  await expect(card.getByRole('meter', { name: 'Bytes the pixel cache holds against its budget' })).toHaveAttribute(
    'aria-valuetext',
    `${(held / 1024 / 1024).toFixed(2)} MiB of 512 MiB`,
  );
  const problems: string[] = [];
  for (const scheme of ['light', 'dark'] as const) {
    await page.emulateMedia({ colorScheme: scheme });
    problems.push(...(await axeProblems(page, `overview (${scheme})`)));
    await shot(page, testInfo, 'overview-cache', { docs: true, scheme });
  }
  await page.emulateMedia({ colorScheme: 'light' });
  for (const width of [1280, 1024]) {
    await page.setViewportSize({ width, height: 900 });
    await expectFits(page, width);
  }
  await shot(page, testInfo, 'overview-cache-1024');
  await page.setViewportSize({ width: 1440, height: 900 });

  // Traffic: the second request's image tensor is the hit, the first's the miss.
  await goTo(page, 'traffic');
  const rows = page.getByTestId('event-table').getByRole('row').filter({ hasText: 'encoder_input' });
  await expect(rows.filter({ hasText: second.id! }).locator('.tag-cache')).toHaveText('cache hit');
  await expect(rows.filter({ hasText: first.id! }).locator('.tag-cache')).toHaveText('cache miss');
  // The hit went over SHM as a link to the cached file; its grid tensor has no answer of its own.
  await expect(rows.filter({ hasText: second.id! }).locator('[data-path]')).toHaveAttribute('data-path', 'shm');
  await expect(page.getByTestId('event-table').getByRole('row').filter({ hasText: 'image_grid_thw' }).locator('.tag-cache')).toHaveCount(0);
  await page.getByLabel('Pixel cache').selectOption('hit');
  await expect(page.getByTestId('row-count')).toHaveText('1');
  await expect(page.getByTestId('event-table').getByRole('row').filter({ hasText: 'chatcmpl' })).toHaveCount(1);
  await expect(rows.filter({ hasText: second.id! })).toHaveCount(1);
  await rows.first().click();
  await expect(page.getByTestId('event-cache')).toContainText('pixel cache hit: this image was preprocessed before');
  await shot(page, testInfo, 'traffic-cache');
  problems.push(...(await axeProblems(page, 'traffic')));
  await page.setViewportSize({ width: 1024, height: 900 });
  await expectFits(page, 1024);
  await shot(page, testInfo, 'traffic-cache-1024');
  await page.setViewportSize({ width: 1440, height: 900 });
  await page.getByLabel('Pixel cache').selectOption('all');

  // Flush, asked first: Cancel keeps the entry, the flush drops it and says how many.
  await goTo(page, 'overview');
  await page.getByRole('button', { name: 'Flush cache…' }).click();
  const dialog = page.getByRole('dialog', { name: 'Flush the pixel cache?' });
  await expect(dialog).toContainText("Drops the cache's 1 entry");
  problems.push(...(await axeProblems(page, 'the flush dialog')));
  expect(problems).toEqual([]);
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  await expect(dialog).toBeHidden();
  expect((await serve.call<{ pixelCache: CacheView }>('overview')).pixelCache.entries).toBe(1);
  await page.getByRole('button', { name: 'Flush cache…' }).click();
  await dialog.getByRole('button', { name: 'Flush 1 entry' }).click();
  await expect(page.getByRole('status').filter({ hasText: 'Pixel cache flushed: 1 entry dropped' })).toBeVisible();
  await expect(card.getByTestId('pixel-cache-entries')).toHaveText('0');
  await expect(card.getByTestId('pixel-cache-counts')).toHaveText('1 hit · 1 miss'); // counts stay
  await expect(page.getByRole('button', { name: 'Flush cache…' })).toBeDisabled();
  expect((await serve.call<{ pixelCache: CacheView }>('overview')).pixelCache).toMatchObject({ entries: 0, heldBytes: 0 });

  // A budget of 0: off, saying why and what turns it on.
  const view = await serve.call<{ revision: number; config: Record<string, unknown> }>('config.get');
  await serve.call('config.apply', { draft: { ...view.config, multimodal_pixel_cache_mb: 0 }, expectedRevision: view.revision });
  const off = card.getByTestId('pixel-cache-off');
  await expect(off).toContainText(
    'The pixel cache is off: multimodal_pixel_cache_mb is 0, set in console (HTTP). Every image is preprocessed for every request.',
  );
  await expect(off).toContainText('To turn it on: set multimodal_pixel_cache_mb to the MiB to keep on the Router screen (it applies at once)');
  await expect(card.getByTestId('pixel-cache-budget')).toHaveText('Budget 0 MiB, from multimodal_pixel_cache_mb, set in console (HTTP).');
  await shot(page, testInfo, 'overview-cache-off');
  expect(serve.shmFiles()).toEqual([]);
});
