// The Requests screen's side of the contract, through the console backend over a real reference
// worker: requests.list (filters, newest first, pages), traffic.request (one record with its
// legs and phases) and the requests stream (each request as it ends, in batches).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readTransportEnvironment } from '../config/env.ts';
import { startMmtc } from '../test/cli.ts';
import { startConsole } from './console.ts';
import type { RequestsBatch } from './contract.ts';

const dir = mkdtempSync(path.join(tmpdir(), 'mmtc-requests-'));
let worker: Awaited<ReturnType<typeof startMmtc>>;
let url: string;
const env = readTransportEnvironment({});
beforeAll(async () => {
  worker = await startMmtc(['worker', '--runtime', 'tokenspeed', '--port', '0'], /listening on grpc:\/\//);
  url = worker.line.match(/grpc:\/\/\S+/)![0];
});
afterAll(async () => {
  await worker.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function post(routerUrl: string, content: unknown): Promise<{ status: number; id?: string; error?: { message: string } }> {
  const res = await fetch(`${routerUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content }], max_tokens: 4 }),
  });
  return { status: res.status, ...((await res.json()) as { id?: string; error?: { message: string } }) };
}

describe('requests on the console contract', () => {
  it('requests.list filters by status, worker, leg, model and errors only, newest first, a page at a time; the stream brings each as it ends; traffic.request has its legs and phases', async () => {
    const c = await startConsole({ flags: { config: path.join(dir, 'router.yaml'), port: '0', workerUrls: [url] }, env, processEnv: {}, log: () => {} });
    const batches: RequestsBatch[] = [];
    const off = c.backend.subscribe('requests', (b) => batches.push(b));
    try {
      const ok1 = await post(c.routerUrl, 'hello');
      const bad = await post(c.routerUrl, [{ type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }]);
      const ok2 = await post(c.routerUrl, 'again');
      expect([ok1.status, bad.status, ok2.status]).toEqual([200, 400, 200]);
      const meta = { client: 'http' } as const;

      const all = await c.backend.invoke('requests.list', {}, meta);
      expect(all.requests.map((r) => r.id).slice(0, 1)).toEqual([ok2.id]);
      expect(all.requests.map((r) => r.status)).toEqual([200, 400, 200]);
      expect(all).toMatchObject({ matched: 3, kept: 3, capacity: 10_000, workers: [url] });
      expect(all.models).toHaveLength(1);
      const failedId = all.requests[1]!.id;

      const failed = await c.backend.invoke('requests.list', { status: 'failed' }, meta);
      expect(failed.requests).toEqual([expect.objectContaining({ id: failedId, status: 400, error: bad.error!.message, legs: [], tensorCount: 0 })]);
      expect(failed.matched).toBe(1);
      expect((await c.backend.invoke('requests.list', { errorsOnly: true }, meta)).requests.map((r) => r.id)).toEqual([failedId]);
      expect(
        (await c.backend.invoke('requests.list', { status: 'ok', worker: url, leg: 'regular', model: all.models[0]! }, meta)).requests.map((r) => r.id),
      ).toEqual([ok2.id, ok1.id]);
      expect((await c.backend.invoke('requests.list', { leg: 'encode' }, meta)).matched).toBe(0);
      expect((await c.backend.invoke('requests.list', { worker: 'grpc://127.0.0.1:1' }, meta)).matched).toBe(0);
      // Pages: the newest one, then the next after it.
      const page1 = await c.backend.invoke('requests.list', { limit: 1 }, meta);
      const page2 = await c.backend.invoke('requests.list', { limit: 1, before: page1.requests[0]!.id }, meta);
      expect([...page1.requests, ...page2.requests].map((r) => r.id)).toEqual([ok2.id, failedId]);
      await expect(c.backend.invoke('requests.list', { leg: 'sideways' as never }, meta)).rejects.toMatchObject({
        code: 'invalid_input',
        message: expect.stringContaining('leg'),
      });
      await expect(c.backend.invoke('requests.list', { limit: 100_000 }, meta)).rejects.toMatchObject({
        code: 'invalid_input',
        message: expect.stringContaining('limit'),
      });

      const one = await c.backend.invoke('traffic.request', { requestId: ok1.id! }, meta);
      expect(one).toMatchObject({ id: ok1.id, status: 200, legs: [expect.objectContaining({ leg: 'regular', worker: url })] });
      expect(one!.phases!.map((p) => p.name)).toContain('place');

      for (let i = 0; i < 50 && batches.flatMap((b) => b.requests).length < 3; i++) await new Promise((r) => setTimeout(r, 50));
      const streamed = batches.flatMap((b) => b.requests);
      expect(streamed.map((r) => r.id)).toEqual([ok1.id, failedId, ok2.id]);
      expect(streamed[1]).toMatchObject({ status: 400, error: bad.error!.message });
      expect(batches.every((b) => b.dropped === 0)).toBe(true);
    } finally {
      off();
      await c.close();
    }
  }, 30_000);
});
