import { execFileSync } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, statSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { TensorEvent } from './event-schema.ts';
import { TensorEventBus } from '../telemetry/events.ts';
import { TransportMetrics } from '../telemetry/metrics.ts';
import { deadPid, makeShmTestDir, tensorName, writeAt } from '../test/shm-dir.ts';
import type { TransportDecision } from './decision.ts';
import { placeTensor, type PlacementContext } from './placement.ts';
import type { OrphanSweepResult } from './orphans.ts';
import { realShmFileOps, ShmRequestScope, ShmWriter, type ShmFileOps } from './shm-writer.ts';
import { isOurTensorName } from './shm-names.ts';

const HOUR = 3600_000;

let shm: ReturnType<typeof makeShmTestDir>;
beforeEach(() => {
  shm = makeShmTestDir();
});
afterEach(() => shm.remove());

const SHM_ON: TransportDecision = { shmEnabled: true, reason: 'shm_writable' };

function context(writer: ShmWriter, minBytes: number, decision = SHM_ON) {
  const metrics = new TransportMetrics();
  const events: TensorEvent[] = [];
  const bus = new TensorEventBus();
  const ctx: PlacementContext = {
    requestId: 'req-1',
    revision: 1,
    source: 'api',
    worker: 'grpc://w:1',
    runtime: 'tokenspeed',
    decision,
    minBytes,
    writer,
    scope: new ShmRequestScope(writer.dir),
    metrics,
    events: bus,
  };
  const origPublish = bus.publish.bind(bus);
  bus.publish = (e) => {
    events.push(e);
    origPublish(e);
  };
  return { ctx, metrics, events };
}

const bytes = (n: number, seed = 1) => Uint8Array.from({ length: n }, (_, i) => (i * 31 + seed) & 0xff);

describe('ShmWriter', () => {
  it('creates a 0600 file named smg-tokenspeed-<pid>-<nanos>-<seq> holding exactly the bytes', async () => {
    const writer = new ShmWriter({ dir: shm.dir });
    const data = bytes(100_000);
    const r = await writer.write(data);
    if (!r.ok) throw new Error(r.error);
    expect(r.handle.name).toMatch(new RegExp(`^smg-tokenspeed-${process.pid}-\\d+-1$`));
    expect(r.handle).toMatchObject({ offset: 0, nbytes: 100_000, owner_id: `smg:${process.pid}` });
    const file = path.join(shm.dir, r.handle.name);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(Buffer.compare(readFileSync(file), Buffer.from(data))).toBe(0);
    const second = await writer.write(bytes(10));
    expect(second.ok && second.handle.name.endsWith('-2')).toBe(true);
  });

  it('writes large tensors (async path) intact', async () => {
    const writer = new ShmWriter({ dir: shm.dir });
    const data = bytes(3 * 1024 * 1024 + 7, 9);
    const r = await writer.write(data);
    if (!r.ok) throw new Error(r.error);
    expect(Buffer.compare(readFileSync(path.join(shm.dir, r.handle.name)), Buffer.from(data))).toBe(0);
  });

  it('never clobbers a pre-existing name: the write fails, the tensor goes inline, the other file is untouched', async () => {
    const writer = new ShmWriter({ dir: shm.dir });
    const taken = `smg-tokenspeed-${process.pid}-1-1`;
    writeFileSync(path.join(shm.dir, taken), 'someone else');
    writer.nextName = () => taken;
    const { ctx, metrics, events } = context(writer, 0);
    const placed = await placeTensor(ctx, { name: 'encoder_input', shape: [4], dtype: 'float32', bytes: bytes(16) });
    expect(placed.payload.kind).toBe('inline');
    expect(readFileSync(path.join(shm.dir, taken), 'utf8')).toBe('someone else');
    expect(events[0]).toMatchObject({ path: 'inline', reason: 'shm_write_failed' });
    expect(events[0]!.detail).toContain('EEXIST');
    expect(await metrics.text()).toContain('smg_mm_shm_write_failures_total{runtime="tokenspeed"} 1');
  });

  it.each([
    ['ENOSPC', 'write'],
    ['EACCES', 'open'],
  ])('falls back to inline on %s (at %s) and leaves no file', async (code, at) => {
    const fail = () => {
      throw Object.assign(new Error(`injected ${code}`), { code });
    };
    const ops: ShmFileOps = { ...realShmFileOps, ...(at === 'write' ? { writeSync: fail, write: async () => fail() } : { openExclusive: fail }) };
    const writer = new ShmWriter({ dir: shm.dir, ops });
    const { ctx, metrics, events } = context(writer, 0);
    for (const n of [1024, 2 * 1024 * 1024]) {
      const placed = await placeTensor(ctx, { name: 't', shape: [n], dtype: 'uint8', bytes: bytes(n) });
      expect(placed.payload).toMatchObject({ kind: 'inline' });
      expect(placed.payload.kind === 'inline' && placed.payload.bytes.byteLength).toBe(n);
    }
    expect(shm.files()).toEqual([]);
    expect(ctx.scope.pending).toEqual([]);
    expect(events.map((e) => e.reason)).toEqual(['shm_write_failed', 'shm_write_failed']);
    expect(events[0]!.detail).toContain(code);
    const text = await metrics.text();
    expect(text).toContain('smg_mm_shm_write_failures_total{runtime="tokenspeed"} 2');
    expect(text).toContain('smg_mm_tensors_total{runtime="tokenspeed",path="inline"} 2');
  });

  it('the probe creates, writes and removes its own file; an unwritable dir says why', () => {
    const writer = new ShmWriter({ dir: shm.dir });
    expect(writer.probe()).toEqual({ writable: true });
    expect(shm.files()).toEqual([]);
    const missing = new ShmWriter({ dir: path.join(shm.dir, 'nope') });
    const r = missing.probe();
    expect(r.writable).toBe(false);
    expect(r.error).toContain('ENOENT');
    expect(r.error).not.toMatch(/ENOENT: ENOENT/);
  });

  it("the probe's name cannot be taken ahead of it: an entry planted under the pid's name is left alone and the probe passes", () => {
    const pid = 424242;
    const planted = path.join(shm.dir, `smg-tokenspeed-probe-${pid}`);
    writeFileSync(planted, 'planted');
    try {
      expect(new ShmWriter({ dir: shm.dir, pid }).probe()).toEqual({ writable: true });
      expect(readFileSync(planted, 'utf8')).toBe('planted');
    } finally {
      unlinkSync(planted);
    }
  });

  it('constructing a writer and writing sweep nothing; start() sweeps at once, logs one line, reports the result', async () => {
    const dead = deadPid();
    const old = Date.now() - 2 * HOUR;
    const orphan = writeAt(shm.dir, tensorName(dead, old), old, 'orphan');
    const lines: string[] = [];
    const results: OrphanSweepResult[] = [];
    const writer = new ShmWriter({ dir: shm.dir, maxFileAgeMs: 60_000, sweepIntervalMs: 0, log: (l) => lines.push(l), onSweep: (r) => results.push(r) });
    const w = await writer.write(bytes(8));
    if (!w.ok) throw new Error(w.error);
    expect(existsSync(orphan)).toBe(true);
    expect(writer.lastSweep).toBeUndefined();
    const first = writer.start();
    expect(first).toMatchObject({ removed: 1, removedBytes: 6, byPid: { [dead]: 1 }, reasonsByPid: { [dead]: ['dead'] }, keptYoung: 1, errors: [] });
    expect(shm.files()).toEqual([w.handle.name]);
    expect(results).toEqual([first]);
    expect(lines).toEqual([
      `${shm.dir} orphan sweep: removed 1 orphaned tensor file (6 B) of pid ${dead} (gone: 1); kept 1 too young to judge and 0 of live older processes`,
    ]);
    expect(writer.start()).toBe(first); // once
    expect(writer.sweepOrphans().removed).toBe(0); // the call shape doctor uses: a fresh sweep each call
    writer.close();
  });

  it('sweeps again every sweepIntervalMs (paced, one at a time), silent when nothing is found, a planted fifo logged once; close() stops it', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    try {
      const dead = deadPid();
      const lines: string[] = [];
      let sweeps = 0;
      const writer = new ShmWriter({ dir: shm.dir, maxFileAgeMs: 60_000, sweepIntervalMs: 1000, log: (l) => lines.push(l), onSweep: () => (sweeps += 1) });
      /** Fire the timer `times` times, each sweep (paced: it ends later) awaited, bounded. */
      const tick = async (times: number) => {
        for (let i = 0; i < times; i++) {
          const before = sweeps;
          vi.advanceTimersByTime(1000);
          for (let k = 0; k < 500 && sweeps === before && writer['timer']; k++) await new Promise((r) => setTimeout(r, 2));
        }
      };
      writer.start();
      expect([sweeps, lines]).toEqual([1, []]);
      const old = Date.now() - 2 * HOUR;
      writeAt(shm.dir, tensorName(dead, old, 1), old);
      const fifo = path.join(shm.dir, tensorName(dead, old, 2));
      execFileSync('mkfifo', [fifo]);
      await tick(1);
      expect(sweeps).toBe(2);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toContain(`removed 1 orphaned tensor file`);
      expect(lines[0]).toContain(`left 1 entry under our name that is not a regular file: ${path.basename(fifo)} (fifo)`);
      await tick(3);
      expect(sweeps).toBe(5);
      expect(lines).toHaveLength(1); // the same fifo again is not news
      expect(shm.files()).toEqual([path.basename(fifo)]);
      writer.close();
      writeAt(shm.dir, tensorName(dead, old, 3), old);
      await tick(5);
      expect(sweeps).toBe(5);
      expect(shm.files()).toHaveLength(2);
    } finally {
      vi.useRealTimers();
    }
  });

  it("the minute sweep never holds the event loop: over 20,000 entries anyone can plant (another router's names, stamped now or ahead), other callbacks run throughout it", async () => {
    const dead = deadPid();
    const now = Date.now();
    for (let i = 0; i < 20_000; i++) closeSync(openSync(path.join(shm.dir, tensorName(dead, now + (i % 2) * HOUR, i + 1)), 'wx'));
    // The event loop's turns: a chain of setImmediate callbacks, as /health's answers would be.
    let turns = 0;
    let spinning = true;
    const spin = () => {
      turns += 1;
      if (spinning) setImmediate(spin);
    };
    let turnsAtStart: number | undefined;
    const mark = () => void (turnsAtStart ??= turns);
    const ops: ShmFileOps = {
      ...realShmFileOps,
      readdir: (dir) => (mark(), realShmFileOps.readdir(dir)),
      entries: (dir) => (mark(), realShmFileOps.entries!(dir)),
    };
    let swept!: (r: OrphanSweepResult) => void;
    const periodic = new Promise<OrphanSweepResult>((resolve) => (swept = resolve));
    let sweeps = 0;
    const writer = new ShmWriter({ dir: shm.dir, ops, maxFileAgeMs: 60_000, sweepIntervalMs: 50, onSweep: (r) => (++sweeps === 2 ? swept(r) : undefined) });
    writer.start(); // the start-up sweep: all at once, before a router listens
    turnsAtStart = undefined;
    setImmediate(spin);
    const r = await periodic;
    const turnsDuring = turns - turnsAtStart!;
    spinning = false;
    writer.close();
    expect(r).toMatchObject({ removed: 0, keptYoung: 20_000, errors: [] });
    expect(shm.files()).toHaveLength(20_000);
    expect(turnsDuring).toBeGreaterThan(10);
  }, 60_000);

  it('the periodic timer never keeps the process alive', () => {
    const writer = new ShmWriter({ dir: shm.dir });
    writer.start();
    const timer = writer['timer'];
    expect(timer?.hasRef()).toBe(false);
    writer.close();
    expect(writer['timer']).toBeUndefined();
  });

  it('a failed request unlinks every file it created, and only names with our prefix', async () => {
    const writer = new ShmWriter({ dir: shm.dir });
    const scope = new ShmRequestScope(shm.dir);
    for (let i = 0; i < 3; i++) await writer.write(bytes(64), scope);
    writeFileSync(path.join(shm.dir, 'not-ours'), 'keep');
    scope.track('not-ours');
    scope.track('../etc/passwd');
    expect(scope.pending).toHaveLength(3);
    expect(scope.cleanup()).toBe(3);
    expect(shm.files()).toEqual(['not-ours']);
    expect(isOurTensorName('smg-tokenspeed-1-2-3')).toBe(true);
    expect(isOurTensorName('smg-tokenspeed-probe-1')).toBe(false);
  });

  it('after a successful request a file the worker left in place (it does not unlink) is removed, and its bytes are no longer outstanding', async () => {
    const writer = new ShmWriter({ dir: shm.dir });
    const scope = writer.newScope();
    const r = await writer.write(bytes(64), scope);
    expect(r.ok && writer.outstanding).toBe(64);
    expect(shm.files()).toHaveLength(1);
    expect(scope.complete()).toBe(1); // the worker read it but left it
    expect(shm.files()).toEqual([]);
    expect(writer.outstanding).toBe(0);
    expect(scope.cleanup()).toBe(0);
  });

  it('above multimodal_shm_max_outstanding_bytes tensors go inline (shm_budget_exceeded) until earlier files are gone', async () => {
    const writer = new ShmWriter({ dir: shm.dir, maxOutstandingBytes: () => 10_000 });
    const first = context(writer, 0);
    first.ctx.scope = writer.newScope();
    const a = await placeTensor(first.ctx, { name: 'a', shape: [6000], dtype: 'uint8', bytes: bytes(6000) });
    const b = await placeTensor(first.ctx, { name: 'b', shape: [6000], dtype: 'uint8', bytes: bytes(6000) });
    expect([a.payload.kind, b.payload.kind]).toEqual(['shm', 'inline']);
    expect(first.events.map((e) => e.reason)).toEqual(['shm_writable', 'shm_budget_exceeded']);
    expect(shm.files()).toHaveLength(1);
    first.ctx.scope.complete();
    const again = await placeTensor(first.ctx, { name: 'c', shape: [6000], dtype: 'uint8', bytes: bytes(6000) });
    expect(again.payload.kind).toBe('shm');
    first.ctx.scope.cleanup();
    expect(shm.files()).toEqual([]);
  });
});

describe('files written by someone else (ShmWriter.reserve, docs/transport.md "Writing a tensor")', () => {
  it('a reserved name counts against the budget at once; placeTensor sends that file as it is; a reserved file left unused is unlinked', async () => {
    const writer = new ShmWriter({ dir: shm.dir, maxOutstandingBytes: () => 10_000 });
    const { ctx, events } = context(writer, 0);
    ctx.scope = writer.newScope();
    const data = bytes(6000);
    const used = writer.reserve(6000, ctx.scope)!;
    expect(isOurTensorName(used.name)).toBe(true);
    expect(writer.outstanding).toBe(6000);
    expect(writer.reserve(6000, ctx.scope)).toBeUndefined(); // over the budget: nothing named, nothing counted
    expect(statSync(used.path).mode & 0o777).toBe(0o600); // created here, empty
    expect(statSync(used.path).size).toBe(0);
    writeFileSync(used.path, data, { flag: 'r+' }); // what the pool thread does
    ctx.prewritten = [{ bytes: data, name: used.name, micros: 42 }];
    const placed = await placeTensor(ctx, { name: 'encoder_input', shape: [6000], dtype: 'uint8', bytes: data });
    expect(placed.payload).toEqual({ kind: 'shm', handle: { name: used.name, offset: 0, nbytes: 6000, owner_id: `smg:${process.pid}` } });
    expect(events[0]).toMatchObject({ path: 'shm', reason: 'shm_writable', writeMicros: 42 });
    expect(ctx.prewritten).toEqual([]);
    expect(readFileSync(used.path).equals(Buffer.from(data))).toBe(true);
    // Other bytes than those of a written file are placed the usual way.
    const other = await placeTensor(ctx, { name: 'other', shape: [100], dtype: 'uint8', bytes: bytes(100) });
    expect(other.payload.kind).toBe('shm');
    expect(shm.files()).toHaveLength(2);
    const unused = writer.reserve(1000, ctx.scope)!;
    ctx.scope.discard(unused.name);
    expect(existsSync(unused.path)).toBe(false);
    expect(writer.outstanding).toBe(6100);
    ctx.scope.complete();
    expect(writer.outstanding).toBe(0);
    expect(shm.files()).toEqual([]);
  });

  it('a request that fails unlinks its reserved files too, written or not', async () => {
    const writer = new ShmWriter({ dir: shm.dir });
    const scope = writer.newScope();
    const a = writer.reserve(10, scope)!;
    writer.reserve(10, scope); // never written (the image failed first)
    writeFileSync(a.path, 'x'.repeat(10), { flag: 'r+' });
    expect(scope.cleanup()).toBe(2);
    expect(shm.files()).toEqual([]);
    expect(writer.outstanding).toBe(0);
  });

  it('a name someone else holds is not reserved: nothing counted, nothing tracked, their file untouched', async () => {
    const writer = new ShmWriter({ dir: shm.dir });
    const scope = writer.newScope();
    const taken = writer.nextName();
    writeFileSync(path.join(shm.dir, taken), 'not ours', { flag: 'wx' });
    vi.spyOn(writer, 'nextName').mockReturnValueOnce(taken);
    expect(writer.reserve(10, scope)).toBeUndefined();
    expect(writer.outstanding).toBe(0);
    expect(scope.pending).toEqual([]);
    scope.cleanup();
    expect(readFileSync(path.join(shm.dir, taken), 'utf8')).toBe('not ours');
    unlinkSync(path.join(shm.dir, taken));
  });
});

describe('placeTensor threshold', () => {
  const MIN = 4096;
  it.each([
    [MIN - 1, 'inline', 'below_threshold'],
    [MIN, 'shm', 'shm_writable'],
    [MIN + 1, 'shm', 'shm_writable'],
  ])('%i bytes with min %i goes %s', async (n, path_, reason) => {
    const writer = new ShmWriter({ dir: shm.dir });
    const { ctx, events } = context(writer, MIN);
    const placed = await placeTensor(ctx, { name: 't', shape: [n], dtype: 'uint8', bytes: bytes(n) });
    expect(placed.payload.kind).toBe(path_);
    expect(events[0]).toMatchObject({ path: path_, reason, nbytes: n, requestId: 'req-1', tensor: 't', shape: [n], dtype: 'uint8' });
    expect(shm.files()).toHaveLength(path_ === 'shm' ? 1 : 0);
  });

  it('threshold 0 sends every tensor through /dev/shm, even an empty one', async () => {
    const writer = new ShmWriter({ dir: shm.dir });
    const { ctx } = context(writer, 0);
    const placed = await placeTensor(ctx, { name: 'empty', shape: [0], dtype: 'float32', bytes: new Uint8Array(0) });
    expect(placed.payload.kind).toBe('shm');
    const file = path.join(shm.dir, placed.payload.kind === 'shm' ? placed.payload.handle.name : '');
    expect(statSync(file).size).toBe(0);
  });

  it('a decision without SHM keeps everything inline and counts it', async () => {
    const writer = new ShmWriter({ dir: shm.dir });
    const { ctx, metrics, events } = context(writer, 0, { shmEnabled: false, reason: 'auto_different_shm' });
    await placeTensor(ctx, { name: 't', shape: [2, 2], dtype: 'float32', bytes: bytes(16) });
    expect(events[0]).toMatchObject({ path: 'inline', reason: 'auto_different_shm', writeMicros: 0 });
    expect(await metrics.text()).toContain('smg_mm_tensor_bytes_total{runtime="tokenspeed",path="inline"} 16');
    expect(shm.files()).toEqual([]);
  });
});

describe('symlink safety of the writer', () => {
  it('does not follow a planted symlink at the next name', async () => {
    const writer = new ShmWriter({ dir: shm.dir });
    const target = path.join(shm.dir, 'victim');
    writeFileSync(target, 'precious');
    const name = `smg-tokenspeed-${process.pid}-5-5`;
    symlinkSync(target, path.join(shm.dir, name));
    writer.nextName = () => name;
    const r = await writer.write(bytes(8));
    expect(r.ok).toBe(false);
    expect(readFileSync(target, 'utf8')).toBe('precious');
    expect(existsSync(path.join(shm.dir, name))).toBe(true);
  });
});
