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
//      heartbeat is at most 5 minutes old ("owner-alive"); otherwise an orphan once the file is
//      that old too ("stale"; "young" before), the heartbeat itself included. Removing a live
//      router's entry costs it no more than a miss: it checks the file before every use.
//
// The sweep and `listTensorFiles` (mmtc doctor) call the same classify(), so what doctor calls
// an orphan is exactly what the sweep removes.
import * as fs from 'node:fs';
import path from 'node:path';
import { SHM_DIR } from './namespace.ts';

export const TENSOR_NAME = /^smg-tokenspeed-(\d+)-(\d+)-(\d+)$/;
/** The pixel cache's entries: never given to a worker (a request gets a hard link under TENSOR_NAME). */
export const CACHE_PREFIX = 'smg-tokenspeed-cache-';
export const CACHE_NAME = /^smg-tokenspeed-cache-(\d+)-(\d+)-(\d+)-(\d+)$/;
/** A cache-writing router touches its heartbeat (its cache name with seq 0) this often... */
export const CACHE_HEARTBEAT_MS = 60_000;
/** ...and one untouched this long is a dead router's, as are its entries, for a router in another pid namespace. */
export const CACHE_HEARTBEAT_STALE_MS = 5 * CACHE_HEARTBEAT_MS;

/** Our pid namespace's inode number, as cache file names carry it ('0' when /proc cannot say). */
export function ourPidNamespace(): string {
  try {
    return /\[(\d+)\]/.exec(fs.readlinkSync('/proc/self/ns/pid'))?.[1] ?? '0';
  } catch {
    return '0';
  }
}

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
}

/** The file-system calls of the sweep and the listing; part of ShmFileOps. */
export interface OrphanFileOps {
  readdir(dir: string): string[];
  /** Never follows a symlink. */
  lstat(file: string): ShmEntryStat;
  unlink(file: string): void;
}

function entryType(s: fs.Stats): ShmEntryType {
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
  lstat: (file) => {
    const s = fs.lstatSync(file);
    return { type: entryType(s), size: s.size, mtimeMs: s.mtimeMs };
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
        secs = undefined;
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

export type OrphanReason = 'dead' | 'reused' | 'stale';
export type KeepReason = 'young' | 'owner-alive' | 'not-regular';
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

/** The time the name was stamped with, ms since the epoch. */
function nameMs(nanos: string): number {
  return Number(BigInt(nanos) / 1_000_000n);
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
function classifyCacheFile(stat: ShmEntryStat, createdMs: number, fileTime: number, sameNamespace: boolean, owner: () => ProcessState, heartbeatMs: number | undefined, t: Thresholds): FileVerdict {
  if (stat.type !== 'file') return { orphan: false, reason: 'not-regular' };
  if (!sameNamespace) {
    // Its router's heartbeat (touched every minute while it runs) says whether it lives.
    if (heartbeatMs !== undefined && t.now - heartbeatMs <= CACHE_HEARTBEAT_STALE_MS) return { orphan: false, reason: 'owner-alive' };
    return t.now - fileTime > CACHE_HEARTBEAT_STALE_MS ? { orphan: true, reason: 'stale' } : { orphan: false, reason: 'young' };
  }
  const p = owner();
  if (!p.alive) return { orphan: true, reason: 'dead' };
  if (p.startMs !== undefined && p.startMs > createdMs + START_TIME_MARGIN_MS) return { orphan: true, reason: 'reused' };
  return { orphan: false, reason: 'owner-alive' };
}

interface ScannedEntry {
  name: string;
  /** A pixel-cache entry (CACHE_NAME), not a request's tensor. */
  cache: boolean;
  /** A pixel cache's heartbeat (CACHE_NAME with seq 0): no tensor, swept by the same rule. */
  heartbeat: boolean;
  pid: number;
  pidKey: string;
  stat: ShmEntryStat;
  fileTime: number;
  verdict: FileVerdict;
}

interface Scan {
  now: number;
  entries: ScannedEntry[];
  processes: Map<string, ProcessState>;
  errors: string[];
}

export interface OrphanScanOptions extends OrphanRuleOptions {
  ops?: OrphanFileOps;
  proc?: ProcessInfo;
  /** Our pid namespace's inode number (tests stage another router's); default /proc/self/ns/pid's. */
  pidNamespace?: string;
}

function errMessage(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  return e.code ? `${e.code}: ${e.message}` : String(e?.message ?? err);
}

function scan(dir: string, options: OrphanScanOptions, listErrors: 'collect' | 'throw'): Scan {
  const ops = options.ops ?? realOrphanFileOps;
  const proc = options.proc ?? defaultProcessInfo();
  const t = thresholds(options, proc.now());
  const out: Scan = { now: t.now, entries: [], processes: new Map(), errors: [] };
  let names: string[];
  try {
    names = ops.readdir(dir);
  } catch (err) {
    if (listErrors === 'throw') throw err;
    out.errors.push(`cannot list ${dir}: ${errMessage(err)}`);
    return out;
  }
  const lookup = (pidKey: string, pid: number): ProcessState => {
    let p = out.processes.get(pidKey);
    if (!p) {
      p = proc.lookup(pid);
      out.processes.set(pidKey, p);
    }
    return p;
  };
  const pidNs = options.pidNamespace ?? ourPidNamespace();
  // Each cache-writing router's heartbeat (seq 0): the mtime of its last touch, by namespace and pid.
  const heartbeats = new Map<string, number>();
  for (const name of names) {
    const c = CACHE_NAME.exec(name);
    if (!c || c[4] !== '0') continue;
    try {
      const st = ops.lstat(path.join(dir, name));
      if (st.type === 'file') heartbeats.set(`${c[1]}-${c[2]}`, Math.max(heartbeats.get(`${c[1]}-${c[2]}`) ?? 0, st.mtimeMs));
    } catch {
      /* gone */
    }
  }
  for (const name of names) {
    const c = CACHE_NAME.exec(name);
    const m = c ? ([c[0], c[2], c[3], c[4]] as const) : TENSOR_NAME.exec(name);
    if (!m) continue;
    let stat: ShmEntryStat;
    try {
      stat = ops.lstat(path.join(dir, name));
    } catch (err) {
      // Gone between readdir and lstat: the worker read it.
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') out.errors.push(`${name}: ${errMessage(err)}`);
      continue;
    }
    const pidKey = m[1]!;
    const pid = Number(pidKey);
    const fileTime = Math.max(stat.mtimeMs, nameMs(m[2]!));
    // A cache file's creation is its name's stamp (whether a process with its pid is younger
    // than it); its age for another namespace's, the later of that and its mtime, as above.
    const verdict = c ? classifyCacheFile(stat, nameMs(m[2]!), fileTime, c[1] === pidNs, () => lookup(pidKey, pid), heartbeats.get(`${c[1]}-${c[2]}`), t) : classify(stat, fileTime, () => lookup(pidKey, pid), t);
    out.entries.push({ name, cache: c !== null, heartbeat: c !== null && c[4] === '0', pid, pidKey, stat, fileTime, verdict });
  }
  return out;
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
  removed: number;
  removedBytes: number;
  /** pid -> files removed for it. */
  byPid: Record<string, number>;
  /** pid -> why its files were orphans (more than one reason when its files differ). */
  reasonsByPid: Record<string, OrphanReason[]>;
  /** Files of any pid kept because they are younger than maxFileAgeMs (+ slack). */
  keptYoung: number;
  /** Old files kept because a process older than them has their pid. */
  keptOwnerAlive: number;
  /** Entries under our name that are not regular files; never removed. */
  suspicious: SuspiciousEntry[];
  errors: string[];
}

/** One sweep of `dir` by the rule of the header comment. Never throws. */
export function sweepOrphanFiles(dir: string, options: OrphanScanOptions = {}): OrphanSweepResult {
  const ops = options.ops ?? realOrphanFileOps;
  const proc = options.proc ?? defaultProcessInfo();
  const s = scan(dir, { ...options, ops, proc }, 'collect');
  const result: OrphanSweepResult = { at: s.now, removed: 0, removedBytes: 0, byPid: {}, reasonsByPid: {}, keptYoung: 0, keptOwnerAlive: 0, suspicious: [], errors: s.errors };
  for (const e of s.entries) {
    const v = e.verdict;
    if (!v.orphan) {
      if (v.reason === 'young') result.keptYoung += 1;
      else if (v.reason === 'owner-alive') result.keptOwnerAlive += 1;
      else result.suspicious.push({ name: e.name, pid: e.pid, type: e.stat.type });
      continue;
    }
    try {
      // unlink removes the name only; TENSOR_NAME admits no '/' or '..', so it stays in dir.
      ops.unlink(path.join(dir, e.name));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') result.errors.push(`${e.name}: ${errMessage(err)}`);
      continue;
    }
    result.removed += 1;
    result.removedBytes += e.stat.size;
    result.byPid[e.pidKey] = (result.byPid[e.pidKey] ?? 0) + 1;
    const reasons = (result.reasonsByPid[e.pidKey] ??= []);
    if (!reasons.includes(v.reason)) reasons.push(v.reason);
  }
  return result;
}

export interface TensorFilesOfPid {
  pid: number;
  files: number;
  bytes: number;
  /** A process with this pid runs and may have written some of the files (it is not younger than all of them). */
  alive: boolean;
  /** What /proc says: no such process; a process that may be the writer; one that started after every regular file (pid reused). */
  process: 'dead' | 'alive' | 'reused';
  /** Files the sweep would remove now, by the same rule. */
  orphans: number;
  orphanBytes: number;
  /** Kept because younger than maxFileAgeMs (+ slack), whatever the process. */
  young: number;
  /** Not regular files (symlink, fifo, ...): never removed. */
  suspicious: number;
  /** Of the files, pixel-cache entries (a live router keeps them while it runs), and their bytes. */
  cacheFiles: number;
  cacheBytes: number;
}

/** Our tensor files in `dir` grouped by pid, judged by the sweep's rule (for `mmtc doctor`). Read-only; throws if `dir` cannot be listed. */
export function listTensorFiles(dir = SHM_DIR, options: OrphanScanOptions = {}): TensorFilesOfPid[] {
  const proc = options.proc ?? defaultProcessInfo();
  const s = scan(dir, { ...options, proc }, 'throw');
  const byPid = new Map<string, TensorFilesOfPid & { newestFile: number }>();
  for (const e of s.entries) {
    if (e.heartbeat && !e.verdict.orphan) continue; // not a tensor: a live cache's sign of life
    let row = byPid.get(e.pidKey);
    if (!row) {
      row = { pid: e.pid, files: 0, bytes: 0, alive: false, process: 'dead', orphans: 0, orphanBytes: 0, young: 0, suspicious: 0, cacheFiles: 0, cacheBytes: 0, newestFile: -Infinity };
      byPid.set(e.pidKey, row);
    }
    row.files += 1;
    row.bytes += e.stat.size;
    if (e.cache) {
      row.cacheFiles += 1;
      row.cacheBytes += e.stat.size;
    }
    if (e.verdict.orphan) {
      row.orphans += 1;
      row.orphanBytes += e.stat.size;
    } else if (e.verdict.reason === 'young') row.young += 1;
    else if (e.verdict.reason === 'not-regular') row.suspicious += 1;
    if (e.stat.type === 'file') row.newestFile = Math.max(row.newestFile, e.fileTime);
  }
  const rows: TensorFilesOfPid[] = [];
  for (const [pidKey, { newestFile, ...row }] of byPid) {
    // The listing asks /proc about every pid, not only those with old files, so doctor can say what each is.
    const p = s.processes.get(pidKey) ?? proc.lookup(row.pid);
    if (p.alive) row.process = p.startMs !== undefined && Number.isFinite(newestFile) && p.startMs > newestFile + START_TIME_MARGIN_MS ? 'reused' : 'alive';
    row.alive = row.process === 'alive';
    rows.push(row);
  }
  return rows.sort((a, b) => a.pid - b.pid);
}

export function formatMiB(n: number): string {
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

const REASON_WORDS: Record<OrphanReason, string> = { dead: 'gone', reused: 'pid reused by a newer process', stale: 'kept past the live-owner limit' };

/** One log line for a sweep, or undefined when there is nothing to say. */
export function describeSweep(r: OrphanSweepResult, dir: string): string | undefined {
  const parts: string[] = [];
  if (r.removed > 0) {
    const pids = Object.entries(r.byPid)
      .slice(0, 8)
      .map(([pid, n]) => `pid ${pid} (${r.reasonsByPid[pid]!.map((x) => REASON_WORDS[x]).join(', ')}: ${n})`);
    const more = Object.keys(r.byPid).length - pids.length;
    parts.push(`removed ${r.removed} orphaned tensor file${r.removed === 1 ? '' : 's'} (${formatMiB(r.removedBytes)}) of ${pids.join(', ')}${more > 0 ? ` and ${more} more pids` : ''}`);
  }
  if (r.suspicious.length > 0) {
    const shown = r.suspicious.slice(0, 5).map((s) => `${s.name} (${s.type})`);
    parts.push(`left ${r.suspicious.length} entr${r.suspicious.length === 1 ? 'y' : 'ies'} under our name that ${r.suspicious.length === 1 ? 'is' : 'are'} not a regular file: ${shown.join(', ')}${r.suspicious.length > 5 ? ', ...' : ''}`);
  }
  if (r.errors.length > 0) parts.push(`${r.errors.length} error${r.errors.length === 1 ? '' : 's'}: ${r.errors.slice(0, 3).join('; ')}${r.errors.length > 3 ? '; ...' : ''}`);
  if (parts.length === 0) return undefined;
  const kept = r.keptYoung + r.keptOwnerAlive;
  if (kept > 0) parts.push(`kept ${r.keptYoung} too young to judge and ${r.keptOwnerAlive} of live older processes`);
  return `${dir} orphan sweep: ${parts.join('; ')}`;
}
