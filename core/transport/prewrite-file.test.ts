// The request's /dev/shm file as the sink a pool thread writes into: opened without following
// or creating anything and touched, judged once written (a file removed meanwhile is not sent),
// always closed; what it says is what the router logs (shm_prewrite_failed). The pool writing
// through it is core/multimodal/prewrite.test.ts.
import { readFileSync, statSync, symlinkSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { makeShmTestDir, tensorName } from '../test/shm-dir.ts';
import { writeAllAtSync } from '../util/write-all.ts';
import { prewriteSink } from './prewrite-file.ts';

const shm = makeShmTestDir();
afterAll(() => shm.remove());

let seq = 0;
/** The empty file ShmWriter.reserve creates, dated an hour ago. */
function reserved(): string {
  const file = path.join(shm.dir, tensorName(process.pid, Date.now(), ++seq));
  writeFileSync(file, '', { flag: 'wx', mode: 0o600 });
  const hourAgo = new Date(Date.now() - 3600_000);
  utimesSync(file, hourAgo, hourAgo);
  return file;
}

const open = (sink: ReturnType<typeof prewriteSink>): number => {
  const opened = sink.open();
  if (!('fd' in opened)) throw new Error(`not opened: ${opened.error}`);
  return opened.fd;
};

describe('prewriteSink', () => {
  it('opens the reserved file and touches it (its age counts from now); written whole, it says so and is closed', () => {
    const file = reserved();
    const sink = prewriteSink({ path: file, nbytes: 4, kind: 'bf16' });
    expect(sink).toMatchObject({ nbytes: 4, kind: 'bf16' });
    const before = Date.now();
    const fd = open(sink);
    expect(statSync(file).mtimeMs).toBeGreaterThanOrEqual(before - 1000);
    writeAllAtSync(fd, Uint8Array.of(1, 2, 3, 4));
    expect(sink.end({ kind: 'written', micros: 12.5 })).toEqual({ written: true, micros: 12.5 });
    expect(readFileSync(file)).toEqual(Buffer.from([1, 2, 3, 4]));
    expect(() => sink.end({ kind: 'written', micros: 1 })).toThrow(/ended without being open/);
    unlinkSync(file);
  });

  it('a file removed while it was written is not sent', () => {
    const file = reserved();
    const sink = prewriteSink({ path: file, nbytes: 4, kind: 'float32' });
    open(sink);
    unlinkSync(file); // the request was cleaned up, or another router's sweep took it
    expect(sink.end({ kind: 'written', micros: 3 })).toEqual({ written: false, error: `write ${file}: the file was removed while it was written` });
  });

  it("says why it was not written: a failed write with the file's path, a reason as it is", () => {
    const file = reserved();
    const failed = prewriteSink({ path: file, nbytes: 4, kind: 'float32' });
    open(failed);
    expect(failed.end({ kind: 'write-failed', error: 'ENOSPC: no space left on device, write' })).toEqual({
      written: false,
      error: `write ${file}: ENOSPC: no space left on device, write`,
    });
    const mismatch = prewriteSink({ path: file, nbytes: 4, kind: 'float32' });
    open(mismatch);
    expect(mismatch.end({ kind: 'not-written', reason: 'the decoded image does not match its header' })).toEqual({
      written: false,
      error: 'the decoded image does not match its header',
    });
    expect(statSync(file).size).toBe(0);
    unlinkSync(file);
  });

  it('never creates the file, never follows a link to one', () => {
    const missing = path.join(shm.dir, tensorName(process.pid, Date.now(), ++seq));
    expect(prewriteSink({ path: missing, nbytes: 4, kind: 'float32' }).open()).toEqual({
      error: `open ${missing}: ENOENT: no such file or directory, open '${missing}'`,
    });
    const target = reserved();
    const link = path.join(shm.dir, tensorName(process.pid, Date.now(), ++seq));
    symlinkSync(target, link);
    expect(prewriteSink({ path: link, nbytes: 4, kind: 'float32' }).open()).toEqual({
      error: `open ${link}: ELOOP: too many symbolic links encountered, open '${link}'`,
    });
    expect(statSync(target).size).toBe(0);
    unlinkSync(link);
    unlinkSync(target);
    expect(shm.files()).toEqual([]);
  });
});
