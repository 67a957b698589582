// One malformed request must never take down the router and the console (issue 23): a real
// `mmtc serve` (its embedded worker behind it) gets, from loopback, the request lines,
// WebSocket frames, bodies and configurations that each stopped it, and must answer each
// with the right status and error, keep every other client, and end alive, healthy and with
// its process guard's count at 0 (it counts what nothing else caught: a bug each).
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_WORKERS } from '../config/schema.ts';
import { runMmtc, startMmtc } from '../test/cli.ts';
import { BAD_REQUEST_TARGETS, BAD_WS_FRAMES, rawRequest, rawWebSocket } from '../test/raw-wire.ts';

const dir = mkdtempSync(path.join(tmpdir(), 'mmtc-attack-'));
const configFile = path.join(dir, 'router.yaml');
let serve: Awaited<ReturnType<typeof startMmtc>>;
let consoleUrl: string;
let routerUrl: string;
let token: string;
let watcher: WebSocket;

beforeAll(async () => {
  writeFileSync(configFile, '# attack test\nhealth_check_interval_secs: 1\n');
  serve = await startMmtc(['serve', '--config', configFile, '--port', '0', '--console-port', '0'], /^mmtc console: /, { XDG_CONFIG_HOME: dir });
  const m = /mmtc console: (http:\/\/\S+?)\/?#token=(\S+)/.exec(serve.line)!;
  consoleUrl = m[1]!;
  token = m[2]!;
  routerUrl = /mmtc router listening on (http:\/\/\S+) /.exec(serve.output())![1]!;
  // A client that must keep its connection through every attack on the others.
  watcher = new WebSocket(`${consoleUrl.replace(/^http/, 'ws')}/api/events`, ['mmtc.v1', `mmtc.token.${token}`], { headers: { origin: consoleUrl } });
  await new Promise<void>((resolve, reject) => {
    watcher.once('open', () => resolve());
    watcher.once('error', reject);
  });
  watcher.send(JSON.stringify({ op: 'subscribe', stream: 'config' }));
}, 60_000);

afterAll(async () => {
  watcher?.close();
  await serve?.stop();
  rmSync(dir, { recursive: true, force: true });
});

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a JSON reply, read field by field as each test asserts it
const jsonOf = (r: Response): Promise<any> => r.json();
const command = (name: string, body: string, headers: Record<string, string> = {}) =>
  fetch(`${consoleUrl}/api/${name}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers }, body });

describe('request targets that are not a URL path: 400, never a crash', () => {
  it.each(BAD_REQUEST_TARGETS)('console GET %s', async (target) => {
    const r = await rawRequest(consoleUrl, `GET ${target} HTTP/1.1\r\nHost: {host}\r\n\r\n`);
    expect(r.status).toBe(400);
    expect(JSON.parse(r.body).error).toMatchObject({
      code: 'invalid_input',
      message: expect.stringMatching(/^the request target .* (is not a valid URL|has a malformed percent-encoding)$/),
    });
  });

  it.each(BAD_REQUEST_TARGETS)('console WebSocket upgrade to %s', async (target) => {
    const r = await rawRequest(
      consoleUrl,
      `GET ${target} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`,
    );
    expect(r.status).toBe(400);
  });

  it.each(
    BAD_REQUEST_TARGETS.flatMap((t) => [
      ['GET', t],
      ['POST', t],
    ]),
  )('router %s %s', async (method, target) => {
    const body = method === 'POST' ? '{"messages":[{"role":"user","content":"hi"}]}' : '';
    const r = await rawRequest(
      routerUrl,
      `${method} ${target} HTTP/1.1\r\nHost: {host}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
    );
    expect(r.status).toBe(400);
    expect(JSON.parse(r.body).error).toMatchObject({ type: 'invalid_request_error', message: expect.stringMatching(/^the request target /) });
  });
});

describe('WebSocket frames that break the protocol close that connection only', () => {
  it.each(BAD_WS_FRAMES.map((f) => [f.label, f] as const))('%s', async (_label, frame) => {
    const ws = await rawWebSocket(consoleUrl, token);
    try {
      ws.send(frame.bytes());
      expect(await ws.closeCode(5000)).toBe(frame.code);
    } finally {
      ws.destroy();
    }
  });

  it('the other client stayed connected and still gets its stream', async () => {
    expect(watcher.readyState).toBe(WebSocket.OPEN);
    const next = new Promise<string>((resolve) => watcher.once('message', (d) => resolve(String(d))));
    const view = await jsonOf(await command('config.get', '{}'));
    const applied = await command(
      'config.apply',
      JSON.stringify({ draft: { ...view.config, workers: view.config.workers, health_check_interval_secs: 2 }, expectedRevision: view.revision }),
    );
    expect(applied.status).toBe(200);
    expect(JSON.parse(await next)).toMatchObject({ stream: 'config', payload: { revision: view.revision + 1 } });
  });
});

describe('bodies and configurations too big, too deep or degenerate', () => {
  it('a 100 MB command body gets a 413 JSON answer, not a reset', async () => {
    const r = await rawRequest(
      consoleUrl,
      Buffer.concat([
        Buffer.from(
          `POST /api/config.validate HTTP/1.1\r\nHost: ${new URL(consoleUrl).host}\r\nauthorization: Bearer ${token}\r\ncontent-type: application/json\r\ncontent-length: ${100 * 1024 * 1024}\r\n\r\n`,
        ),
        Buffer.alloc(1024 * 1024, 0x20),
      ]),
    );
    expect(r.status).toBe(413);
    expect(JSON.parse(r.body).error).toMatchObject({
      code: 'invalid_input',
      message: 'the command body is above 256 KiB (a configuration of the most workers allowed fits well within it)',
    });
  });

  it('a chunked body that grows past the limit gets the same 413', async () => {
    const chunk = Buffer.alloc(512 * 1024, 0x20);
    const r = await rawRequest(
      consoleUrl,
      Buffer.concat([
        Buffer.from(
          `POST /api/config.validate HTTP/1.1\r\nHost: ${new URL(consoleUrl).host}\r\nauthorization: Bearer ${token}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n${chunk.length.toString(16)}\r\n`,
        ),
        chunk,
        Buffer.from('\r\n'),
      ]),
    );
    expect(r.status).toBe(413);
  });

  it('JSON nested 100,000 deep in a worker label is a 400, not a 500 stack overflow', async () => {
    const r = await command(
      'config.validate',
      `{"draft":{"workers":[{"url":"grpc://127.0.0.1:1","labels":{"zone":${'['.repeat(100_000)}${']'.repeat(100_000)}}}]}}`,
    );
    expect(r.status).toBe(400);
    expect((await jsonOf(r)).error).toMatchObject({ code: 'invalid_input', message: 'the command body is nested deeper than 32 levels' });
  });

  it(`${MAX_WORKERS + 1} workers are refused naming the limit, and the file is not written`, async () => {
    const before = readFileSync(configFile, 'utf8');
    const view = await jsonOf(await command('config.get', '{}'));
    const workers = Array.from({ length: MAX_WORKERS + 1 }, (_, i) => ({ url: `grpc://127.0.0.1:${20000 + i}` }));
    const r = await command('config.apply', JSON.stringify({ draft: { ...view.config, workers }, expectedRevision: view.revision }));
    expect(r.status).toBe(422);
    expect((await jsonOf(r)).error.issues).toEqual([
      {
        path: 'workers',
        message: `invalid value a list of ${MAX_WORKERS + 1} entries for workers: expected at most ${MAX_WORKERS} workers (MAX_WORKERS, docs/configuration.md)`,
      },
    ]);
    expect(readFileSync(configFile, 'utf8')).toBe(before);
  });

  it('10,000 workers (as YAML or JSON) are refused by size before anything looks at them', async () => {
    const yaml = `workers:\n${Array.from({ length: 10_000 }, (_, i) => `  - url: grpc://127.0.0.1:${1 + (i % 65_000)}\n`).join('')}`;
    const r = await command('config.apply', JSON.stringify({ yaml, expectedRevision: 1 }));
    expect(r.status).toBe(413);
    const small = `workers:\n${Array.from({ length: 300 }, (_, i) => `  - url: grpc://127.0.0.1:${1 + i}\n`).join('')}`;
    const resolve = await command('config.resolve', JSON.stringify({ yaml: small }));
    expect(resolve.status).toBe(200);
    expect((await jsonOf(resolve)).issues[0].message).toBe(
      `draft.yaml:2:3: invalid value a list of 300 entries for workers: expected at most ${MAX_WORKERS} workers (MAX_WORKERS, docs/configuration.md)`,
    );
  });

  it.each([
    ['health_check_interval_secs', 1e-300, 'from 0.1 to 3600'],
    ['request_timeout_secs', 1e-300, 'from 1 to 86400'],
    ['body_timeout_secs', 1e-300, 'from 1 to 3600'],
  ])('%s: %d is refused naming the range', async (key, value, range) => {
    const view = await jsonOf(await command('config.get', '{}'));
    const r = await command('config.apply', JSON.stringify({ draft: { ...view.config, [key]: value }, expectedRevision: view.revision }));
    expect(r.status).toBe(422);
    expect((await jsonOf(r)).error.issues).toEqual([{ path: key, message: `invalid value ${value} for ${key}: expected a number of seconds ${range}` }]);
  });
});

describe('after all of it', () => {
  it('the process is alive, /health answers, and the guard caught nothing', async () => {
    const health = await fetch(`${routerUrl}/health`);
    expect(health.status).toBe(200);
    const metrics = await (await fetch(`${routerUrl}/metrics`)).text();
    expect(metrics).toContain('mmtc_uncaught_errors_total{kind="uncaught_exception"} 0');
    expect(metrics).toContain('mmtc_uncaught_errors_total{kind="unhandled_rejection"} 0');
    expect(serve.errors()).not.toMatch(/uncaught_exception|unhandled_rejection/);
  });
});

describe('a router.yaml of 10,000 workers (what the console used to persist)', () => {
  it('is refused at start with an error naming the limit, instead of wedging the start', () => {
    const other = mkdtempSync(path.join(tmpdir(), 'mmtc-attack-big-'));
    const big = path.join(other, 'router.yaml');
    writeFileSync(big, `workers:\n${Array.from({ length: 10_000 }, (_, i) => `  - url: grpc://127.0.0.1:${1 + i}\n`).join('')}`);
    try {
      const r = runMmtc(['serve', '--config', big, '--port', '0', '--console-port', '0'], { XDG_CONFIG_HOME: other, MMTC_MALLOC_HUGETLB: '0' });
      expect(r.status).toBe(2);
      expect(r.stderr).toContain(
        `${big}:1:1: the configuration is ${Math.ceil(readFileSync(big).length / 1024)} KiB, above the 32 KiB a configuration may have (MAX_CONFIG_YAML_BYTES`,
      );
      expect(r.stdout).not.toMatch(/listening/);
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  }, 70_000);
});

describe('--console-host', () => {
  it('the console stays on 127.0.0.1 when the router listens elsewhere', async () => {
    const other = mkdtempSync(path.join(tmpdir(), 'mmtc-attack-host-'));
    const s = await startMmtc(
      ['serve', '--config', path.join(other, 'router.yaml'), '--host', '127.0.0.3', '--port', '0', '--console-port', '0'],
      /^mmtc console: /,
      { XDG_CONFIG_HOME: other },
    );
    try {
      expect(s.output()).toMatch(/mmtc router listening on http:\/\/127\.0\.0\.3:\d+ /);
      const port = /^mmtc console: http:\/\/127\.0\.0\.1:(\d+)\/#token=/.exec(s.line)![1];
      expect(s.output()).not.toMatch(/warning: the console listens on/);
      // Listening on 127.0.0.1 (where it said), not on the router's address.
      expect((await rawRequest(`http://127.0.0.1:${port}`, 'GET / HTTP/1.1\r\nHost: {host}\r\n\r\n')).status).toBe(200);
      expect((await rawRequest(`http://127.0.0.3:${port}`, 'GET / HTTP/1.1\r\nHost: {host}\r\n\r\n')).error).toBe('ECONNREFUSED');
    } finally {
      await s.stop();
      rmSync(other, { recursive: true, force: true });
    }
    expect(existsSync(other)).toBe(false);
  }, 60_000);
});
