// Fault injection for the reference worker (`mmtc worker --tamper-shm`): a worker that writes
// into the /dev/shm files it is given. Before each /dev/shm tensor is read, its file is opened
// for writing (O_RDWR, never following a symlink, a regular file only) and the first byte of
// the tensor is inverted; then the tensor is read and unlinked exactly as a regular worker
// reads it (shm-reader.ts), so the worker reports the fingerprint of the bytes it changed. A
// worker running as root is not stopped by a file's mode: this is what the router's pixel cache
// must notice when the file is a hard link to one of its entries (transport/pixel-cache.ts,
// "the guard"). Inline tensors are left alone; what could not be changed (a file another uid
// owns, a name the reader refuses) is reported, and the read goes on as usual.
//
// `--tamper-shm map` writes as a worker does through a shared read-write map of a tmpfs file
// (TokenSpeed's scheduler attaches its encoder inputs so): the byte changes and the file's
// mtime stays as it was, which no stat can tell from an untouched file. A file the worker
// attaches (ShmTensorReader.attach) is written through the descriptor it attached.
import { constants } from 'node:fs';
import * as fs from 'node:fs';
import path from 'node:path';
import type { ShmHandleData } from '../transport/shm-writer.ts';
import { TensorReadError, TensorReader, validateShmName, type ReadTensor, type ShmReaderOptions, type WireTensor } from '../transport/shm-reader.ts';

/** One tensor file the worker wrote into, or tried to. */
export interface TamperRecord {
  /** The file's name in the reader's directory. */
  name: string;
  /** Its inode (the cached entry's, when the file was a link to it). */
  ino?: number;
  /** The byte changed: the tensor's first, at the handle's offset. */
  offset: number;
  /** Why nothing was changed (an errno code, `not a regular file`, `empty`). */
  error?: string;
}

export interface TamperingReaderOptions extends ShmReaderOptions {
  /** Told of every file written into (or tried). */
  onTamper?: (record: TamperRecord) => void;
  /** Write as through a shared map: the file's mtime (and atime) stay as they were. */
  keepMtime?: boolean;
}

/** How `--tamper-shm` writes: write() (the mtime changes) or through a shared map (it does not). */
export type TamperMode = 'write' | 'map';

/** A TensorReader that changes one byte of every /dev/shm tensor file before reading it. */
export class TamperingReader extends TensorReader {
  /** Files changed so far, and attempts that failed. */
  readonly counts = { changed: 0, failed: 0 };
  private readonly onTamper: ((record: TamperRecord) => void) | undefined;
  private readonly keepMtime: boolean;

  constructor(options: TamperingReaderOptions = {}) {
    super(options);
    this.onTamper = options.onTamper;
    this.keepMtime = options.keepMtime ?? false;
  }

  override read(tensor: WireTensor): ReadTensor {
    if (tensor.payload.kind === 'shm') this.tamper(tensor.payload.handle);
    return super.read(tensor);
  }

  override attach(tensor: WireTensor, handle: ShmHandleData): ReadTensor {
    return super.attach(tensor, handle, (fd, file) => {
      const record: TamperRecord = { name: path.basename(file), offset: 0 };
      try {
        record.ino = fs.fstatSync(fd).ino;
        this.flipFirstByte(fd, 0, record);
      } catch (err) {
        record.error = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
      }
      this.report(record);
    });
  }

  /** Invert the byte at `at` through `fd`; with keepMtime, put the file's times back as they were. */
  private flipFirstByte(fd: number, at: number, record: TamperRecord): void {
    const before = fs.fstatSync(fd);
    if (!before.isFile()) {
      record.error = 'not a regular file';
      return;
    }
    if (at >= before.size) {
      record.error = 'empty';
      return;
    }
    const byte = Buffer.alloc(1);
    fs.readSync(fd, byte, 0, 1, at);
    byte[0] = byte[0]! ^ 0xff;
    if (fs.writeSync(fd, byte, 0, 1, at) !== 1) record.error = 'short write';
    if (this.keepMtime) fs.futimesSync(fd, before.atime, before.mtime);
  }

  private report(record: TamperRecord): void {
    if (record.error) this.counts.failed += 1;
    else this.counts.changed += 1;
    this.onTamper?.(record);
  }

  private tamper(handle: ShmHandleData): void {
    let name: string;
    try {
      name = validateShmName(handle.name);
    } catch (err) {
      if (!(err instanceof TensorReadError)) throw err;
      return; // an invalid name: the read refuses it itself
    }
    const at = handle.offset;
    if (!Number.isSafeInteger(at) || at < 0 || !Number.isSafeInteger(handle.nbytes) || handle.nbytes <= 0) return;
    const record: TamperRecord = { name, offset: at };
    let fd: number | undefined;
    try {
      fd = fs.openSync(path.join(this.dir, name), constants.O_RDWR | constants.O_NOFOLLOW | constants.O_NONBLOCK);
      record.ino = fs.fstatSync(fd).ino;
      this.flipFirstByte(fd, at, record);
    } catch (err) {
      record.error = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    } finally {
      if (fd !== undefined) fs.closeSync(fd);
    }
    this.report(record);
  }
}
