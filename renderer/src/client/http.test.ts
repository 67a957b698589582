// The browser binding's client against a tiny node:http server standing in for mmtc serve:
// the request it sends (POST /api/<command>, bearer token, JSON), errors rebuilt into real
// ContractErrors, and the reconnect backoff.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ContractError } from '../../../core/console/contract.ts';
import { backoffMs, createHttpClient } from './http.ts';

let server: Server;
let origin: string;
const seen: Array<{ url?: string; auth?: string; type?: string; body: string }> = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      seen.push({ url: req.url, auth: req.headers.authorization, type: req.headers['content-type'], body });
      if (req.url === '/api/config.apply') {
        res.writeHead(409, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            error: {
              code: 'conflict',
              message: 'revision 3 is not the current revision 4',
              details: {
                currentRevision: 4,
                expectedRevision: 3,
                changedMeanwhile: [{ path: 'policy', kind: 'changed', before: 'round_robin', after: 'least_load' }],
              },
            },
          }),
        );
      } else if (req.url === '/api/overview') {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ok: 1 }));
      } else {
        res.writeHead(502, { 'content-type': 'text/html' }).end('<html>bad gateway</html>');
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => new Promise<void>((r) => server.close(() => r())));

describe('HTTP console client', () => {
  it('sends POST /api/<command> with the bearer token and a JSON body', async () => {
    const client = createHttpClient({ origin, token: 'tok-123' });
    expect(await client.call('overview', {})).toEqual({ ok: 1 });
    expect(seen.at(-1)).toEqual({ url: '/api/overview', auth: 'Bearer tok-123', type: 'application/json', body: '{}' });
  });

  it('rebuilds contract errors with their code and details', async () => {
    const client = createHttpClient({ origin, token: 't' });
    const err = await client.call('config.apply', { draft: {}, expectedRevision: 3 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ContractError);
    expect(err).toMatchObject({ code: 'conflict', details: { currentRevision: 4, changedMeanwhile: [{ path: 'policy' }] } });
  });

  it('says so when the answer is not a contract error, or the backend is gone', async () => {
    const client = createHttpClient({ origin, token: 't' });
    const err = (await client.call('metrics.text', {}).catch((e: unknown) => e)) as ContractError;
    expect(err).toMatchObject({ code: 'internal' });
    expect(err.message).toContain('HTTP 502');
    const gone = createHttpClient({ origin: 'http://127.0.0.1:1', token: 't' });
    const e2 = (await gone.call('overview', {}).catch((e: unknown) => e)) as ContractError;
    expect(e2).toBeInstanceOf(ContractError);
    expect(e2.message).toContain('cannot be reached');
  });

  it('backs off from 250 ms doubling to 10 s, with jitter', () => {
    expect(backoffMs(1, () => 0.5)).toBe(250);
    expect(backoffMs(2, () => 0.5)).toBe(500);
    expect(backoffMs(3, () => 0.5)).toBe(1000);
    expect(backoffMs(20, () => 0.5)).toBe(10_000);
    expect(backoffMs(1, () => 0)).toBe(200);
    expect(backoffMs(1, () => 1)).toBe(300);
  });
});
