// Stopping a real `mmtc router` by signal, as an operator's Ctrl-C reaches it (docs/console.md,
// "Stopping"): the copies of one Ctrl-C that a terminal and the wrappers in front of it deliver
// leave nothing of the router in /dev/shm, and a second, deliberate Ctrl-C stops at once.
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startMmtc } from '../test/cli.ts';
import { cacheAnImage, cacheFilesOf } from '../test/router-process.ts';

const kills: Array<() => void> = [];
afterEach(() => {
  for (const kill of kills.splice(0).reverse()) kill();
});

/** A router of its own (no worker configured: it starts its embedded reference worker). */
async function startRouterProcess() {
  const p = await startMmtc(['router', '--port', '0'], /^\s+transport /m);
  kills.push(() => {
    if (existsSync(`/proc/${p.pid}`)) process.kill(p.pid, 'SIGKILL');
    // A test that failed leaves no file of its router behind.
    for (const f of cacheFilesOf(p.pid)) rmSync(path.join('/dev/shm', f), { force: true });
  });
  const base = /listening on (http:\/\/\S+)/.exec(p.output())![1]!;
  return { p, base };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Resolves once the server at `base` refuses a new connection (it has begun to stop). */
async function untilRefused(base: string): Promise<void> {
  const { hostname, port } = new URL(base);
  for (let i = 0; i < 2000; i++) {
    const refused = await new Promise<boolean>((resolve) => {
      const socket = connect(Number(port), hostname);
      socket.once('connect', () => {
        socket.destroy();
        resolve(false);
      });
      socket.once('error', () => resolve(true));
    });
    if (refused) return;
  }
  throw new Error(`${base} still takes connections`);
}

describe('mmtc router stopped by signal', () => {
  it('one Ctrl-C delivered twice (by the terminal, then by a wrapper once it is stopping): a normal stop, exit 0, its pixel-cache entry and heartbeat gone from /dev/shm', async () => {
    const { p, base } = await startRouterProcess();
    const held = await cacheAnImage(base, p.pid);
    expect(held.filter((f) => f.endsWith('-0'))).toHaveLength(1); // the heartbeat
    expect(held.length).toBeGreaterThanOrEqual(2); // and the entry
    // The terminal's copy, then the wrapper's once the router is stopping (it no longer takes
    // connections) and still holds its files: the moment that killed it before.
    process.kill(p.pid, 'SIGINT');
    await untilRefused(base);
    const status = await p.stop('SIGINT');
    expect(cacheFilesOf(p.pid), 'left in /dev/shm').toEqual([]);
    expect(status, p.errors()).toBe(0);
    expect(p.errors()).toContain('mmtc: SIGINT: stopping');
    expect(p.errors()).not.toContain('stopping at once');
  });

  it('a second, deliberate Ctrl-C while the stop waits (its embedded worker stopped): exits at once with 130, the cache files still removed', async () => {
    const { p, base } = await startRouterProcess();
    expect(await cacheAnImage(base, p.pid)).not.toEqual([]);
    // The embedded worker, frozen: the router's stop waits for it to exit.
    const children = readFileSync(`/proc/${p.pid}/task/${p.pid}/children`, 'utf8').trim().split(/\s+/).map(Number);
    expect(children).toHaveLength(1);
    const worker = children[0]!;
    kills.push(() => {
      if (existsSync(`/proc/${worker}`)) process.kill(worker, 'SIGKILL');
    });
    process.kill(worker, 'SIGSTOP');
    process.kill(p.pid, 'SIGINT');
    await sleep(1500);
    expect(existsSync(`/proc/${p.pid}`), 'the stop waits for the frozen worker').toBe(true);
    const t0 = performance.now();
    const status = await p.stop('SIGINT');
    expect(performance.now() - t0).toBeLessThan(2000);
    expect(status, p.errors()).toBe(130);
    expect(p.errors()).toContain('mmtc: SIGINT again: stopping at once');
    expect(cacheFilesOf(p.pid)).toEqual([]);
  });
});
