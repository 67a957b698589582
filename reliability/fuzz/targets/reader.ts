// The worker-side reader (core/transport/shm-reader.ts TensorReader), as a worker runs it,
// against handles a careless or hostile router could send: names with '/', '..', NUL, a
// leading '/', very long or empty; offsets and lengths negative, fractional, past the end,
// 2^53; shapes and dtypes that disagree; and entries that are not our regular files: a
// symlink to a file outside /dev/shm, a FIFO, a directory, a socket, a file of another owner.
// Every refusal must be a TensorReadError with its code, nothing but a regular file it read
// may be unlinked, nothing outside the directory is touched, and no handle may make the
// reader allocate far more than the file holds.
import { closeSync, existsSync, lstatSync, openSync, readdirSync, readFileSync, rmSync, statSync, writeSync } from 'node:fs';
import path from 'node:path';
import { TensorReadError, TensorReader, type WireTensor } from '../../../core/transport/shm-reader.ts';
import { formatBytes } from '../../../core/util/bytes.ts';
import type { Rng } from '../../lib/rng.ts';
import type { CaseOutcome } from '../harness.ts';

export interface ReaderFixture {
  dir: string;
  /** A file outside the directory every symlink points at; it must never change. */
  canary: string;
  /** Entries the reader must never unlink (symlinks, FIFO, directory, socket, a file of another owner). */
  keep: string[];
}

const DTYPES = ['float32', 'bfloat16', 'int64', 'uint8', 'float16', 'uint32', 'complex128', '', 'FLOAT32'];
const ELEMENT: Record<string, number> = { float32: 4, bfloat16: 2, int64: 8, uint8: 1, float16: 2, uint32: 4 };
const SIZES = [0, 1, 7, 8, 100, 4096, 65_536, 300_000];

export function readerTarget(args: string[]) {
  const fixture = JSON.parse(args[0]!) as ReaderFixture;
  const reader = new TensorReader({ dir: fixture.dir, unlinkAfterRead: true });
  const canaryBefore = { text: readFileSync(fixture.canary, 'utf8'), mtime: statSync(fixture.canary).mtimeMs };
  const kinds = new Map(fixture.keep.map((n) => [n, lstatSync(path.join(fixture.dir, n))]));
  let seq = 0;
  const regular = (size: number) => {
    const name = `smg-tokenspeed-${process.pid}-${Date.now()}000000-${++seq}`;
    const fd = openSync(path.join(fixture.dir, name), 'wx', 0o600);
    if (size > 0) writeSync(fd, Buffer.alloc(size, seq & 255));
    closeSync(fd);
    return name;
  };
  return {
    run(rng: Rng): CaseOutcome {
      const size = rng.pick(SIZES);
      const ours = regular(size);
      const target = rng.pick(['ours', 'ours', 'ours', ...fixture.keep.map((k) => `keep:${k}`), 'missing', 'evil']);
      const name =
        // Leading slashes are stripped (docs/transport.md, "Reading a tensor"): still our file.
        target === 'ours'
          ? rng.chance(0.2)
            ? rng.pick([`/${ours}`, `//${ours}`])
            : ours
          : target === 'missing'
            ? `smg-tokenspeed-1-${rng.int(1, 1e9)}-1`
            : target === 'evil'
              ? rng.pick([
                  '',
                  '/',
                  '.',
                  '..',
                  '../etc/passwd',
                  `../${path.basename(fixture.dir)}/${ours}`,
                  'a/b',
                  `${ours}\u0000x`,
                  '\u0000',
                  'x'.repeat(300),
                  ours + '/',
                  `/./${ours}`,
                  '\u00e9\u4e2d',
                  path.relative(fixture.dir, fixture.canary),
                  fixture.canary,
                ])
              : target.slice(5);
      const dtype = rng.pick(DTYPES);
      const elem = ELEMENT[dtype] ?? 4;
      const fits = Math.floor(size / elem);
      const nbytes = rng.pick([size, fits * elem, size - 1, size + 1, 0, -1, 2 ** 31, 2 ** 33, 2 ** 40, 2 ** 53, 1.5, Number.NaN]);
      const offset = rng.pick([0, 0, 0, 1, size, size + 1, -1, 2 ** 53, 0.5]);
      const shape = rng.pick([[Math.floor(nbytes / elem)], [1, Math.floor(nbytes / elem)], [], [-1], [2 ** 31, 2 ** 31], [fits + 1], [0]]);
      // Two in five of our files get a handle right in every field: the read path must work too.
      const right = target === 'ours' && rng.chance(0.4);
      const rightDtype = rng.pick(Object.keys(ELEMENT));
      const rightRows = Math.floor(size / ELEMENT[rightDtype]!);
      const tensor: WireTensor = right
        ? {
            shape: [rightRows],
            dtype: rightDtype,
            payload: { kind: 'shm', handle: { name, offset: 0, nbytes: rightRows * ELEMENT[rightDtype]!, owner_id: 'smg:1' } },
          }
        : { shape, dtype, payload: { kind: 'shm', handle: { name, offset, nbytes, owner_id: 'smg:1' } } };
      const input = JSON.stringify({
        target,
        size,
        handle: tensor.payload.kind === 'shm' ? tensor.payload.handle : null,
        shape: tensor.shape,
        dtype: tensor.dtype,
      });
      const rssBefore = process.memoryUsage().rss;
      let outcome: CaseOutcome;
      try {
        const read = reader.read(tensor);
        const got = read.bytes.byteLength;
        read.release();
        outcome =
          target === 'ours'
            ? { kind: 'accepted', label: right ? 'read (a right handle)' : 'read' }
            : { kind: 'accepted', label: 'read', problem: `read ${got} bytes from ${target}`, input };
        if (right && got !== rightRows * ELEMENT[rightDtype]!)
          outcome = { kind: 'accepted', problem: `read ${got} bytes for a handle of ${rightRows * ELEMENT[rightDtype]!}`, input };
      } catch (err) {
        if (right) outcome = { kind: 'rejected', problem: `a right handle was refused: ${(err as Error).message}`, input };
        else if (!(err instanceof TensorReadError))
          outcome = { kind: 'rejected', problem: `not a TensorReadError: ${(err as Error)?.constructor?.name}: ${(err as Error)?.message}`, input };
        else outcome = { kind: 'rejected', label: err.code };
      }
      const grew = process.memoryUsage().rss - rssBefore;
      if (grew > 256 * 1024 * 1024) outcome = { ...outcome, problem: `the reader took ${formatBytes(grew)} for a handle to a ${size}-byte file`, input };
      // Invariants: nothing outside the directory changed; nothing but our regular file is gone.
      if (readFileSync(fixture.canary, 'utf8') !== canaryBefore.text || statSync(fixture.canary).mtimeMs !== canaryBefore.mtime)
        return { ...outcome, problem: 'the file outside /dev/shm changed', input };
      for (const [k, s] of kinds) {
        if (!existsSync(path.join(fixture.dir, k)) && !lstatSync(path.join(fixture.dir, k), { throwIfNoEntry: false }))
          return { ...outcome, problem: `${k} was removed`, input };
        const now = lstatSync(path.join(fixture.dir, k));
        if (now.mode !== s.mode || now.ino !== s.ino) return { ...outcome, problem: `${k} changed`, input };
      }
      const extra = readdirSync(fixture.dir).filter((n) => !kinds.has(n) && n !== ours && !n.startsWith(`smg-tokenspeed-${process.pid}-`));
      if (extra.length) return { ...outcome, problem: `new entries appeared: ${extra}`, input };
      // Our file, if the reader left it (a refused handle), goes now.
      rmSync(path.join(fixture.dir, ours), { force: true });
      return outcome;
    },
  };
}
