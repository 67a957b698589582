// The embedded reference worker both ways it runs: as a child process (Node) and as a thread
// (how it runs inside Electron, whose process.execPath is not Node).
import { describe, expect, it } from 'vitest';
import { BUNDLED_MODEL_PATH } from '../multimodal/model-dir.ts';
import { probeWorker } from '../workers/discovery.ts';
import { startEmbeddedWorker, startEmbeddedWorkerThread } from './embedded.ts';

describe('the embedded reference worker', () => {
  it.each([
    ['a child process', () => startEmbeddedWorker(BUNDLED_MODEL_PATH, { PATH: process.env.PATH, MMTC_MALLOC_HUGETLB: '0' })],
    ['a thread of this process', () => startEmbeddedWorkerThread(BUNDLED_MODEL_PATH)],
  ])('answers as TokenSpeed when started as %s, and is gone once stopped', async (_how, start) => {
    const worker = await start();
    const probe = await probeWorker(worker.url, { timeoutMs: 3000 });
    expect(probe).toMatchObject({ reachable: true, runtime: 'tokenspeed', healthy: true });
    await worker.stop();
    expect((await probeWorker(worker.url, { timeoutMs: 1000 })).reachable).toBe(false);
  });
});
