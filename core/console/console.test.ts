// The console backend in this process over a real reference worker: history and revision
// numbering across a restart, and the traffic stream's bounded backlog for a slow subscriber.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readTransportEnvironment } from '../config/env.ts';
import type { TensorEvent } from '../transport/event-schema.ts';
import { startMmtc } from '../test/cli.ts';
import { makeFamilyModel } from '../test/family-models.ts';
import { makeTestImages } from '../test/images.ts';
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

  it('a worker left to detection is exported with the runtime detected on it: the YAML and the gateway body name tokenspeed, not unspecified', async () => {
    const c = await start();
    try {
      const listed = await c.backend.invoke('workers.list', {}, { client: 'http' });
      expect(listed.workers.map((w) => [w.spec.runtime, w.runtime])).toEqual([['unspecified', 'tokenspeed']]);
      const { yaml } = await c.backend.invoke('config.exportYaml', {}, { client: 'http' });
      expect(yaml).toContain('    runtime: tokenspeed # detected by the router (the applied configuration leaves it unspecified)\n');
      expect(yaml).not.toContain('unspecified\n');
      const gateway = await c.backend.invoke('config.exportForGateway', {}, { client: 'http' });
      expect(gateway.workers.map((w) => w.body.runtime_type)).toEqual(['tokenspeed']);
      expect(gateway.workers[0]!.curl).toContain('"runtime_type":"tokenspeed"');
    } finally {
      await c.close();
    }
  });

  it("each worker's model and family: the router's own (the bundled Qwen2-VL), and a LLaVA-1.5 worker marked as another family", async () => {
    const llavaDir = makeFamilyModel(path.join(dir, 'llava-model'), 'llava');
    const llava = await startMmtc(['worker', '--runtime', 'vllm', '--port', '0', '--model-path', llavaDir], /listening on grpc:\/\//);
    const llavaUrl = llava.line.match(/grpc:\/\/\S+/)![0];
    const c = await startConsole({
      flags: { config: path.join(dir, 'families.yaml'), port: '0', workerUrls: [url, llavaUrl] },
      env,
      processEnv: {},
      log: () => {},
    });
    try {
      const { workers } = await c.backend.invoke('workers.list', {}, { client: 'http' });
      const byUrl = new Map(workers.map((w) => [w.url, w.model]));
      expect(byUrl.get(url)).toMatchObject({ modelType: 'qwen2_vl', family: 'Qwen2-VL, Qwen2.5-VL', sameFamily: true });
      expect(byUrl.get(llavaUrl)).toMatchObject({ modelType: 'llava', family: 'LLaVA-1.5', sameFamily: false, routerFamily: 'Qwen2-VL, Qwen2.5-VL' });
    } finally {
      await c.close();
      await llava.stop();
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

  it('the quick start (the embedded worker) rolled back across launches keeps a working embedded worker and writes no worker', async () => {
    const file = path.join(dir, 'quick-start.yaml');
    const launch = () => startConsole({ flags: { config: file, port: '0' }, env, processEnv: {}, log: () => {} });
    const first = await launch();
    let firstUrl: string;
    try {
      const view = await first.backend.invoke('config.get', {}, { client: 'http' });
      firstUrl = view.config.workers[0]!.url;
      await first.backend.invoke(
        'config.apply',
        { draft: { ...view.config, multimodal_tensor_transport: 'inline' }, expectedRevision: view.revision },
        { client: 'http' },
      );
    } finally {
      await first.close();
    }

    const second = await launch();
    try {
      const view = await second.backend.invoke('config.get', {}, { client: 'http' });
      const runningUrl = view.config.workers[0]!.url;
      expect(runningUrl).not.toBe(firstUrl); // a port of its own at every launch
      // One revision per launch and per apply: the embedded worker's start is none, and nothing changed between the launches.
      // (Before: 5 revisions, the embedded worker removed and added again on its new port at the second launch.)
      const history = await second.backend.invoke('config.history', {}, { client: 'http' });
      expect(history.entries.map((e) => [e.revision, e.client, e.diff.map((d) => d.path)])).toEqual([
        [3, 'start', []],
        [2, 'http', ['multimodal_tensor_transport']],
        [1, 'start', ['port']], // the first start against the built-in defaults: --port 0
      ]);
      expect(readFileSync(`${file}.history.jsonl`, 'utf8')).not.toContain('grpc://');
      // The rollback's preview is what it applies: the running embedded worker kept.
      expect(history.entries[2]!.config!.workers.map((w) => w.url)).toEqual([runningUrl]);

      const rolledBack = await second.backend.invoke('config.rollback', { revision: 1, expectedRevision: 3 }, { client: 'http' });
      expect(rolledBack.diff.map((d) => d.path)).toEqual(['multimodal_tensor_transport']);
      const after = await second.backend.invoke('config.history', {}, { client: 'http' });
      expect(after.entries[0]).toMatchObject({ revision: 4, client: 'http', rollbackOf: 1 }); // History says it is a rollback
      expect(after.entries[1]!.rollbackOf).toBeUndefined();
      const workers = await second.backend.invoke('workers.list', {}, { client: 'http' });
      expect(workers.workers.map((w) => [w.url, w.embedded, w.health])).toEqual([[runningUrl, true, 'healthy']]);
      const chat = await fetch(`${second.routerUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'hello' }], max_tokens: 4 }),
      });
      expect(chat.status).toBe(200);
      expect(readFileSync(file, 'utf8')).not.toContain('grpc://'); // a restart starts a new embedded worker, not a dead one

      // A worker added replaces the embedded one; undoing it (a rollback) brings the embedded worker back, as embedded.
      const added = await second.backend.invoke('workers.add', { worker: { url }, expectedRevision: rolledBack.revision }, { client: 'http' });
      expect((await second.backend.invoke('workers.list', {}, { client: 'http' })).workers.map((w) => w.url)).toEqual([url]);
      await second.backend.invoke('config.rollback', { revision: rolledBack.revision, expectedRevision: added.revision }, { client: 'http' });
      const back = await second.backend.invoke('workers.list', {}, { client: 'http' });
      expect(back.workers.map((w) => [w.url, w.embedded, w.health])).toEqual([[runningUrl, true, 'healthy']]);
      expect(readFileSync(file, 'utf8')).not.toContain(runningUrl);

      // The last configured worker removed: the embedded worker stands in again, as at start; the review's diff says so.
      const again = await second.backend.invoke(
        'workers.add',
        { worker: { url }, expectedRevision: (await second.backend.invoke('config.get', {}, { client: 'http' })).revision },
        { client: 'http' },
      );
      const preview = await second.backend.invoke(
        'config.diff',
        { draft: { ...(await second.backend.invoke('config.get', {}, { client: 'http' })).config, workers: [] } },
        { client: 'http' },
      );
      expect(preview.diff.map((d) => [d.path, d.kind])).toEqual([
        [`workers["${runningUrl}"]`, 'added'],
        [`workers["${url}"]`, 'removed'],
      ]);
      await second.backend.invoke('workers.remove', { url, expectedRevision: again.revision }, { client: 'http' });
      const standIn = await second.backend.invoke('workers.list', {}, { client: 'http' });
      expect(standIn.workers.map((w) => [w.url, w.embedded])).toEqual([[runningUrl, true]]);
      expect(readFileSync(file, 'utf8')).not.toContain('grpc://');
    } finally {
      await second.close();
    }
  });

  it('a worker labelled multimodal_encoder_dtype=int8: Workers and Overview say it is no dtype and float32 goes instead', async () => {
    const c = await startConsole({ flags: { config: path.join(dir, 'int8.yaml'), port: '0', workerUrls: [url] }, env, processEnv: {}, log: () => {} });
    try {
      const view = await c.backend.invoke('config.get', {}, { client: 'http' });
      await c.backend.invoke(
        'workers.update',
        { url, worker: { url, labels: { multimodal_encoder_dtype: 'int8' } }, expectedRevision: view.revision },
        { client: 'http' },
      );
      const [w] = (await c.backend.invoke('workers.list', {}, { client: 'http' })).workers;
      expect(w!.encoderDtype).toEqual({
        dtype: 'float32',
        source: 'label multimodal_encoder_dtype',
        warning:
          "unknown encoder dtype 'int8' from label multimodal_encoder_dtype: expected float32|fp32|f32, bfloat16|bf16 or float16|fp16|f16|half; using float32",
      });
      const overview = await c.backend.invoke('overview', {}, { client: 'http' });
      expect(overview.warnings.filter((x) => x.kind === 'encoder_dtype_unknown')).toEqual([
        {
          kind: 'encoder_dtype_unknown',
          message: `worker ${url}: ${w!.encoderDtype!.warning}`,
          remedy: "set the worker's label multimodal_encoder_dtype (on Workers, or its GetModelInfo) to float32, bfloat16 or float16",
        },
      ]);
    } finally {
      await c.close();
    }
  });

  it("a failed request: the traffic stream and the snapshot name it beside its tensors' events", async () => {
    const slow = await startMmtc(['worker', '--runtime', 'tokenspeed', '--port', '0', '--delay-ms', '4000'], /listening on grpc:\/\//);
    const slowUrl = slow.line.match(/grpc:\/\/\S+/)![0];
    const file = path.join(dir, 'timeout.yaml');
    writeFileSync(file, 'request_timeout_secs: 1\n');
    const c = await startConsole({ flags: { config: file, port: '0', workerUrls: [slowUrl] }, env, processEnv: {}, log: () => {} });
    const batches: TrafficBatch[] = [];
    const off = c.backend.subscribe('traffic', (b) => batches.push(b));
    try {
      const images = makeTestImages();
      const png = images.bytes('rgb.png').toString('base64');
      images.remove();
      const res = await fetch(`${c.routerUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          messages: [
            {
              role: 'user',
              content: [
                { type: 'image_url', image_url: { url: `data:image/png;base64,${png}` } },
                { type: 'text', text: 'x' },
              ],
            },
          ],
          max_tokens: 4,
        }),
      });
      expect(res.status).toBe(504);
      for (let i = 0; i < 50 && !batches.some((b) => b.failed.length > 0); i++) await new Promise((r) => setTimeout(r, 50));
      const events = batches.flatMap((b) => b.events);
      const failed = batches.flatMap((b) => b.failed);
      expect(failed).toHaveLength(1);
      expect(failed[0]).toMatchObject({ status: 504, error: expect.stringMatching(/within 1 s|timed out|did not finish/) });
      expect(events.filter((e) => e.requestId === failed[0]!.requestId).length).toBeGreaterThan(0);
      const snapshot = await c.backend.invoke('traffic.snapshot', {}, { client: 'http' });
      expect(snapshot.failed).toEqual(failed);
    } finally {
      off();
      await c.close();
      await slow.stop();
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
