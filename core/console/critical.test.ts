// The console under EPD with its encode worker killed (kill -9), over real workers: no screen
// gets a green "SHM ≥" verdict for the dead worker (its next request reaches nobody), the
// overview carries /health's critical state, and Doctor's panel never shows a failed step next
// to a green verdict, with advice for the step that failed (bring the encode worker back, not
// --ipc=host for a decode worker whose probe was refused for want of an encode worker).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readTransportEnvironment } from '../config/env.ts';
import { startMmtc } from '../test/cli.ts';
import { startConsole } from './console.ts';

const dir = mkdtempSync(path.join(tmpdir(), 'mmtc-critical-'));
const stops: Array<() => Promise<unknown>> = [];
let encode: { url: string; kill(): Promise<unknown> };
let decodeUrl: string;
let c: Awaited<ReturnType<typeof startConsole>>;

async function roleWorker(role: 'encode' | 'prefill' | 'decode') {
  const served = role !== 'decode';
  const w = await startMmtc(
    ['worker', '--runtime', 'tokenspeed', '--port', '0', '--role', role, ...(served ? ['--bootstrap-port', '0'] : [])],
    served ? /bootstrap server on http:\/\// : /listening on grpc:\/\//,
  );
  stops.push(() => w.stop());
  const out = w.output();
  const url = /listening on (grpc:\/\/\S+)/.exec(out)![1]!;
  const bootstrap = served ? `    bootstrap_port: ${/bootstrap server on http:\/\/\S+:(\d+)/.exec(out)![1]}\n` : '';
  return { url, entry: `  - url: ${url}\n    worker_type: ${role}\n${bootstrap}`, kill: () => w.stop('SIGKILL') };
}

beforeAll(async () => {
  const [e, p, d] = await Promise.all([roleWorker('encode'), roleWorker('prefill'), roleWorker('decode')]);
  encode = e;
  decodeUrl = d.url;
  const file = path.join(dir, 'router.yaml');
  writeFileSync(file, `disaggregation: epd\nmultimodal_tensor_transport: auto\nhealth_check_interval_secs: 0.5\nworkers:\n${e.entry}${p.entry}${d.entry}`);
  c = await startConsole({ flags: { config: file, port: '0' }, env: readTransportEnvironment({}), processEnv: {}, log: () => {} });
  stops.push(() => c.close());
}, 60_000);
afterAll(async () => {
  for (const stop of stops.splice(0).reverse()) await stop();
  rmSync(dir, { recursive: true, force: true });
});

const meta = { client: 'http' } as const;

describe('EPD, the encode worker killed', () => {
  it('its verdict is "no request" everywhere, the overview carries the critical state, and Doctor advises bringing it back', async () => {
    const before = await c.backend.invoke('overview', {}, meta);
    expect(before.verdicts.find((v) => v.url === encode.url)?.decision.outcome).toBe('shm');
    expect(before).toMatchObject({ health: 'ok', critical: [] });

    await encode.kill();
    let overview = before;
    for (let i = 0; i < 100 && overview.health === 'ok'; i++) {
      await new Promise((r) => setTimeout(r, 100));
      overview = await c.backend.invoke('overview', {}, meta);
    }
    // Overview and Traffic (the overview's verdicts) and Workers (workers.list): no green SHM for it.
    const verdict = overview.verdicts.find((v) => v.url === encode.url)!;
    expect(verdict.health).toBe('unhealthy');
    expect(verdict.decision).toMatchObject({ outcome: 'no_request', reason: 'worker_not_healthy', shmEnabled: false });
    const listed = (await c.backend.invoke('workers.list', {}, meta)).workers.find((w) => w.url === encode.url)!;
    expect(listed.decision.outcome).toBe('no_request');
    expect(overview.health).toBe('degraded');
    expect(overview.critical.map((s) => s.message)).toEqual([
      expect.stringMatching(new RegExp(`^no healthy encode worker: every request with an image fails with 503 \\(${encode.url.replace(/[.:/]/g, '\\$&')}: `)),
    ]);

    // Doctor on the dead worker: the failed reach and a verdict that is not green, in one panel.
    const dead = await c.backend.invoke('workers.diagnose', { url: encode.url }, meta);
    expect(dead.steps.find((s) => s.id === 'reachable')?.ok).toBe(false);
    expect(dead.verdict).toMatchObject({ outcome: 'no_request', reason: 'worker_not_healthy' });

    // Doctor on the decode worker: its probe was refused for want of an encode worker, and says what to do about that.
    const decode = await c.backend.invoke('workers.diagnose', { url: decodeUrl }, meta);
    const probe = decode.steps.find((s) => s.id === 'probe_file_read')!;
    expect(probe.ok).toBe(false);
    expect(probe.detail).toMatch(/^no healthy encode worker \(/);
    expect(probe.remedy).toBe(
      "restart or bring back the encode worker (Doctor shows each one's checks); requests succeed again as soon as one answers its health check",
    );
    expect(probe.remedy).not.toContain('--ipc=host');
    expect(decode.verdict).toMatchObject({ outcome: 'no_request', reason: 'route_not_healthy' });
    expect(decode.verdict.advice).not.toContain('--ipc=host');
  }, 60_000);
});
