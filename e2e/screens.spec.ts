// Every screen, light and dark, with realistic data (two workers — one sharing our
// /dev/shm, one advertising another — API traffic, a test request, a calibration, a few
// revisions, a file changed on disk): an accessibility check with axe (no serious or
// critical violation), the layout check (layoutProblems in rig.ts) and a screenshot at 1440
// and 1024 px as test artifacts. With MMTC_UPDATE_SCREENSHOTS=1 the screenshots also replace
// docs/screenshots/<screen>-<width>-<scheme>.png.
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import AxeBuilder from '@axe-core/playwright';
import { expect, test, type Page } from '@playwright/test';
import { apiChat, goTo, layoutProblems, openConsole, otherShmToken, ROOT, shot, startServe, startWorker, waitHealthy, type Serve, type Worker } from './rig.ts';

const SCREENS = ['overview', 'router', 'workers', 'precedence', 'traffic', 'requests', 'doctor', 'yaml', 'history'] as const;
/** The window sizes of the screenshots: the usual desktop, and the narrowest the console is laid out for. */
const SHOT_SIZES = [
  [1440, 900],
  [1024, 700],
] as const;

/** Go to `screen` and open what the screenshots and the layout check show of it: History's newest changes, the Traffic threshold moved, the drift notes. */
async function showScreen(page: Page, screen: (typeof SCREENS)[number]): Promise<void> {
  await goTo(page, screen);
  if (screen === 'overview') await expect(page.getByText('File drift')).toBeVisible();
  if (screen === 'traffic') {
    await page.getByRole('slider', { name: /What if the threshold were/ }).focus();
    for (let i = 0; i < 12; i++) await page.keyboard.press('PageDown');
  }
  if (screen === 'yaml') await expect(page.getByText('The configuration file changed on disk')).toBeVisible();
  if (screen === 'history') {
    const show = page.getByRole('button', { name: /Show the \d+ changes? of revision/ }).first();
    if (await show.isVisible()) await show.click();
  }
}
const update = process.env.MMTC_UPDATE_SCREENSHOTS === '1';

let same: Worker;
let other: Worker;
let serve: Serve;

test.beforeAll(async () => {
  same = await startWorker('tokenspeed');
  other = await startWorker('vllm', ['--shm-namespace-id', otherShmToken()]);
  serve = await startServe({
    config: `# GPU rig 1: router config\nmultimodal_tensor_transport: auto\npolicy: least_load\nhealth_check_interval_secs: 0.5\nworkers:\n  - url: ${same.url}\n    runtime: tokenspeed\n  - url: ${other.url}\n    multimodal_shm_min_bytes: 0\n`,
    env: { SMG_TOKENSPEED_MM_SHM_MIN_BYTES: '131072' },
  });
  await waitHealthy(serve, 2);
  // A few revisions for History.
  let view = await serve.call<{ revision: number; config: Record<string, unknown> }>('config.get');
  await serve.call('config.apply', { draft: { ...view.config, policy: 'round_robin' }, expectedRevision: view.revision });
  view = await serve.call('config.get');
  await serve.call('config.apply', { draft: { ...view.config, multimodal_shm_min_bytes: 262144 }, expectedRevision: view.revision });
  await waitHealthy(serve, 2);
});

test.afterAll(async () => {
  const files = serve?.shmFiles() ?? [];
  await serve?.stop();
  await same?.stop();
  await other?.stop();
  expect(files).toEqual([]);
});

test('every screen passes axe in light and dark, with a screenshot of each', async ({ page }, testInfo) => {
  test.setTimeout(480_000);
  // The page runs under the console's strict CSP: no violation, no page error, anywhere.
  const pageErrors: string[] = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  await page.addInitScript(() => {
    const w = window as unknown as { __csp: string[] };
    w.__csp = [];
    document.addEventListener('securitypolicyviolation', (e) =>
      w.__csp.push(`${e.violatedDirective} ${e.blockedURI} ${e.sourceFile}:${e.lineNumber}:${e.columnNumber} ${e.sample}`),
    );
  });
  await openConsole(page, serve);
  // API traffic of several sizes, over both workers.
  for (const [w, h] of [
    [448, 448],
    [640, 480],
    [224, 224],
    [1024, 768],
    [96, 96],
    [800, 600],
    [320, 240],
    [1280, 720],
  ] as const)
    expect(await apiChat(serve, w, h)).toBe(200);

  // Doctor with real results: the checklist, a test tensor and a calibration.
  await goTo(page, 'doctor');
  await page.getByRole('button', { name: 'Run checks' }).click();
  await expect(page.getByTestId('checklist')).toBeVisible();
  await page.getByRole('button', { name: 'Send test tensor' }).click();
  await expect(page.getByTestId('test-result')).toBeVisible();
  await page.getByRole('spinbutton', { name: 'Samples per size' }).fill('1');
  await page.getByRole('button', { name: 'Calibrate', exact: true }).click();
  await expect(page.getByTestId('calibration-result')).toBeVisible({ timeout: 150_000 });

  // The file changed on disk behind the console's back: drift.
  writeFileSync(serve.configFile, readFileSync(serve.configFile, 'utf8').replace(/request_timeout_secs: \d+\n|$/, '') + 'request_timeout_secs: 300\n');

  // YAML with an error, so the screen shows how errors read.
  await goTo(page, 'yaml');
  await page
    .getByRole('textbox', { name: 'YAML to import' })
    .fill(`multimodal_tensor_transport: auto\nmultimodal_shm_min_bytes: 64k\nworkers:\n  - url: ${same.url}\n`);
  await expect(page.getByTestId('yaml-issues')).toBeVisible();

  if (update) mkdirSync(path.join(ROOT, 'docs', 'screenshots'), { recursive: true });
  const problems: string[] = [];
  for (const scheme of ['light', 'dark'] as const) {
    await page.emulateMedia({ colorScheme: scheme });
    for (const [width, height] of SHOT_SIZES) {
      await page.setViewportSize({ width, height });
      for (const screen of SCREENS) {
        await showScreen(page, screen);
        await page.waitForTimeout(450);
        if (width === 1440) {
          const results = await new AxeBuilder({ page }).analyze();
          for (const v of results.violations) {
            if (v.impact === 'serious' || v.impact === 'critical')
              problems.push(
                `${screen} (${scheme}): ${v.id} ${v.help} — ${v.nodes
                  .slice(0, 3)
                  .map((n) => n.target.join(' '))
                  .join(' | ')}`,
              );
          }
        }
        for (const p of await layoutProblems(page)) problems.push(`${screen} at ${width} px (${scheme}): ${p}`);
        // The shell scrolls inside <main>: grow the window to the content so the shot shows all of it.
        const full = await page.evaluate(() => Math.ceil(document.getElementById('main')!.scrollHeight));
        await page.setViewportSize({ width, height: Math.min(4000, Math.max(height, full)) });
        await page.waitForTimeout(200);
        const name = `${screen}-${width}-${scheme}`;
        const file = testInfo.outputPath(`${name}.png`);
        await page.screenshot({ path: file });
        await page.setViewportSize({ width, height });
        await testInfo.attach(name, { path: file, contentType: 'image/png' });
        if (update) copyFileSync(file, path.join(ROOT, 'docs', 'screenshots', `${name}.png`));
      }
    }
  }
  expect(problems).toEqual([]);
  expect(await page.evaluate(() => (window as unknown as { __csp: string[] }).__csp)).toEqual([]);
  expect(pageErrors).toEqual([]);
});

test('layout at 1440, 1280 and 1024 px: nothing clipped on any screen, every column and action in view', async ({ page }, testInfo) => {
  test.setTimeout(180_000);
  // Traffic for the charts' time axes, over both workers.
  for (const [w, h] of [
    [448, 448],
    [640, 480],
    [224, 224],
  ] as const)
    expect(await apiChat(serve, w, h)).toBe(200);
  await openConsole(page, serve);
  await page.getByRole('navigation', { name: 'Screens' }).waitFor();
  // Every screen at every width is looked at before the verdict: the list names all that is cut.
  const problems: string[] = [];
  for (const [width, height] of [
    [1440, 900],
    [1280, 900],
    [1024, 700],
  ] as const) {
    await page.setViewportSize({ width, height });
    for (const screen of SCREENS) {
      await goTo(page, screen);
      if (screen === 'traffic') await page.getByRole('checkbox', { name: /show console traffic/ }).check();
      // A YAML import that parses: its diff against what runs, in a table.
      if (screen === 'yaml') {
        await page
          .getByRole('textbox', { name: 'YAML to import' })
          .fill(
            `multimodal_tensor_transport: shm\nmultimodal_shm_min_bytes: 1048576\nrequest_timeout_secs: 120\nworkers:\n  - url: ${same.url}\n    runtime: tokenspeed\n`,
          );
        await expect(page.getByTestId('yaml-issues')).toHaveCount(0);
        await expect(page.getByText('multimodal_shm_min_bytes').first()).toBeVisible();
      }
      if (screen === 'history')
        await page
          .getByRole('button', { name: /Show the \d+ changes? of revision/ })
          .first()
          .click();
      await page.waitForTimeout(300);
      for (const p of await layoutProblems(page)) problems.push(`${screen} at ${width} px: ${p}`);
      if (width !== 1440) await shot(page, testInfo, `${screen}-${width}`);
    }
    // The Traffic table keeps its key columns at every width.
    await goTo(page, 'traffic');
    for (const name of ['Size', 'Path', 'Reason']) {
      const header = page.getByRole('columnheader', { name: new RegExp(`^${name}`) });
      await header.scrollIntoViewIfNeeded();
      await expect(header, `the ${name} column at ${width} px`).toBeInViewport({ ratio: 1 });
    }
  }
  expect(problems).toEqual([]);
});
