// The console's rates (metrics.rates; docs/console.md, "Rates and latency") in this process over
// a real reference worker: requests through the router's API and a test request of the console's,
// then the rates per worker over a window, and a window the contract does not know refused
// naming the field.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readTransportEnvironment } from '../config/env.ts';
import { startMmtc } from '../test/cli.ts';
import { startConsole } from './console.ts';
import { ContractError } from './contract.ts';

const dir = mkdtempSync(path.join(tmpdir(), 'mmtc-rates-'));
const meta = { client: 'http' as const };
let worker: Awaited<ReturnType<typeof startMmtc>>;
let url: string;

beforeAll(async () => {
  worker = await startMmtc(['worker', '--runtime', 'tokenspeed', '--port', '0'], /listening on grpc:\/\//);
  url = worker.line.match(/grpc:\/\/\S+/)![0];
}, 60_000);
afterAll(async () => {
  await worker.stop();
  rmSync(dir, { recursive: true, force: true });
});

const PNG_1x1 = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC';
const chat = (extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    messages: [
      {
        role: 'user',
        content: [
          { type: 'image_url', image_url: { url: `data:image/png;base64,${PNG_1x1}` } },
          { type: 'text', text: 'What is it?' },
        ],
      },
    ],
    ...extra,
  });

describe('metrics.rates', () => {
  it("gives each worker's requests, errors and error rate over the window, with one point per bucket", async () => {
    const file = path.join(dir, 'router.yaml');
    writeFileSync(file, `multimodal_tensor_transport: inline\nworkers:\n  - url: ${url}\n`);
    const c = await startConsole({ flags: { config: file, port: '0' }, env: readTransportEnvironment({}), processEnv: {}, shmDir: dir, log: () => {} });
    try {
      const post = (body: string) => fetch(`${c.routerUrl}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      expect((await post(chat())).status).toBe(200);
      expect((await post(chat())).status).toBe(200);
      // TokenSpeed's engine refuses top_k 200: the worker's call fails.
      expect((await post(chat({ top_k: 200 }))).status).toBe(502);
      // The console's own test request is a call to the worker too.
      expect((await c.backend.invoke('traffic.sendTestRequest', { url, width: 32, height: 32, format: 'png' }, meta)).status).toBe(200);

      const minute = await c.backend.invoke('metrics.rates', { window: '1m' }, meta);
      expect(minute).toMatchObject({ window: '1m', bucketMs: 1000 });
      expect(minute.series.map((s) => [s.worker, s.leg, s.requests, s.errors, s.errorRate])).toEqual([[url, 'regular', 4, 1, 1 / 4]]);
      expect(minute.series[0]!.points).toHaveLength(60);
      expect(minute.series[0]!.points.reduce((n, p) => n + p.requests, 0)).toBe(4);
      const hour = await c.backend.invoke('metrics.rates', { window: '1h' }, meta);
      expect(hour).toMatchObject({ window: '1h', bucketMs: 60_000 });
      expect(hour.series[0]!.points).toHaveLength(60);

      const refused = await c.backend.invoke('metrics.rates', { window: '2h' }, meta).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(ContractError);
      expect((refused as ContractError).code).toBe('invalid_input');
      expect((refused as Error).message).toMatch(/^invalid input for metrics\.rates at window: /);
    } finally {
      await c.close();
    }
  });
});
