// Fault injection for the reference worker (`mmtc worker --tamper-shm`): a worker that writes
// into the /dev/shm files it is given. Before each /dev/shm tensor is read, its file is opened
// for writing (O_RDWR, never following a symlink, a regular file only) and the first byte of
// the tensor is inverted; then the tensor is read and unlinked exactly as a regular worker
// reads it (shm-reader.ts), so the worker reports the fingerprint of the bytes it changed. A
// worker running as root is not stopped by a file's mode: this is what the router's pixel cache
// must notice when the file is a hard link to one of its entries (transport/pixel-cache.ts,
// "the guard"). Inline tensors are left alone; what could not be changed (a file another uid
// owns, a name the reader refuses) is reported, and the read goes on as usual.
import { constants } from 'node:fs';
import * as fs from 'node:fs';
import path from 'node:path';
import type { ShmHandleData } from '../transport/shm-writer.ts';
import { TensorReader, validateShmName, type ReadTensor, type ShmReaderOptions, type WireTensor } from '../transport/shm-reader.ts';

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
}

/** A TensorReader that changes one byte of every /dev/shm tensor file before reading it. */
export class TamperingReader extends TensorReader {
  /** Files changed so far, and attempts that failed. */
  readonly counts = { changed: 0, failed: 0 };
  private readonly onTamper: ((record: TamperRecord) => void) | undefined;

  constructor(options: TamperingReaderOptions = {}) {
    super(options);
    this.onTamper = options.onTamper;
  }

  override read(tensor: WireTensor): ReadTensor {
    if (tensor.payload.kind === 'shm') this.tamper(tensor.payload.handle);
    return super.read(tensor);
  }

  private tamper(handle: ShmHandleData): void {
    let name: string;
    try {
      name = validateShmName(handle.name);
    } catch {
      return; // the read refuses the name itself
    }
    const at = handle.offset;
    if (!Number.isSafeInteger(at) || at < 0 || !Number.isSafeInteger(handle.nbytes) || handle.nbytes <= 0) return;
    const record: TamperRecord = { name, offset: at };
    let fd: number | undefined;
    try {
      fd = fs.openSync(path.join(this.dir, name), constants.O_RDWR | constants.O_NOFOLLOW | constants.O_NONBLOCK);
      const stat = fs.fstatSync(fd);
      record.ino = stat.ino;
      if (!stat.isFile()) record.error = 'not a regular file';
      else if (at >= stat.size) record.error = 'empty';
      else {
        const byte = Buffer.alloc(1);
        fs.readSync(fd, byte, 0, 1, at);
        byte[0] = byte[0]! ^ 0xff;
        if (fs.writeSync(fd, byte, 0, 1, at) !== 1) record.error = 'short write';
      }
    } catch (err) {
      record.error = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    } finally {
      if (fd !== undefined) fs.closeSync(fd);
    }
    if (record.error) this.counts.failed += 1;
    else this.counts.changed += 1;
    this.onTamper?.(record);
  }
}
