// Which tensor files in /dev/shm are orphans, and the sweep that removes them.
//
// The sweep removes only what it can prove is an orphan, because the file of a router it
// cannot see may be in flight: two routers in different pid namespaces that share /dev/shm
// (docker --ipc=host) see no /proc entry for each other, so "no /proc/<pid>" alone proves
// nothing. What does prove it is age. A live router keeps a file at most for its request
// timeout (the deadline starts after the tensors are written, cleanup runs when it fires, and
// on success the worker has read and unlinked the file), so a file older than that is not in
// flight for any router whose timeout is within `maxFileAgeMs`, whatever its pid namespace.
// /proc is read only for files that old, and is there to spare files, not to condemn them:
// it keeps an old file whose writer may still be running in our namespace, and it stops a
// live but unrelated process with the same pid from protecting orphans forever.
//
// The rule, per entry named `smg-tokenspeed-<pid>-<unix nanos>-<seq>` (nothing else is looked
// at: not the probe `smg-tokenspeed-probe-<pid>-<nanos>`, not other names, nothing below the directory):
//   1. Not a regular file (lstat: symlink, fifo, directory, socket, device): never removed,
//      reported as suspicious. The writer only ever creates regular files, so this is
//      something planted under our name; unlinking it is not our call, showing it is.
//   2. Its time is the later of its mtime and the time in its name (what the file system
//      records of the last write, and what the writer stamped at creation). Using the later
//      one only ever keeps more: a name stamped in the future, an mtime set back by hand or a
//      clock step backwards all make the file look younger, never older.
//   3. Younger than maxFileAgeMs + OLD_FILE_SLACK_MS: kept, whatever /proc says.
//   4. Older, and no /proc/<pid> in our pid namespace: orphan ("dead").
//   5. Older, and the process with that pid started more than START_TIME_MARGIN_MS after the
//      file's time (/proc/<pid>/stat field 22, clock ticks since boot, plus btime from
//      /proc/stat): it cannot have written the file, the pid was reused: orphan ("reused").
//      Our own pid is not special: a restarted container's PID 1 finds its predecessor's
//      files under its own pid and this rule sweeps them; our own files are newer than us,
//      so rules 3 and 6 keep them like anyone else's.
//   6. Older, and the process started before the file: it may be the writer, kept while the
//      file is younger than max(liveOwnerMaxAgeMs, maxFileAgeMs + slack) (default 24 h), an
//      orphan ("stale") after that. In our namespace that process is the writer and keeping
//      its old files protects a router with a longer timeout than ours; in another namespace
//      the same number may be an unrelated long-lived process (low pids, PID 1 in every
//      container) and would otherwise protect a crashed router's files forever. Only a
//      router whose request timeout exceeds the bound could lose an in-flight file to it;
//      the bound is never below the sweeper's own maxFileAgeMs.
//   If the start time cannot be read, the process counts as started before the file (6).
//   If /proc itself is unusable (no /proc/self), every pid counts as alive (6): an empty
//   /proc proves nothing.
//
// What this cannot defend against: a router whose request timeout exceeds the sweeper's
// maxFileAgeMs, in another pid namespace (set maxFileAgeMs to the largest timeout of any
// router sharing /dev/shm), and a forward step of the wall clock larger than maxFileAgeMs
// (file times are wall-clock; nothing monotonic is recorded on a tmpfs). ctime, which cannot
// be set back by utimes, was considered and not used: only a file's owner can set its mtime,
// and the owner can delete it anyway, while utimes is how tests and operators stage ages.
//
// Cache files (`smg-tokenspeed-cache-<pid namespace>-<pid>-<unix nanos>-<seq>`, the pixel
// cache's entries: transport/pixel-cache.ts) live as long as their router, so age says nothing
// about them. Their rule:
//   1. Not a regular file: never removed, suspicious (as above).
//   2. Written in our pid namespace (the namespace's inode number is in the name): an orphan at
//      once when no process has the pid ("dead") or the one that has it started after the file
//      was created, the time in its name ("reused"), so a restarted router sweeps its predecessor's entries at its first sweep;
//      kept while the writer lives ("owner-alive").
//   3. Another pid namespace: /proc cannot see the writer, its heartbeat can: a router with a
//      cache touches `smg-tokenspeed-cache-<ns>-<pid>-<nanos>-0` every minute. Kept while that
//      heartbeat is at most 5 minutes old ("heartbeat"); otherwise an orphan once the file is
//      that old too ("no-heartbeat"; "young" before), the heartbeat itself included. Removing a
//      live router's entry costs it no more than a miss: it checks the file before every use.
//      A heartbeat speaks only for entries of its own owner (uid): anyone may create a file with
//      a dead router's name and touch it, and would otherwise keep its entries forever.
//   A heartbeat is neither a tensor file nor an entry: the sweep counts it apart, the listing not at all.
//
// The sweep and `listTensorFiles` (mmtc doctor, the console) call the same classify(), so what
// doctor calls an orphan is exactly what the sweep removes. The directory may hold anything
// anyone put there (200,000 files named like another router's take a second to stat): the
// minute sweep and the console's listing run paced (the directory read a batch at a time, the
// entries judged PACED_SLICE_MS at a time, the event loop served between), and a tensor name
// stamped within the age limit, which its name alone keeps, is not even stat'ed by a sweep.
import * as fs from 'node:fs';
import path from 'node:path';
import { SHM_DIR } from './namespace.ts';
import { ourPidNamespace, parseShmName, SHM_PREFIX, stampMs } from './shm-names.ts';
import { errnoText } from '../util/errno.ts';
import { formatBytes } from '../util/bytes.ts';

/** A cache-writing router touches its heartbeat (its cache name with seq 0) this often... */
export const CACHE_HEARTBEAT_MS = 60_000;
/** ...and one untouched this long is a dead router's, as are its entries, for a router in another pid namespace. */
export const CACHE_HEARTBEAT_STALE_MS = 5 * CACHE_HEARTBEAT_MS;

/** Default maxFileAgeMs: the config's default request_timeout_secs. */
export const DEFAULT_MAX_FILE_AGE_MS = 600_000;
/** Between the last tensor write and the request deadline there is placement of the other
 *  tensors and the call set-up; after it, the cleanup. Neither takes anywhere near this. */
export const OLD_FILE_SLACK_MS = 30_000;
/** btime is whole seconds (truncated), start times are clock ticks, mtimes nanoseconds. */
export const START_TIME_MARGIN_MS = 2_000;
export const DEFAULT_LIVE_OWNER_MAX_AGE_MS = 24 * 3600_000;
/** USER_HZ, the unit of /proc/<pid>/stat times, is 100 in the Linux ABI on every mainstream
 *  architecture (what `getconf CLK_TCK` prints); spawning getconf for it is not worth it. */
export const LINUX_CLK_TCK = 100;

export type ShmEntryType = 'file' | 'symlink' | 'fifo' | 'directory' | 'socket' | 'char-device' | 'block-device' | 'unknown';

export interface ShmEntryStat {
  type: ShmEntryType;
  size: number;
  mtimeMs: number;
  /** The entry's owner: a heartbeat speaks only for entries of its own owner. */
  uid?: number;
  /** The inode's names: removing one while another stays frees nothing. */
  nlink?: number;
}

/** A directory entry, with its type when the directory gives it (d_type), so an entry its name alone judges needs no lstat. */
export interface ShmDirEntry {
  name: string;
  type?: ShmEntryType;
}

/** The file-system calls of the sweep and the listing; part of ShmFileOps. */
export interface OrphanFileOps {
  readdir(dir: string): string[];
  /** The directory's entries read a batch at a time off the event loop (the paced sweep and listing); without it, readdir's. */
  entries?(dir: string): AsyncIterable<ShmDirEntry>;
  /** Never follows a symlink. */
  lstat(file: string): ShmEntryStat;
  unlink(file: string): void;
}

function entryType(
  s: Pick<fs.Stats, 'isFile' | 'isSymbolicLink' | 'isFIFO' | 'isDirectory' | 'isSocket' | 'isCharacterDevice' | 'isBlockDevice'>,
): ShmEntryType {
  if (s.isFile()) return 'file';
  if (s.isSymbolicLink()) return 'symlink';
  if (s.isFIFO()) return 'fifo';
  if (s.isDirectory()) return 'directory';
  if (s.isSocket()) return 'socket';
  if (s.isCharacterDevice()) return 'char-device';
  if (s.isBlockDevice()) return 'block-device';
  return 'unknown';
}

export const realOrphanFileOps: OrphanFileOps = {
  readdir: (dir) => fs.readdirSync(dir),
  entries: async function* (dir) {
    for await (const e of await fs.promises.opendir(dir, { bufferSize: 128 })) {
      const type = entryType(e);
      yield type === 'unknown' ? { name: e.name } : { name: e.name, type };
    }
  },
  lstat: (file) => {
    const s = fs.lstatSync(file);
    return { type: entryType(s), size: s.size, mtimeMs: s.mtimeMs, uid: s.uid, nlink: s.nlink };
  },
  unlink: (file) => fs.unlinkSync(file),
};

/** What /proc says about a pid, as seen from our pid namespace. */
export type ProcessState = { alive: false } | { alive: true; startMs: number | undefined };

/** The clock and the /proc readers; tests stage ages and pid reuse through this. */
export interface ProcessInfo {
  /** Wall-clock now, ms since the epoch (the clock file mtimes are in). */
  now(): number;
  lookup(pid: number): ProcessState;
}

/** Parse field 22 (starttime) of a /proc/<pid>/stat line; comm (field 2) may hold spaces and parentheses. */
export function parseStartTicks(stat: string): number | undefined {
  const close = stat.lastIndexOf(')');
  if (close < 0) return undefined;
  const ticks = Number(stat.slice(close + 2).split(' ')[19]);
  return Number.isFinite(ticks) ? ticks : undefined;
}

export function parseBootTimeSecs(procStat: string): number | undefined {
  const m = /^btime (\d+)$/m.exec(procStat);
  return m ? Number(m[1]) : undefined;
}

export function procProcessInfo(options: { proc?: string; clockTicksPerSec?: number; now?: () => number } = {}): ProcessInfo {
  const proc = options.proc ?? '/proc';
  const hz = options.clockTicksPerSec ?? LINUX_CLK_TCK;
  const now = options.now ?? Date.now;
  let boot: { secs: number | undefined; readAt: number } | undefined;
  // btime is recomputed by the kernel from the wall clock; re-read it now and then so a
  // clock step does not skew every start time for the life of the process.
  const bootSecs = (): number | undefined => {
    const t = now();
    if (!boot || t - boot.readAt > 10_000 || t < boot.readAt) {
      let secs: number | undefined;
      try {
        secs = parseBootTimeSecs(fs.readFileSync(path.join(proc, 'stat'), 'utf8'));
      } catch {
        secs = undefined; // /proc/stat unreadable: start times unknown, so a process counts as started before the file (rule 6)
      }
      boot = { secs, readAt: t };
    }
    return boot.secs;
  };
  let procUsable: boolean | undefined;
  return {
    now,
    lookup(pid) {
      if (!Number.isSafeInteger(pid) || pid <= 0) return { alive: false };
      let stat: string;
      try {
        stat = fs.readFileSync(path.join(proc, String(pid), 'stat'), 'utf8');
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code !== 'ENOENT' && code !== 'ESRCH') return { alive: true, startMs: undefined };
        procUsable ??= fs.existsSync(path.join(proc, 'self', 'stat'));
        return procUsable ? { alive: false } : { alive: true, startMs: undefined };
      }
      const ticks = parseStartTicks(stat);
      const btime = bootSecs();
      return { alive: true, startMs: ticks === undefined || btime === undefined ? undefined : btime * 1000 + (ticks * 1000) / hz };
    },
  };
}

export interface OrphanRuleOptions {
  /** The longest a live router keeps a file: its request timeout. A function is read at
   *  every sweep, so a reloaded config takes effect. Default 600 s. */
  maxFileAgeMs?: number | (() => number);
  /** How long a live process older than the file protects it; default 24 h, never less than maxFileAgeMs. */
  liveOwnerMaxAgeMs?: number;
}

/** dead, reused, stale: the rule of tensor files (and of our namespace's cache files); no-heartbeat: another namespace's cache file whose router's heartbeat stopped. */
export type OrphanReason = 'dead' | 'reused' | 'stale' | 'no-heartbeat';
/** owner-alive: a process older than the file has its pid in our namespace; heartbeat: another namespace's router, seen by its heartbeat. */
export type KeepReason = 'young' | 'owner-alive' | 'heartbeat' | 'not-regular';
export type FileVerdict = { orphan: true; reason: OrphanReason } | { orphan: false; reason: KeepReason };

interface Thresholds {
  now: number;
  oldAfterMs: number;
  staleAfterMs: number;
}

function thresholds(rule: OrphanRuleOptions, now: number): Thresholds {
  const raw = typeof rule.maxFileAgeMs === 'function' ? rule.maxFileAgeMs() : rule.maxFileAgeMs;
  const maxAge = Number.isFinite(raw) && raw! >= 0 ? raw! : DEFAULT_MAX_FILE_AGE_MS;
  const oldAfterMs = maxAge + OLD_FILE_SLACK_MS;
  return { now, oldAfterMs, staleAfterMs: Math.max(rule.liveOwnerMaxAgeMs ?? DEFAULT_LIVE_OWNER_MAX_AGE_MS, oldAfterMs) };
}

/** The rule of the header comment, for one entry; `owner` (a /proc read) is asked only about old regular files. */
function classify(stat: ShmEntryStat, fileTime: number, owner: () => ProcessState, t: Thresholds): FileVerdict {
  if (stat.type !== 'file') return { orphan: false, reason: 'not-regular' };
  const age = t.now - fileTime;
  if (!(age > t.oldAfterMs)) return { orphan: false, reason: 'young' };
  const p = owner();
  if (!p.alive) return { orphan: true, reason: 'dead' };
  if (p.startMs !== undefined && p.startMs > fileTime + START_TIME_MARGIN_MS) return { orphan: true, reason: 'reused' };
  if (age > t.staleAfterMs) return { orphan: true, reason: 'stale' };
  return { orphan: false, reason: 'owner-alive' };
}

/** The rule for cache files (header comment): they live as long as their router. */
function classifyCacheFile(
  stat: ShmEntryStat,
  createdMs: number,
  fileTime: number,
  sameNamespace: boolean,
  owner: () => ProcessState,
  heartbeatMs: number | undefined,
  t: Thresholds,
): FileVerdict {
  if (stat.type !== 'file') return { orphan: false, reason: 'not-regular' };
  if (!sameNamespace) {
    // Its router's heartbeat (touched every minute while it runs, by the entries' owner) says whether it lives.
    if (heartbeatMs !== undefined && t.now - heartbeatMs <= CACHE_HEARTBEAT_STALE_MS) return { orphan: false, reason: 'heartbeat' };
    return t.now - fileTime > CACHE_HEARTBEAT_STALE_MS ? { orphan: true, reason: 'no-heartbeat' } : { orphan: false, reason: 'young' };
  }
  const p = owner();
  if (!p.alive) return { orphan: true, reason: 'dead' };
  if (p.startMs !== undefined && p.startMs > createdMs + START_TIME_MARGIN_MS) return { orphan: true, reason: 'reused' };
  return { orphan: false, reason: 'owner-alive' };
}

interface ScannedEntry {
  name: string;
  /** A pixel-cache entry (or heartbeat), not a request's tensor. */
  cache: boolean;
  /** A pixel cache's heartbeat (its cache name with seq 0): no tensor and no entry, swept by the same rule. */
  heartbeat: boolean;
  pid: number;
  /** Whose files: `<pid>` of our pid namespace (or of a tensor file, whose name carries none), `<namespace>:<pid>` of another. */
  owner: string;
  /** Another pid namespace's cache file: that namespace (its inode number); /proc cannot see its router. */
  pidNamespace?: string;
  /** Undefined: judged young by its name alone, never stat'ed (a tensor name stamped within the age limit). */
  stat?: ShmEntryStat;
  fileTime: number;
  verdict: FileVerdict;
  /** Another namespace's cache file: when its router's heartbeat of the same owner was last touched. */
  heartbeatMs?: number;
}

export interface OrphanScanOptions extends OrphanRuleOptions {
  ops?: OrphanFileOps;
  proc?: ProcessInfo;
  /** Our pid namespace's inode number (tests stage another router's); default /proc/self/ns/pid's. */
  pidNamespace?: string;
}

/**
 * One pass over a directory by the rule of the header comment: the names are taken first
 * (add), then steps() judges them one at a time, the heartbeats first. A driver runs the steps
 * at once (the start-up sweep, `mmtc doctor`) or paced (scanPaced: the minute sweep, the
 * console), so however many entries the directory holds, none of its work holds the event loop
 * for long. Only names under our prefix are kept (a string each, not the entries).
 */
class OrphanScan {
  readonly now: number;
  readonly processes = new Map<string, ProcessState>();
  readonly errors: string[] = [];
  private readonly t: Thresholds;
  private readonly ops: OrphanFileOps;
  private readonly proc: ProcessInfo;
  private readonly pidNs: string;
  private readonly names: string[] = [];
  private readonly types: Array<ShmEntryType | undefined> = [];
  /** Each cache-writing router's heartbeat: `<namespace>-<pid>-<uid>` -> the mtime of its last touch. */
  private readonly heartbeats = new Map<string, number>();

  constructor(
    readonly dir: string,
    options: OrphanScanOptions,
    /** Stat every entry (a listing needs its bytes); a sweep leaves out what the name alone keeps. */
    private readonly statAll: boolean,
  ) {
    this.ops = options.ops ?? realOrphanFileOps;
    this.proc = options.proc ?? defaultProcessInfo();
    this.t = thresholds(options, this.proc.now());
    this.now = this.t.now;
    this.pidNs = options.pidNamespace ?? ourPidNamespace();
  }

  add(e: ShmDirEntry): void {
    if (!e.name.startsWith(SHM_PREFIX)) return;
    this.names.push(e.name);
    this.types.push(e.type);
  }

  listSync(): void {
    for (const name of this.ops.readdir(this.dir)) this.add({ name });
  }

  async list(): Promise<void> {
    if (!this.ops.entries) return this.listSync();
    for await (const e of this.ops.entries(this.dir)) this.add(e);
  }

  private lookup(pidKey: string, pid: number): ProcessState {
    let p = this.processes.get(pidKey);
    if (!p) {
      p = this.proc.lookup(pid);
      this.processes.set(pidKey, p);
    }
    return p;
  }

  /** Each entry judged (undefined: a step that judged nothing, a point to pause at). */
  *steps(): Generator<ScannedEntry | undefined, void> {
    for (const name of this.names) {
      const beat = name.endsWith('-0') ? parseShmName(name) : null;
      if (beat?.kind !== 'cache-heartbeat') continue;
      try {
        const st = this.ops.lstat(path.join(this.dir, name));
        const key = `${beat.pidNamespace}-${beat.pidText}-${st.uid}`;
        if (st.type === 'file') this.heartbeats.set(key, Math.max(this.heartbeats.get(key) ?? 0, st.mtimeMs));
      } catch {
        /* gone since the listing, or not ours to stat: no heartbeat counted (judging the entry reports its error) */
      }
      yield undefined;
    }
    for (let i = 0; i < this.names.length; i++) yield this.judge(this.names[i]!, this.types[i]);
  }

  private judge(name: string, type: ShmEntryType | undefined): ScannedEntry | undefined {
    const parsed = parseShmName(name);
    if (!parsed || parsed.kind === 'probe') return undefined;
    const pidKey = parsed.pidText;
    const pid = parsed.pid;
    const stamped = stampMs(parsed);
    const c = parsed.kind === 'tensor' ? null : parsed;
    const otherNs = c !== null && c.pidNamespace !== this.pidNs ? c.pidNamespace : undefined;
    const base = {
      name,
      cache: c !== null,
      heartbeat: c?.kind === 'cache-heartbeat',
      pid,
      owner: otherNs ? `${otherNs}:${pidKey}` : pidKey,
      ...(otherNs ? { pidNamespace: otherNs } : {}),
    };
    // A tensor file stamped within the age limit is kept whatever its mtime and /proc say
    // (its time is the later of the two): a sweep needs no lstat to know it.
    if (!this.statAll && !c && type === 'file' && !(this.t.now - stamped > this.t.oldAfterMs))
      return { ...base, fileTime: stamped, verdict: { orphan: false, reason: 'young' } };
    let stat: ShmEntryStat;
    try {
      stat = this.ops.lstat(path.join(this.dir, name));
    } catch (err) {
      // Gone between readdir and lstat: the worker read it.
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') this.errors.push(`${name}: ${errnoText(err)}`);
      return undefined;
    }
    const fileTime = Math.max(stat.mtimeMs, stamped);
    if (!c) return { ...base, stat, fileTime, verdict: classify(stat, fileTime, () => this.lookup(pidKey, pid), this.t) };
    // A cache file's creation is its name's stamp (whether a process with its pid is younger
    // than it); its age for another namespace's, the later of that and its mtime, as above.
    // Another namespace's router speaks through its heartbeat, and only for its own entries.
    const heartbeatMs = otherNs ? this.heartbeats.get(`${otherNs}-${pidKey}-${stat.uid}`) : undefined;
    const verdict = classifyCacheFile(stat, stamped, fileTime, otherNs === undefined, () => this.lookup(pidKey, pid), heartbeatMs, this.t);
    return { ...base, stat, fileTime, verdict, ...(heartbeatMs !== undefined ? { heartbeatMs } : {}) };
  }
}

/** The longest a paced scan holds the event loop at a time. */
export const PACED_SLICE_MS = 5;

/** Run every step at once. */
function scanNow(scan: OrphanScan, visit: (e: ScannedEntry) => void): void {
  for (const e of scan.steps()) if (e) visit(e);
}

/** Run the steps in slices of at most PACED_SLICE_MS, giving the event loop its turn between them. */
async function scanPaced(scan: OrphanScan, visit: (e: ScannedEntry) => void): Promise<void> {
  let sliceStart = performance.now();
  let n = 0;
  for (const e of scan.steps()) {
    if (e) visit(e);
    if ((++n & 31) === 0 && performance.now() - sliceStart >= PACED_SLICE_MS) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      sliceStart = performance.now();
    }
  }
}

let sharedProcessInfo: ProcessInfo | undefined;
function defaultProcessInfo(): ProcessInfo {
  sharedProcessInfo ??= procProcessInfo();
  return sharedProcessInfo;
}

export interface SuspiciousEntry {
  name: string;
  pid: number;
  type: ShmEntryType;
}

export interface OrphanSweepResult {
  /** When the sweep ran, ms since the epoch (the ProcessInfo clock). */
  at: number;
  /** Tensor files and pixel-cache entries removed (not heartbeats), and their bytes. */
  removed: number;
  removedBytes: number;
  /** Of the removed bytes, those whose last name the sweep removed: the rest still has another link (a request's), and was not freed. */
  freedBytes: number;
  /** Of the removed, pixel-cache entries. */
  removedCacheEntries: number;
  /** Heartbeats of pixel caches whose router is gone: no tensor, no entry, counted apart. */
  removedHeartbeats: number;
  /** Owner (a pid, or `<pid namespace>:<pid>` for another namespace's cache entries) -> files removed for it. */
  byPid: Record<string, number>;
  /** Owner -> why its files were orphans (more than one reason when its files differ). */
  reasonsByPid: Record<string, OrphanReason[]>;
  /** Files of any pid kept because they are younger than maxFileAgeMs (+ slack), or another namespace's cache files younger than 5 minutes. */
  keptYoung: number;
  /** Old files kept because a process older than them has their pid. */
  keptOwnerAlive: number;
  /** Another pid namespace's cache entries kept because their router's heartbeat (of the same owner) is fresh. */
  keptByHeartbeat: number;
  /** Entries under our name that are not regular files; never removed. */
  suspicious: SuspiciousEntry[];
  errors: string[];
}

function newSweepResult(at: number, errors: string[]): OrphanSweepResult {
  return {
    at,
    removed: 0,
    removedBytes: 0,
    freedBytes: 0,
    removedCacheEntries: 0,
    removedHeartbeats: 0,
    byPid: {},
    reasonsByPid: {},
    keptYoung: 0,
    keptOwnerAlive: 0,
    keptByHeartbeat: 0,
    suspicious: [],
    errors,
  };
}

/** What the sweep does with one judged entry. */
function sweepEntry(dir: string, ops: OrphanFileOps, result: OrphanSweepResult, e: ScannedEntry): void {
  const v = e.verdict;
  if (!v.orphan) {
    if (e.heartbeat && v.reason !== 'not-regular') return; // a live cache's sign of life: no file to count
    if (v.reason === 'young') result.keptYoung += 1;
    else if (v.reason === 'owner-alive') result.keptOwnerAlive += 1;
    else if (v.reason === 'heartbeat') result.keptByHeartbeat += 1;
    else result.suspicious.push({ name: e.name, pid: e.pid, type: e.stat!.type });
    return;
  }
  try {
    // unlink removes the name only; a name parseShmName takes has no '/' or '..', so it stays in dir.
    ops.unlink(path.join(dir, e.name));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') result.errors.push(`${e.name}: ${errnoText(err)}`);
    return;
  }
  if (e.heartbeat) {
    result.removedHeartbeats += 1;
    return;
  }
  const size = e.stat!.size;
  result.removed += 1;
  result.removedBytes += size;
  if ((e.stat!.nlink ?? 1) <= 1) result.freedBytes += size;
  if (e.cache) result.removedCacheEntries += 1;
  result.byPid[e.owner] = (result.byPid[e.owner] ?? 0) + 1;
  const reasons = (result.reasonsByPid[e.owner] ??= []);
  if (!reasons.includes(v.reason)) reasons.push(v.reason);
}

/** One sweep of `dir` by the rule of the header comment, all at once (the start-up sweep, before the router listens; doctor). Never throws. */
export function sweepOrphanFiles(dir: string, options: OrphanScanOptions = {}): OrphanSweepResult {
  const ops = options.ops ?? realOrphanFileOps;
  const scan = new OrphanScan(dir, { ...options, ops }, false);
  try {
    scan.listSync();
  } catch (err) {
    return newSweepResult(scan.now, [`cannot list ${dir}: ${errnoText(err)}`]);
  }
  const result = newSweepResult(scan.now, scan.errors);
  scanNow(scan, (e) => sweepEntry(dir, ops, result, e));
  return result;
}

/** The same sweep paced (PACED_SLICE_MS at a time, the directory read a batch at a time): what a running router does every minute (MMTC_ORPHAN_SWEEP_SECS). Never rejects. */
export async function sweepOrphanFilesPaced(dir: string, options: OrphanScanOptions = {}): Promise<OrphanSweepResult> {
  const ops = options.ops ?? realOrphanFileOps;
  const scan = new OrphanScan(dir, { ...options, ops }, false);
  try {
    await scan.list();
  } catch (err) {
    return newSweepResult(scan.now, [`cannot list ${dir}: ${errnoText(err)}`]);
  }
  const result = newSweepResult(scan.now, scan.errors);
  await scanPaced(scan, (e) => sweepEntry(dir, ops, result, e));
  return result;
}

export interface TensorFilesOfPid {
  pid: number;
  /** The pid namespace (its inode number) of another namespace's pixel-cache entries, whose pid /proc cannot see; null for ours and for tensor files (whose names carry none). */
  pidNamespace: string | null;
  files: number;
  bytes: number;
  /** A process with this pid runs in our pid namespace and may have written some of the files (it is not younger than all of them). */
  alive: boolean;
  /** What /proc says: no such process; a process that may be the writer; one that started after every regular file (pid reused); or nothing, the pid being another namespace's. */
  process: 'dead' | 'alive' | 'reused' | 'other-namespace';
  /** Another namespace's row: how long ago its router's heartbeat (of the entries' owner) was touched, ms; null when there is none. */
  heartbeatAgeMs: number | null;
  /** Files the sweep would remove now, by the same rule. */
  orphans: number;
  orphanBytes: number;
  /** Kept because younger than maxFileAgeMs (+ slack), whatever the process; another namespace's cache entries: younger than 5 minutes. */
  young: number;
  /** Not regular files (symlink, fifo, ...): never removed. */
  suspicious: number;
  /** Of the files, pixel-cache entries (a live router keeps them while it runs), and their bytes. Heartbeats are neither. */
  cacheFiles: number;
  cacheBytes: number;
}

type Row = TensorFilesOfPid & { newestFile: number };

/** The listing's rows, one per owner, from judged entries. */
function tensorFileRows(scan: OrphanScan, proc: ProcessInfo): { visit(e: ScannedEntry): void; rows(): TensorFilesOfPid[] } {
  const byOwner = new Map<string, Row>();
  return {
    visit(e) {
      if (e.heartbeat) return; // not a tensor, not an entry: a cache's sign of life
      const stat = e.stat!;
      let row = byOwner.get(e.owner);
      if (!row) {
        row = {
          pid: e.pid,
          pidNamespace: e.pidNamespace ?? null,
          files: 0,
          bytes: 0,
          alive: false,
          process: e.pidNamespace ? 'other-namespace' : 'dead',
          heartbeatAgeMs: null,
          orphans: 0,
          orphanBytes: 0,
          young: 0,
          suspicious: 0,
          cacheFiles: 0,
          cacheBytes: 0,
          newestFile: -Infinity,
        };
        byOwner.set(e.owner, row);
      }
      row.files += 1;
      row.bytes += stat.size;
      if (e.cache) {
        row.cacheFiles += 1;
        row.cacheBytes += stat.size;
      }
      if (e.heartbeatMs !== undefined) row.heartbeatAgeMs = Math.min(row.heartbeatAgeMs ?? Infinity, Math.max(0, scan.now - e.heartbeatMs));
      if (e.verdict.orphan) {
        row.orphans += 1;
        row.orphanBytes += stat.size;
      } else if (e.verdict.reason === 'young') row.young += 1;
      else if (e.verdict.reason === 'not-regular') row.suspicious += 1;
      if (stat.type === 'file') row.newestFile = Math.max(row.newestFile, e.fileTime);
    },
    rows() {
      const rows: TensorFilesOfPid[] = [];
      for (const [owner, { newestFile, ...row }] of byOwner) {
        if (row.pidNamespace === null) {
          // The listing asks /proc about every pid of ours, not only those with old files, so doctor can say what each is.
          const p = scan.processes.get(owner) ?? proc.lookup(row.pid);
          if (p.alive)
            row.process = p.startMs !== undefined && Number.isFinite(newestFile) && p.startMs > newestFile + START_TIME_MARGIN_MS ? 'reused' : 'alive';
          row.alive = row.process === 'alive';
        }
        rows.push(row);
      }
      return rows.sort((a, b) => a.pid - b.pid || (a.pidNamespace ?? '').localeCompare(b.pidNamespace ?? ''));
    },
  };
}

/** Our tensor files in `dir` grouped by owner, judged by the sweep's rule (for `mmtc doctor`), all at once. Read-only; throws if `dir` cannot be listed. */
export function listTensorFiles(dir = SHM_DIR, options: OrphanScanOptions = {}): TensorFilesOfPid[] {
  const proc = options.proc ?? defaultProcessInfo();
  const scan = new OrphanScan(dir, { ...options, proc }, true);
  scan.listSync();
  const rows = tensorFileRows(scan, proc);
  scanNow(scan, rows.visit);
  return rows.rows();
}

/** The same listing paced (PACED_SLICE_MS at a time): for a server's event loop (the console's overview). */
export async function listTensorFilesPaced(dir = SHM_DIR, options: OrphanScanOptions = {}): Promise<TensorFilesOfPid[]> {
  const proc = options.proc ?? defaultProcessInfo();
  const scan = new OrphanScan(dir, { ...options, proc }, true);
  await scan.list();
  const rows = tensorFileRows(scan, proc);
  await scanPaced(scan, rows.visit);
  return rows.rows();
}

/** A listing that took this long or more is reused for LISTING_REUSE_FACTOR times as long. */
const COSTLY_LISTING_MS = 50;
const LISTING_REUSE_FACTOR = 10;

/**
 * The paced listing for a screen that asks for it often (the console's overview, about once a
 * second while anyone watches): one at a time, and a costly one (a directory of 200,000 foreign
 * entries takes a second or more) reused for ten times as long as it took, so however often it
 * is asked, it takes at most about a tenth of the event loop's time. A cheap one is never reused:
 * what was just written or removed shows at once.
 */
export class TensorFileListing {
  private last: { dir: string; at: number; tookMs: number; rows: TensorFilesOfPid[] } | undefined;
  private running: { dir: string; rows: Promise<TensorFilesOfPid[]> } | undefined;

  async get(dir: string, options: OrphanScanOptions = {}): Promise<TensorFilesOfPid[]> {
    const now = performance.now();
    const last = this.last;
    if (last && last.dir === dir && last.tookMs >= COSTLY_LISTING_MS && now - last.at < last.tookMs * LISTING_REUSE_FACTOR) return last.rows;
    if (this.running?.dir === dir) return this.running.rows;
    const rows = listTensorFilesPaced(dir, options);
    const running = { dir, rows };
    this.running = running;
    try {
      const got = await rows;
      this.last = { dir, at: performance.now(), tookMs: performance.now() - now, rows: got };
      return got;
    } finally {
      if (this.running === running) this.running = undefined;
    }
  }
}

const REASON_WORDS: Record<OrphanReason, string> = {
  dead: 'gone',
  reused: 'pid reused by a newer process',
  stale: 'kept past the live-owner limit',
  'no-heartbeat': 'no heartbeat of its router for 5 minutes',
};

/** An owner as the words name it: `pid 12`, or `pid 12 of pid namespace 4026532180`. */
export function ownerWords(owner: string): string {
  const at = owner.indexOf(':');
  return at < 0 ? `pid ${owner}` : `pid ${owner.slice(at + 1)} of pid namespace ${owner.slice(0, at)}`;
}

/** One log line for a sweep, or undefined when there is nothing to say. */
export function describeSweep(r: OrphanSweepResult, dir: string): string | undefined {
  const parts: string[] = [];
  if (r.removed > 0) {
    const pids = Object.entries(r.byPid)
      .slice(0, 8)
      .map(([owner, n]) => `${ownerWords(owner)} (${r.reasonsByPid[owner]!.map((x) => REASON_WORDS[x]).join(', ')}: ${n})`);
    const more = Object.keys(r.byPid).length - pids.length;
    const held = r.removedBytes - r.freedBytes;
    const entries =
      r.removedCacheEntries > 0
        ? `, ${r.removedCacheEntries === r.removed ? (r.removed === 1 ? 'a pixel-cache entry' : 'all pixel-cache entries') : `${r.removedCacheEntries} of them pixel-cache entr${r.removedCacheEntries === 1 ? 'y' : 'ies'}`}`
        : '';
    const notFreed = held > 0 ? `; ${formatBytes(held)} of it not freed: still linked under other names` : '';
    parts.push(
      `removed ${r.removed} orphaned tensor file${r.removed === 1 ? '' : 's'} (${formatBytes(r.removedBytes)}${entries}${notFreed}) of ${pids.join(', ')}${more > 0 ? ` and ${more} more pids` : ''}`,
    );
  }
  if (r.removedHeartbeats > 0)
    parts.push(
      `removed ${r.removedHeartbeats} pixel-cache heartbeat${r.removedHeartbeats === 1 ? '' : 's'} of ${r.removedHeartbeats === 1 ? 'a router' : 'routers'} gone`,
    );
  if (r.suspicious.length > 0) {
    const shown = r.suspicious.slice(0, 5).map((s) => `${s.name} (${s.type})`);
    parts.push(
      `left ${r.suspicious.length} entr${r.suspicious.length === 1 ? 'y' : 'ies'} under our name that ${r.suspicious.length === 1 ? 'is' : 'are'} not a regular file: ${shown.join(', ')}${r.suspicious.length > 5 ? ', ...' : ''}`,
    );
  }
  if (r.errors.length > 0)
    parts.push(`${r.errors.length} error${r.errors.length === 1 ? '' : 's'}: ${r.errors.slice(0, 3).join('; ')}${r.errors.length > 3 ? '; ...' : ''}`);
  if (parts.length === 0) return undefined;
  const kept = r.keptYoung + r.keptOwnerAlive + r.keptByHeartbeat;
  if (kept > 0)
    parts.push(
      `kept ${r.keptYoung} too young to judge and ${r.keptOwnerAlive} of live older processes${r.keptByHeartbeat > 0 ? ` and ${r.keptByHeartbeat} of routers in other pid namespaces whose heartbeat is fresh` : ''}`,
    );
  return `${dir} orphan sweep: ${parts.join('; ')}`;
}
