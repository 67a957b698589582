// The pixel cache (docs/performance.md, "The pixel cache"): an image's encoder input, computed
// once, kept as a private read-only file in /dev/shm and handed to every later request that
// brings the same image under the same preprocessing, so a repeated image skips decoding,
// resizing and normalizing, and over SHM skips the write too.
//
// - The key is the image's media hash (BLAKE3 of its encoded bytes, as the gateway's pixel
//   cache keys it: core/multimodal/media-hash.ts) and a fingerprint of everything that
//   changes its tensor (the model's image config with the request's pixel bounds, the
//   encoder-input kind): a live change of any of them gives other keys, never a stale tensor.
// - An entry is a file `smg-tokenspeed-cache-<pid namespace>-<pid>-<unix nanos>-<seq>`, mode
//   0400, a name no worker is given. A request that sends the tensor over SHM gets a hard link
//   to it under an ordinary tensor name (ShmWriter.nextName): the worker opens it read-only,
//   reads and unlinks the link, and the cached inode stays. Inline, the tensor is read from the
//   file into the preprocessing pool's memory (a fresh buffer's page faults cost more than the
//   read): core/router/cached-images.ts.
// - Creating an entry costs no copy when its tensor was written to /dev/shm for the request
//   anyway (the file gets a second name), and one write to a file otherwise, done off the
//   event loop while the request goes on.
// - The guard: the file's inode, size, mode and mtime are recorded when it is made and checked
//   (an fstat of the descriptor the request holds; its cost: docs/performance.md, "The pixel
//   cache") before every use and after every request that was given a link. A worker
//   that writes into its file changes its mtime: the entry is dropped (counted as `tampered`)
//   and the image computed again. Mode 0400 stops a worker of our uid from opening it for
//   writing at all; root ignores modes, which is why the check is there.
// - The budget counts each entry's bytes once, however many links are in flight; an entry
//   evicted while links are out stays counted until the last of those requests ends. The
//   cache's bytes also count against the /dev/shm budget (multimodal_shm_max_outstanding_bytes)
//   and yield to requests: a tensor write that does not fit evicts entries first. An entry
//   evicted to make room stops counting at once while its unlink runs on libuv's pool (how
//   long that takes: docs/performance.md, "The pixel cache"), so /dev/shm holds up to that
//   entry's bytes more than counted for that long.
// - Concurrent requests for an image not yet cached compute it once (single flight).
// - A router that dies leaves its entries; the next router's sweep removes them at once (their
//   pid is gone or reused in its pid namespace: orphans.ts, "cache files").
import { createHash } from 'node:crypto';
import { constants, promises as fsp } from 'node:fs';
import * as fs from 'node:fs';
import path from 'node:path';
import { SHM_DIR } from './namespace.ts';
import { CACHE_HEARTBEAT_MS } from './orphans.ts';
import { formatShmName, ourPidNamespace, shmStampNanos } from './shm-names.ts';
import type { ShmHandleData, ShmRequestScope, ShmWriter } from './shm-writer.ts';
import { writeAllAt } from '../util/write-all.ts';
import type { ImageModelTensor } from '../multimodal/families/index.ts';

/** The encoder-input kinds preprocessing produces: the bytes an entry holds. */
export type CachedKind = 'float32' | 'bf16';

/** What a cached image's tensor is, besides its bytes. */
export interface CachedImageShape {
  kind: CachedKind;
  nbytes: number;
  patches: number;
  features: number;
  /** The image's encoder input shape, as the gateway slices it per item (PreparedImage.encoderShape). */
  encoderShape: number[];
  /** The family's model-specific tensors of the image (image_grid_thw, patches_per_image for Qwen). */
  modelTensors: ImageModelTensor[];
  tokens: number;
  /** The image's media hash (BLAKE3 of its encoded bytes). */
  mediaHash: Buffer;
}

interface Entry {
  key: string;
  shape: CachedImageShape;
  name: string;
  file: string;
  ino: bigint;
  mtimeNs: bigint;
  /** Requests holding a link or a read of this entry right now. */
  users: number;
  /** Evicted (its name is gone) while users were out: its bytes stay counted until they end. */
  evicted: boolean;
}

/** An entry's file made, with what the guard checks later; or not made, and whether its name was ours (created) to remove. */
type EntryFile = { kind: 'made'; ino: bigint; mtimeNs: bigint } | { kind: 'not-made'; created: boolean };

/** What the console and /metrics show. */
export interface PixelCacheStats {
  budgetBytes: number;
  heldBytes: number;
  entries: number;
  hits: number;
  misses: number;
  evictions: number;
  /** Entries dropped because their file changed under us (a worker wrote into it). */
  tampered: number;
  /** Misses that could not be stored (larger than the budget, no room in /dev/shm, a write error). */
  notStored: number;
  flushes: number;
}

/** Where an entry's bytes come from: a request's file in /dev/shm, written and counted already (it gets a second name), or memory (written to a new file). */
export type CacheStoreSource = { kind: 'file'; file: string } | { kind: 'memory'; bytes: Uint8Array };

/** A miss this request must compute: store() it when computed, or abandon() it; waiters for the same key get the outcome. */
export interface CacheMiss {
  readonly key: string;
  store(shape: CachedImageShape, source: CacheStoreSource): Promise<boolean>;
  /**
   * Keep the request's own file, which `worker` is about to read, as the entry (a second name
   * for its inode: no copy), pinned for the request: in use until it ends (eviction passes over
   * it, its bytes count), then checked like a hit's link, blaming `worker` for a change.
   */
  storeShared(shape: CachedImageShape, file: string, worker: string): Promise<CachedEntry | undefined>;
  abandon(): void;
}

export type CacheLookup = { kind: 'hit'; entry: CachedEntry } | { kind: 'miss'; miss: CacheMiss } | { kind: 'off' };

/** A hit: the entry pinned for one request until release(). */
export interface CachedEntry {
  readonly shape: CachedImageShape;
  /**
   * The entry under a fresh ordinary tensor name for `worker`, tracked by `scope`: a hard link
   * (0 bytes: the cache counts them), or with `copy`, or for a worker caught writing into an
   * entry, a copy of its own (counted as any request file); undefined when neither can be made.
   */
  place(scope: ShmRequestScope, worker: string, copy: boolean): Promise<{ handle: ShmHandleData; micros: number; copied: boolean } | undefined>;
  /** The tensor's bytes read into `into` (exactly shape.nbytes long); false when the entry is gone or changed. */
  read(into: Uint8Array): Promise<boolean>;
  /** The request is over: check the file is as stored (a worker may have written into its link) and unpin. */
  release(): void;
}

export interface PixelCacheOptions {
  dir?: string;
  pid?: number;
  /** The budget in bytes, read at every store (a live change applies at once through setBudget). */
  budgetBytes: number;
  /** The writer whose /dev/shm budget the cache's files share, and whose names links take. */
  writer: ShmWriter;
  /** How an entry evicted to make room is unlinked off the request's path (fs.unlink; a test holds it back). */
  unlinkInBackground?: (file: string, done: () => void) => void;
}

/** The fingerprint of what changes an image's tensor besides its bytes, for cache keys. */
export function pixelFingerprint(parts: Record<string, unknown>): string {
  return createHash('sha256')
    .update(JSON.stringify(parts, Object.keys(parts).sort()))
    .digest('hex')
    .slice(0, 32);
}

export class PixelCache {
  readonly dir: string;
  private readonly pid: number;
  private readonly pidNs = ourPidNamespace();
  private readonly writer: ShmWriter;
  private budget: number;
  /** LRU order: Map iteration is insertion order, a use re-inserts. */
  private readonly entries = new Map<string, Entry>();
  private readonly inflight = new Map<string, Promise<void>>();
  private held = 0;
  /** Evicted entries' files whose unlink is under way (close() finishes them at once). */
  private readonly unlinking = new Set<string>();
  private readonly unlinkInBackground: (file: string, done: () => void) => void;
  private seq = 0;
  /** Raised by flush() and close(): a store that began before lands nothing. */
  private generation = 0;
  /** Workers seen writing into an entry they were given a link to: they get copies (docs/performance.md). */
  private readonly suspects = new Set<string>();
  private readonly counts = { hits: 0, misses: 0, evictions: 0, tampered: 0, notStored: 0, flushes: 0 };

  constructor(options: PixelCacheOptions) {
    this.dir = options.dir ?? SHM_DIR;
    this.pid = options.pid ?? process.pid;
    this.writer = options.writer;
    this.budget = Math.max(0, options.budgetBytes);
    this.unlinkInBackground = options.unlinkInBackground ?? ((file, done) => fs.unlink(file, () => done()));
    this.writer.shareBudgetWith({ bytes: () => this.held, reclaim: (n) => this.reclaim(n) });
  }

  /**
   * The sign of life a router in another pid namespace can see (orphans.ts, cache files rule 3):
   * an empty file under our cache name with seq 0, made at the first entry, touched every
   * minute, removed at close.
   */
  private heartbeat: { file: string; timer: NodeJS.Timeout } | undefined;
  private beat(): void {
    if (this.heartbeat) return;
    const file = path.join(this.dir, formatShmName({ kind: 'cache-heartbeat', pidNamespace: this.pidNs, pid: this.pid, stampNanos: shmStampNanos() }));
    try {
      fs.closeSync(fs.openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o400));
    } catch {
      return; // no heartbeat: another namespace's sweep may take our entries (a miss for us, no more)
    }
    const timer = setInterval(() => {
      try {
        const now = new Date();
        fs.utimesSync(file, now, now);
      } catch {
        /* removed by hand: the next entry makes a new one */
        clearInterval(timer);
        this.heartbeat = undefined;
      }
    }, CACHE_HEARTBEAT_MS);
    timer.unref();
    this.heartbeat = { file, timer };
  }

  get enabled(): boolean {
    return this.budget > 0;
  }

  /** The key of an image (by its media hash, BLAKE3 of its encoded bytes) under a fingerprint. */
  keyOf(mediaHash: Uint8Array, fingerprint: string): string {
    return `${Buffer.from(mediaHash.buffer, mediaHash.byteOffset, mediaHash.byteLength).toString('hex')}:${fingerprint}`;
  }

  stats(): PixelCacheStats {
    return { budgetBytes: this.budget, heldBytes: this.held, entries: this.entries.size, ...this.counts };
  }

  /** A new budget; a smaller one evicts at once (0 turns the cache off and empties it). */
  setBudget(bytes: number): void {
    this.budget = Math.max(0, bytes);
    // The entries' bytes, not those of entries already evicted that requests still hold: no
    // eviction frees those, and counting them would empty the cache at every later change.
    this.evictUntil(() => this.entryBytes() <= this.budget);
  }

  /** Bytes no eviction can free now: entries requests are using, and evicted ones they still hold. */
  pinnedBytes(): number {
    let idle = 0;
    for (const e of this.entries.values()) if (e.users === 0) idle += e.shape.nbytes;
    return this.held - idle;
  }

  private entryBytes(): number {
    let n = 0;
    for (const e of this.entries.values()) n += e.shape.nbytes;
    return n;
  }

  /** Drop every entry (files of requests in flight live on under their links). Returns how many. */
  flush(): number {
    this.generation += 1; // stores under way land nothing
    const n = this.entries.size;
    for (const e of [...this.entries.values()]) this.drop(e, 'flush');
    this.finishUnlinks();
    this.counts.flushes += 1;
    return n;
  }

  /**
   * The entry for `key`, pinned for the caller (an open descriptor: its bytes stay readable
   * whatever happens to the entry meanwhile); or a miss the caller must compute (store or
   * abandon); a request computing the same key now is waited for first.
   */
  async lookup(key: string): Promise<CacheLookup> {
    if (!this.enabled) return { kind: 'off' };
    // One wait at most: when the computation waited for could not be kept, compute at once.
    for (let round = 0; round < 2; round++) {
      const e = this.entries.get(key);
      const fd = e ? this.openIntact(e) : undefined;
      if (e && fd !== undefined) {
        this.entries.delete(key);
        this.entries.set(key, e); // most recently used
        this.counts.hits += 1;
        return { kind: 'hit', entry: this.pin(e, fd) };
      }
      const pending = this.inflight.get(key);
      if (!pending || round > 0) break;
      await pending;
    }
    this.counts.misses += 1;
    return { kind: 'miss', miss: this.newMiss(key) };
  }

  private newMiss(key: string): CacheMiss {
    let settle!: () => void;
    const done = new Promise<void>((resolve) => (settle = resolve));
    // A miss for a key another request computes still (its owner could not keep it) computes its own.
    const owner = !this.inflight.has(key);
    if (owner) this.inflight.set(key, done);
    let over = false;
    const finish = () => {
      if (over) return;
      over = true;
      if (owner && this.inflight.get(key) === done) this.inflight.delete(key);
      settle();
    };
    return {
      key,
      store: async (shape, source) => {
        try {
          return over ? false : await this.store(key, shape, source);
        } finally {
          finish();
        }
      },
      storeShared: async (shape, file, worker) => {
        try {
          if (over || !(await this.store(key, shape, { kind: 'file', file }))) return undefined;
          const e = this.entries.get(key);
          const fd = e ? this.openIntact(e) : undefined;
          return e && fd !== undefined ? this.pin(e, fd, worker) : undefined;
        } finally {
          finish();
        }
      },
      abandon: finish,
    };
  }

  private newName(): string {
    this.seq += 1;
    return formatShmName({ kind: 'cache-entry', pidNamespace: this.pidNs, pid: this.pid, stampNanos: shmStampNanos(), seq: this.seq });
  }

  /**
   * Room for `nbytes` more: within the budget, and within /dev/shm's (evicting least recently
   * used entries for both). A request's own file that becomes the entry is in /dev/shm's count
   * already (its scope gives it up once the entry has it): it needs only the cache's budget.
   */
  private makeRoom(nbytes: number, inShmAlready: boolean): boolean {
    if (nbytes > this.budget) return false;
    // Entries a request is using free nothing now (their bytes count until it ends): kept.
    this.evictUntil(() => this.held + nbytes <= this.budget, true);
    if (this.held + nbytes > this.budget) return false;
    if (inShmAlready) return true;
    this.evictUntil(() => this.writer.fits(nbytes), true);
    return this.writer.fits(nbytes);
  }

  private async store(key: string, shape: CachedImageShape, source: CacheStoreSource): Promise<boolean> {
    const generation = this.generation;
    if (this.entries.has(key) || !this.enabled || !this.makeRoom(shape.nbytes, source.kind === 'file')) {
      if (!this.entries.has(key)) this.counts.notStored += 1;
      return false;
    }
    this.beat();
    const name = this.newName();
    const file = path.join(this.dir, name);
    // Counted from now, so a concurrent store cannot take the same room.
    this.held += shape.nbytes;
    const made = await this.makeEntryFile(file, shape.nbytes, source);
    // Flushed, closed or turned off, or the same image stored by another request, while the file
    // was made: not wanted any more, which is no failure (not counted as notStored).
    const wanted = this.enabled && !this.entries.has(key) && generation === this.generation;
    if (made.kind === 'made' && wanted) {
      this.entries.set(key, { key, shape, name, file, ino: made.ino, mtimeNs: made.mtimeNs, users: 0, evicted: false });
      return true;
    }
    this.held -= shape.nbytes;
    if (made.kind === 'made' || made.created) {
      try {
        fs.unlinkSync(file);
      } catch {
        /* gone already (a sweep, or by hand): nothing left to remove */
      }
    }
    if (made.kind === 'not-made') this.counts.notStored += 1;
    return false;
  }

  /**
   * An entry's file: a second name for the request's file, or a new file the bytes are written
   * to; made read-only (0400) and checked to be a regular file of `nbytes`. When it cannot be
   * made, whether the name was created by us (then it is ours to remove; a name that exists
   * already, EEXIST, is someone else's).
   */
  private async makeEntryFile(file: string, nbytes: number, source: CacheStoreSource): Promise<EntryFile> {
    let created = false;
    try {
      if (source.kind === 'file') {
        fs.linkSync(source.file, file);
        created = true;
      } else {
        const fd = fs.openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
        created = true;
        try {
          await writeAllAt(fd, source.bytes);
        } finally {
          fs.closeSync(fd);
        }
      }
      fs.chmodSync(file, 0o400);
      const s = fs.lstatSync(file, { bigint: true });
      return s.isFile() && Number(s.size) === nbytes ? { kind: 'made', ino: s.ino, mtimeNs: s.mtimeNs } : { kind: 'not-made', created };
    } catch {
      // Whatever stopped it (a name taken, /dev/shm full, a failed write): the image is not
      // cached, which the caller counts (notStored); the request has its tensor all the same.
      return { kind: 'not-made', created };
    }
  }

  /** Whether a stat of the file is what was stored: same inode, size, mode and mtime (a write changes the mtime). */
  private same(e: Entry, s: fs.BigIntStats): boolean {
    return s.isFile() && s.ino === e.ino && Number(s.size) === e.shape.nbytes && s.mtimeNs === e.mtimeNs && (Number(s.mode) & 0o777) === 0o400;
  }

  /** The entry's file opened for reading, when it is still as stored; otherwise the entry is dropped (tampered, or removed by someone else). */
  private openIntact(e: Entry): number | undefined {
    let fd: number | undefined;
    try {
      fd = fs.openSync(e.file, constants.O_RDONLY | constants.O_NOFOLLOW);
      if (this.same(e, fs.fstatSync(fd, { bigint: true }))) return fd;
    } catch {
      /* removed (a sweep of a router that cannot see us, or by hand) or unreadable: not as stored, dropped below */
    }
    if (fd !== undefined) fs.closeSync(fd);
    this.drop(e, 'tampered');
    return undefined;
  }

  /** A worker that writes into its files (caught once): its misses are kept from memory, its hits are copies. */
  isSuspect(worker: string): boolean {
    return this.suspects.has(worker);
  }

  private pin(e: Entry, fd: number, sharedWith?: string): CachedEntry {
    e.users += 1;
    let released = false;
    /** The workers given this entry's inode by this request: a link, or the request's own file that became the entry. */
    const linkedTo = new Set<string>(sharedWith !== undefined ? [sharedWith] : []);
    const unchanged = () => {
      try {
        return this.same(e, fs.fstatSync(fd, { bigint: true }));
      } catch {
        return false; // our own descriptor cannot be stat'ed: the file cannot be vouched for, as if changed
      }
    };
    const readAll = async (into: Uint8Array): Promise<boolean> => {
      if (released || !unchanged()) return false;
      let done = 0;
      while (done < e.shape.nbytes) {
        const at = done;
        const n = await new Promise<number>((resolve) => fs.read(fd, into, at, e.shape.nbytes - at, at, (err, bytesRead) => resolve(err ? -1 : bytesRead)));
        if (n <= 0) return false;
        done += n;
      }
      // Changed while we read: the bytes may be anyone's.
      return unchanged();
    };
    return {
      shape: e.shape,
      place: async (scope, worker, copy) => {
        if (e.evicted || !unchanged()) return undefined;
        const started = process.hrtime.bigint();
        const micros = () => Number(process.hrtime.bigint() - started) / 1000;
        if (copy || this.suspects.has(worker)) {
          // A file of the request's own, written by the kernel from the entry (no shared inode),
          // with a request file's mode (copyFile gives it the entry's 0400, which a worker that
          // attaches its file read-write, not root, could not open).
          const file = this.writer.reserve(e.shape.nbytes, scope);
          if (!file) return undefined;
          try {
            await fsp.copyFile(e.file, file.path);
            await fsp.chmod(file.path, 0o600);
          } catch {
            // No copy (/dev/shm full, the entry gone meanwhile): the reserved file goes, and the caller reads the entry instead.
            scope.discard(file.name);
            return undefined;
          }
          return { handle: this.writer.handleFor(file.name, e.shape.nbytes), micros: micros(), copied: true };
        }
        const name = this.writer.nextName();
        try {
          fs.linkSync(e.file, path.join(this.dir, name));
        } catch {
          return undefined; // evicted since: the caller reads instead
        }
        linkedTo.add(worker);
        scope.track(name, 0);
        return { handle: this.writer.handleFor(name, e.shape.nbytes), micros: micros(), copied: false };
      },
      read: async (into) => {
        const ok = await readAll(into);
        if (!ok && !e.evicted && !unchanged()) this.drop(e, 'tampered');
        return ok;
      },
      release: () => {
        if (released) return;
        released = true;
        // A worker given a link may have written into it: the entry is dropped, not served again,
        // and that worker gets copies of its own from now on.
        if (linkedTo.size > 0 && !e.evicted && !unchanged()) {
          this.drop(e, 'tampered');
          for (const w of linkedTo) this.suspects.add(w);
        }
        try {
          fs.closeSync(fd);
        } catch {
          /* Linux frees the descriptor even when close fails: nothing is left to do */
        }
        e.users -= 1;
        if (e.evicted && e.users === 0) this.held -= e.shape.nbytes;
      },
    };
  }

  /** Evictions whose background unlink has not run yet: unlinked now (flush, close). */
  private finishUnlinks(): void {
    for (const file of this.unlinking) {
      try {
        fs.unlinkSync(file);
      } catch {
        /* its unlink got there first */
      }
    }
    this.unlinking.clear();
  }

  /** `room`: an eviction on a request's path (making room for its tensor), unlinked off it. */
  private drop(e: Entry, why: 'evict' | 'room' | 'tampered' | 'flush'): void {
    if (e.evicted) return;
    e.evicted = true;
    if (this.entries.get(e.key) === e) this.entries.delete(e.key);
    if (why === 'room') {
      // Off the request's path: removing the last name of a large tmpfs file frees its pages,
      // which a miss making room would otherwise wait for (and the event loop with it;
      // measured: docs/performance.md, "The pixel cache").
      const file = e.file;
      this.unlinking.add(file);
      this.unlinkInBackground(file, () => this.unlinking.delete(file));
    } else {
      try {
        fs.unlinkSync(e.file);
      } catch {
        /* gone already */
      }
    }
    if (why === 'evict' || why === 'room') this.counts.evictions += 1;
    if (why === 'tampered') this.counts.tampered += 1;
    if (e.users === 0) this.held -= e.shape.nbytes;
  }

  /** Evict least recently used entries until `done`; `idleOnly` (a request making room) passes over entries in use. */
  private evictUntil(done: () => boolean, idleOnly = false): void {
    for (const e of [...this.entries.values()]) {
      if (done()) return;
      if (idleOnly && e.users > 0) continue;
      this.drop(e, idleOnly ? 'room' : 'evict');
    }
  }

  /** The /dev/shm budget needs `nbytes` for a request's tensor: least recently used entries go first. */
  private reclaim(nbytes: number): void {
    this.evictUntil(() => this.writer.fits(nbytes), true);
  }

  /** The workers that get copies instead of links, having written into an entry. */
  copyWorkers(): string[] {
    return [...this.suspects];
  }

  /** The entries' files, for mmtc doctor and tests. */
  files(): Array<{ name: string; nbytes: number; users: number }> {
    return [...this.entries.values()].map((e) => ({ name: e.name, nbytes: e.shape.nbytes, users: e.users }));
  }

  /** The router is stopping: every entry's file goes. */
  close(): void {
    this.budget = 0; // a store under way cancels itself
    this.generation += 1;
    for (const e of [...this.entries.values()]) this.drop(e, 'flush');
    this.finishUnlinks();
    if (this.heartbeat) {
      clearInterval(this.heartbeat.timer);
      try {
        fs.unlinkSync(this.heartbeat.file);
      } catch {
        /* gone already (by hand, or a sweep): nothing left to remove */
      }
      this.heartbeat = undefined;
    }
  }
}
