// The router's periodic orphan sweep runs every MMTC_ORPHAN_SWEEP_SECS (docs/transport.md,
// "Orphan sweep"): a planted orphan goes at the next sweep, with its line in the log; a
// malformed value stops the start, naming the variable and the value.
import { existsSync } from 'node:fs';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { readTransportEnvironment } from '../config/env.ts';
import { RouterConfigSchema } from '../config/schema.ts';
import { deadPid, makeShmTestDir, tensorName, writeAt } from '../test/shm-dir.ts';
import { startRouter, type RunningRouter } from './server.ts';

const shm = makeShmTestDir();
const running: RunningRouter[] = [];
afterEach(async () => {
  for (const r of running.splice(0)) await r.close();
  expect(shm.files()).toEqual([]);
});
afterAll(() => shm.remove());

const start = (processEnv: Record<string, string>, log: (line: string) => void = () => {}) =>
  startRouter({
    // A worker nobody listens on: the sweep needs no worker.
    config: RouterConfigSchema.parse({ port: 0, workers: [{ url: 'grpc://127.0.0.1:9' }] }),
    env: readTransportEnvironment({}),
    processEnv,
    shmDir: shm.dir,
    log,
  });

describe('the orphan sweep interval', () => {
  it('MMTC_ORPHAN_SWEEP_SECS=1: an orphan planted after the start goes at the next sweep, within 3 s, and the log says so', async () => {
    const lines: string[] = [];
    running.push(await start({ MMTC_ORPHAN_SWEEP_SECS: '1' }, (l) => lines.push(l)));
    const dead = deadPid();
    const old = Date.now() - 2 * 3600_000;
    const orphan = writeAt(shm.dir, tensorName(dead, old), old, 'orphan');
    const end = performance.now() + 3000;
    while (existsSync(orphan) && performance.now() < end) await new Promise((r) => setTimeout(r, 50));
    expect(existsSync(orphan)).toBe(false);
    expect(lines.filter((l) => l.includes('orphan sweep: removed 1 orphaned tensor file'))).toHaveLength(1);
  });

  it.each(['0', 'soon', '1.5', '3601'])('MMTC_ORPHAN_SWEEP_SECS=%s stops the start, naming the variable and the value', async (value) => {
    await expect(start({ MMTC_ORPHAN_SWEEP_SECS: value })).rejects.toThrow(
      `invalid value '${value}' for MMTC_ORPHAN_SWEEP_SECS: expected a whole number of seconds from 1 to 3600`,
    );
  });
});
