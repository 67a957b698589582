// Writing every byte: a write to a file (pwrite) may write fewer bytes than asked, and the rest
// is written from where it stopped; a write that writes nothing is an error (EIO, "wrote <n> of
// <total> bytes"), never retried. The one loop of the whole tree, in both forms a caller needs:
// synchronous (a pool thread writing a band, a small tensor, where a hop to libuv's threads
// costs more than the copy) and asynchronous (a large tensor or a cache entry written off the
// event loop).
import * as fs from 'node:fs';

/** One write of `bytes` at `position`: how many of them it wrote. */
export type WriteAtSync = (bytes: Uint8Array, position: number) => number;
export type WriteAt = (bytes: Uint8Array, position: number) => Promise<number>;

/** The partial-write rule: the bytes done after a write of `wrote` more, `done` of `total` having been written before it. */
function advance(done: number, wrote: number, total: number): number {
  if (wrote <= 0) throw Object.assign(new Error(`wrote ${done} of ${total} bytes`), { code: 'EIO' });
  return done + wrote;
}

/** What is left to write (the first write gets `bytes` itself). */
const rest = (bytes: Uint8Array, done: number): Uint8Array => (done === 0 ? bytes : bytes.subarray(done));

/** All of `bytes` at `position` onwards, by `write`; throws its error, or EIO for a write of nothing. */
export function writeAllSync(write: WriteAtSync, bytes: Uint8Array, position = 0): void {
  for (let done = 0; done < bytes.byteLength;) done = advance(done, write(rest(bytes, done), position + done), bytes.byteLength);
}

/** The same, each write awaited. */
export async function writeAll(write: WriteAt, bytes: Uint8Array, position = 0): Promise<void> {
  for (let done = 0; done < bytes.byteLength;) done = advance(done, await write(rest(bytes, done), position + done), bytes.byteLength);
}

/** One pwrite of `bytes` to `fd` at `position`, on this thread. */
export function pwriteSync(fd: number, bytes: Uint8Array, position: number): number {
  return fs.writeSync(fd, bytes, 0, bytes.byteLength, position);
}

/** One pwrite of `bytes` to `fd` at `position`, on libuv's threads. */
export function pwrite(fd: number, bytes: Uint8Array, position: number): Promise<number> {
  return new Promise((resolve, reject) => fs.write(fd, bytes, 0, bytes.byteLength, position, (err, written) => (err ? reject(err) : resolve(written))));
}

/** All of `bytes` to the open file `fd` at `position`, on this thread. */
export function writeAllAtSync(fd: number, bytes: Uint8Array, position = 0): void {
  writeAllSync((chunk, at) => pwriteSync(fd, chunk, at), bytes, position);
}

/** All of `bytes` to the open file `fd` at `position`, on libuv's threads. */
export function writeAllAt(fd: number, bytes: Uint8Array, position = 0): Promise<void> {
  return writeAll((chunk, at) => pwrite(fd, chunk, at), bytes, position);
}
