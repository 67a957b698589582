// The reference worker's --tamper-shm (tamper.ts): the flag combinations that cannot work
// (exit 2 naming the flag), the reader on the real /dev/shm tmpfs (the first byte of the tensor
// inverted in the file itself, so another name of the inode sees it and its mtime moves: the
// cue the pixel cache's guard looks for; then read and unlinked as usual; symlinks and inline
// tensors left alone), and the real `mmtc worker --tamper-shm` over gRPC, reporting the
// fingerprint of the bytes it changed. Every file here is one this test created.
import { randomBytes } from 'node:crypto';
import { chmodSync, linkSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import * as ts from '../gen/tokenspeed/grpc/scheduler.ts';
import { ENGINES } from '../engines/table.ts';
import { loadModelDirectory } from '../multimodal/model-dir.ts';
import { runMmtc, startMmtc } from '../test/cli.ts';
import { makeShmTestDir } from '../test/shm-dir.ts';
import { fnv1a64Hex } from '../util/fnv.ts';
import { TensorReadError } from '../transport/shm-reader.ts';
import { TamperingReader, type TamperRecord } from './tamper.ts';

const shm = makeShmTestDir();
const own = `mmtc-test-tamper-${process.pid}-${randomBytes(4).toString('hex')}`;
afterAll(() => {
  shm.remove();
  for (const f of readdirSync('/dev/shm')) if (f.startsWith(own)) rmSync(path.join('/dev/shm', f), { force: true });
});
const root = process.getuid?.() === 0;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pattern = (n: number) => Uint8Array.from({ length: n }, (_, i) => (i * 31 + 7) & 255);
const shmTensor = (name: string, nbytes: number, offset = 0) => ({
  shape: [nbytes / 4],
  dtype: 'float32',
  payload: { kind: 'shm' as const, handle: { name, offset, nbytes, owner_id: 'test' } },
});

describe('mmtc worker --tamper-shm', () => {
  it.each([
    [
      ['--runtime', 'sglang', '--tamper-shm'],
      '--tamper-shm is for a worker that reads /dev/shm tensor files: an sglang worker gets every tensor inline (its protocol has no /dev/shm lane)',
    ],
    [
      ['--runtime', 'tokenspeed', '--role', 'decode', '--tamper-shm'],
      '--tamper-shm is for a worker that reads /dev/shm tensor files: a decode worker is given no tensors (this one is --role decode)',
    ],
    [
      ['--runtime', 'tokenspeed', '--role', 'encode', '--bootstrap-port', '0', '--encode-accept', 'false', '--tamper-shm'],
      '--tamper-shm is for a worker that reads /dev/shm tensor files: an encode worker with --encode-accept false reads no tensors',
    ],
  ])('%j exits 2 naming the flag', (args, message) => {
    const r = runMmtc(['worker', '--port', '0', ...args]);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain(message);
  });
});

describe('the tampering reader', () => {
  it('inverts the first byte of the tensor in the file (every name of the inode sees it, its mtime moves), then reads and unlinks it as a worker does', async () => {
    const bytes = pattern(4096);
    const entry = path.join(shm.dir, 'entry');
    writeFileSync(entry, bytes);
    chmodSync(entry, 0o400);
    linkSync(entry, path.join(shm.dir, 'link'));
    const before = statSync(entry, { bigint: true });
    await sleep(20);
    const seen: TamperRecord[] = [];
    const reader = new TamperingReader({ dir: shm.dir, unlinkAfterRead: true, onTamper: (r) => seen.push(r) });
    const read = reader.read(shmTensor('link', 4096));
    expect(read.path).toBe('shm');
    const after = statSync(entry, { bigint: true });
    const want = Uint8Array.from(bytes);
    if (root) {
      // Root ignores the 0400 mode: the write goes through, into the other name's inode too.
      want[0] = want[0]! ^ 0xff;
      expect(seen).toEqual([{ name: 'link', ino: Number(before.ino), offset: 0 }]);
      expect(reader.counts).toEqual({ changed: 1, failed: 0 });
      expect(after.mtimeNs).not.toBe(before.mtimeNs);
    } else {
      expect(seen).toEqual([{ name: 'link', offset: 0, error: 'EACCES' }]);
      expect(after.mtimeNs).toBe(before.mtimeNs);
    }
    expect(Uint8Array.from(read.bytes)).toEqual(want);
    expect(Uint8Array.from(readFileSync(entry))).toEqual(want);
    expect(after.ino).toBe(before.ino);
    read.release();
    expect(shm.files()).toEqual(['entry']); // the link was unlinked, the other name stays
    rmSync(entry);
  });

  it('changes the byte at the handle offset, leaves inline tensors alone, and never follows a symlink', () => {
    const target = path.join(shm.dir, 'target');
    writeFileSync(target, pattern(64));
    const seen: TamperRecord[] = [];
    const reader = new TamperingReader({ dir: shm.dir, unlinkAfterRead: true, onTamper: (r) => seen.push(r) });
    // At an offset: byte 16 of the file is the tensor's first.
    writeFileSync(path.join(shm.dir, 'offset'), pattern(64));
    const read = reader.read(shmTensor('offset', 32, 16));
    const want = pattern(64).slice(16, 48);
    want[0] = want[0]! ^ 0xff;
    expect(Uint8Array.from(read.bytes)).toEqual(want);
    read.release();
    // Inline: nothing to write into.
    const inline = reader.read({ shape: [4], dtype: 'uint8', payload: { kind: 'inline', bytes: pattern(4) } });
    expect(Uint8Array.from(inline.bytes)).toEqual(pattern(4));
    // A symlink under the name: refused by the open (O_NOFOLLOW), its target untouched; the read then refuses it too.
    symlinkSync(target, path.join(shm.dir, 'symlink'));
    expect(() => reader.read(shmTensor('symlink', 64))).toThrow(TensorReadError);
    expect(Uint8Array.from(readFileSync(target))).toEqual(pattern(64));
    expect(seen).toEqual([
      { name: 'offset', ino: expect.any(Number), offset: 16 },
      { name: 'symlink', offset: 0, error: 'ELOOP' },
    ]);
    expect(reader.counts).toEqual({ changed: 1, failed: 1 });
    expect(shm.files()).toEqual(['symlink', 'target']);
  });
});

describe('a real `mmtc worker --tamper-shm`', () => {
  it.skipIf(!root)(
    'reports the fingerprint of the bytes it changed, says which file and inode, unlinks the link; the entry it links to is changed',
    async () => {
      const model = await loadModelDirectory();
      const pad = model.imageTokenId;
      const worker = await startMmtc(['worker', '--runtime', 'tokenspeed', '--port', '0', '--tamper-shm'], /listening on grpc:\/\//, {
        MMTC_MALLOC_HUGETLB: '0',
      });
      try {
        const url = /(grpc:\/\/\S+)/.exec(worker.line)![1]!;
        await waitFor(() => worker.output().includes('tamper-shm: every /dev/shm tensor file given is written into before it is read'));
        const bytes = pattern(16 * 1176 * 2);
        const entry = path.join('/dev/shm', `${own}-entry`);
        writeFileSync(entry, bytes);
        chmodSync(entry, 0o400);
        const link = `${own}-link`;
        linkSync(entry, path.join('/dev/shm', link));
        const ino = statSync(entry).ino;
        const grid = Buffer.from(new BigInt64Array([1n, 4n, 4n]).buffer);
        const request = ts.GenerateRequest.fromPartial({
          requestId: 't1',
          tokenized: { inputIds: [1, pad, pad, pad, pad, 2] },
          mmInputs: {
            items: [
              {
                modality: 1,
                contentHash: Buffer.alloc(32, 7),
                encoderInput: {
                  shape: [16, 1176],
                  dtype: 'bfloat16',
                  payload: { $case: 'shm', value: { name: link, offset: 0, nbytes: bytes.byteLength, ownerId: 'test' } },
                },
                modelSpecificTensors: { image_grid_thw: { shape: [1, 3], dtype: 'int64', payload: { $case: 'inline', value: grid } } },
                placeholders: [{ offset: 1, length: 4 }],
                placeholderTokenId: pad,
              },
            ],
          },
        });
        const text = await generate(url, request, model.tokenizer);
        const changed = Uint8Array.from(bytes);
        changed[0] = changed[0]! ^ 0xff;
        expect(text).toBe(
          `1 image: encoder_input [16,1176] bfloat16 via shm, ${bytes.byteLength} bytes, fnv1a ${fnv1a64Hex(changed)}; image_grid_thw [1,3] int64 via inline, 24 bytes, fnv1a ${fnv1a64Hex(grid)}`,
        );
        expect(fnv1a64Hex(changed)).not.toBe(fnv1a64Hex(bytes));
        expect(worker.output()).toContain(`tamper-shm: changed byte 0 of ${link} (inode ${ino})`);
        expect(readdirSync('/dev/shm').filter((f) => f.startsWith(own))).toEqual([`${own}-entry`]);
        expect(Uint8Array.from(readFileSync(entry))).toEqual(changed);
      } finally {
        await worker.stop();
      }
    },
  );
});

async function waitFor(ok: () => boolean, ms = 5000): Promise<void> {
  for (const end = Date.now() + ms; !ok() && Date.now() < end;) await sleep(20);
  expect(ok()).toBe(true);
}

function generate(url: string, message: ts.GenerateRequest, tokenizer: { decode(ids: readonly number[], skipSpecial: boolean): string }): Promise<string> {
  const connection = ENGINES.tokenspeed.connect(url);
  return new Promise((resolve, reject) => {
    const ids: number[] = [];
    connection.generate(
      { runtime: 'tokenspeed', message },
      { deadline: Date.now() + 10_000 },
      {
        event: (ev) => ids.push(...ev.tokenIds),
        failure: (error) => {
          connection.close();
          reject(new Error(`${error.status}: ${error.details}`));
        },
        end: () => {
          connection.close();
          resolve(tokenizer.decode(ids, false));
        },
      },
    );
  });
}
