// Router side of the /dev/shm lane (docs/transport.md, "Writing a tensor").
//
// One file per tensor, named `smg-tokenspeed-<router pid>-<unix nanos>-<seq>` (shm-names.ts),
// created with O_CREAT|O_EXCL|O_NOFOLLOW and mode 0600 so we never follow a planted link or
// clobber anything, written with write/pwrite (an mmap writer is slower: measured:
// docs/performance.md, "Where the comments' measurements went: transport and preprocessing"),
// closed. On any error the file we created is unlinked and the caller falls back to inline:
// SHM never fails a request. A name that already exists is not ours and is never unlinked.
//
// Once at start: a writability probe (`smg-tokenspeed-probe-<pid>-<nanos>`, one byte, unlinked).
// start() runs the orphan sweep at once and then every sweepIntervalMs, so a crashed router's
// files go when the next router starts (not at its first SHM write) and keep going while it
// runs. The start-up sweep runs all at once (before the router listens); the periodic one is
// paced (orphans.ts), so a /dev/shm anyone filled with entries never holds the event loop. The sweep removes only files it can prove are orphans; the rule, and why age and not
// /proc decides, is in orphans.ts. Constructing a writer sweeps nothing: `mmtc doctor` builds
// one and is read-only unless asked.
//
// Small tensors are written synchronously (a thread-pool hop costs more than the copy);
// large ones asynchronously so the event loop keeps serving while the kernel copies.
import { constants, promises as fsp } from 'node:fs';
import * as fs from 'node:fs';
import path from 'node:path';
import { SHM_DIR } from './namespace.ts';
import {
  describeSweep,
  realOrphanFileOps,
  sweepOrphanFiles,
  sweepOrphanFilesPaced,
  type OrphanFileOps,
  type OrphanRuleOptions,
  type OrphanSweepResult,
  type ProcessInfo,
} from './orphans.ts';
import { formatShmName, isOurTensorName, shmStampNanos } from './shm-names.ts';
import { errnoText } from '../util/errno.ts';
import { pwrite, pwriteSync, writeAll, writeAllSync } from '../util/write-all.ts';
import { DEFAULT_ORPHAN_SWEEP_SECS } from '../config/sweep-interval-setting.ts';
export const DEFAULT_SWEEP_INTERVAL_MS = DEFAULT_ORPHAN_SWEEP_SECS * 1000;
const SYNC_WRITE_LIMIT = 1 << 20;

export interface ShmHandleData {
  name: string;
  offset: number;
  nbytes: number;
  owner_id: string;
}

/** The file-system calls the writer and its sweep make; tests swap one to inject ENOSPC or EACCES. */
export interface ShmFileOps extends OrphanFileOps {
  openExclusive(file: string): number;
  writeSync(fd: number, bytes: Uint8Array, position: number): number;
  write(fd: number, bytes: Uint8Array, position: number): Promise<number>;
  close(fd: number): void;
}

export const realShmFileOps: ShmFileOps = {
  ...realOrphanFileOps,
  openExclusive: (file) => fs.openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600),
  writeSync: pwriteSync,
  write: pwrite,
  close: (fd) => fs.closeSync(fd),
};

export interface ShmProbeResult {
  writable: boolean;
  error?: string;
}

export type ShmWriteResult = { ok: true; handle: ShmHandleData; micros: number } | { ok: false; error: string; code: string };

function errText(err: unknown): { code: string; message: string } {
  return { code: (err as NodeJS.ErrnoException)?.code ?? 'EIO', message: errnoText(err) };
}

export interface ShmWriterOptions extends OrphanRuleOptions {
  dir?: string;
  pid?: number;
  ops?: ShmFileOps;
  /** Clock and /proc readers for the sweep (default: the real ones). */
  proc?: ProcessInfo;
  /** Period of the sweep after start(); 0 sweeps only at start. Default 60 s. */
  sweepIntervalMs?: number;
  /** One line per sweep that removed something, or found new suspicious entries or errors. */
  log?: (line: string) => void;
  /** Every sweep's result, including the silent ones. */
  onSweep?: (result: OrphanSweepResult) => void;
  /** Most bytes of our files in the directory at once (read at every write); unlimited when absent. */
  maxOutstandingBytes?: () => number | undefined;
}

export class ShmWriter implements OutstandingLedger {
  readonly dir: string;
  /** Bytes of files written for request scopes and not yet gone. */
  outstanding = 0;
  readonly pid: number;
  private readonly ops: ShmFileOps;
  private readonly options: ShmWriterOptions;
  private seq = 0;
  private probed: ShmProbeResult | undefined;
  private timer: NodeJS.Timeout | undefined;
  private started = false;
  private sweeping = false;
  /** What the last logged line said about suspicious entries and errors, so a planted fifo or a
   *  persistent EPERM is logged once, not every minute. */
  private lastComplaint = '';
  private last: OrphanSweepResult | undefined;
  private sharer: { bytes(): number; reclaim(bytes: number): void } | undefined;

  constructor(options: ShmWriterOptions = {}) {
    this.dir = options.dir ?? SHM_DIR;
    this.pid = options.pid ?? process.pid;
    this.ops = options.ops ?? realShmFileOps;
    this.options = options;
  }

  /** A scope whose files count against this writer's outstanding bytes. */
  newScope(): ShmRequestScope {
    return new ShmRequestScope(this.dir, this.ops, this);
  }

  settle(bytes: number): void {
    this.outstanding = Math.max(0, this.outstanding - bytes);
  }

  /** The limit on outstanding bytes now (undefined: none). */
  maxOutstanding(): number | undefined {
    return this.options.maxOutstandingBytes?.();
  }

  /** Whether `bytes` more fit under maxOutstandingBytes, with what the pixel cache holds; when not, the cache gives up entries first. */
  hasRoom(bytes: number): boolean {
    if (this.fits(bytes)) return true;
    this.sharer?.reclaim(bytes);
    return this.fits(bytes);
  }

  /** Whether `bytes` more fit now, taking nothing from the pixel cache. */
  fits(bytes: number): boolean {
    const max = this.maxOutstanding();
    return max === undefined || this.outstanding + (this.sharer?.bytes() ?? 0) + bytes <= max;
  }

  /** The pixel cache's files share this budget (transport/pixel-cache.ts): counted once each, and given up for requests' tensors. */
  shareBudgetWith(sharer: { bytes(): number; reclaim(bytes: number): void }): void {
    this.sharer = sharer;
  }

  /** The most recent sweep's result (start(), the timer or sweepOrphans()). */
  get lastSweep(): OrphanSweepResult | undefined {
    return this.last;
  }

  /**
   * A name for the probe no one can take ahead of it: the pid alone is predictable (pid 1 in a
   * container, or another router that is pid 1 of its own pid namespace at the same moment), so
   * it carries the nanoseconds a tensor name carries.
   */
  probeName(): string {
    return formatShmName({ kind: 'probe', pid: this.pid, stampNanos: shmStampNanos() });
  }

  /** Close and remove a file we created, whatever state it is in. */
  private discard(fd: number, file: string): void {
    try {
      this.ops.close(fd);
    } catch {
      /* already closed or never usable */
    }
    try {
      this.ops.unlink(file);
    } catch {
      /* gone already */
    }
  }

  /** The start-up writability probe; later calls return the first answer. */
  probe(): ShmProbeResult {
    if (this.probed) return this.probed;
    const file = path.join(this.dir, this.probeName());
    let fd: number | undefined;
    try {
      fd = this.ops.openExclusive(file);
      if (this.ops.writeSync(fd, new Uint8Array([0x5a]), 0) !== 1) throw Object.assign(new Error('short write'), { code: 'EIO' });
      this.probed = { writable: true };
    } catch (err) {
      this.probed = { writable: false, error: `cannot create files in ${this.dir}: ${errText(err).message}` };
    } finally {
      if (fd !== undefined) this.discard(fd, file);
    }
    return this.probed;
  }

  /** One sweep now, by the rule in orphans.ts; never throws. Does not log (start() does). */
  sweepOrphans(): OrphanSweepResult {
    const { maxFileAgeMs, liveOwnerMaxAgeMs, proc } = this.options;
    this.last = sweepOrphanFiles(this.dir, { ops: this.ops, proc, maxFileAgeMs, liveOwnerMaxAgeMs });
    return this.last;
  }

  /** Sweep now and every sweepIntervalMs until close(); returns the first sweep. Later calls only return the last sweep. */
  start(): OrphanSweepResult {
    if (this.started) return this.last!;
    this.started = true;
    const first = this.sweepOrphans();
    this.report(first);
    const every = this.options.sweepIntervalMs ?? DEFAULT_SWEEP_INTERVAL_MS;
    if (every > 0 && Number.isFinite(every)) {
      this.timer = setInterval(() => void this.sweepPaced(), every);
      // The sweep is housekeeping: it must never keep a router (or a test) alive.
      this.timer.unref();
    }
    return first;
  }

  /** Stop the periodic sweep; the writer still writes. */
  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** A periodic sweep, paced; none starts while the last one still runs. */
  private async sweepPaced(): Promise<void> {
    if (this.sweeping) return;
    this.sweeping = true;
    try {
      const { maxFileAgeMs, liveOwnerMaxAgeMs, proc } = this.options;
      this.last = await sweepOrphanFilesPaced(this.dir, { ops: this.ops, proc, maxFileAgeMs, liveOwnerMaxAgeMs });
      if (this.timer) this.report(this.last);
    } finally {
      this.sweeping = false;
    }
  }

  private report(result: OrphanSweepResult): void {
    try {
      this.options.onSweep?.(result);
    } catch {
      /* a listener's failure is not the sweep's */
    }
    const complaint = JSON.stringify([result.suspicious.map((x) => x.name), result.errors]);
    const news = complaint !== this.lastComplaint;
    this.lastComplaint = complaint;
    if (this.options.log && (result.removed > 0 || result.removedHeartbeats > 0 || (news && (result.suspicious.length > 0 || result.errors.length > 0)))) {
      const line = describeSweep(result, this.dir);
      try {
        if (line) this.options.log(line);
      } catch {
        /* logging must not break the timer */
      }
    }
  }

  /**
   * A file for a tensor of `nbytes` that someone else will write (a preprocessing thread, as
   * the bands of the image are done): created here, empty, as write() creates its files
   * (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600), so it is ours and the scope may unlink it whatever
   * becomes of the write; counted against the budget and tracked by `scope` from now on,
   * exactly as write() counts and tracks its files. Undefined when it does not fit the budget
   * or cannot be created (the tensor is then placed as any other).
   */
  reserve(nbytes: number, scope: ShmRequestScope): { name: string; path: string } | undefined {
    if (!this.hasRoom(nbytes)) return undefined;
    const name = this.nextName();
    const file = path.join(this.dir, name);
    let fd: number;
    try {
      fd = this.ops.openExclusive(file);
    } catch {
      return undefined; // taken, or /dev/shm refusing: nothing of ours to remove
    }
    try {
      this.ops.close(fd);
    } catch {
      // Closing the new file failed: not known to be usable, so it is removed and the tensor placed as any other.
      this.discard(fd, file);
      return undefined;
    }
    scope.track(name, nbytes);
    if (scope.ledger === this) this.outstanding += nbytes;
    return { name, path: file };
  }

  /** The handle of a reserved file its writer has written and closed. */
  handleFor(name: string, nbytes: number): ShmHandleData {
    return { name, offset: 0, nbytes, owner_id: `smg:${this.pid}` };
  }

  nextName(): string {
    this.seq += 1;
    return formatShmName({ kind: 'tensor', pid: this.pid, stampNanos: shmStampNanos(), seq: this.seq });
  }

  /** Write one tensor's bytes to a new file; never throws. */
  async write(bytes: Uint8Array, scope?: ShmRequestScope): Promise<ShmWriteResult> {
    const started = process.hrtime.bigint();
    const name = this.nextName();
    const file = path.join(this.dir, name);
    let fd: number;
    try {
      fd = this.ops.openExclusive(file);
    } catch (err) {
      const e = errText(err);
      return { ok: false, code: e.code, error: `create ${file}: ${e.message}` };
    }
    scope?.track(name, bytes.byteLength);
    if (scope?.ledger === this) this.outstanding += bytes.byteLength;
    try {
      if (bytes.byteLength < SYNC_WRITE_LIMIT) writeAllSync((chunk, at) => this.ops.writeSync(fd, chunk, at), bytes);
      else await writeAll((chunk, at) => this.ops.write(fd, chunk, at), bytes);
      this.ops.close(fd);
    } catch (err) {
      const e = errText(err);
      this.discard(fd, file);
      scope?.forget(name);
      return { ok: false, code: e.code, error: `write ${file}: ${e.message}` };
    }
    const micros = Number(process.hrtime.bigint() - started) / 1000;
    return { ok: true, micros, handle: { name, offset: 0, nbytes: bytes.byteLength, owner_id: `smg:${this.pid}` } };
  }
}

/** Where a request scope gives back the bytes of its files once they are gone. */
export interface OutstandingLedger {
  settle(bytes: number): void;
}

/**
 * The files one request created. Whatever the outcome they are unlinked when the request is
 * over: complete() once the worker has answered (it read them, and normally unlinked them
 * already: ENOENT is the usual answer, but a worker run with
 * TOKENSPEED_UNLINK_MM_SHM_AFTER_READ=0 leaves them, and /dev/shm must not fill up with
 * them), cleanup() when the request failed, timed out or was cancelled (a file the worker
 * never read would otherwise stay). Only valid names with our prefix are ever unlinked. The
 * bytes go back to the writer's outstanding count either way.
 */
export class ShmRequestScope {
  private readonly names = new Map<string, number>();
  constructor(
    readonly dir: string = SHM_DIR,
    private readonly ops: Pick<ShmFileOps, 'unlink'> = realShmFileOps,
    /** Where the bytes of this scope's files are counted while they exist (a writer's newScope()). */
    readonly ledger?: OutstandingLedger,
  ) {}

  track(name: string, nbytes = 0): void {
    if (isOurTensorName(name)) this.names.set(name, nbytes);
  }

  forget(name: string): void {
    const n = this.names.get(name);
    if (n === undefined) return;
    this.names.delete(name);
    this.ledger?.settle(n);
  }

  /** One of this scope's files whose bytes someone else now counts (the pixel cache took its inode): still unlinked with the scope, counted 0. */
  uncount(name: string): void {
    const n = this.names.get(name);
    if (n === undefined || n === 0) return;
    this.names.set(name, 0);
    this.ledger?.settle(n);
  }

  /** Hand one of this scope's files to `other` (an image's own call under EPD): its bytes stay counted, now there. */
  transferTo(other: ShmRequestScope, name: string): void {
    const n = this.names.get(name);
    if (n === undefined) return;
    this.names.delete(name);
    other.names.set(name, n);
  }

  /** A file of this scope that will not be sent (a reserved file left unused): unlinked now, its bytes given back. */
  discard(name: string): void {
    if (!this.names.has(name)) return;
    try {
      this.ops.unlink(path.join(this.dir, name));
    } catch {
      /* never created, or removed already */
    }
    this.forget(name);
  }

  get pending(): readonly string[] {
    return [...this.names.keys()];
  }

  /** The request succeeded: the worker has read every file. Returns how many it had left in place. */
  complete(): number {
    return this.unlinkAll();
  }

  /** The request failed: unlink every file of it still present; returns how many were removed. */
  cleanup(): number {
    return this.unlinkAll();
  }

  private unlinkAll(): number {
    let removed = 0;
    let bytes = 0;
    for (const [name, n] of this.names) {
      bytes += n;
      try {
        this.ops.unlink(path.join(this.dir, name));
        removed += 1;
      } catch {
        /* the worker read and unlinked it already */
      }
    }
    this.names.clear();
    if (bytes > 0) this.ledger?.settle(bytes);
    return removed;
  }
}

export async function shmFreeBytes(dir = SHM_DIR): Promise<{ free: number; total: number } | undefined> {
  try {
    const s = await fsp.statfs(dir);
    return { free: s.bavail * s.bsize, total: s.blocks * s.bsize };
  } catch {
    return undefined; // statfs refused (no such directory, not permitted): the free space is unknown (null in doctor and the console)
  }
}
