// The bootstrap server of an encode or prefill reference worker against what anyone who can
// reach its port sends: request targets that are not URLs (they stopped the worker) and idle
// fetches that fill its table of waiting fetches (the next prefill's fetch was refused and
// reported as "no embedding … within N ms"). Loopback only; every wait bounded.
import { EventEmitter } from 'node:events';
import http from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { startMmtc } from '../test/cli.ts';
import { BAD_REQUEST_TARGETS, rawRequest } from '../test/raw-wire.ts';
import { CallRefused, fetchBootstrapRecord, MAX_WAITERS, startBootstrapServer, type BootstrapServer } from './bootstrap.ts';

const stops: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const stop of stops.splice(0).reverse()) await stop();
});

const never = new EventEmitter();

describe('a request target that is not a URL', () => {
  it.each([
    ['tokenspeed', 'encode'],
    ['vllm', 'prefill'],
  ])(
    '%s %s worker: every such target is a 400 naming it, the process lives on and its bootstrap server still answers',
    async (runtime, role) => {
      const w = await startMmtc(['worker', '--runtime', runtime, '--port', '0', '--role', role, '--bootstrap-port', '0'], /bootstrap server on http:\/\//);
      stops.push(() => w.stop());
      const base = /bootstrap server on (http:\/\/\S+)/.exec(w.output())![1]!.replace(/\/$/, '');
      for (const target of ['//[', 'http://[', ...BAD_REQUEST_TARGETS]) {
        const r = await rawRequest(base, `GET ${target} HTTP/1.1\r\nHost: {host}\r\n\r\n`, 5000);
        expect([target, r.status]).toEqual([target, 400]);
        expect(JSON.parse(r.body).error).toMatch(/^the request target ".*" (is not a valid URL|has a malformed percent-encoding)$/);
      }
      const ok = await rawRequest(base, 'GET /embedding/17 HTTP/1.1\r\nHost: {host}\r\n\r\n', 5000);
      expect([ok.status, JSON.parse(ok.body)]).toEqual([404, { error: `no embedding for room 17` }]);
      expect(w.errors()).not.toMatch(/uncaught_exception|TypeError/);
      expect(await w.stop()).toBe(0);
    },
    60_000,
  );
});

/** `n` fetches that wait for rooms no one will fill, each on its own connection, all sent; stopped with the test. */
async function idleFetches(server: BootstrapServer, n: number, firstRoom: number): Promise<Array<Promise<{ status: number; body: string }>>> {
  const sent: Array<Promise<void>> = [];
  const answers = Array.from(
    { length: n },
    (_, i) =>
      new Promise<{ status: number; body: string }>((resolve) => {
        const req = http.get({ host: '127.0.0.1', port: server.port, path: `/embedding/${firstRoom + i}?wait_ms=60000`, agent: false }, (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (d: string) => (body += d));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        });
        sent.push(new Promise((done) => req.on('finish', () => done())));
        req.on('error', () => resolve({ status: 0, body: '' }));
        stops.push(async () => req.destroy());
      }),
  );
  await Promise.all(sent);
  // Sent: the server has read them once it has had a moment.
  await new Promise((r) => setTimeout(r, 300));
  return answers;
}

async function bootstrap(): Promise<BootstrapServer> {
  const server = await startBootstrapServer('127.0.0.1', 0);
  stops.push(() => server.close());
  return server;
}

describe(`the table of waiting fetches, full of ${MAX_WAITERS} idle ones`, () => {
  it("a prefill's fetch for a room whose Encode call has arrived is not shut out: the oldest idle fetch gives way (503, displaced), and the record arrives", async () => {
    const server = await bootstrap();
    const idle = await idleFetches(server, MAX_WAITERS, 100_000);
    server.expect('embedding', '42');
    const fetched = fetchBootstrapRecord<{ room: string }>('item 0', '127.0.0.1', server.port, 'embedding', '42', 5000, never);
    await new Promise((r) => setTimeout(r, 100));
    server.put('embedding', '42', { room: '42' });
    expect(await fetched).toEqual({ room: '42' });
    const displaced = await idle[0]!;
    expect(displaced.status).toBe(503);
    expect(JSON.parse(displaced.body).error).toBe(
      `displaced: ${MAX_WAITERS} fetches are waiting (at most ${MAX_WAITERS}) and this one's room is not expected; fetch again`,
    );
  }, 30_000);

  it('a fetch that comes before its room is expected asks again when displaced, and gets its record', async () => {
    const server = await bootstrap();
    const fetched = fetchBootstrapRecord<{ room: string }>('item 0', '127.0.0.1', server.port, 'embedding', '7', 10_000, never);
    await new Promise((r) => setTimeout(r, 100));
    void (await idleFetches(server, MAX_WAITERS + 5, 200_000)); // newer idle fetches push it out (their answers do not matter here)
    server.expect('embedding', '7');
    server.put('embedding', '7', { room: '7' });
    expect(await fetched).toEqual({ room: '7' });
  }, 30_000);

  it('a table full of fetches for expected rooms refuses a newcomer, and the error says so: RESOURCE_EXHAUSTED, not "no embedding within N ms"', async () => {
    const server = await bootstrap();
    for (let room = 300_000; room < 300_000 + MAX_WAITERS; room++) server.expect('embedding', String(room));
    void (await idleFetches(server, MAX_WAITERS, 300_000)); // their answers do not matter here
    server.expect('embedding', '99');
    const err = (await fetchBootstrapRecord('item 0', '127.0.0.1', server.port, 'embedding', '99', 400, never).catch((e: unknown) => e)) as CallRefused;
    expect(err).toBeInstanceOf(CallRefused);
    expect(err.message).toMatch(
      new RegExp(
        `^item 0: the bootstrap server 127\\.0\\.0\\.1:${server.port} refused the fetch of room 99 \\(503, \\d+ times in \\d+ ms\\): ${MAX_WAITERS} fetches are waiting already, each for a room whose record is coming \\(at most ${MAX_WAITERS}\\)$`,
      ),
    );
    expect(err.code).toBe(8); // RESOURCE_EXHAUSTED
    expect(err.message).not.toMatch(/within/);
  }, 30_000);

  it('a record that never comes is still a timeout, in those words', async () => {
    const server = await bootstrap();
    const err = (await fetchBootstrapRecord('item 0', '127.0.0.1', server.port, 'embedding', '5', 200, never).catch((e: unknown) => e)) as CallRefused;
    expect([err.code, err.message]).toEqual([4, `item 0: no embedding from 127.0.0.1:${server.port} room 5 within 200 ms`]);
  });
});
