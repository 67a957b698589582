// The pixel cache's files on the real tmpfs, in a private directory of this test: an entry is
// a 0400 file under a name no worker is given; a link is a second name for its inode that the
// cache does not count again; an entry evicted while a request holds it stays counted until
// that request ends; a changed file is never served; and the sweep of the next router removes
// a dead router's entries at once but keeps a live one's.
import { chmodSync, chownSync, existsSync, linkSync, readFileSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { deadPid, liveChild, makeShmTestDir, setMtime } from '../test/shm-dir.ts';
import { describeSweep, listTensorFiles, sweepOrphanFiles } from './orphans.ts';
import { CACHE_PREFIX, ourPidNamespace } from './shm-names.ts';
import { PixelCache, type CachedImageShape } from './pixel-cache.ts';
import { ShmWriter } from './shm-writer.ts';
import { QWEN2_VL } from '../multimodal/families/qwen2-vl.ts';

const shm = makeShmTestDir();
/** Our directory's files but a live cache's heartbeat (its name with seq 0). */
const entryFiles = () => shm.files().filter((f) => !/^smg-tokenspeed-cache-\d+-\d+-\d+-0$/.test(f));
afterAll(() => shm.remove());

const MiB = 1024 * 1024;
const shapeOf = (nbytes: number): CachedImageShape => ({
  kind: 'float32',
  nbytes,
  patches: nbytes / 16,
  features: 4,
  encoderShape: [nbytes / 16, 4],
  modelTensors: QWEN2_VL.imageTensors({ gridT: 1, gridH: 2, gridW: 2, patches: 4 }),
  tokens: 1,
  mediaHash: Buffer.alloc(32),
});
const bytesOf = (nbytes: number, fill: number) => new Uint8Array(nbytes).fill(fill);

function newCache(budgetBytes: number, maxOutstandingBytes?: number) {
  const writer = new ShmWriter({ dir: shm.dir, ...(maxOutstandingBytes !== undefined ? { maxOutstandingBytes: () => maxOutstandingBytes } : {}) });
  return { writer, cache: new PixelCache({ dir: shm.dir, writer, budgetBytes }) };
}

async function put(cache: PixelCache, key: string, nbytes: number, fill: number): Promise<boolean> {
  const look = await cache.lookup(key);
  if (look.kind !== 'miss') throw new Error(`expected a miss for ${key}, got ${look.kind}`);
  return look.miss.store(shapeOf(nbytes), { kind: 'memory', bytes: bytesOf(nbytes, fill) });
}

describe('entries and links', () => {
  it('an entry is a 0400 file of ours; a link is a fresh tensor name for the same inode, tracked at 0 bytes; the bytes read back are the stored ones', async () => {
    const { cache, writer } = newCache(8 * MiB);
    expect(await put(cache, 'a', MiB, 3)).toBe(true);
    const [entry] = cache.files();
    expect(entry!.name.startsWith(`${CACHE_PREFIX}${ourPidNamespace()}-${process.pid}-`)).toBe(true);
    const file = path.join(shm.dir, entry!.name);
    expect(statSync(file).mode & 0o777).toBe(0o400);

    const look = await cache.lookup('a');
    if (look.kind !== 'hit') throw new Error('expected a hit');
    const scope = writer.newScope();
    const link = (await look.entry.place(scope, 'w', false))!;
    expect(link.handle).toMatchObject({ offset: 0, nbytes: MiB });
    expect(statSync(path.join(shm.dir, link.handle.name)).ino).toBe(statSync(file).ino);
    expect(writer.outstanding).toBe(0);
    expect(cache.stats()).toMatchObject({ heldBytes: MiB, entries: 1, hits: 1, misses: 1 });
    const into = new Uint8Array(MiB);
    expect(await look.entry.read(into)).toBe(true);
    expect(into.every((b) => b === 3)).toBe(true);
    // The worker reads and unlinks its name; the entry stays.
    unlinkSync(path.join(shm.dir, link.handle.name));
    scope.complete();
    look.entry.release();
    expect(entryFiles()).toEqual([entry!.name]);
    expect(shm.files()).toHaveLength(2); // the entry and the cache's heartbeat
    cache.close();
    expect(shm.files()).toEqual([]);
  });

  it('an entry in use is not evicted for room (that frees nothing); lowered under it, the budget evicts it, and it stays readable and counted until its request ends', async () => {
    const { cache } = newCache(2 * MiB);
    await put(cache, 'a', MiB, 1);
    const held = await cache.lookup('a');
    if (held.kind !== 'hit') throw new Error('expected a hit');
    await put(cache, 'b', MiB, 2);
    // 'a' is older, but in use: 'b' goes to make room for 'c'.
    await put(cache, 'c', MiB, 3);
    expect(cache.stats()).toMatchObject({ entries: 2, evictions: 1, heldBytes: 2 * MiB });
    // With 'c' in use too, no idle entry is left to give room: a fourth is not stored, and the budget holds.
    const alsoHeld = await cache.lookup('c');
    if (alsoHeld.kind !== 'hit') throw new Error('expected a hit');
    expect(await put(cache, 'd', MiB, 4)).toBe(false);
    expect(cache.stats()).toMatchObject({ entries: 2, heldBytes: 2 * MiB, notStored: 1 });
    alsoHeld.entry.release();
    // A smaller budget evicts whatever it must, 'a' too; its request still reads it, and it counts until then.
    cache.setBudget(MiB / 2);
    expect(cache.stats()).toMatchObject({ entries: 0, heldBytes: MiB });
    // 'b', evicted for room, is unlinked on libuv's pool: give that its moment (bounded).
    for (let i = 0; i < 100 && entryFiles().length > 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(entryFiles()).toEqual([]);
    const into = new Uint8Array(MiB);
    expect(await held.entry.read(into)).toBe(true);
    expect(into[0]).toBe(1);
    held.entry.release();
    expect(cache.stats().heldBytes).toBe(0);
    cache.close();
  });

  it("an entry evicted to make room for a request's tensor is unlinked off that request's path, and close() finishes any unlink still under way", async () => {
    const held: Array<() => void> = [];
    const writer = new ShmWriter({ dir: shm.dir });
    // The unlink in the background, held back until the test lets it run.
    const cache = new PixelCache({
      dir: shm.dir,
      writer,
      budgetBytes: 2 * MiB,
      unlinkInBackground: (file, done) =>
        held.push(() => {
          unlinkSync(file);
          done();
        }),
    });
    await put(cache, 'a', MiB, 1);
    await put(cache, 'b', MiB, 2);
    const name = (k: number) => cache.files()[k]!.name;
    const [a, b] = [name(0), name(1)];
    await put(cache, 'c', MiB, 3); // 'a' makes room: no longer an entry, its file not yet unlinked
    expect(cache.stats()).toMatchObject({ entries: 2, evictions: 1, heldBytes: 2 * MiB });
    expect(cache.files().map((f) => f.name)).not.toContain(a);
    expect(entryFiles()).toContain(a);
    held.shift()!();
    expect(entryFiles()).not.toContain(a);
    // 'b' evicted for 'd', its unlink still held back when the router stops: close() removes it.
    await put(cache, 'd', MiB, 4);
    expect(entryFiles()).toContain(b);
    cache.close();
    expect(shm.files()).toEqual([]);
  });

  it('never serves a changed file: a write into it (what a worker given its link can do) drops the entry at the next use, counted as tampered', async () => {
    const { cache, writer } = newCache(8 * MiB);
    await put(cache, 'a', MiB, 5);
    const look = await cache.lookup('a');
    if (look.kind !== 'hit') throw new Error('expected a hit');
    const scope = writer.newScope();
    const link = (await look.entry.place(scope, 'w', false))!;
    const linked = path.join(shm.dir, link.handle.name);
    // The write must land on a later clock tick than the store's, or the mtime the guard checks
    // stays the same (kernels before 6.13 stamp tmpfs files with the coarse, per-tick clock).
    await new Promise((r) => setTimeout(r, 20));
    chmodSync(linked, 0o600); // a worker of our uid must do this first; root need not
    writeFileSync(linked, Buffer.alloc(16, 9), { flag: 'r+' });
    chmodSync(linked, 0o400);
    scope.complete();
    look.entry.release(); // the request is over: checked now
    expect(cache.stats()).toMatchObject({ tampered: 1, entries: 0, heldBytes: 0 });
    expect((await cache.lookup('a')).kind).toBe('miss');
    expect(entryFiles()).toEqual([]);
    cache.close();
  });

  it('a mode set back to writable, or the file removed by someone else, is a miss too', async () => {
    const { cache } = newCache(8 * MiB);
    await put(cache, 'a', MiB, 5);
    await put(cache, 'b', MiB, 6);
    const [a, b] = cache.files();
    chmodSync(path.join(shm.dir, a!.name), 0o600);
    unlinkSync(path.join(shm.dir, b!.name));
    expect((await cache.lookup('a')).kind).toBe('miss');
    expect((await cache.lookup('b')).kind).toBe('miss');
    expect(cache.stats()).toMatchObject({ tampered: 2, entries: 0 });
    expect(entryFiles()).toEqual([]);
    cache.close();
  });

  it('shares the /dev/shm budget: a request that needs the room takes it from the entries; an entry larger than the cache budget is not stored', async () => {
    const { cache, writer } = newCache(8 * MiB, 3 * MiB);
    await put(cache, 'a', MiB, 1);
    await put(cache, 'b', MiB, 2);
    expect(writer.hasRoom(MiB)).toBe(true);
    expect(writer.hasRoom(2 * MiB)).toBe(true); // evicts 'a'
    expect(cache.stats()).toMatchObject({ entries: 1, evictions: 1 });
    expect(await put(cache, 'big', 9 * MiB, 1)).toBe(false);
    expect(cache.stats().notStored).toBe(1);
    cache.close();
  });

  it('waiters for a key being computed get its entry; an abandoned computation lets the next caller compute', async () => {
    const { cache } = newCache(8 * MiB);
    const first = await cache.lookup('k');
    if (first.kind !== 'miss') throw new Error('expected a miss');
    const waiting = cache.lookup('k');
    await first.miss.store(shapeOf(MiB), { kind: 'memory', bytes: bytesOf(MiB, 4) });
    const second = await waiting;
    expect(second.kind).toBe('hit');
    if (second.kind === 'hit') second.entry.release();
    const other = await cache.lookup('j');
    if (other.kind !== 'miss') throw new Error('expected a miss');
    const waiter = cache.lookup('j');
    other.miss.abandon();
    expect((await waiter).kind).toBe('miss');
    cache.close();
  });
});

describe('a name that exists is not ours', () => {
  it("a store whose entry name is taken (EEXIST) stores nothing and leaves that file as it was, from memory and from a request's file", async () => {
    const { cache } = newCache(8 * MiB);
    const planted = path.join(shm.dir, `${CACHE_PREFIX}${ourPidNamespace()}-${process.pid}-1-1`);
    writeFileSync(planted, "not the cache's", { mode: 0o644 });
    // Its next name is the planted one (the nanoseconds make that unpredictable from outside; here it is staged).
    (cache as unknown as { newName(): string }).newName = () => path.basename(planted);
    expect(await put(cache, 'a', MiB, 1)).toBe(false);
    const requestFile = path.join(shm.dir, 'smg-tokenspeed-1-1-2');
    writeFileSync(requestFile, Buffer.alloc(MiB, 2), { mode: 0o600 });
    const look = await cache.lookup('b');
    if (look.kind !== 'miss') throw new Error('expected a miss');
    expect(await look.miss.store(shapeOf(MiB), { kind: 'file', file: requestFile })).toBe(false);
    expect(readFileSync(planted, 'utf8')).toBe("not the cache's");
    expect(statSync(planted).mode & 0o777).toBe(0o644);
    expect(cache.stats()).toMatchObject({ entries: 0, heldBytes: 0, notStored: 2 });
    cache.close();
    unlinkSync(planted);
    unlinkSync(requestFile);
    expect(entryFiles()).toEqual([]);
  });
});

describe('the sweep of cache files', () => {
  it("another pid namespace's entries live while their router's heartbeat is fresh, and go 5 minutes after it stops", () => {
    const now = Date.now();
    const pid = deadPid();
    const at = (seq: number, ms: number) => `${CACHE_PREFIX}7-${pid}-${BigInt(ms) * 1_000_000n}-${seq}`;
    const old = now - 3_600_000;
    const entry = path.join(shm.dir, at(1, old));
    const heartbeat = path.join(shm.dir, at(0, old));
    writeFileSync(entry, 'x', { mode: 0o400 });
    writeFileSync(heartbeat, '', { mode: 0o400 });
    setMtime(entry, old);
    setMtime(heartbeat, now - 60_000); // touched a minute ago: that router runs
    expect(sweepOrphanFiles(shm.dir).removed).toBe(0);
    expect(listTensorFiles(shm.dir).reduce((n, r) => n + r.cacheFiles, 0)).toBe(1); // the heartbeat is no entry
    setMtime(heartbeat, now - 6 * 60_000); // untouched for 6 minutes: gone, and its entries with it
    // The heartbeat is no tensor file: counted apart, in the sweep as in the listing.
    expect(listTensorFiles(shm.dir).reduce((n, r) => n + r.cacheFiles, 0)).toBe(1);
    expect(sweepOrphanFiles(shm.dir)).toMatchObject({
      removed: 1,
      removedCacheEntries: 1,
      removedHeartbeats: 1,
      reasonsByPid: { [`7:${pid}`]: ['no-heartbeat'] },
    });
    expect(entryFiles()).toEqual([]);
  });

  it("removes a dead router's entries (and one whose pid a newer process took) at once, whatever their age; keeps a live router's, and another pid namespace's without a heartbeat until they are 5 minutes old; listTensorFiles agrees", async () => {
    const ns = ourPidNamespace();
    const now = Date.now();
    const name = (pidNs: string, pid: number, atMs: number) => `${CACHE_PREFIX}${pidNs}-${pid}-${BigInt(atMs) * 1_000_000n}-1`;
    const live = await liveChild();
    try {
      const files = {
        dead: name(ns, deadPid(), now - 1000),
        reused: name(ns, live.pid, now - 3_600_000),
        alive: name(ns, live.pid, now + 10_000),
        otherNs: name('1', deadPid(), now - 1000),
        otherNsOld: name('1', deadPid(), now - 48 * 3_600_000),
      };
      for (const f of Object.values(files)) writeFileSync(path.join(shm.dir, f), 'x', { mode: 0o400 });
      setMtime(path.join(shm.dir, files.otherNsOld), now - 48 * 3_600_000);
      const rows = listTensorFiles(shm.dir);
      expect(rows.reduce((n, r) => n + r.cacheFiles, 0)).toBe(5);
      expect(rows.reduce((n, r) => n + r.orphans, 0)).toBe(3);
      const swept = sweepOrphanFiles(shm.dir);
      expect(swept.removed).toBe(3);
      expect(entryFiles()).toEqual([files.alive, files.otherNs].sort());
    } finally {
      await live.kill();
      for (const f of entryFiles()) unlinkSync(path.join(shm.dir, f));
    }
  });
});

describe("the sweep's words and another owner's heartbeat, on the real tmpfs", () => {
  it.runIf(process.getuid?.() === 0)("a heartbeat another user made under a dead router's name, and touches, keeps none of that router's entries", () => {
    const now = Date.now();
    const pid = deadPid();
    const name = (seq: number, ms: number) => `${CACHE_PREFIX}7-${pid}-${BigInt(ms) * 1_000_000n}-${seq}`;
    const old = now - 3_600_000;
    const entry = path.join(shm.dir, name(1, old));
    writeFileSync(entry, 'x', { mode: 0o400 });
    setMtime(entry, old);
    const forged = path.join(shm.dir, name(0, now - 60_000));
    writeFileSync(forged, '', { mode: 0o600 });
    chownSync(forged, 65534, 65534); // nobody's: any local user can make such a file and touch it
    const swept = sweepOrphanFiles(shm.dir);
    expect(swept).toMatchObject({ removed: 1, removedCacheEntries: 1, keptByHeartbeat: 0, reasonsByPid: { [`7:${pid}`]: ['no-heartbeat'] } });
    expect(existsSync(entry)).toBe(false);
    expect(existsSync(forged)).toBe(true); // not ours to judge as an entry: it is nobody's, touched a minute ago
    unlinkSync(forged);
  });

  it("a dead router's entry whose data a young request link still holds: removed, and the sweep says its bytes were not freed", () => {
    const pid = deadPid();
    const now = Date.now();
    const entry = path.join(shm.dir, `${CACHE_PREFIX}${ourPidNamespace()}-${pid}-${BigInt(now - 1000) * 1_000_000n}-1`);
    writeFileSync(entry, Buffer.alloc(MiB, 1), { mode: 0o400 });
    const link = path.join(shm.dir, `smg-tokenspeed-${pid}-${BigInt(now) * 1_000_000n}-2`);
    linkSync(entry, link);
    const swept = sweepOrphanFiles(shm.dir);
    expect(swept).toMatchObject({ removed: 1, removedBytes: MiB, freedBytes: 0, keptYoung: 1 });
    expect(describeSweep(swept, shm.dir)).toBe(
      `${shm.dir} orphan sweep: removed 1 orphaned tensor file (1.00 MiB, a pixel-cache entry; 1.00 MiB of it not freed: still linked under other names) of pid ${pid} (gone: 1); kept 1 too young to judge and 0 of live older processes`,
    );
    expect(statSync(link).size).toBe(MiB);
    unlinkSync(link);
  });
});

describe('copies instead of links', () => {
  it('multimodal_pixel_cache_shm copy: a file of its own (another inode, counted as a request file); a worker caught writing into its link gets copies from then on', async () => {
    const { cache, writer } = newCache(8 * MiB);
    await put(cache, 'a', MiB, 5);
    const entryIno = () => statSync(path.join(shm.dir, cache.files()[0]!.name)).ino;
    const hit = async () => {
      const look = await cache.lookup('a');
      if (look.kind !== 'hit') throw new Error('expected a hit');
      return look.entry;
    };
    let entry = await hit();
    let scope = writer.newScope();
    const copied = (await entry.place(scope, 'grpc://w:1', true))!;
    expect(copied.copied).toBe(true);
    const copyFile = path.join(shm.dir, copied.handle.name);
    expect(statSync(copyFile).ino).not.toBe(entryIno());
    expect(writer.outstanding).toBe(MiB);
    scope.complete();
    entry.release();
    expect(writer.outstanding).toBe(0);

    // A link to a worker that writes into it: caught when the request ends; that worker's next hit is a copy, others still get links.
    entry = await hit();
    scope = writer.newScope();
    const link = (await entry.place(scope, 'grpc://writer:1', false))!;
    const linked = path.join(shm.dir, link.handle.name);
    chmodSync(linked, 0o600);
    writeFileSync(linked, Buffer.alloc(8, 1), { flag: 'r+' });
    scope.complete();
    entry.release();
    expect(cache.copyWorkers()).toEqual(['grpc://writer:1']);
    await put(cache, 'a', MiB, 5);
    entry = await hit();
    scope = writer.newScope();
    expect((await entry.place(scope, 'grpc://writer:1', false))!.copied).toBe(true);
    expect((await entry.place(scope, 'grpc://honest:1', false))!.copied).toBe(false);
    scope.complete();
    entry.release();
    cache.close();
    expect(entryFiles()).toEqual([]);
  });
});

describe("a request's own file as the entry", () => {
  it('is in use until the request ends (eviction for room passes over it), then checked: a write by its worker drops it and marks that worker', async () => {
    const { cache } = newCache(2 * MiB);
    const requestFile = path.join(shm.dir, 'smg-tokenspeed-1-1-1');
    writeFileSync(requestFile, Buffer.alloc(MiB, 6), { mode: 0o600 });
    const look = await cache.lookup('own');
    if (look.kind !== 'miss') throw new Error('expected a miss');
    const pinned = await look.miss.storeShared(shapeOf(MiB), requestFile, 'grpc://w:1');
    expect(pinned).toBeDefined();
    expect(statSync(requestFile).mode & 0o777).toBe(0o400);
    await put(cache, 'b', MiB, 2);
    // No idle room: 'own' is in use, 'b' is evicted instead.
    await put(cache, 'c', MiB, 3);
    expect(cache.files().map((f) => f.nbytes)).toHaveLength(2);
    expect((await cache.lookup('b')).kind).toBe('miss');
    // The worker writes into the file it was given (root ignores the mode).
    chmodSync(requestFile, 0o600);
    writeFileSync(requestFile, Buffer.alloc(4, 9), { flag: 'r+' });
    unlinkSync(requestFile); // and unlinks it after reading, as workers do
    pinned!.release();
    expect(cache.stats().tampered).toBe(1);
    expect(cache.isSuspect('grpc://w:1')).toBe(true);
    expect((await cache.lookup('own')).kind).toBe('miss');
    cache.close();
    expect(entryFiles()).toEqual([]);
  });

  it('a store under way when the cache is flushed or closed lands nothing', async () => {
    const { cache } = newCache(8 * MiB);
    const look = await cache.lookup('late');
    if (look.kind !== 'miss') throw new Error('expected a miss');
    const storing = look.miss.store(shapeOf(4 * MiB), { kind: 'memory', bytes: bytesOf(4 * MiB, 1) });
    cache.flush();
    expect(await storing).toBe(false);
    expect(cache.stats().entries).toBe(0);
    expect(entryFiles()).toEqual([]);
    cache.close();
  });
});
