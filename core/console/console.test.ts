// The console backend in this process over a real reference worker: history and revision
// numbering across a restart, and the traffic stream's bounded backlog for a slow subscriber.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readTransportEnvironment } from '../config/env.ts';
import type { TensorEvent } from '../transport/event-schema.ts';
import { startMmtc } from '../test/cli.ts';
import { startConsole, TRAFFIC_BACKLOG } from './console.ts';
import type { TrafficBatch } from './contract.ts';

const dir = mkdtempSync(path.join(tmpdir(), 'mmtc-console-'));
const configFile = path.join(dir, 'router.yaml');
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

const start = () => startConsole({ flags: { config: configFile, port: '0', workerUrls: [url] }, env, processEnv: {}, log: () => {} });

describe('the console backend', () => {
  it('keeps its history across a restart and goes on counting revisions', async () => {
    const first = await start();
    const view = await first.backend.invoke('config.get', {}, { client: 'http' });
    expect(view.revision).toBe(1);
    await first.backend.invoke('config.apply', { draft: { ...view.config, multimodal_tensor_transport: 'shm' }, expectedRevision: 1 }, { client: 'ipc' });
    await first.close();

    const second = await start();
    const again = await second.backend.invoke('config.get', {}, { client: 'http' });
    expect(again.revision).toBe(3);
    expect(again.config.multimodal_tensor_transport).toBe('shm'); // read back from the file
    const history = await second.backend.invoke('config.history', {}, { client: 'http' });
    expect(history.entries.map((e) => [e.revision, e.client])).toEqual([
      [3, 'start'],
      [2, 'ipc'],
      [1, 'start'],
    ]);
    expect(history.entries[0]!.diff).toEqual([]); // nothing changed while it was down
    expect(history.entries[1]!.config?.multimodal_tensor_transport).toBe('shm'); // a rollback can be previewed
    expect(history.entries[2]!.config).toBeDefined();
    expect(history.entries[2]!.config!.multimodal_tensor_transport).toBeUndefined(); // not set: the environment or the default decides
    await second.close();
  });

  it('an imported YAML is taken as written, and a flag it leaves out (--port 0 here) keeps its running value', async () => {
    const c = await start();
    try {
      const mode = await c.backend.invoke('config.importYaml', { text: `multimodal_tensor_transport: auto\nworkers:\n  - url: ${url}\n` }, { client: 'http' });
      expect(mode.diff.map((d) => d.path)).toEqual(['multimodal_tensor_transport']);
      expect(mode.draft?.port).toBe(0);
      const port = await c.backend.invoke('config.importYaml', { text: `port: 31000\nworkers:\n  - url: ${url}\n` }, { client: 'http' });
      expect(port.diff).toContainEqual({ path: 'port', kind: 'changed', before: 0, after: 31000 });
      const { revision } = await c.backend.invoke('config.get', {}, { client: 'http' });
      await expect(
        c.backend.invoke('config.apply', { yaml: `port: 31000\nworkers:\n  - url: ${url}\n`, expectedRevision: revision }, { client: 'http' }),
      ).rejects.toMatchObject({ code: 'restart_required' });
    } finally {
      await c.close();
    }
  });

  it('with no worker configured, the embedded worker is marked and an exported YAML imports with no change', async () => {
    const file = path.join(dir, 'embedded.yaml');
    const c = await startConsole({ flags: { config: file, port: '0' }, env, processEnv: {}, log: () => {} });
    try {
      const workers = await c.backend.invoke('workers.list', {}, { client: 'http' });
      expect(workers.workers).toHaveLength(1);
      expect(workers.workers[0]!.embedded).toBe(true);
      const exported = await c.backend.invoke('config.exportYaml', {}, { client: 'http' });
      expect(exported.yaml).not.toContain('workers:\n  -'); // the embedded worker is never written out
      const imported = await c.backend.invoke('config.importYaml', { text: exported.yaml }, { client: 'http' });
      expect(imported.ok).toBe(true);
      expect(imported.diff).toEqual([]);
    } finally {
      await c.close();
    }
  });

  it('a slow traffic subscriber gets bounded batches and the count of what it missed', async () => {
    const c = await start();
    let ready = false;
    const batches: TrafficBatch[] = [];
    const off = c.backend.subscribe('traffic', (b) => batches.push(b), { canSend: () => ready });
    const event = (i: number): TensorEvent => ({
      time: Date.now(),
      revision: 1,
      requestId: `r${i}`,
      source: 'api',
      worker: url,
      runtime: 'tokenspeed',
      tensor: 'encoder_input',
      shape: [1],
      dtype: 'bfloat16',
      nbytes: 2,
      path: 'shm',
      reason: 'shm_writable',
      writeMicros: 1,
    });
    const total = TRAFFIC_BACKLOG * 3;
    for (let i = 0; i < total; i++) c.router.context.events.publish(event(i));
    await new Promise((r) => setTimeout(r, 250));
    expect(batches).toEqual([]); // nothing is sent while the subscriber cannot take it
    ready = true;
    for (let i = 0; i < 40 && batches.length === 0; i++) await new Promise((r) => setTimeout(r, 25));
    off();
    expect(batches).toHaveLength(1);
    expect(batches[0]!.events).toHaveLength(TRAFFIC_BACKLOG);
    expect(batches[0]!.dropped).toBe(total - TRAFFIC_BACKLOG);
    expect(batches[0]!.events.at(-1)!.requestId).toBe(`r${total - 1}`); // the newest are kept
    await c.close();
  });
});
