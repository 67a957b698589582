// The pixel cache as the console shows it (handlers/pixel-cache.ts), in this process over a
// real reference worker, each router with a private SHM directory: the budget's source and
// where its value came from, why the cache is off and what the remedy says for each input
// that can turn it off, an apply that turns it on at once, and a router without a cache.
// A repeated image and the flush over both bindings are in the contract suite
// (test/contract-suite.ts).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readTransportEnvironment } from '../config/env.ts';
import type { ConfigFlags } from '../config/load.ts';
import { startMmtc } from '../test/cli.ts';
import { formatShmName, ourPidNamespace, shmStampNanos } from '../transport/shm-names.ts';
import { startConsole, type RunningConsole } from './console.ts';
import { ContractError } from './contract.ts';

const dir = mkdtempSync(path.join(tmpdir(), 'mmtc-pixel-cache-'));
const env = readTransportEnvironment({});
const meta = { client: 'http' as const };
const MiB = 1024 * 1024;
let worker: Awaited<ReturnType<typeof startMmtc>>;
let url: string;

beforeAll(async () => {
  worker = await startMmtc(['worker', '--runtime', 'tokenspeed', '--port', '0'], /listening on grpc:\/\//);
  url = worker.line.match(/grpc:\/\/\S+/)![0];
}, 60_000);
afterAll(async () => {
  await worker.stop();
  rmSync(dir, { recursive: true, force: true });
});

let n = 0;
/** A console on a config file of its own (`yaml` before the worker list), with a private SHM directory unless `shmDir` says otherwise. */
async function withConsole(
  options: { yaml?: string; flags?: Partial<ConfigFlags>; processEnv?: Record<string, string>; shmDir?: string },
  body: (c: RunningConsole, file: string) => Promise<void>,
): Promise<void> {
  n += 1;
  const file = path.join(dir, `router-${n}.yaml`);
  writeFileSync(file, `${options.yaml ?? ''}workers:\n  - url: ${url}\n`);
  const shmDir = options.shmDir ?? mkdtempSync(path.join(dir, 'shm-'));
  const c = await startConsole({ flags: { config: file, port: '0', ...options.flags }, env, processEnv: options.processEnv ?? {}, shmDir, log: () => {} });
  try {
    await body(c, file);
  } finally {
    await c.close();
  }
}

const cacheOf = async (c: RunningConsole) => (await c.backend.invoke('overview', {}, meta)).pixelCache!;

describe('the pixel cache on the overview', () => {
  it('on by default: the default budget, in force, and nothing off', async () => {
    await withConsole({}, async (c) => {
      expect(await cacheOf(c)).toEqual({
        budgetBytes: 512 * MiB,
        heldBytes: 0,
        entries: 0,
        hits: 0,
        misses: 0,
        evictions: 0,
        tampered: 0,
        notStored: 0,
        flushes: 0,
        configured: { mb: 512, source: 'default', origin: null },
        off: null,
      });
    });
  });

  it('an inline hit: the entry is a file of the cache, not counted among the tensor files', async () => {
    await withConsole({ yaml: 'multimodal_tensor_transport: inline\n' }, async (c) => {
      const image = { url, width: 96, height: 96, format: 'png' as const };
      const first = await c.backend.invoke('traffic.sendTestRequest', image, meta);
      const second = await c.backend.invoke('traffic.sendTestRequest', image, meta);
      expect([first.events, second.events].map((events) => events.filter((e) => e.cache).map((e) => [e.path, e.cache]))).toEqual([
        [['inline', 'miss']],
        [['inline', 'hit']],
      ]);
      const overview = await c.backend.invoke('overview', {}, meta);
      expect(overview.pixelCache).toMatchObject({ entries: 1, hits: 1, misses: 1 });
      expect(overview.files).toMatchObject({ count: 0, bytes: 0, cacheFiles: 1, cacheBytes: overview.pixelCache!.heldBytes });
      await c.backend.invoke('pixelCache.flush', {}, meta);
      expect((await c.backend.invoke('overview', {}, meta)).files).toMatchObject({ cacheFiles: 0, cacheBytes: 0 });
    });
  });

  it("Our tensor files counts this router's files only: another router's in the same directory are counted apart", async () => {
    const shmDir = mkdtempSync(path.join(dir, 'shm-shared-'));
    // Another router, alive (pid 1 stands for it), wrote a tensor and a pixel-cache entry a moment ago.
    const stampNanos = shmStampNanos();
    const theirs = [
      formatShmName({ kind: 'tensor', pid: 1, stampNanos, seq: 1 }),
      formatShmName({ kind: 'cache-entry', pidNamespace: ourPidNamespace(), pid: 1, stampNanos, seq: 1 }),
    ];
    for (const name of theirs) writeFileSync(path.join(shmDir, name), Buffer.alloc(4096));
    await withConsole({ yaml: 'multimodal_tensor_transport: inline\n', shmDir }, async (c) => {
      await c.backend.invoke('traffic.sendTestRequest', { url, width: 96, height: 96, format: 'png' }, meta);
      const overview = await c.backend.invoke('overview', {}, meta);
      expect(overview.files).toMatchObject({ count: 0, bytes: 0, cacheFiles: 1, cacheBytes: overview.pixelCache!.heldBytes, otherFiles: 2, otherBytes: 8192 });
    });
    for (const name of theirs) rmSync(path.join(shmDir, name), { force: true });
  });

  it('off by multimodal_pixel_cache_mb: 0 in the file, naming the key and its line; an apply from the console turns it on at once', async () => {
    await withConsole({ yaml: 'multimodal_pixel_cache_mb: 0\n' }, async (c, file) => {
      const off = await cacheOf(c);
      expect(off).toMatchObject({
        budgetBytes: 0,
        configured: { mb: 0, source: 'multimodal_pixel_cache_mb', origin: expect.stringMatching(new RegExp(`^${file.replaceAll('.', '\\.')}:1:\\d+$`)) },
      });
      expect(off.off).toEqual({
        reason: 'budget_zero',
        message: `off: multimodal_pixel_cache_mb is 0, set in ${off.configured.origin}`,
        remedy: 'set multimodal_pixel_cache_mb to the MiB to keep on the Router screen (it applies at once), or leave it unset for the default 512 MiB',
      });
      const view = await c.backend.invoke('config.get', {}, meta);
      await c.backend.invoke('config.apply', { draft: { ...view.config, multimodal_pixel_cache_mb: 64 }, expectedRevision: view.revision }, meta);
      expect(await cacheOf(c)).toMatchObject({
        budgetBytes: 64 * MiB,
        off: null,
        configured: { mb: 64, source: 'multimodal_pixel_cache_mb', origin: 'console (HTTP)' },
      });
    });
  });

  it("off by SMG_MM_PIXEL_CACHE_MB=0 in the router's environment: the setting wins over it, or unset it and restart", async () => {
    await withConsole({ processEnv: { SMG_MM_PIXEL_CACHE_MB: '0' } }, async (c) => {
      const off = await cacheOf(c);
      expect(off).toMatchObject({ budgetBytes: 0, configured: { mb: 0, source: 'SMG_MM_PIXEL_CACHE_MB', origin: null } });
      expect(off.off).toEqual({
        reason: 'budget_zero',
        message: "off: SMG_MM_PIXEL_CACHE_MB=0 in the router's environment",
        remedy:
          'set multimodal_pixel_cache_mb to the MiB to keep on the Router screen (it wins over SMG_MM_PIXEL_CACHE_MB and applies at once), or unset SMG_MM_PIXEL_CACHE_MB and restart the router (the default is 512 MiB)',
      });
    });
    // The environment's own budget, when it gives one.
    await withConsole({ processEnv: { SMG_MM_PIXEL_CACHE_MB: '100' } }, async (c) => {
      expect(await cacheOf(c)).toMatchObject({ budgetBytes: 100 * MiB, configured: { mb: 100, source: 'SMG_MM_PIXEL_CACHE_MB', origin: null }, off: null });
    });
  });

  it('off by --multimodal-pixel-cache-mb 0: a change in the console lasts until a restart with the flag', async () => {
    await withConsole({ flags: { multimodalPixelCacheMb: '0' } }, async (c) => {
      const off = await cacheOf(c);
      expect(off.configured).toEqual({ mb: 0, source: 'multimodal_pixel_cache_mb', origin: '--multimodal-pixel-cache-mb' });
      expect(off.off?.remedy).toBe(
        'set multimodal_pixel_cache_mb to the MiB to keep on the Router screen (it applies at once, until the next restart: the router started with --multimodal-pixel-cache-mb 0), or restart the router without that flag',
      );
    });
  });

  it('off while the SHM directory is not writable, though the settings give a budget: it says so and keeps the configured budget apart', async () => {
    const missing = path.join(dir, 'no-such-shm');
    await withConsole({ shmDir: missing, yaml: 'multimodal_tensor_transport: inline\n' }, async (c) => {
      const off = await cacheOf(c);
      expect(off).toMatchObject({ budgetBytes: 0, configured: { mb: 512, source: 'default' } });
      expect(off.off?.reason).toBe('shm_not_writable');
      expect(off.off?.message).toMatch(new RegExp(`^off: the cache keeps its entries in ${missing}, which the router could not write at start \\(.+\\)$`));
      expect(off.off?.remedy).toBe(
        `make ${missing} writable by the router's user and restart the router: the cache then gets its budget (the default budget is 512 MiB)`,
      );
      // Nothing to flush, but nothing refused either.
      expect(await c.backend.invoke('pixelCache.flush', {}, meta)).toMatchObject({
        dropped: 0,
        pixelCache: { entries: 0, off: { reason: 'shm_not_writable' } },
      });
    });
  });

  it('a router without a pixel cache: the overview says null, and a flush is not_found', async () => {
    await withConsole({}, async (c) => {
      c.router.context.pixelCache = undefined;
      expect((await c.backend.invoke('overview', {}, meta)).pixelCache).toBeNull();
      const err = await c.backend.invoke('pixelCache.flush', {}, meta).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ContractError);
      expect(err).toMatchObject({ code: 'not_found', message: 'this router runs without a pixel cache: there is nothing to flush' });
    });
  });
});
