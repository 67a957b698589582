// The console contract's behaviour, as one suite both bindings must pass: HTTP through a real
// `mmtc serve` process (http.test.ts) and IPC through Electron main's handlers with electron
// mocked at the edge (electron/ipc-contract.test.ts). Each run gets its own config file and
// real reference workers; what is checked is what the operator sees: revisions, diffs, the
// path the next request's tensors take, the file on disk, and the errors.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ContractError, type ConfigDraft, type ConsoleClient, type StreamPayload } from '../contract.ts';

export interface ContractEnv {
  client: ConsoleClient;
  /** Which binding: what the config history records as the client. */
  binding: 'http' | 'ipc';
  configFile: string;
  /** A TokenSpeed reference worker sharing our /dev/shm, and a vLLM one advertising another /dev/shm. */
  workers: { sameShm: string; otherShm: string };
  /** The pid whose tensor files are ours (the router's). */
  routerPid: () => number;
}

async function rejection(p: Promise<unknown>): Promise<ContractError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ContractError);
  return err as ContractError;
}

/** A draft holding a value the config schema refuses, as a form holds one typed halfway: the commands check it and name it, so the client's types let it through only when said so. */
const invalidDraft = (draft: Record<string, unknown>): ConfigDraft => draft;

const encoderPath = (content: string) => /(?:encoder_input|pixel_values) \[[\d,]+\] \w+ via (\w+)/.exec(content)?.[1];

export function describeContract(name: string, setup: () => ContractEnv): void {
  describe(`console contract over ${name}`, () => {
    const env = () => setup();
    const ourFiles = () => readdirSync('/dev/shm').filter((f) => f.startsWith(`smg-tokenspeed-${env().routerPid()}-`));

    it('config.get shows the applied config, its revision, origins, the env layer and the file', async () => {
      const view = await env().client.call('config.get', {});
      expect(view.revision).toBeGreaterThanOrEqual(1);
      expect(view.config.workers.map((w) => w.url)).toEqual([env().workers.sameShm]);
      expect(view.file).toMatchObject({ path: env().configFile, drifted: false });
      expect(view.env.multimodal_tensor_transport.canonical.name).toBe('SMG_MM_TENSOR_TRANSPORT');
      expect(view.restartOnly).toEqual(['host', 'port', 'model_path']);
      expect(view.origins.multimodal_tensor_transport).toMatch(/router\.yaml:\d+:\d+$/);
    });

    it('an apply reaches the next request, is written to the file and recorded in the history', async () => {
      const { client, workers } = env();
      const before = await client.call('config.get', {});
      const draft = { ...before.config, multimodal_tensor_transport: 'auto' as const };
      const diff = await client.call('config.diff', { draft });
      const ladder = await client.call('config.resolve', { draft });
      expect(ladder.workers[0]!.resolution.multimodal_tensor_transport).toMatchObject({ value: 'auto', source: 'router' });
      expect(ladder.workers[0]!.resolution.multimodal_tensor_transport.layers[1]).toMatchObject({ origin: 'draft (not applied)', state: 'won' });
      expect(ladder.workers[0]!.decision).toMatchObject({ shmEnabled: true, reason: 'auto_tokens_equal' });
      expect(diff.diff).toEqual([{ path: 'multimodal_tensor_transport', kind: 'changed', before: before.config.multimodal_tensor_transport, after: 'auto' }]);
      const applied = await client.call('config.apply', { draft, expectedRevision: before.revision });
      expect(applied).toMatchObject({ revision: before.revision + 1, file: env().configFile });
      expect(readFileSync(env().configFile, 'utf8')).toContain('multimodal_tensor_transport: auto');
      expect(readFileSync(env().configFile, 'utf8')).toContain('# hand-written comment'); // the operator's comment survives
      const test = await client.call('traffic.sendTestRequest', { url: workers.sameShm, width: 320, height: 240, format: 'png' });
      expect(test).toMatchObject({ status: 200, revision: applied.revision });
      expect(encoderPath(test.content)).toBe('shm');
      expect(test.events[0]).toMatchObject({ source: 'console', path: 'shm', reason: 'auto_tokens_equal', revision: applied.revision });
      const history = await client.call('config.history', {});
      expect(history.entries[0]).toMatchObject({ revision: applied.revision, client: env().binding, diff: diff.diff });
      expect(ourFiles()).toEqual([]);
    });

    it('two applies against the same revision: exactly one wins, the other is a conflict saying what changed', async () => {
      const { client } = env();
      const base = await client.call('config.get', {});
      const outcomes = await Promise.allSettled(
        [1024, 2048].map((n) => client.call('config.apply', { draft: { ...base.config, multimodal_shm_min_bytes: n }, expectedRevision: base.revision })),
      );
      expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1);
      const lost = outcomes.find((o): o is PromiseRejectedResult => o.status === 'rejected')!.reason as ContractError<'conflict'>;
      expect(lost).toBeInstanceOf(ContractError);
      expect(lost.code).toBe('conflict');
      expect(lost.details).toMatchObject({ currentRevision: base.revision + 1, expectedRevision: base.revision });
      const winner = (await client.call('config.get', {})).config.multimodal_shm_min_bytes;
      expect(lost.details.changedMeanwhile).toEqual([
        {
          path: 'multimodal_shm_min_bytes',
          kind: base.config.multimodal_shm_min_bytes === undefined ? 'added' : 'changed',
          ...(base.config.multimodal_shm_min_bytes === undefined ? {} : { before: base.config.multimodal_shm_min_bytes }),
          after: winner,
        },
      ]);
    });

    it('an invalid draft and YAML with errors change nothing and say where', async () => {
      const { client } = env();
      const before = await client.call('config.get', {});
      const fileBefore = readFileSync(env().configFile, 'utf8');
      const bad = await rejection(
        client.call('config.apply', { draft: invalidDraft({ ...before.config, multimodal_tensor_transport: 'fast' }), expectedRevision: before.revision }),
      );
      expect(bad.code).toBe('invalid_config');
      expect(bad.issues).toEqual([
        { path: 'multimodal_tensor_transport', message: "invalid value 'fast' for multimodal_tensor_transport: expected inline, shm, auto or rdma" },
      ]);
      const imported = await client.call('config.importYaml', {
        text: 'multimodal_tensor_transport: auto\nworkers:\n  - url: grpc://127.0.0.1:1\n    priority: high\n',
      });
      expect(imported.ok).toBe(false);
      expect(imported.issues[0]).toMatchObject({ path: 'workers[0].priority', line: 4, column: 15 });
      const restart = await rejection(client.call('config.apply', { draft: { ...before.config, port: 1 }, expectedRevision: before.revision }));
      expect(restart.code).toBe('restart_required');
      const input = await rejection(client.call('config.apply', { draft: before.config, expectedRevision: 0 }));
      expect(input.code).toBe('invalid_input');
      expect((await client.call('config.get', {})).revision).toBe(before.revision);
      expect(readFileSync(env().configFile, 'utf8')).toBe(fileBefore);
    });

    it('a file edited by hand is drift: reported with its diff, never overwritten, reloadable', async () => {
      const { client } = env();
      const before = await client.call('config.get', {});
      const edited = readFileSync(env().configFile, 'utf8').replace(/request_timeout_secs: \d+\n|$/, '') + 'request_timeout_secs: 77\n';
      writeFileSync(env().configFile, edited);
      const view = await client.call('config.get', {});
      expect(view.file.drifted).toBe(true);
      expect(view.file.driftDiff).toContainEqual(expect.objectContaining({ path: 'request_timeout_secs', after: 77 }));
      expect((await client.call('overview', {})).warnings.map((w) => w.kind)).toContain('config_drift');
      const refused = await rejection(client.call('config.apply', { draft: { ...before.config, policy: 'least_load' }, expectedRevision: before.revision }));
      expect(refused.code).toBe('file_drift');
      expect(readFileSync(env().configFile, 'utf8')).toBe(edited);
      const reloaded = await client.call('config.reloadFile', { expectedRevision: before.revision });
      expect(reloaded.diff).toContainEqual(expect.objectContaining({ path: 'request_timeout_secs', after: 77 }));
      expect((await client.call('config.get', {})).file.drifted).toBe(false);
    });

    it('a rollback is a new revision with the older settings, and the next request follows them', async () => {
      const { client, workers } = env();
      const start = await client.call('config.get', {});
      const inline = await client.call('config.apply', { draft: { ...start.config, multimodal_tensor_transport: 'inline' }, expectedRevision: start.revision });
      const shm = await client.call('config.apply', { draft: { ...start.config, multimodal_tensor_transport: 'shm' }, expectedRevision: inline.revision });
      const back = await client.call('config.rollback', { revision: inline.revision, expectedRevision: shm.revision });
      expect(back.revision).toBe(shm.revision + 1);
      expect(back.diff).toEqual([{ path: 'multimodal_tensor_transport', kind: 'changed', before: 'shm', after: 'inline' }]);
      const test = await client.call('traffic.sendTestRequest', { url: workers.sameShm, width: 128, height: 128, format: 'jpeg' });
      expect(encoderPath(test.content)).toBe('inline');
    });

    it('workers: add one advertising another /dev/shm; list, diagnose and resolve it; remove it', async () => {
      const { client, workers } = env();
      const base = await client.call('config.get', {});
      await client.call('config.apply', { draft: { ...base.config, multimodal_tensor_transport: 'auto' }, expectedRevision: base.revision });
      const added = await client.call('workers.add', { worker: { url: workers.otherShm, multimodal_shm_min_bytes: 0 }, expectedRevision: base.revision + 1 });
      const list = await client.call('workers.list', {});
      const other = list.workers.find((w) => w.url === workers.otherShm)!;
      expect(other).toMatchObject({
        runtime: 'vllm',
        health: 'healthy',
        tokenMatch: 'different_shm',
        decision: { shmEnabled: false, reason: 'auto_different_shm' },
      });
      expect(other.resolution.multimodal_shm_min_bytes).toMatchObject({ value: 0, source: 'worker' });
      const diagnosis = await client.call('workers.diagnose', { url: workers.otherShm });
      expect(diagnosis.steps.map((s) => [s.id, s.ok])).toEqual([
        ['reachable', true],
        ['protocol_lane', true],
        ['token_advertised', true],
        ['same_boot_id', true],
        ['same_st_dev', false],
        ['shm_writable', true],
        ['probe_file_read', true], // the same machine really: the worker only advertises another token
      ]);
      expect(diagnosis.steps.find((st) => st.id === 'same_st_dev')!.remedy).toBe(
        "run the worker container with --ipc=host or mount the host's /dev/shm into it",
      );
      const test = await client.call('traffic.sendTestRequest', { url: workers.otherShm, width: 256, height: 256, format: 'webp' });
      expect(test.events[0]).toMatchObject({ path: 'inline', reason: 'auto_different_shm' });
      await client.call('workers.remove', { url: workers.otherShm, expectedRevision: added.revision });
      expect((await client.call('workers.list', {})).workers.map((w) => w.url)).toEqual([workers.sameShm]);
      const missing = await rejection(client.call('workers.diagnose', { url: workers.otherShm }));
      expect(missing.code).toBe('not_found');
    });

    it('workers.drain takes a worker out of rotation (listed with when, and in the gateway export notes) until workers.returnToRotation', async () => {
      const { client, workers } = env();
      const drained = await client.call('workers.drain', { url: workers.sameShm });
      expect(drained).toMatchObject({ url: workers.sameShm, inFlight: 0 });
      expect((await client.call('workers.drain', { url: workers.sameShm })).drainedAt).toBe(drained.drainedAt); // again: the first time stands
      const listed = (await client.call('workers.list', {})).workers.find((w) => w.url === workers.sameShm)!;
      expect([listed.drainedAt, listed.health]).toEqual([drained.drainedAt, 'healthy']);
      // Its verdict says why no request reaches it: drained, not down; Doctor says the same.
      expect(listed.decision).toMatchObject({ shmEnabled: false, reason: 'worker_drained' });
      const doctor = await client.call('workers.diagnose', { url: workers.sameShm });
      expect(doctor.verdict).toMatchObject({ outcome: 'no_request', reason: 'worker_drained' });
      expect(doctor.steps.find((s) => s.id === 'probe_file_read')?.detail).toBe(
        'not checked: the router takes no request to it now (drained by the operator (out of rotation))',
      );
      const overview = await client.call('overview', {});
      expect(overview.workers).toMatchObject({ healthy: 0, draining: 1 });
      const gateway = await client.call('config.exportForGateway', {});
      expect(gateway.notes.filter((n) => n.includes('is drained on this router'))).toEqual([
        expect.stringMatching(
          /^workers\[0\] \(grpc:\/\/\S+\) is drained on this router .* DELETE \/workers\/\{worker_id\} drains the worker for drain_settle_secs/,
        ),
      ]);
      const back = await client.call('workers.returnToRotation', { url: workers.sameShm });
      expect(back).toEqual({ url: workers.sameShm, wasDrained: true, inFlight: 0 });
      expect((await client.call('workers.list', {})).workers.find((w) => w.url === workers.sameShm)!.drainedAt).toBeNull();
      expect((await client.call('workers.returnToRotation', { url: workers.sameShm })).wasDrained).toBe(false);
      const missing = await rejection(client.call('workers.drain', { url: workers.otherShm }));
      expect([missing.code, missing.path]).toEqual(['not_found', 'url']);
      expect(missing.message).toMatch(new RegExp(`^no worker ${workers.otherShm.replace(/[/.]/g, '\\$&')} in configuration revision \\d+$`));
    });

    it("the traffic stream delivers the console's own test traffic in batches, marked as its own", async () => {
      const { client, workers } = env();
      const batches: Array<StreamPayload<'traffic'>> = [];
      const off = client.subscribe('traffic', (b) => batches.push(b));
      await new Promise((r) => setTimeout(r, 200));
      const test = await client.call('traffic.sendTestRequest', { url: workers.sameShm, width: 64, height: 64, format: 'png' });
      for (let i = 0; i < 50 && !batches.some((b) => b.events.some((e) => e.requestId === test.requestId)); i++) await new Promise((r) => setTimeout(r, 50));
      off();
      const events = batches.flatMap((b) => b.events).filter((e) => e.requestId === test.requestId);
      expect(events.map((e) => e.tensor)).toEqual(['encoder_input', 'image_grid_thw', 'patches_per_image']);
      expect(events.every((e) => e.source === 'console')).toBe(true);
      expect(batches.every((b) => b.dropped === 0)).toBe(true);
      const snapshot = await client.call('traffic.snapshot', { limit: 3 });
      expect(snapshot.events.map((e) => e.requestId)).toEqual([test.requestId, test.requestId, test.requestId]);
    });

    it('exports: YAML of the applied config, the gateway command line, metrics', async () => {
      const { client } = env();
      const yaml = await client.call('config.exportYaml', {});
      expect(yaml.yaml).toContain(`url: ${env().workers.sameShm}`);
      const gateway = await client.call('config.exportForGateway', {});
      expect(gateway.command).toMatch(/^smg launch /);
      expect(gateway.command).toContain(`--worker-urls ${env().workers.sameShm}`);
      expect((await client.call('metrics.text', {})).text).toContain('smg_mm_tensors_total');
    });

    it('the pixel cache: a repeated image is a hit on its tensor and in the overview, and a flush drops the entries', async () => {
      const { client, workers } = env();
      await client.call('pixelCache.flush', {});
      const before = (await client.call('overview', {})).pixelCache!;
      expect(before).toMatchObject({ entries: 0, off: null, configured: { mb: 512, source: 'default', origin: null }, budgetBytes: 512 * 1024 * 1024 });
      const image = { url: workers.sameShm, width: 208, height: 144, format: 'webp' as const };
      const first = await client.call('traffic.sendTestRequest', image);
      const second = await client.call('traffic.sendTestRequest', image);
      expect(first.events.filter((e) => e.cache).map((e) => [e.tensor, e.cache])).toEqual([['encoder_input', 'miss']]);
      expect(second.events.filter((e) => e.cache).map((e) => [e.tensor, e.cache])).toEqual([['encoder_input', 'hit']]);
      const after = (await client.call('overview', {})).pixelCache!;
      expect(after).toMatchObject({ hits: before.hits + 1, misses: before.misses + 1, entries: 1, tampered: before.tampered });
      expect(after.heldBytes).toBe(first.events.find((e) => e.cache)!.nbytes);
      const flushed = await client.call('pixelCache.flush', {});
      expect(flushed).toMatchObject({ dropped: 1, pixelCache: { entries: 0, heldBytes: 0, hits: after.hits, flushes: after.flushes + 1 } });
      expect((await client.call('overview', {})).pixelCache).toMatchObject({ entries: 0, heldBytes: 0 });
      const third = await client.call('traffic.sendTestRequest', image);
      expect(third.events.filter((e) => e.cache).map((e) => e.cache)).toEqual(['miss']); // computed again
      expect((await rejection(client.call('pixelCache.flush', { all: true } as never))).code).toBe('invalid_input');
      await client.call('pixelCache.flush', {});
      expect(ourFiles()).toEqual([]);
    });

    it('calibration measures inline and SHM across the sweep, recommends a threshold, and leaves no file', async () => {
      const { client, workers } = env();
      const progress: Array<StreamPayload<'calibration'>> = [];
      const off = client.subscribe('calibration', (p) => progress.push(p));
      await new Promise((r) => setTimeout(r, 100));
      const plan = await client.call('transport.calibrationPlan', { url: workers.sameShm });
      const cacheBefore = (await client.call('overview', {})).pixelCache!;
      const result = await client.call('transport.calibrate', { url: workers.sameShm, samples: 1 });
      off();
      // Every sample computes its image and writes its tensor: the pixel cache is not asked (a hit would time a hard link).
      expect((await client.call('overview', {})).pixelCache).toMatchObject({ hits: cacheBefore.hits, misses: cacheBefore.misses });
      expect(result.points.length).toBeGreaterThanOrEqual(5);
      // The plan states the sizes the run measures.
      expect(result.points.map((p) => p.nbytes)).toEqual(plan.sizes.map((s) => s.nbytes));
      expect(result.points[0]!.nbytes).toBeLessThan(64 * 1024);
      expect(result.points.at(-1)!.nbytes).toBeGreaterThan(16 * 1024 * 1024);
      for (const p of result.points) {
        expect(p.inlineSamples).toHaveLength(1);
        expect(p.inlineSpread[0]).toBeLessThanOrEqual(p.inlineMs);
        expect(p.inlineSpread[1]).toBeGreaterThanOrEqual(p.inlineMs);
      }
      // One sample per size cannot tell either path apart from the noise: nothing is recommended, and the note says why.
      expect(result.points.every((p) => p.winner === 'tie')).toBe(true);
      expect(result).toMatchObject({ crossoverBytes: null, recommendedMinBytes: null });
      expect(result.note).toMatch(/^No clear crossover/);
      expect(progress.at(-1)).toMatchObject({ url: workers.sameShm, phase: 'done', done: progress.at(-1)!.total });
      expect(ourFiles()).toEqual([]);
    }, 120_000);
  });
}
