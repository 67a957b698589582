// Router side of the /dev/shm lane (SPEC §4).
//
// One file per tensor, named `smg-tokenspeed-<router pid>-<unix nanos>-<seq>` (the historical
// prefix, so SMG-era workers and sweepers recognise it), created with O_CREAT|O_EXCL|
// O_NOFOLLOW and mode 0600 so we never follow a planted link or clobber anything, written
// with write/pwrite (an mmap writer is 7-13x slower on these machines), closed. On any error
// the file we created is unlinked and the caller falls back to inline: SHM never fails a
// request. A name that already exists is not ours and is never unlinked.
//
// Once at start: a writability probe (`smg-tokenspeed-probe-<pid>`, one byte, unlinked). Once
// before the first write: the orphan sweep, which deletes `smg-tokenspeed-<pid>-…` files whose
// pid is not ours and has no /proc/<pid>, never the probe, and reports the count.
//
// Small tensors are written synchronously (a thread-pool hop costs more than the copy);
// large ones asynchronously so the event loop keeps serving while the kernel copies.
import { constants, promises as fsp } from 'node:fs';
import * as fs from 'node:fs';
import path from 'node:path';
import { SHM_DIR } from './namespace.ts';

export const SHM_PREFIX = 'smg-tokenspeed-';
const TENSOR_NAME = /^smg-tokenspeed-(\d+)-(\d+)-(\d+)$/;
const SYNC_WRITE_LIMIT = 1 << 20;

export interface ShmHandleData {
  name: string;
  offset: number;
  nbytes: number;
  owner_id: string;
}

/** The file-system calls the writer makes; tests swap one to inject ENOSPC or EACCES. */
export interface ShmFileOps {
  openExclusive(file: string): number;
  writeSync(fd: number, bytes: Uint8Array, position: number): number;
  write(fd: number, bytes: Uint8Array, position: number): Promise<number>;
  close(fd: number): void;
  unlink(file: string): void;
  readdir(dir: string): string[];
  pidAlive(pid: number): boolean;
}

export const realShmFileOps: ShmFileOps = {
  openExclusive: (file) => fs.openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600),
  writeSync: (fd, bytes, position) => fs.writeSync(fd, bytes, 0, bytes.byteLength, position),
  write: (fd, bytes, position) =>
    new Promise((resolve, reject) => fs.write(fd, bytes, 0, bytes.byteLength, position, (err, written) => (err ? reject(err) : resolve(written)))),
  close: (fd) => fs.closeSync(fd),
  unlink: (file) => fs.unlinkSync(file),
  readdir: (dir) => fs.readdirSync(dir),
  pidAlive: (pid) => fs.existsSync(`/proc/${pid}`),
};

export function isOurTensorName(name: string): boolean {
  return TENSOR_NAME.test(name);
}

export interface ShmProbeResult {
  writable: boolean;
  error?: string;
}

export interface OrphanSweepResult {
  removed: number;
  /** Dead pid -> files removed for it. */
  byPid: Record<string, number>;
  errors: string[];
}

export type ShmWriteResult = { ok: true; handle: ShmHandleData; micros: number } | { ok: false; error: string; code: string };

function errText(err: unknown): { code: string; message: string } {
  const e = err as NodeJS.ErrnoException;
  return { code: e.code ?? 'EIO', message: e.code ? `${e.code}: ${e.message}` : String(e.message ?? err) };
}

export interface ShmWriterOptions {
  dir?: string;
  pid?: number;
  ops?: ShmFileOps;
}

export class ShmWriter {
  readonly dir: string;
  readonly pid: number;
  private readonly ops: ShmFileOps;
  private seq = 0;
  private probed: ShmProbeResult | undefined;
  private swept: OrphanSweepResult | undefined;

  constructor(options: ShmWriterOptions = {}) {
    this.dir = options.dir ?? SHM_DIR;
    this.pid = options.pid ?? process.pid;
    this.ops = options.ops ?? realShmFileOps;
  }

  get probeName(): string {
    return `${SHM_PREFIX}probe-${this.pid}`;
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
    const file = path.join(this.dir, this.probeName);
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

  /** Remove files left by dead routers; runs once, before the first write. */
  sweepOrphans(): OrphanSweepResult {
    if (this.swept) return this.swept;
    const result: OrphanSweepResult = { removed: 0, byPid: {}, errors: [] };
    let names: string[] = [];
    try {
      names = this.ops.readdir(this.dir);
    } catch (err) {
      result.errors.push(`cannot list ${this.dir}: ${errText(err).message}`);
    }
    for (const name of names) {
      const m = TENSOR_NAME.exec(name);
      if (!m) continue;
      const pid = Number(m[1]);
      if (pid === this.pid || this.ops.pidAlive(pid)) continue;
      try {
        this.ops.unlink(path.join(this.dir, name));
        result.removed += 1;
        result.byPid[String(pid)] = (result.byPid[String(pid)] ?? 0) + 1;
      } catch (err) {
        if (errText(err).code !== 'ENOENT') result.errors.push(`${name}: ${errText(err).message}`);
      }
    }
    this.swept = result;
    return result;
  }

  nextName(): string {
    const nanos = BigInt(Date.now()) * 1_000_000n + (process.hrtime.bigint() % 1_000_000n);
    this.seq += 1;
    return `${SHM_PREFIX}${this.pid}-${nanos}-${this.seq}`;
  }

  /** Write one tensor's bytes to a new file; never throws. */
  async write(bytes: Uint8Array, scope?: ShmRequestScope): Promise<ShmWriteResult> {
    if (!this.swept) this.sweepOrphans();
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
    scope?.track(name);
    try {
      let done = 0;
      while (done < bytes.byteLength) {
        const chunk = done === 0 ? bytes : bytes.subarray(done);
        const n = bytes.byteLength < SYNC_WRITE_LIMIT ? this.ops.writeSync(fd, chunk, done) : await this.ops.write(fd, chunk, done);
        if (n <= 0) throw Object.assign(new Error(`wrote ${done} of ${bytes.byteLength} bytes`), { code: 'EIO' });
        done += n;
      }
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

/**
 * The files one request created. When the request succeeds, complete() leaves them to the
 * worker (it unlinks after reading). When it fails, times out or is cancelled, cleanup()
 * unlinks every one still present, whether or not the worker had answered: a worker that
 * read them already unlinked them (ENOENT is fine), one that did not would leave them
 * behind. Only valid names with our prefix are ever unlinked.
 */
export class ShmRequestScope {
  private readonly names = new Set<string>();
  constructor(readonly dir: string = SHM_DIR, private readonly ops: Pick<ShmFileOps, 'unlink'> = realShmFileOps) {}

  track(name: string): void {
    if (isOurTensorName(name)) this.names.add(name);
  }

  forget(name: string): void {
    this.names.delete(name);
  }

  get pending(): readonly string[] {
    return [...this.names];
  }

  /** The request succeeded: the worker has read, and unlinked, every file. */
  complete(): void {
    this.names.clear();
  }

  /** Unlink every file of the request that is still ours; returns how many were removed. */
  cleanup(): number {
    let removed = 0;
    for (const name of this.names) {
      try {
        this.ops.unlink(path.join(this.dir, name));
        removed += 1;
      } catch {
        /* the worker read and unlinked it already */
      }
    }
    this.names.clear();
    return removed;
  }
}

/** Our tensor files in `dir`, grouped by the pid that wrote them (for `mmtc doctor`). */
export function listTensorFiles(dir = SHM_DIR, ops: Pick<ShmFileOps, 'readdir' | 'pidAlive'> = realShmFileOps) {
  const byPid = new Map<number, { files: number; bytes: number; alive: boolean }>();
  for (const name of ops.readdir(dir)) {
    const m = TENSOR_NAME.exec(name);
    if (!m) continue;
    const pid = Number(m[1]);
    let size = 0;
    try {
      size = fs.lstatSync(path.join(dir, name)).size;
    } catch {
      continue;
    }
    const entry = byPid.get(pid) ?? { files: 0, bytes: 0, alive: ops.pidAlive(pid) };
    entry.files += 1;
    entry.bytes += size;
    byPid.set(pid, entry);
  }
  return [...byPid.entries()].map(([pid, v]) => ({ pid, ...v })).sort((a, b) => a.pid - b.pid);
}

export async function shmFreeBytes(dir = SHM_DIR): Promise<{ free: number; total: number } | undefined> {
  try {
    const s = await fsp.statfs(dir);
    return { free: s.bavail * s.bsize, total: s.blocks * s.bsize };
  } catch {
    return undefined;
  }
}
