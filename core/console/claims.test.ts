// What the console says must be so: a verdict the next request honours, "written" for a change
// a restart keeps (or a warning that it does not), a reset refused while the next request would
// break the lane again, and a warning that reaches the overview stream within a second of its
// cause. Over real reference workers; worker B (root only) runs in a private tmpfs mounted over
// /dev/shm, so it really cannot see the router's files, as a container without --ipc=host.
import { readFileSync, rmSync, mkdtempSync, writeFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readTransportEnvironment } from '../config/env.ts';
import { startMmtc } from '../test/cli.ts';
import { startConsole, type RunningConsole } from './console.ts';
import type { ContractError, StreamPayload } from './contract.ts';

const isRoot = process.getuid?.() === 0;
const dir = mkdtempSync(path.join(tmpdir(), 'mmtc-claims-'));
const env = readTransportEnvironment({});
const stops: Array<() => Promise<unknown>> = [];
let a: string;
let b: string | undefined;

beforeAll(async () => {
  const wa = await startMmtc(['worker', '--runtime', 'tokenspeed', '--port', '0'], /listening on grpc:\/\//);
  stops.push(() => wa.stop());
  a = wa.line.match(/grpc:\/\/\S+/)![0];
  if (isRoot) {
    // exec: the worker itself is the process the stop signal reaches.
    const wb = await startMmtc(['worker', '--runtime', 'vllm', '--port', '0'], /listening on grpc:\/\//, {}, [
      'unshare',
      '--mount',
      '--propagation',
      'private',
      'sh',
      '-c',
      `mount -t tmpfs -o size=64m mmtc-claims /dev/shm && exec "$0" "$@"`,
    ]);
    stops.push(() => wb.stop());
    b = wb.line.match(/grpc:\/\/\S+/)![0];
  }
}, 60_000);

afterAll(async () => {
  for (const stop of stops.reverse()) await stop();
  rmSync(dir, { recursive: true, force: true });
});

const meta = { client: 'http' as const };
const ourFiles = () => readdirSync('/dev/shm').filter((f) => f.startsWith(`smg-tokenspeed-${process.pid}-`));

describe('a setting a flag gave at start, changed in the console', () => {
  it('is written to the file, and the review, the apply, Overview and a restart all say that the flag sets it back', async () => {
    const file = path.join(dir, 'flagged.yaml');
    writeFileSync(file, `multimodal_tensor_transport: inline\nworkers:\n  - url: ${a}\n`);
    const flags = { config: file, port: '0', multimodalTensorTransport: 'auto' };
    const first = await startConsole({ flags, env, processEnv: {}, log: () => {} });
    let c: RunningConsole | undefined = first;
    try {
      // At start the flag overrides the file, and a restart with it would run the same: in sync.
      let overview = await first.backend.invoke('overview', {}, meta);
      expect(overview.config.restartChanges).toEqual([]);
      const view = await first.backend.invoke('config.get', {}, meta);
      expect(view.startFlags).toContainEqual({ key: 'multimodal_tensor_transport', flag: '--multimodal-tensor-transport auto' });
      const draft = { ...view.config, multimodal_tensor_transport: 'shm' as const };
      const preview = await first.backend.invoke('config.diff', { draft }, meta);
      expect(preview.untilRestart).toEqual([{ path: 'multimodal_tensor_transport', kind: 'changed', before: 'shm', after: 'auto' }]);
      const applied = await first.backend.invoke('config.apply', { draft, expectedRevision: view.revision }, meta);
      expect(applied.untilRestart).toEqual(preview.untilRestart);
      expect(readFileSync(file, 'utf8')).toContain('multimodal_tensor_transport: shm'); // the change is in the file
      overview = await first.backend.invoke('overview', {}, meta);
      expect(overview.config.restartChanges).toEqual(preview.untilRestart);
      expect(overview.warnings.find((w) => w.kind === 'until_restart')?.message).toBe(
        '1 running setting would be set back by a restart with the flags the router started with (--multimodal-tensor-transport auto): multimodal_tensor_transport: "shm" now, "auto" after a restart',
      );
      await first.close();
      c = undefined;

      // What Overview said: a restart with the same flags sets it back...
      c = await startConsole({ flags, env, processEnv: {}, log: () => {} });
      expect((await c.backend.invoke('config.get', {}, meta)).config.multimodal_tensor_transport).toBe('auto');
      await c.close();
      c = undefined;
      // ...and one without the flag keeps the operator's change.
      c = await startConsole({ flags: { config: file, port: '0' }, env, processEnv: {}, log: () => {} });
      expect((await c.backend.invoke('config.get', {}, meta)).config.multimodal_tensor_transport).toBe('shm');
      expect((await c.backend.invoke('overview', {}, meta)).config.restartChanges).toEqual([]);
    } finally {
      await c?.close();
    }
  });

  it('a hand edit of the file is drift, not a setting the flags set back', async () => {
    const file = path.join(dir, 'drifted.yaml');
    writeFileSync(file, `request_timeout_secs: 600\nworkers:\n  - url: ${a}\n`);
    const c = await startConsole({ flags: { config: file, port: '0', multimodalTensorTransport: 'auto' }, env, processEnv: {}, log: () => {} });
    try {
      writeFileSync(file, `request_timeout_secs: 300\nworkers:\n  - url: ${a}\n`);
      const overview = await c.backend.invoke('overview', {}, meta);
      expect(overview.config.drifted).toBe(true);
      expect(overview.config.restartChanges).toEqual([{ path: 'request_timeout_secs', kind: 'changed', before: 600, after: 300 }]);
      expect(overview.warnings.map((w) => w.kind)).toContain('config_drift');
      expect(overview.warnings.map((w) => w.kind)).not.toContain('until_restart');
    } finally {
      await c.close();
    }
  });

  it("under --worker-urls, an apply of another setting leaves the file's own worker list as it was", async () => {
    const file = path.join(dir, 'own-workers.yaml');
    writeFileSync(file, '# our workers\nworkers:\n  - url: grpc://127.0.0.1:9\n');
    const c = await startConsole({ flags: { config: file, port: '0', workerUrls: [a] }, env, processEnv: {}, log: () => {} });
    try {
      const view = await c.backend.invoke('config.get', {}, meta);
      expect(view.config.workers.map((w) => w.url)).toEqual([a]);
      const applied = await c.backend.invoke('config.apply', { draft: { ...view.config, policy: 'least_load' }, expectedRevision: view.revision }, meta);
      expect(applied.untilRestart).toEqual([]);
      const text = readFileSync(file, 'utf8');
      expect(text).toContain('policy: least_load');
      expect(text).toContain('grpc://127.0.0.1:9');
      expect(text).not.toContain(a);
      expect(text).toContain('# our workers');
    } finally {
      await c.close();
    }
  });

  it("a flagged setting changed and then set back to the flag's value: the file says what the operator chose last", async () => {
    const file = path.join(dir, 'set-back.yaml');
    writeFileSync(file, `multimodal_tensor_transport: inline\nworkers:\n  - url: ${a}\n`);
    const c = await startConsole({ flags: { config: file, port: '0', multimodalTensorTransport: 'auto' }, env, processEnv: {}, log: () => {} });
    try {
      let view = await c.backend.invoke('config.get', {}, meta);
      await c.backend.invoke('config.apply', { draft: { ...view.config, multimodal_tensor_transport: 'shm' }, expectedRevision: view.revision }, meta);
      view = await c.backend.invoke('config.get', {}, meta);
      const back = await c.backend.invoke(
        'config.apply',
        { draft: { ...view.config, multimodal_tensor_transport: 'auto' }, expectedRevision: view.revision },
        meta,
      );
      expect(back.untilRestart).toEqual([]);
      expect(readFileSync(file, 'utf8')).toContain('multimodal_tensor_transport: auto');
      expect((await c.backend.invoke('overview', {}, meta)).config.restartChanges).toEqual([]);
    } finally {
      await c.close();
    }
  });

  it('a reload runs the file as a restart would: flags over it, its comments kept, nothing left to set back', async () => {
    const file = path.join(dir, 'reload.yaml');
    writeFileSync(file, `multimodal_tensor_transport: inline\nworkers:\n  - url: ${a}\n`);
    const c = await startConsole({ flags: { config: file, port: '0', multimodalTensorTransport: 'auto' }, env, processEnv: {}, log: () => {} });
    try {
      let view = await c.backend.invoke('config.get', {}, meta);
      await c.backend.invoke('config.apply', { draft: { ...view.config, multimodal_tensor_transport: 'shm' }, expectedRevision: view.revision }, meta);
      writeFileSync(file, `# edited by hand\nmultimodal_tensor_transport: shm\nrequest_timeout_secs: 300\nworkers:\n  - url: ${a}\n`);
      view = await c.backend.invoke('config.get', {}, meta);
      // What the drift panel says a reload changes is what it does.
      expect(view.file.driftDiff).toEqual([
        { path: 'multimodal_tensor_transport', kind: 'changed', before: 'shm', after: 'auto' },
        { path: 'request_timeout_secs', kind: 'changed', before: 600, after: 300 },
      ]);
      const reloaded = await c.backend.invoke('config.reloadFile', { expectedRevision: view.revision }, meta);
      expect(reloaded.diff).toEqual(view.file.driftDiff);
      expect(reloaded.untilRestart).toEqual([]);
      const text = readFileSync(file, 'utf8');
      expect(text).toContain('# edited by hand');
      expect(text).toContain('multimodal_tensor_transport: shm'); // the file's own value stays in the file
      const overview = await c.backend.invoke('overview', {}, meta);
      expect(overview.config).toMatchObject({ drifted: false, restartChanges: [] });
    } finally {
      await c.close();
    }
  });

  it('a worker added while --worker-urls was given: the review says a restart drops it', async () => {
    const file = path.join(dir, 'urls.yaml');
    const c = await startConsole({ flags: { config: file, port: '0', workerUrls: [a] }, env, processEnv: {}, log: () => {} });
    try {
      const view = await c.backend.invoke('config.get', {}, meta);
      const draft = {
        ...view.config,
        workers: [
          ...view.config.workers,
          { url: 'grpc://127.0.0.1:9', runtime: 'unspecified' as const, worker_type: 'regular' as const, labels: {}, priority: 50 },
        ],
      };
      const preview = await c.backend.invoke('config.diff', { draft }, meta);
      expect(preview.untilRestart).toEqual([expect.objectContaining({ path: 'workers["grpc://127.0.0.1:9"]', kind: 'removed' })]);
      // Applied, Overview says it in words: the worker is dropped, not set "to undefined".
      await c.backend.invoke('config.apply', { draft, expectedRevision: view.revision }, meta);
      const warning = (await c.backend.invoke('overview', {}, meta)).warnings.find((w) => w.kind === 'until_restart')?.message;
      expect(warning).toContain(': worker grpc://127.0.0.1:9: configured now, dropped by a restart');
      expect(warning).not.toContain('undefined');
    } finally {
      await c.close();
    }
  });
});

describe.skipIf(!isRoot)('mode shm forced on a worker in another /dev/shm (root: a private tmpfs)', () => {
  it('every view says SHM will be attempted and fail over; the lane breaks for real; the warning is pushed within a second; reset is refused while its next request would break the lane again', async () => {
    const file = path.join(dir, 'two.yaml');
    writeFileSync(
      file,
      `multimodal_tensor_transport: auto\nhealth_check_interval_secs: 0.5\nworkers:\n  - url: ${a}\n    runtime: tokenspeed\n  - url: ${b}\n    runtime: vllm\n`,
    );
    const c = await startConsole({ flags: { config: file, port: '0' }, env, processEnv: {}, log: () => {} });
    try {
      for (let i = 0; i < 100; i++) {
        const list = await c.backend.invoke('workers.list', {}, meta);
        if (list.workers.every((w) => w.health === 'healthy')) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      const view = await c.backend.invoke('config.get', {}, meta);
      const draft = { ...view.config, workers: view.config.workers.map((w) => (w.url === b ? { ...w, multimodal_tensor_transport: 'shm' as const } : w)) };
      // The review warns before the apply, with the reason in words.
      const preview = await c.backend.invoke('config.diff', { draft }, meta);
      expect(preview.warnings).toEqual([
        expect.objectContaining({
          url: b,
          decision: expect.objectContaining({ reason: 'shm_worker_other_shm', outcome: 'shm_then_inline', shmEnabled: true }),
        }),
      ]);
      expect(preview.warnings[0]!.decision.explanation).toMatch(/SHM will be attempted, the worker will not find the files, and the request goes again inline/);
      const resolved = await c.backend.invoke('config.resolve', { draft }, meta);
      expect(resolved.workers.find((w) => w.url === b)!.decision.outcome).toBe('shm_then_inline');
      expect(resolved.workers.find((w) => w.url === a)!.decision.outcome).toBe('shm');
      await c.backend.invoke('config.apply', { draft, expectedRevision: view.revision }, meta);
      const listed = (await c.backend.invoke('workers.list', {}, meta)).workers.find((w) => w.url === b)!;
      expect(listed).toMatchObject({ tokenMatch: 'different_shm', decision: { outcome: 'shm_then_inline', reason: 'shm_worker_other_shm' } });
      const overview = await c.backend.invoke('overview', {}, meta);
      expect(overview.verdicts.find((v) => v.url === b)!.decision.outcome).toBe('shm_then_inline');
      expect(overview.warnings.map((w) => w.kind)).toContain('shm_will_fail');

      // The overview stream pushes the broken lane within a second of the request that broke it.
      const pushed: Array<{ at: number; overview: StreamPayload<'overview'> }> = [];
      const off = c.backend.subscribe('overview', (o) => pushed.push({ at: performance.now(), overview: o }));
      // What the screen said happens: attempted, not found, sent again inline, lane broken.
      const test = await c.backend.invoke('traffic.sendTestRequest', { url: b!, width: 448, height: 448, format: 'png' }, meta);
      const brokeAt = performance.now();
      expect(test.status).toBe(200);
      const first = test.events.filter((e) => e.attempt === undefined);
      const retry = test.events.filter((e) => e.attempt === 2);
      expect(first.find((e) => e.tensor === 'pixel_values')).toMatchObject({ path: 'shm', reason: 'shm_worker_other_shm' });
      expect(retry.find((e) => e.tensor === 'pixel_values')).toMatchObject({ path: 'inline', reason: 'shm_worker_read_failed' });
      expect(retry[0]!.detail).toMatch(/ENOENT|No such file/);
      for (let i = 0; i < 40 && !pushed.some((p) => p.overview.warnings.some((w) => w.kind === 'shm_read_failed')); i++)
        await new Promise((r) => setTimeout(r, 50));
      off();
      const warned = pushed.find((p) => p.overview.warnings.some((w) => w.kind === 'shm_read_failed'));
      expect(warned).toBeDefined();
      expect(warned!.at - brokeAt).toBeLessThan(1000);
      expect(warned!.overview.verdicts.find((v) => v.url === b)!.decision).toMatchObject({ outcome: 'inline', reason: 'shm_worker_read_failed' });

      // The checks still fail, so the reset is refused, naming them; forced, it resets.
      const refused = (await c.backend.invoke('workers.resetShmLane', { url: b! }, meta).catch((e: unknown) => e)) as ContractError<'checks_failed'>;
      expect(refused.code).toBe('checks_failed');
      const failing = refused.details.failing.map((s) => s.id);
      expect(failing).toEqual(['same_st_dev', 'probe_file_read']);
      expect(refused.message).toMatch(/^not reset: same \/dev\/shm \(st_dev\)/);
      expect((await c.backend.invoke('workers.list', {}, meta)).workers.find((w) => w.url === b)!.shmLane).not.toBeNull();
      // Following the warning's advice (mode auto for it): the lane is judged afresh under auto, which checks the
      // token first: inline because the worker has another /dev/shm, no broken lane left, no warning of one.
      expect(refused.details.failing.length).toBeGreaterThan(0);
      const now = await c.backend.invoke('config.get', {}, meta);
      const auto = { ...now.config, workers: now.config.workers.map((w) => (w.url === b ? { ...w, multimodal_tensor_transport: 'auto' as const } : w)) };
      await c.backend.invoke('config.apply', { draft: auto, expectedRevision: now.revision }, meta);
      const followed = (await c.backend.invoke('workers.list', {}, meta)).workers.find((w) => w.url === b)!;
      expect(followed.shmLane).toBeNull();
      expect(followed.decision).toMatchObject({ outcome: 'inline', reason: 'auto_different_shm' });
      expect((await c.backend.invoke('overview', {}, meta)).warnings.map((w) => w.kind)).not.toContain('shm_read_failed');
      // Its next request goes inline at once: nothing attempted through /dev/shm, nothing to retry.
      const again = await c.backend.invoke('traffic.sendTestRequest', { url: b!, width: 448, height: 448, format: 'png' }, meta);
      expect(again.status).toBe(200);
      expect(again.events.filter((e) => e.tensor === 'pixel_values').map((e) => [e.path, e.reason, e.attempt])).toEqual([
        ['inline', 'auto_different_shm', undefined],
      ]);
      expect(ourFiles()).toEqual([]);
    } finally {
      await c.close();
    }
  }, 60_000);
});

describe('an SGLang worker (its protocol has no /dev/shm lane)', () => {
  it("under shm and auto: every screen's verdict is inline with runtime_inline_only, no warning that SHM will fail, Doctor says why, calibration refuses", async () => {
    const ws = await startMmtc(['worker', '--runtime', 'sglang', '--port', '0'], /listening on grpc:\/\//);
    stops.push(() => ws.stop());
    const s = ws.line.match(/grpc:\/\/\S+/)![0];
    const file = path.join(dir, 'sglang.yaml');
    writeFileSync(file, `multimodal_tensor_transport: shm\nworkers:\n  - url: ${s}\n  - url: ${a}\n    multimodal_tensor_transport: auto\n`);
    const c = await startConsole({ flags: { config: file, port: '0' }, env, processEnv: {}, log: () => {} });
    try {
      const listed = (await c.backend.invoke('workers.list', {}, meta)).workers.find((w) => w.url === s)!;
      expect(listed).toMatchObject({ runtime: 'sglang', health: 'healthy', decision: { shmEnabled: false, outcome: 'inline', reason: 'runtime_inline_only' } });
      expect(listed.decision.explanation).toMatch(/inline only/);
      expect(listed.resolution.multimodal_tensor_transport.value).toBe('shm');
      expect(listed.resolution.notes.join(' ')).toMatch(/^SGLang carries tensors inline only .*: mode shm travels inline \(runtime_inline_only\)/);
      const overview = await c.backend.invoke('overview', {}, meta);
      expect(overview.verdicts.find((v) => v.url === s)!.decision).toMatchObject({ outcome: 'inline', reason: 'runtime_inline_only' });
      expect(overview.warnings.map((w) => w.kind)).not.toContain('shm_will_fail');
      const view = await c.backend.invoke('config.get', {}, meta);
      const draft = { ...view.config, multimodal_tensor_transport: 'auto' as const };
      const preview = await c.backend.invoke('config.diff', { draft }, meta);
      expect(preview.warnings).toEqual([]);
      const resolved = await c.backend.invoke('config.resolve', { draft }, meta);
      expect(resolved.workers.find((w) => w.url === s)!.decision.reason).toBe('runtime_inline_only');
      const diagnosis = await c.backend.invoke('workers.diagnose', { url: s }, meta);
      expect(diagnosis.steps.map((st) => [st.id, st.ok])).toEqual([
        ['reachable', true],
        ['protocol_lane', false],
        ['token_advertised', null],
        ['same_boot_id', null],
        ['same_st_dev', null],
        ['shm_writable', null],
        ['probe_file_read', null],
      ]);
      expect(diagnosis.steps[1]!.detail).toBe('SGLang carries tensors inline only (its TensorData has no /dev/shm handle)');
      expect(diagnosis.verdict.reason).toBe('runtime_inline_only');
      const test = await c.backend.invoke('traffic.sendTestRequest', { url: s, width: 128, height: 128, format: 'png' }, meta);
      expect(test.status).toBe(200);
      expect(test.events.map((e) => [e.tensor, e.path, e.reason])).toEqual([
        ['pixel_values', 'inline', 'runtime_inline_only'],
        ['image_grid_thw', 'inline', 'runtime_inline_only'],
        ['patches_per_image', 'inline', 'runtime_inline_only'],
      ]);
      const refused = (await c.backend.invoke('transport.calibrationPlan', { url: s }, meta).catch((e: unknown) => e)) as ContractError;
      expect(refused.message).toMatch(/carries tensors inline only: there is no SHM path to measure/);
      expect(ourFiles()).toEqual([]);
    } finally {
      await c.close();
    }
  }, 60_000);

  it('as the decode worker under PD: calibration says it reads no pixels and names the prefill worker, before its protocol', async () => {
    const [decode, prefill] = await Promise.all([
      startMmtc(['worker', '--runtime', 'sglang', '--port', '0'], /listening on grpc:\/\//),
      startMmtc(['worker', '--runtime', 'sglang', '--port', '0'], /listening on grpc:\/\//),
    ]);
    stops.push(
      () => decode.stop(),
      () => prefill.stop(),
    );
    const [d, p] = [decode, prefill].map((w) => w.line.match(/grpc:\/\/\S+/)![0]);
    const file = path.join(dir, 'sglang-pd.yaml');
    writeFileSync(file, `disaggregation: pd\nworkers:\n  - url: ${p}\n    worker_type: prefill\n  - url: ${d}\n    worker_type: decode\n`);
    const c = await startConsole({ flags: { config: file, port: '0' }, env, processEnv: {}, log: () => {} });
    try {
      const deadline = Date.now() + 10_000;
      const bothHealthy = async () =>
        (await c.backend.invoke('workers.list', {}, meta)).workers.filter((w) => (w.url === d || w.url === p) && w.health.startsWith('healthy')).length === 2;
      while (Date.now() < deadline && !(await bothHealthy())) await new Promise((r) => setTimeout(r, 100));
      const refused = (await c.backend.invoke('transport.calibrationPlan', { url: d }, meta).catch((e: unknown) => e)) as ContractError;
      expect(refused.message).toBe(
        `worker ${d} is a decode worker under disaggregation pd: it reads no pixel tensors (tensors go to the prefill worker; ${p}'s overrides apply), so there is no transport of its own to measure; no prefill worker can be calibrated now (each is unhealthy or its protocol carries tensors inline only)`,
      );
      const own = (await c.backend.invoke('transport.calibrationPlan', { url: p }, meta).catch((e: unknown) => e)) as ContractError;
      expect(own.message).toMatch(/carries tensors inline only: there is no SHM path to measure/);
    } finally {
      await c.close();
    }
  }, 60_000);
});
