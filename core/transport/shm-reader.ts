// Worker side of the tensor lanes (docs/transport.md, "Reading a tensor"), to the letter:
//   inline -> the bytes; remote -> "remote payload not supported"; no payload -> error.
//   SHM name: strip leading '/', refuse empty, any remaining '/', '.', '..', NUL.
//   open /dev/shm/<name> read-only with O_NOFOLLOW (a symlink is refused and NOT unlinked),
//   it must be a regular file, read nbytes at offset, close, then unlink unless
//   TOKENSPEED_UNLINK_MM_SHM_AFTER_READ is 0/false/no.
//   Fewer bytes than nbytes -> "byte length mismatch (expected N, got M)".
//   nbytes must equal product(shape) x element size of dtype.
//   offset and nbytes must be non-negative integers, and nothing is allocated for bytes the
//   file does not hold: a handle cannot make a worker reserve gigabytes for a small file.
// Each failure is a TensorReadError with its own code, so a worker can answer precisely.
//
// attach() is the other way a worker takes a file: TokenSpeed's scheduler attaches an encoder
// input already in the model's dtype with Python's SharedMemory(name) (shm_open O_RDWR, never
// following a link, the whole file mapped read-write and shared), uses it as a tensor of
// exactly the file's size, and unlinks it. It needs a file its uid may open for writing; a
// failure there is no servicer error but the scheduler's own exception (AttachError).
import { constants } from 'node:fs';
import * as fs from 'node:fs';
import path from 'node:path';
import { TensorBufferPool, type BufferLease } from './buffer-pool.ts';
import { elementSize } from './dtype.ts';
import { SHM_DIR } from './namespace.ts';
import type { ShmHandleData } from './shm-writer.ts';

export type TensorReadErrorCode =
  | 'no_payload'
  | 'remote_unsupported'
  | 'invalid_handle'
  | 'invalid_name'
  | 'symlink'
  | 'not_regular_file'
  | 'open_failed'
  | 'read_failed'
  | 'length_mismatch'
  | 'unknown_dtype'
  | 'shape_mismatch';

export class TensorReadError extends Error {
  override readonly name = 'TensorReadError';
  constructor(
    readonly code: TensorReadErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/** A tensor as a worker receives it, whichever protocol carried it. */
export interface WireTensor {
  shape: readonly number[];
  dtype: string;
  payload:
    { kind: 'inline'; bytes: Uint8Array } | { kind: 'shm'; handle: ShmHandleData } | { kind: 'remote'; transport: string; nbytes: number } | { kind: 'none' };
}

export interface ReadTensor extends BufferLease {
  path: 'inline' | 'shm';
  /** Microseconds spent opening, reading and unlinking (0 for inline). */
  micros: number;
}

/** TOKENSPEED_UNLINK_MM_SHM_AFTER_READ: unlink unless it is 0, false or no. */
export function unlinkAfterReadFromEnv(env: Readonly<Record<string, string | undefined>>): boolean {
  const raw = env.TOKENSPEED_UNLINK_MM_SHM_AFTER_READ;
  if (raw === undefined) return true;
  return !['0', 'false', 'no'].includes(raw.trim().toLowerCase());
}

/** The file name a handle may refer to, or a TensorReadError. */
export function validateShmName(raw: string): string {
  const name = raw.replace(/^\/+/, '');
  const show = JSON.stringify(raw);
  if (name === '') throw new TensorReadError('invalid_name', `invalid shm name ${show}: empty`);
  if (name.includes('\0')) throw new TensorReadError('invalid_name', `invalid shm name ${show}: contains NUL`);
  if (name.includes('/')) throw new TensorReadError('invalid_name', `invalid shm name ${show}: contains '/'`);
  if (name === '.' || name === '..') throw new TensorReadError('invalid_name', `invalid shm name ${show}: '${name}' is not a file name`);
  return name;
}

function expectedBytes(tensor: WireTensor): number {
  const size = elementSize(tensor.dtype);
  if (size === undefined) throw new TensorReadError('unknown_dtype', `unsupported dtype '${tensor.dtype}'`);
  return tensor.shape.reduce((a, b) => a * b, 1) * size;
}

function checkShape(tensor: WireTensor, nbytes: number): void {
  const want = expectedBytes(tensor);
  if (want !== nbytes) {
    throw new TensorReadError('shape_mismatch', `nbytes ${nbytes} does not match shape [${tensor.shape.join(', ')}] x ${tensor.dtype} (${want} bytes)`);
  }
}

function readFully(fd: number, into: Buffer, offset: number): number {
  let got = 0;
  while (got < into.byteLength) {
    const n = fs.readSync(fd, into, got, into.byteLength - got, offset + got);
    if (n === 0) break;
    got += n;
  }
  return got;
}

/** The scheduler's exception on attaching a file (TokenSpeed): no INVALID_ARGUMENT from the servicer, which never opened it. */
export class AttachError extends Error {
  override readonly name = 'AttachError';
}

export interface ShmReaderOptions {
  dir?: string;
  unlinkAfterRead?: boolean;
  pool?: TensorBufferPool;
}

export class TensorReader {
  readonly dir: string;
  readonly unlinkAfterRead: boolean;
  readonly pool: TensorBufferPool;

  constructor(options: ShmReaderOptions = {}) {
    this.dir = options.dir ?? SHM_DIR;
    this.unlinkAfterRead = options.unlinkAfterRead ?? unlinkAfterReadFromEnv(process.env);
    this.pool = options.pool ?? new TensorBufferPool();
  }

  read(tensor: WireTensor): ReadTensor {
    const p = tensor.payload;
    switch (p.kind) {
      case 'none':
        throw new TensorReadError('no_payload', 'tensor has no payload (neither inline, shm nor remote)');
      case 'remote':
        throw new TensorReadError('remote_unsupported', 'remote payload not supported');
      case 'inline': {
        checkShape(tensor, p.bytes.byteLength);
        const bytes = Buffer.from(p.bytes.buffer, p.bytes.byteOffset, p.bytes.byteLength);
        return { path: 'inline', bytes, micros: 0, release: () => {} };
      }
      case 'shm':
        return this.readShm(tensor, p.handle);
    }
  }

  /**
   * Attach a /dev/shm tensor read-write, as TokenSpeed's scheduler does (SharedMemory(name)):
   * the file opened O_RDWR (no link followed), its size taken as the tensor's, its bytes read
   * through that descriptor (`touch`, when given, is what the worker does through its map
   * first: a fault injection), and the name unlinked. The servicer checked the handle's nbytes against the shape
   * before; the scheduler checks the file.
   */
  attach(tensor: WireTensor, handle: ShmHandleData, touch?: (fd: number, file: string) => void): ReadTensor {
    const started = process.hrtime.bigint();
    const name = validateShmName(handle.name);
    const file = path.join(this.dir, name);
    let fd: number;
    try {
      fd = fs.openSync(file, constants.O_RDWR | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      const python =
        code === 'EACCES'
          ? 'PermissionError: [Errno 13] Permission denied'
          : code === 'ENOENT'
            ? 'FileNotFoundError: [Errno 2] No such file or directory'
            : `OSError: ${code ?? (err as Error).message}`;
      throw new AttachError(`Scheduler hit an exception: ${python}: '/${name}' (SharedMemory attaches /dev/shm/${name} read-write)`);
    }
    let lease: BufferLease | undefined;
    try {
      const size = fs.fstatSync(fd).size;
      if (size !== handle.nbytes)
        throw new AttachError(
          `Scheduler hit an exception: RuntimeError: shape '[${tensor.shape.join(', ')}]' is invalid for input of size ${Math.floor(size / (elementSize(tensor.dtype) ?? 1))} (/dev/shm/${name} has ${size} bytes, the handle says ${handle.nbytes})`,
        );
      touch?.(fd, file);
      lease = this.pool.acquire(size);
      if (readFully(fd, lease.bytes, 0) !== size) throw new AttachError(`Scheduler hit an exception: /dev/shm/${name} changed size while it was read`);
    } catch (err) {
      lease?.release();
      throw err;
    } finally {
      fs.closeSync(fd);
    }
    try {
      fs.unlinkSync(file);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT') {
        lease.release();
        throw new AttachError(
          `Scheduler hit an exception: ${code === 'EPERM' ? 'PermissionError: [Errno 1] Operation not permitted' : `OSError: ${code}`}: '/${name}' (shm_unlink)`,
        );
      }
    }
    return { path: 'shm', bytes: lease.bytes, release: lease.release, micros: Number(process.hrtime.bigint() - started) / 1000 };
  }

  private readShm(tensor: WireTensor, handle: ShmHandleData): ReadTensor {
    const started = process.hrtime.bigint();
    const name = validateShmName(handle.name);
    for (const key of ['offset', 'nbytes'] as const) {
      const v = handle[key];
      if (!Number.isSafeInteger(v) || v < 0)
        throw new TensorReadError('invalid_handle', `invalid shm handle for ${JSON.stringify(name)}: ${key} ${v} is not a non-negative integer`);
    }
    const file = path.join(this.dir, name);
    let fd: number;
    try {
      fd = fs.openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ELOOP') throw new TensorReadError('symlink', `refusing ${file}: it is a symbolic link`);
      throw new TensorReadError('open_failed', `cannot open ${file}: ${code ?? (err as Error).message}`);
    }
    let lease: BufferLease | undefined;
    let got: number;
    try {
      const stat = fs.fstatSync(fd);
      if (!stat.isFile()) throw new TensorReadError('not_regular_file', `refusing ${file}: not a regular file`);
      // The file is complete when its handle is sent: never reserve more than it holds.
      lease = this.pool.acquire(Math.min(handle.nbytes, Math.max(0, stat.size - handle.offset)));
      got = readFully(fd, lease.bytes, handle.offset);
    } catch (err) {
      lease?.release();
      if (err instanceof TensorReadError) throw err;
      throw new TensorReadError('read_failed', `cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    } finally {
      fs.closeSync(fd);
    }
    if (this.unlinkAfterRead) {
      try {
        fs.unlinkSync(file);
      } catch {
        /* someone else removed it: the bytes are read */
      }
    }
    try {
      if (got !== handle.nbytes) throw new TensorReadError('length_mismatch', `byte length mismatch (expected ${handle.nbytes}, got ${got})`);
      checkShape(tensor, handle.nbytes);
    } catch (err) {
      lease.release();
      throw err;
    }
    return { path: 'shm', bytes: lease.bytes, release: lease.release, micros: Number(process.hrtime.bigint() - started) / 1000 };
  }
}
