import { execFileSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { deadPid, liveChild, makeShmTestDir, setMtime, tensorName, writeAt } from '../test/shm-dir.ts';
import {
  DEFAULT_LIVE_OWNER_MAX_AGE_MS,
  describeSweep,
  listTensorFiles,
  OLD_FILE_SLACK_MS,
  parseBootTimeSecs,
  parseStartTicks,
  procProcessInfo,
  realOrphanFileOps,
  START_TIME_MARGIN_MS,
  sweepOrphanFiles,
  sweepOrphanFilesPaced,
  type OrphanFileOps,
  type ProcessInfo,
  type ShmEntryStat,
} from './orphans.ts';

const NOW = 1_800_000_000_000;
const MAX = 600_000;
const OLD = MAX + OLD_FILE_SLACK_MS;
const MIN = 60_000;
const HOUR = 3600_000;

const enoent = () => Object.assign(new Error('no such file'), { code: 'ENOENT' });

/** An in-memory directory: names -> lstat results. */
function fakeDir(entries: Record<string, Partial<ShmEntryStat>>) {
  const map = new Map<string, ShmEntryStat>(Object.entries(entries).map(([n, s]) => [n, { type: 'file', size: 10, mtimeMs: 0, ...s }]));
  const ops: OrphanFileOps = {
    readdir: () => [...map.keys()],
    lstat: (file) => {
      const s = map.get(path.basename(file));
      if (!s) throw enoent();
      return s;
    },
    unlink: (file) => {
      if (!map.delete(path.basename(file))) throw enoent();
    },
  };
  return { ops, names: () => [...map.keys()].sort() };
}

/** pid -> start time (ms), or 'unknown' for a process whose stat cannot be read; absent = no such process. */
function fakeProc(procs: Record<number, number | 'unknown'>, now = NOW) {
  const asked: number[] = [];
  const proc: ProcessInfo = {
    now: () => now,
    lookup: (pid) => {
      asked.push(pid);
      const p = procs[pid];
      if (p === undefined) return { alive: false };
      return { alive: true, startMs: p === 'unknown' ? undefined : p };
    },
  };
  return { proc, asked };
}

/** A file of `pid` written at `atMs`: name stamp and mtime agree, as the writer makes them. */
const at = (pid: number, atMs: number, seq = 1) => ({ [tensorName(pid, atMs, seq)]: { mtimeMs: atMs } });

describe('the orphan rule, with a staged clock and /proc', () => {
  it('age first: a file younger than maxFileAgeMs (+ slack) is kept whatever /proc says; one ms older is judged', () => {
    const dead = 1000;
    const d = fakeDir({ ...at(dead, NOW - OLD, 1), ...at(dead, NOW - OLD - 1, 2), ...at(dead, NOW - 5_000, 3), ...at(dead, NOW + HOUR, 4) });
    const { proc } = fakeProc({});
    const r = sweepOrphanFiles('/d', { ops: d.ops, proc, maxFileAgeMs: MAX });
    expect(r).toMatchObject({
      removed: 1,
      removedBytes: 10,
      byPid: { '1000': 1 },
      reasonsByPid: { '1000': ['dead'] },
      keptYoung: 3,
      keptOwnerAlive: 0,
      suspicious: [],
      errors: [],
    });
    expect(d.names()).toEqual([tensorName(dead, NOW - OLD, 1), tensorName(dead, NOW - 5_000, 3), tensorName(dead, NOW + HOUR, 4)].sort());
  });

  it('the later of mtime and the name stamp is the file time: a future name or a future mtime keeps an old-looking file', () => {
    const dead = 1000;
    const futureName = tensorName(dead, NOW + MIN, 1);
    const oldName = tensorName(dead, NOW - 2 * HOUR, 2);
    const d = fakeDir({
      [futureName]: { mtimeMs: NOW - 2 * HOUR },
      [oldName]: { mtimeMs: NOW - 1000 },
      [tensorName(dead, 100, 3)]: { mtimeMs: NOW - 2 * HOUR },
    });
    const r = sweepOrphanFiles('/d', { ops: d.ops, proc: fakeProc({}).proc, maxFileAgeMs: MAX });
    expect(r.removed).toBe(1);
    expect(r.keptYoung).toBe(2);
    expect(d.names()).toEqual([futureName, oldName].sort());
  });

  it('pid reuse: a live process that started after the file (beyond the margin) did not write it', () => {
    const fileAt = NOW - HOUR;
    const d = fakeDir({
      ...at(2000, fileAt), // started 10 min ago: reused
      ...at(3000, fileAt), // started 1.5 s after the file: within the margin, may be the writer
      ...at(3001, fileAt), // started just beyond the margin
      ...at(4000, fileAt), // started two days ago: the owner
      ...at(5000, fileAt), // alive, start time unreadable: the owner
    });
    const { proc } = fakeProc({ 2000: NOW - 10 * MIN, 3000: fileAt + 1500, 3001: fileAt + START_TIME_MARGIN_MS + 1, 4000: NOW - 48 * HOUR, 5000: 'unknown' });
    const r = sweepOrphanFiles('/d', { ops: d.ops, proc, maxFileAgeMs: MAX });
    expect(r).toMatchObject({
      removed: 2,
      byPid: { '2000': 1, '3001': 1 },
      reasonsByPid: { '2000': ['reused'], '3001': ['reused'] },
      keptOwnerAlive: 3,
      keptYoung: 0,
    });
    expect(d.names()).toEqual([tensorName(3000, fileAt), tensorName(4000, fileAt), tensorName(5000, fileAt)].sort());
  });

  it('a live older owner protects its files for liveOwnerMaxAgeMs (24 h by default), never less than maxFileAgeMs', () => {
    const owner = 4000;
    const d = fakeDir({ ...at(owner, NOW - 23 * HOUR, 1), ...at(owner, NOW - 25 * HOUR, 2), ...at(6000, NOW - 25 * HOUR, 3) });
    const { proc } = fakeProc({ [owner]: NOW - 48 * HOUR, 6000: NOW - HOUR });
    const r = sweepOrphanFiles('/d', { ops: d.ops, proc, maxFileAgeMs: MAX });
    expect(DEFAULT_LIVE_OWNER_MAX_AGE_MS).toBe(24 * HOUR);
    expect(r).toMatchObject({ removed: 2, byPid: { '4000': 1, '6000': 1 }, reasonsByPid: { '4000': ['stale'], '6000': ['reused'] }, keptOwnerAlive: 1 });
    expect(d.names()).toEqual([tensorName(owner, NOW - 23 * HOUR, 1)]);

    // A router with a 2-day timeout: the live-owner bound follows maxFileAgeMs up.
    const long = fakeDir({ ...at(owner, NOW - 30 * HOUR, 1) });
    expect(sweepOrphanFiles('/d', { ops: long.ops, proc, maxFileAgeMs: 48 * HOUR, liveOwnerMaxAgeMs: HOUR }).removed).toBe(0);
    expect(sweepOrphanFiles('/d', { ops: long.ops, proc, maxFileAgeMs: MAX, liveOwnerMaxAgeMs: HOUR }).reasonsByPid).toEqual({ '4000': ['stale'] });
  });

  it("our own pid is judged like any other: files newer than us are kept, files from before we started are a predecessor's", () => {
    const self = 1; // PID 1 in a restarted container
    const started = NOW - 10 * MIN;
    const d = fakeDir({ ...at(self, NOW - HOUR, 1), ...at(self, NOW - 5 * MIN, 2), ...at(self, NOW - 1000, 3) });
    const r = sweepOrphanFiles('/d', { ops: d.ops, proc: fakeProc({ [self]: started }).proc, maxFileAgeMs: 60_000 });
    expect(r).toMatchObject({ removed: 1, reasonsByPid: { '1': ['reused'] }, keptOwnerAlive: 1, keptYoung: 1 });
    expect(d.names()).toEqual([tensorName(self, NOW - 5 * MIN, 2), tensorName(self, NOW - 1000, 3)].sort());
  });

  it('asks /proc only about pids that have an old regular file, once per pid per sweep', () => {
    const d = fakeDir({
      ...at(1000, NOW - HOUR, 1),
      ...at(1000, NOW - HOUR, 2),
      ...at(7000, NOW - 1000),
      [tensorName(8000, NOW - HOUR)]: { type: 'fifo', mtimeMs: NOW - HOUR },
    });
    const { proc, asked } = fakeProc({});
    sweepOrphanFiles('/d', { ops: d.ops, proc, maxFileAgeMs: MAX });
    expect(asked).toEqual([1000]);
  });

  it('never unlinks a non-regular entry under our name, whatever its age or pid; reports its type', () => {
    const old = NOW - 2 * HOUR;
    const d = fakeDir({
      [tensorName(1000, old, 1)]: { type: 'symlink', mtimeMs: old },
      [tensorName(1000, old, 2)]: { type: 'fifo', mtimeMs: old },
      [tensorName(1000, old, 3)]: { type: 'directory', mtimeMs: old },
      [tensorName(1000, old, 4)]: { type: 'socket', mtimeMs: old },
    });
    const before = d.names();
    const r = sweepOrphanFiles('/d', { ops: d.ops, proc: fakeProc({}).proc, maxFileAgeMs: MAX });
    expect(r.removed).toBe(0);
    expect(r.suspicious.map((s) => s.type).sort()).toEqual(['directory', 'fifo', 'socket', 'symlink']);
    expect(r.suspicious[0]).toMatchObject({ pid: 1000 });
    expect(d.names()).toEqual(before);
  });

  it('looks only at our tensor names: not the probe, not other names', () => {
    const old = NOW - 2 * HOUR;
    const d = fakeDir({
      'smg-tokenspeed-probe-1000': { mtimeMs: old },
      'smg-tokenspeed-1000-1-1.tmp': { mtimeMs: old },
      'other-1000-1-1': { mtimeMs: old },
      'smg-tokenspeed-x-1-1': { mtimeMs: old },
    });
    const r = sweepOrphanFiles('/d', { ops: d.ops, proc: fakeProc({}).proc, maxFileAgeMs: MAX });
    expect(r).toMatchObject({ removed: 0, keptYoung: 0, keptOwnerAlive: 0, suspicious: [], errors: [] });
    expect(d.names()).toHaveLength(4);
  });

  it('never throws: an unlistable directory, an unlink refused, and files the worker removed mid-sweep', () => {
    const { proc } = fakeProc({});
    const unlistable: OrphanFileOps = {
      readdir: () => {
        throw Object.assign(new Error('denied'), { code: 'EACCES' });
      },
      lstat: () => {
        throw enoent();
      },
      unlink: () => {},
    };
    expect(sweepOrphanFiles('/d', { ops: unlistable, proc }).errors).toEqual(['cannot list /d: EACCES: denied']);

    const d = fakeDir({ ...at(1000, NOW - HOUR, 1), ...at(1000, NOW - HOUR, 2), ...at(1000, NOW - HOUR, 3) });
    const refused = tensorName(1000, NOW - HOUR, 1);
    const vanishing = tensorName(1000, NOW - HOUR, 2);
    const ops: OrphanFileOps = {
      readdir: () => [...d.ops.readdir('/d'), tensorName(1000, NOW - HOUR, 9)], // listed, gone before lstat
      lstat: d.ops.lstat,
      unlink: (file) => {
        if (path.basename(file) === refused) throw Object.assign(new Error('not permitted'), { code: 'EPERM' });
        if (path.basename(file) === vanishing) throw enoent();
        d.ops.unlink(file);
      },
    };
    const r = sweepOrphanFiles('/d', { ops, proc, maxFileAgeMs: MAX });
    expect(r.removed).toBe(1);
    expect(r.errors).toEqual([`${refused}: EPERM: not permitted`]);
  });

  it("says a system call's code once: Node's own messages start with it", async () => {
    const { proc } = fakeProc({});
    // Not a directory: readdir (the sweep at start) and opendir (the paced one) fail as the kernel says.
    expect(sweepOrphanFiles('/dev/null', { proc }).errors).toEqual(["cannot list /dev/null: ENOTDIR: not a directory, scandir '/dev/null'"]);
    expect((await sweepOrphanFilesPaced('/dev/null', { proc })).errors).toEqual(["cannot list /dev/null: ENOTDIR: not a directory, opendir '/dev/null'"]);
  });

  it('maxFileAgeMs may be a function, read at every sweep (a reloaded request timeout)', () => {
    const d = fakeDir({ ...at(1000, NOW - 10 * MIN) });
    let timeout = HOUR;
    const { proc } = fakeProc({});
    expect(sweepOrphanFiles('/d', { ops: d.ops, proc, maxFileAgeMs: () => timeout }).keptYoung).toBe(1);
    timeout = MIN;
    expect(sweepOrphanFiles('/d', { ops: d.ops, proc, maxFileAgeMs: () => timeout }).removed).toBe(1);
  });

  it('listTensorFiles judges by the same rule: its orphans are exactly what the sweep then removes', () => {
    const fileAt = NOW - HOUR;
    const d = fakeDir({
      ...at(1000, fileAt, 1),
      ...at(1000, NOW - 1000, 2), // dead but young
      ...at(2000, fileAt, 1), // reused, and nothing newer: the process is not the writer
      ...at(4000, fileAt, 1), // owner
      ...at(4000, NOW - 25 * HOUR, 2), // owner, stale
      ...at(1, NOW - 2 * HOUR, 1), // predecessor of a restarted PID 1
      ...at(1, NOW - 1000, 2), // and its own young file
      [tensorName(1000, fileAt, 3)]: { type: 'fifo', mtimeMs: fileAt, size: 0 },
    });
    const { proc } = fakeProc({ 2000: NOW - 10 * MIN, 4000: NOW - 48 * HOUR, 1: NOW - 30 * MIN });
    const rows = listTensorFiles('/d', { ops: d.ops, proc, maxFileAgeMs: MAX });
    expect(rows).toEqual([
      {
        pid: 1,
        files: 2,
        bytes: 20,
        pidNamespace: null,
        alive: true,
        process: 'alive',
        heartbeatAgeMs: null,
        orphans: 1,
        orphanBytes: 10,
        young: 1,
        suspicious: 0,
        cacheFiles: 0,
        cacheBytes: 0,
      },
      {
        pid: 1000,
        files: 3,
        bytes: 20,
        pidNamespace: null,
        alive: false,
        process: 'dead',
        heartbeatAgeMs: null,
        orphans: 1,
        orphanBytes: 10,
        young: 1,
        suspicious: 1,
        cacheFiles: 0,
        cacheBytes: 0,
      },
      {
        pid: 2000,
        files: 1,
        bytes: 10,
        pidNamespace: null,
        alive: false,
        process: 'reused',
        heartbeatAgeMs: null,
        orphans: 1,
        orphanBytes: 10,
        young: 0,
        suspicious: 0,
        cacheFiles: 0,
        cacheBytes: 0,
      },
      {
        pid: 4000,
        files: 2,
        bytes: 20,
        pidNamespace: null,
        alive: true,
        process: 'alive',
        heartbeatAgeMs: null,
        orphans: 1,
        orphanBytes: 10,
        young: 0,
        suspicious: 0,
        cacheFiles: 0,
        cacheBytes: 0,
      },
    ]);
    const swept = sweepOrphanFiles('/d', { ops: d.ops, proc, maxFileAgeMs: MAX });
    expect(swept.byPid).toEqual(Object.fromEntries(rows.filter((r) => r.orphans > 0).map((r) => [String(r.pid), r.orphans])));
    expect(swept.removedBytes).toBe(rows.reduce((n, r) => n + r.orphanBytes, 0));
    expect(listTensorFiles('/d', { ops: d.ops, proc, maxFileAgeMs: MAX }).reduce((n, r) => n + r.orphans, 0)).toBe(0);
  });

  it('describes a sweep in one line naming count, bytes, pids and why; nothing to say is undefined', () => {
    const base = {
      at: NOW,
      removed: 0,
      removedBytes: 0,
      freedBytes: 0,
      removedCacheEntries: 0,
      removedHeartbeats: 0,
      byPid: {},
      reasonsByPid: {},
      keptYoung: 4,
      keptOwnerAlive: 1,
      keptByHeartbeat: 0,
      suspicious: [],
      errors: [],
    };
    expect(describeSweep(base, '/dev/shm')).toBeUndefined();
    const line = describeSweep(
      {
        ...base,
        removed: 3,
        removedBytes: 3 * 1024 * 1024,
        freedBytes: 3 * 1024 * 1024,
        byPid: { '12': 2, '34': 1 },
        reasonsByPid: { '12': ['dead'], '34': ['reused'] },
        suspicious: [{ name: 'smg-tokenspeed-9-1-1', pid: 9, type: 'fifo' }],
      },
      '/dev/shm',
    );
    expect(line).toBe(
      '/dev/shm orphan sweep: removed 3 orphaned tensor files (3.00 MiB) of pid 12 (gone: 2), pid 34 (pid reused by a newer process: 1); ' +
        'left 1 entry under our name that is not a regular file: smg-tokenspeed-9-1-1 (fifo); kept 4 too young to judge and 1 of live older processes',
    );
    expect(line!.split('\n')).toHaveLength(1);
  });
});

describe("another pid namespace's cache entries and their router's heartbeat", () => {
  const cacheName = (ns: string, pid: number, atMs: number, seq: number) => `smg-tokenspeed-cache-${ns}-${pid}-${BigInt(atMs) * 1_000_000n}-${seq}`;

  it("a heartbeat speaks only for entries of its own owner: one anyone else touches under a dead router's name keeps nothing", () => {
    const pid = 4242;
    const router = 0; // the entries' owner (root)
    const d = fakeDir({
      [cacheName('7', pid, NOW - HOUR, 1)]: { mtimeMs: NOW - HOUR, uid: router },
      [cacheName('7', pid, NOW - HOUR, 2)]: { mtimeMs: NOW - HOUR, uid: router },
      // Its router is dead: its own heartbeat stopped an hour ago...
      [cacheName('7', pid, NOW - 2 * HOUR, 0)]: { mtimeMs: NOW - HOUR, uid: router, size: 0 },
      // ...and another user made one under the same name (another nanos) and touches it.
      [cacheName('7', pid, NOW - 10 * MIN, 0)]: { mtimeMs: NOW - 30_000, uid: 65534, size: 0 },
    });
    const r = sweepOrphanFiles('/d', { ops: d.ops, proc: fakeProc({}).proc, pidNamespace: '1' });
    expect(r).toMatchObject({ removed: 2, removedCacheEntries: 2, removedHeartbeats: 1, keptByHeartbeat: 0, reasonsByPid: { [`7:${pid}`]: ['no-heartbeat'] } });
    // The other user's file is theirs: kept (it beats), never counted as an entry.
    expect(d.names()).toEqual([cacheName('7', pid, NOW - 10 * MIN, 0)]);

    // The router's own heartbeat, fresh, keeps them.
    const alive = fakeDir({
      [cacheName('7', pid, NOW - HOUR, 1)]: { mtimeMs: NOW - HOUR, uid: router },
      [cacheName('7', pid, NOW - HOUR, 0)]: { mtimeMs: NOW - 30_000, uid: router, size: 0 },
    });
    expect(sweepOrphanFiles('/d', { ops: alive.ops, proc: fakeProc({}).proc, pidNamespace: '1' })).toMatchObject({
      removed: 0,
      keptByHeartbeat: 1,
      removedHeartbeats: 0,
    });
  });

  it("another namespace's pid is not ours: its row says so (not 'running' because our pid 12 is some other process), and a heartbeat is neither a file nor an entry", () => {
    const d = fakeDir({
      [cacheName('7', 12, NOW - HOUR, 1)]: { mtimeMs: NOW - HOUR },
      [cacheName('7', 12, NOW - HOUR, 0)]: { mtimeMs: NOW - 30_000, size: 0 },
      ...at(12, NOW - 1000),
    });
    const rows = listTensorFiles('/d', { ops: d.ops, proc: fakeProc({ 12: NOW - 48 * HOUR }).proc, pidNamespace: '1' });
    expect(rows).toEqual([
      {
        pid: 12,
        pidNamespace: null,
        files: 1,
        bytes: 10,
        alive: true,
        process: 'alive',
        heartbeatAgeMs: null,
        orphans: 0,
        orphanBytes: 0,
        young: 1,
        suspicious: 0,
        cacheFiles: 0,
        cacheBytes: 0,
      },
      {
        pid: 12,
        pidNamespace: '7',
        files: 1,
        bytes: 10,
        alive: false,
        process: 'other-namespace',
        heartbeatAgeMs: 30_000,
        orphans: 0,
        orphanBytes: 0,
        young: 0,
        suspicious: 0,
        cacheFiles: 1,
        cacheBytes: 10,
      },
    ]);
  });

  it('says what a sweep freed: a file whose data another link still holds frees nothing, and a heartbeat is counted apart', () => {
    const base = {
      at: NOW,
      removed: 0,
      removedBytes: 0,
      freedBytes: 0,
      removedCacheEntries: 0,
      removedHeartbeats: 0,
      byPid: {},
      reasonsByPid: {},
      keptYoung: 1,
      keptOwnerAlive: 0,
      keptByHeartbeat: 2,
      suspicious: [],
      errors: [],
    };
    const line = describeSweep(
      {
        ...base,
        removed: 2,
        removedBytes: 2.5 * 1024 * 1024,
        freedBytes: 0.2 * 1024 * 1024,
        removedCacheEntries: 2,
        removedHeartbeats: 1,
        byPid: { '7:12': 2 },
        reasonsByPid: { '7:12': ['no-heartbeat'] },
      },
      '/dev/shm',
    );
    expect(line).toBe(
      '/dev/shm orphan sweep: removed 2 orphaned tensor files (2.50 MiB, all pixel-cache entries; 2.30 MiB of it not freed: still linked under other names) of pid 12 of pid namespace 7 (no heartbeat of its router for 5 minutes: 2); ' +
        'removed 1 pixel-cache heartbeat of a router gone; kept 1 too young to judge and 0 of live older processes and 2 of routers in other pid namespaces whose heartbeat is fresh',
    );
  });
});

describe('reading /proc', () => {
  let shm: ReturnType<typeof makeShmTestDir>;
  beforeEach(() => {
    shm = makeShmTestDir();
  });
  afterEach(() => shm.remove());

  it('parses starttime (field 22) past a comm holding spaces and parentheses, and btime', () => {
    const stat =
      '42 (we (ird) name) S 1 42 42 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 123456 1000 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0';
    expect(parseStartTicks(stat)).toBe(123456);
    expect(parseStartTicks('garbage')).toBeUndefined();
    expect(parseBootTimeSecs('cpu  1 2 3\nintr 5\nbtime 1700000000\nprocesses 9\n')).toBe(1700000000);
    expect(parseBootTimeSecs('cpu 1\n')).toBeUndefined();
  });

  it('a staged /proc: start = btime + ticks / CLK_TCK; missing pid is dead; a /proc without self proves nothing', () => {
    const root = path.join(shm.dir, 'proc');
    mkdirSync(path.join(root, 'self'), { recursive: true });
    mkdirSync(path.join(root, '42'));
    writeFileSync(path.join(root, 'stat'), 'cpu 1\nbtime 1700000000\n');
    writeFileSync(path.join(root, 'self', 'stat'), '1 (x) S 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 0 1 0');
    writeFileSync(path.join(root, '42', 'stat'), '42 (a) b) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 250 0 0');
    const p = procProcessInfo({ proc: root, now: () => NOW });
    expect(p.lookup(42)).toEqual({ alive: true, startMs: 1_700_000_000_000 + 2500 });
    expect(p.lookup(43)).toEqual({ alive: false });
    expect(p.lookup(0)).toEqual({ alive: false });
    expect(procProcessInfo({ proc: root, clockTicksPerSec: 1000 }).lookup(42)).toEqual({ alive: true, startMs: 1_700_000_000_000 + 250 });
    const empty = path.join(shm.dir, 'noproc');
    mkdirSync(empty);
    expect(procProcessInfo({ proc: empty }).lookup(43)).toEqual({ alive: true, startMs: undefined });
  });

  it('the real /proc: our start time is in the past and within our uptime; a pid above pid_max is dead', () => {
    const me = procProcessInfo().lookup(process.pid);
    const now = Date.now();
    if (!me.alive || me.startMs === undefined) throw new Error('expected our own start time');
    expect(me.startMs).toBeLessThanOrEqual(now + START_TIME_MARGIN_MS);
    expect(me.startMs).toBeGreaterThan(now - process.uptime() * 1000 - START_TIME_MARGIN_MS);
    expect(procProcessInfo().lookup(deadPid())).toEqual({ alive: false });
    expect(readFileSync('/proc/stat', 'utf8')).toMatch(/^btime \d+$/m);
  });
});

describe('the sweep on the real /dev/shm and the real /proc', () => {
  let shm: ReturnType<typeof makeShmTestDir>;
  const children: Array<Awaited<ReturnType<typeof liveChild>>> = [];
  beforeEach(() => {
    shm = makeShmTestDir();
  });
  afterEach(async () => {
    for (const c of children.splice(0)) await c.kill();
    shm.remove();
  });

  it('removes exactly the provable orphans and leaves everything else, as listTensorFiles predicted', async () => {
    const dead = deadPid();
    const t0 = Date.now();
    const mixed = await liveChild(); // has a file from before it started and one from after
    const reused = await liveChild(); // has only a file from before it started
    children.push(mixed, reused);
    const after = Date.now() + 10; // written after both children started
    // The sweep judges an hour from now: files written now are old, the children still run.
    const proc = procProcessInfo({ now: () => Date.now() + HOUR });
    const judgedAt = () => Date.now() + HOUR;
    const before = t0 - 2 * HOUR;

    const n = {
      deadOld: writeAt(shm.dir, tensorName(dead, after, 1), after, 'abc'),
      deadYoung: writeAt(shm.dir, tensorName(dead, judgedAt() - 5000, 2), judgedAt() - 5000),
      selfBefore: writeAt(shm.dir, tensorName(process.pid, before, 1), before, 'abcd'),
      selfAfter: writeAt(shm.dir, tensorName(process.pid, after, 2), after),
      mixedBefore: writeAt(shm.dir, tensorName(mixed.pid, before, 1), before, 'ab'),
      mixedAfter: writeAt(shm.dir, tensorName(mixed.pid, after, 2), after),
      reusedBefore: writeAt(shm.dir, tensorName(reused.pid, before, 1), before, 'a'),
      probe: writeAt(shm.dir, `smg-tokenspeed-probe-${dead}`, before),
      foreign: writeAt(shm.dir, `other-${dead}-1-1`, before),
      victim: writeAt(shm.dir, 'victim', before, 'precious'),
    };
    const link = path.join(shm.dir, tensorName(dead, before, 3));
    symlinkSync(n.victim, link);
    setMtime(link, before);
    const fifo = path.join(shm.dir, tensorName(dead, before, 4));
    execFileSync('mkfifo', [fifo]);
    setMtime(fifo, before);
    const dir = path.join(shm.dir, tensorName(dead, before, 5));
    mkdirSync(dir);
    setMtime(dir, before);

    const options = { proc, maxFileAgeMs: 60_000 };
    const rows = listTensorFiles(shm.dir, options);
    expect(rows.find((r) => r.pid === dead)).toMatchObject({ files: 5, alive: false, process: 'dead', orphans: 1, orphanBytes: 3, young: 1, suspicious: 3 });
    expect(rows.find((r) => r.pid === process.pid)).toMatchObject({
      files: 2,
      pidNamespace: null,
      alive: true,
      process: 'alive',
      heartbeatAgeMs: null,
      orphans: 1,
      orphanBytes: 4,
      young: 0,
    });
    expect(rows.find((r) => r.pid === mixed.pid)).toMatchObject({
      files: 2,
      pidNamespace: null,
      alive: true,
      process: 'alive',
      heartbeatAgeMs: null,
      orphans: 1,
      orphanBytes: 2,
    });
    expect(rows.find((r) => r.pid === reused.pid)).toMatchObject({ files: 1, alive: false, process: 'reused', orphans: 1, orphanBytes: 1 });

    const r = sweepOrphanFiles(shm.dir, options);
    expect(r.removed).toBe(4);
    expect(r.removedBytes).toBe(3 + 4 + 2 + 1);
    expect(r.byPid).toEqual({ [dead]: 1, [process.pid]: 1, [mixed.pid]: 1, [reused.pid]: 1 });
    expect(r.reasonsByPid).toEqual({ [dead]: ['dead'], [process.pid]: ['reused'], [mixed.pid]: ['reused'], [reused.pid]: ['reused'] });
    expect(r.keptYoung).toBe(1);
    expect(r.keptOwnerAlive).toBe(2);
    expect(r.suspicious.map((s) => [path.basename(s.name), s.type]).sort()).toEqual(
      [
        [path.basename(link), 'symlink'],
        [path.basename(fifo), 'fifo'],
        [path.basename(dir), 'directory'],
      ].sort(),
    );
    expect(r.errors).toEqual([]);
    expect(shm.files()).toEqual([n.deadYoung, n.selfAfter, n.mixedAfter, n.probe, n.foreign, n.victim, link, fifo, dir].map((f) => path.basename(f)).sort());
    expect(readFileSync(n.victim, 'utf8')).toBe('precious');
    expect(listTensorFiles(shm.dir, options).reduce((k, row) => k + row.orphans, 0)).toBe(0);
  });

  it('the paced sweep gives the event loop its turns while it reads and judges a directory of 20,000 foreign entries; the same verdicts as at once', async () => {
    const dead = deadPid();
    const now = Date.now();
    // What any local user can make: empty files named like another router's, stamped now or in the future.
    for (let i = 0; i < 20_000; i++) closeSync(openSync(path.join(shm.dir, tensorName(dead, now + (i % 2) * HOUR, i + 1)), 'wx'));
    const orphan = writeAt(shm.dir, tensorName(dead, now - 2 * HOUR, 99_999), now - 2 * HOUR, 'old');
    // The event loop's turns while the sweep runs: a chain of setImmediate callbacks.
    let turns = 0;
    let chain = true;
    const spin = () => {
      turns += 1;
      if (chain) setImmediate(spin);
    };
    let turnsAtStart: number | undefined;
    const ops: OrphanFileOps = {
      ...realOrphanFileOps,
      readdir: (dir) => ((turnsAtStart ??= turns), realOrphanFileOps.readdir(dir)),
      entries: (dir) => ((turnsAtStart ??= turns), realOrphanFileOps.entries!(dir)),
    };
    setImmediate(spin);
    await new Promise((r) => setImmediate(r));
    const r = await sweepOrphanFilesPaced(shm.dir, { ops, maxFileAgeMs: 60_000 });
    const turnsDuring = turns - turnsAtStart!;
    chain = false;
    expect(r).toMatchObject({ removed: 1, keptYoung: 20_000, errors: [] });
    expect(existsSync(orphan)).toBe(false);
    expect(turnsDuring).toBeGreaterThan(10);
    expect(sweepOrphanFiles(shm.dir, { maxFileAgeMs: 60_000 })).toMatchObject({ removed: 0, keptYoung: 20_000 });
  }, 60_000);

  it('with the real clock nothing written just now is touched, even of a dead pid', () => {
    const dead = deadPid();
    const name = tensorName(dead, Date.now());
    writeAt(shm.dir, name, Date.now());
    const r = sweepOrphanFiles(shm.dir, { maxFileAgeMs: 0 });
    expect(r).toMatchObject({ removed: 0, keptYoung: 1 });
    expect(shm.files()).toEqual([name]);
  });
});
