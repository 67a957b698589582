// The console's HTTP binding through a real `mmtc serve` process with real reference workers:
// the guards (token, Host, Origin, WebSocket), then the shared contract suite.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readNamespaceToken } from '../transport/namespace.ts';
import { startMmtc } from '../test/cli.ts';
import { describeContract, type ContractEnv } from './test/contract-suite.ts';
import { httpClient, type HttpTestClient } from './test/http-client.ts';

const token = readNamespaceToken().token!;
const dir = mkdtempSync(path.join(tmpdir(), 'mmtc-serve-'));
const configFile = path.join(dir, 'router.yaml');
const stops: Array<() => Promise<unknown>> = [];
let serve: Awaited<ReturnType<typeof startMmtc>>;
let consoleUrl: string;
let consoleToken: string;
let client: HttpTestClient;
let env: ContractEnv;

async function worker(args: string[]): Promise<string> {
  const w = await startMmtc(['worker', '--port', '0', ...args], /listening on grpc:\/\//);
  stops.push(() => w.stop());
  return w.line.match(/grpc:\/\/\S+/)![0];
}

beforeAll(async () => {
  const sameShm = await worker(['--runtime', 'tokenspeed']);
  const otherShm = await worker(['--runtime', 'vllm', '--shm-namespace-id', `${token.slice(0, token.lastIndexOf(':'))}:424242`]);
  writeFileSync(configFile, `# hand-written comment\nmultimodal_tensor_transport: inline\nhealth_check_interval_secs: 0.5\nworkers:\n  - url: ${sameShm}\n`);
  serve = await startMmtc(['serve', '--config', configFile, '--port', '0', '--console-port', '0'], /^mmtc console: /, { XDG_CONFIG_HOME: dir });
  const m = /mmtc console: (http:\/\/\S+)#token=(\S+)/.exec(serve.line)!;
  consoleUrl = m[1]!;
  consoleToken = m[2]!;
  client = httpClient(consoleUrl, consoleToken);
  env = { client, binding: 'http', configFile, workers: { sameShm, otherShm }, routerPid: () => serve.pid };
}, 60_000);

afterAll(async () => {
  client?.close();
  await serve?.stop();
  for (const stop of stops.reverse()) await stop();
  rmSync(dir, { recursive: true, force: true });
});

const post = (pathname: string, init: { headers?: Record<string, string>; body?: string } = {}) =>
  fetch(`${consoleUrl.replace(/\/$/, '')}${pathname}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...init.headers },
    body: init.body ?? '{}',
  });

function wsStatus(protocols: string[], headers: Record<string, string> = {}): Promise<number | 'open'> {
  return new Promise((resolve) => {
    const ws = new WebSocket(`${consoleUrl.replace('http', 'ws')}api/events`, protocols, { headers });
    ws.on('open', () => {
      ws.close();
      resolve('open');
    });
    ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
    // A refused upgrade also emits 'error' after 'unexpected-response' has answered.
    ws.on('error', () => {});
  });
}

describe('mmtc serve guards', () => {
  it('binds 127.0.0.1, and the page and API answer only with the right token, Host and Origin', async () => {
    expect(consoleUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    expect((await post('/api/overview')).status).toBe(401);
    expect((await post('/api/overview', { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
    const ok = await post('/api/overview', { headers: { authorization: `Bearer ${consoleToken}` } });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('content-security-policy')).toContain("default-src 'self'");
    // DNS rebinding: the attacker's name in Host; a page of another origin.
    const { request } = await import('node:http');
    const status = (headers: Record<string, string>) =>
      new Promise<number>((resolve) => {
        const u = new URL(consoleUrl);
        const req = request(
          {
            host: u.hostname,
            port: u.port,
            path: '/api/overview',
            method: 'POST',
            headers: { 'content-type': 'application/json', authorization: `Bearer ${consoleToken}`, ...headers },
          },
          (res) => {
            res.resume();
            resolve(res.statusCode!);
          },
        );
        req.end('{}');
      });
    expect(await status({ host: `attacker.example:${new URL(consoleUrl).port}` })).toBe(403);
    expect(await status({ origin: 'http://attacker.example' })).toBe(403);
    expect(await status({ origin: consoleUrl.replace(/\/$/, '') })).toBe(200);
    expect((await post('/api/overview', { headers: { authorization: `Bearer ${consoleToken}`, 'content-type': 'text/plain' } })).status).toBe(415);
    expect((await post('/api/no.such.command', { headers: { authorization: `Bearer ${consoleToken}` } })).status).toBe(404);
    // A command that changes the router's state (the pixel cache's flush) has the same guards.
    expect((await post('/api/pixelCache.flush')).status).toBe(401);
    expect((await post('/api/pixelCache.flush', { headers: { authorization: `Bearer ${consoleToken}`, origin: 'http://attacker.example' } })).status).toBe(403);
  });

  it('the WebSocket needs the token subprotocol and the right Origin', async () => {
    expect(await wsStatus(['mmtc.v1'])).toBe(401);
    expect(await wsStatus(['mmtc.v1', 'mmtc.token.wrong'])).toBe(401);
    expect(await wsStatus(['mmtc.v1', `mmtc.token.${consoleToken}`], { origin: 'http://attacker.example' })).toBe(403);
    expect(await wsStatus(['mmtc.v1', `mmtc.token.${consoleToken}`])).toBe('open');
  });

  it('the token appears once in the output, in the URL it printed, and in no log line', async () => {
    await post('/api/overview', { headers: { authorization: `Bearer ${consoleToken}` } });
    const lines = serve
      .output()
      .split('\n')
      .filter((l) => l.includes(consoleToken));
    expect(lines).toEqual([serve.line]);
  });
});

describeContract('HTTP (mmtc serve)', () => env);
