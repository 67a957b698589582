// Every server here listens on loopback, and every name is resolved by an injected
// resolver, so no test sends a packet (DNS included) to a non-loopback address. Tests
// that need a "public" host divert the already checked connection to loopback inside
// the injected request function, after recording which address the fetcher pinned.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, request as httpRequest, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer, request as httpsRequest } from 'node:https';
import type { AddressInfo, LookupFunction } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { ImageInputError, loadImageBytes, type HttpRequestFn } from './fetch.ts';
import { createMediaPolicy, type ResolvedAddress } from './media-policy.ts';

const PNG_HEAD = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
const HINT = '(set allow_private_media_hosts to fetch from private hosts)';

interface Listener {
  server: Server;
  port: number;
  connections: number;
  hosts: string[];
}

async function listen(handler: RequestListener, host = '127.0.0.1', make: (h: RequestListener) => Server = (h) => createServer(h)): Promise<Listener> {
  const l: Listener = { server: make((req, res) => (l.hosts.push(req.headers.host ?? ''), handler(req, res))), port: 0, connections: 0, hosts: [] };
  l.server.on('connection', () => l.connections++);
  await new Promise<void>((resolve, reject) => {
    l.server.once('error', reject);
    l.server.listen(0, host, resolve);
  });
  l.port = (l.server.address() as AddressInfo).port;
  return l;
}

function close(l: Listener | undefined): void {
  if (!l) return;
  l.server.closeAllConnections();
  l.server.close();
}

const servePng = (_req: IncomingMessage, res: ServerResponse) => res.writeHead(200, { 'content-type': 'image/png' }).end(PNG_HEAD);

let main: Listener; // the image server the tests are allowed to reach
let target: Listener; // a server that must never be reached: any connection to it is a bug
let v6: Listener | undefined; // on ::1, when the host has IPv6 loopback
let base: string;
const timers = new Set<NodeJS.Timeout>();

beforeAll(async () => {
  target = await listen(servePng);
  main = await listen((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname === '/ok.png') return servePng(req, res);
    if (url.pathname === '/page') return res.writeHead(200, { 'content-type': 'text/html' }).end('<html>');
    if (url.pathname === '/big') return res.writeHead(200, { 'content-type': 'image/jpeg', 'content-length': String(50 * 1024 * 1024) }).end();
    if (url.pathname === '/chunked-big') {
      res.writeHead(200, { 'content-type': 'image/jpeg' });
      for (let i = 0; i < 40; i++) res.write(Buffer.alloc(64 * 1024));
      return res.end();
    }
    if (url.pathname === '/slow') {
      const t = setTimeout(() => res.writeHead(200, { 'content-type': 'image/png' }).end(PNG_HEAD), 2000);
      return timers.add(t);
    }
    if (url.pathname === '/trickle') {
      // Headers at once, then one byte every 50 ms: each read is quick, the whole is not.
      res.writeHead(200, { 'content-type': 'image/png', 'content-length': '200' });
      let sent = 0;
      const t = setInterval(() => (++sent >= 200 ? (clearInterval(t), res.end(Buffer.from([0]))) : res.write(Buffer.from([0]))), 50);
      res.once('close', () => clearInterval(t));
      return timers.add(t);
    }
    if (url.pathname === '/reset') {
      res.writeHead(200, { 'content-type': 'image/png', 'content-length': '1000' });
      res.write(Buffer.alloc(10));
      return setTimeout(() => req.socket.destroy(), 20);
    }
    if (url.pathname === '/empty') return res.writeHead(200, { 'content-type': 'image/png' }).end();
    const hop = /^\/r\/(\d+)$/.exec(url.pathname);
    if (hop) return res.writeHead(302, { location: Number(hop[1]) > 1 ? `/r/${Number(hop[1]) - 1}` : '/ok.png' }).end();
    if (url.pathname === '/to') return res.writeHead(302, { location: url.searchParams.get('u') ?? '/' }).end();
    if (url.pathname === '/secret') return res.writeHead(404, { 'x-internal': 'db-admin' }).end('internal service');
    res.writeHead(404).end();
  });
  base = `http://127.0.0.1:${main.port}`;
  // A machine without IPv6 on loopback: the opt-in IPv6 cases skip themselves (v6 undefined).
  v6 = await listen(servePng, '::1').catch(() => undefined);
});

afterAll(() => {
  for (const t of timers) clearTimeout(t); // clears intervals too
  close(main);
  close(target);
  close(v6);
});

beforeEach(() => {
  for (const l of [main, target, v6]) {
    if (!l) continue;
    l.connections = 0;
    l.hosts.length = 0;
  }
});

async function failure(p: Promise<unknown>): Promise<ImageInputError> {
  const err = await p.catch((e: unknown) => e);
  expect(err).toBeInstanceOf(ImageInputError);
  return err as ImageInputError;
}

function resolverOf(table: Record<string, string[]>) {
  return vi.fn(async (host: string): Promise<ResolvedAddress[]> => {
    const found = table[host];
    if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return found.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  });
}

/** Passes through to node:http, counting calls: a request that is never opened is never connected. */
function countingRequest() {
  return vi.fn<HttpRequestFn>((options) => httpRequest(options));
}

/** What the fetcher's pinned lookup hands the socket layer for this request. */
function pinnedAddresses(options: Parameters<HttpRequestFn>[0]): string[] {
  const out: string[] = [];
  (options.lookup as LookupFunction)(String(options.hostname), { all: true }, (_err, addresses) => {
    out.push(...(addresses as { address: string }[]).map((a) => a.address));
  });
  return out;
}

const toLoopback: LookupFunction = (_host, opts, cb) => {
  if (opts.all) (cb as (e: null, a: { address: string; family: number }[]) => void)(null, [{ address: '127.0.0.1', family: 4 }]);
  else cb(null, '127.0.0.1', 4);
};

/** Records the pinned (public) address, then connects to loopback instead so no traffic leaves the host. */
function divertedRequest(pinned: string[][]) {
  return vi.fn<HttpRequestFn>((options) => {
    pinned.push(pinnedAddresses(options));
    return httpRequest({ ...options, lookup: toLoopback });
  });
}

const optIn = createMediaPolicy({ allowPrivateHosts: true });

describe('image sources', () => {
  it('decodes a base64 data: URL', async () => {
    const bytes = await loadImageBytes(`data:image/png;base64,${PNG_HEAD.toString('base64')}`, 0);
    expect(Buffer.from(bytes).equals(PNG_HEAD)).toBe(true);
  });

  it.each([
    ['data:text/plain;base64,aGk=', "image 2: data: URL has content type 'text/plain', expected image/*"],
    ['data:image/png,rawbytes', 'image 2: data: URL must be base64-encoded (data:image/png;base64,…)'],
    ['data:image/png;base64,@@@@', 'image 2: data: URL payload is not valid base64'],
    ['data:image/png;base64', 'image 2: malformed data: URL (no comma)'],
    ['ftp://example.org/x.png', "image 2: unsupported image URL scheme 'ftp:', expected data:, http: or https:"],
    ['/etc/passwd', 'image 2: image_url.url must be a data: or http(s) URL'],
    ['http://', 'image 2: http:// is not a valid URL'],
    ['http://user:pw@example.org/x.png', 'image 2: http://user:pw@example.org/x.png is refused: URLs with user:password@ credentials are not fetched'],
  ])('%s is refused with a message naming the image', async (url, message) => {
    const err = await failure(loadImageBytes(url, 2));
    expect(err.message).toBe(message);
    expect(err.status).toBe(400);
  });

  it('an oversized data: URL is 413', async () => {
    const err = await failure(loadImageBytes(`data:image/png;base64,${Buffer.alloc(3000).toString('base64')}`, 0, { maxBytes: 1000 }));
    expect(err.status).toBe(413);
  });

  it('downloads http(s) images with a content-type check, a size cap and a timeout', async () => {
    const policy = optIn; // the test server is on loopback
    expect(Buffer.from(await loadImageBytes(`${base}/ok.png`, 0, { policy })).equals(PNG_HEAD)).toBe(true);
    expect((await failure(loadImageBytes(`${base}/page`, 1, { policy }))).message).toBe(`image 1: ${base}/page has content type 'text/html', expected image/*`);
    expect((await failure(loadImageBytes(`${base}/missing`, 1, { policy }))).message).toBe(`image 1: download of ${base}/missing answered HTTP 404`);
    expect((await failure(loadImageBytes(`${base}/big`, 1, { policy }))).status).toBe(413);
    expect((await failure(loadImageBytes(`${base}/chunked-big`, 1, { policy, maxBytes: 1024 * 1024 }))).status).toBe(413);
    expect((await failure(loadImageBytes(`${base}/slow`, 1, { policy, timeoutMs: 200 }))).message).toBe(
      `image 1: download of ${base}/slow timed out after 200 ms`,
    );
    expect((await failure(loadImageBytes(`${base}/empty`, 1, { policy }))).message).toBe(`image 1: ${base}/empty returned an empty body`);
  });

  it('local files only when allowed (the CLI)', async () => {
    expect((await failure(loadImageBytes('file:///etc/hostname', 0))).message).toBe(
      "image 0: unsupported image URL scheme 'file:', expected data:, http: or https:",
    );
    expect((await loadImageBytes('/etc/hostname', 0, { allowFiles: true })).byteLength).toBeGreaterThan(0);
    expect((await failure(loadImageBytes('/no/such/file.png', 3, { allowFiles: true }))).message).toBe('image 3: cannot read /no/such/file.png: no such file');
  });
});

describe('address policy for http(s) images', () => {
  it('by default the loopback server is refused and never connected to', async () => {
    const err = await failure(loadImageBytes(`${base}/secret`, 0));
    expect(err.message).toBe(`image 0: ${base}/secret is refused: 127.0.0.1 is a loopback address ${HINT}`);
    expect(err.status).toBe(400);
    expect(main.connections).toBe(0);
  });

  // The WHATWG parser rewrites all of these to the canonical address before the policy
  // sees them; the test pins that down end to end, connection count included.
  it.each([
    ['127.1', '127.0.0.1 is a loopback address'],
    ['2130706433', '127.0.0.1 is a loopback address'],
    ['0x7f.0.0.1', '127.0.0.1 is a loopback address'],
    ['0177.0.0.1', '127.0.0.1 is a loopback address'],
    ['0x7f000001', '127.0.0.1 is a loopback address'],
    ['127.0.0.1.', '127.0.0.1 is a loopback address'],
    ['%31%32%37.0.0.1', '127.0.0.1 is a loopback address'],
    ['[::ffff:127.0.0.1]', '::ffff:7f00:1 is the IPv4-mapped form of 127.0.0.1, a loopback address'],
    ['[::ffff:7f00:1]', '::ffff:7f00:1 is the IPv4-mapped form of 127.0.0.1, a loopback address'],
    ['[::127.0.0.1]', '::7f00:1 is the IPv4-compatible form of 127.0.0.1, a loopback address'],
    ['[64:ff9b::127.0.0.1]', '64:ff9b::7f00:1 is the NAT64 form of 127.0.0.1, a loopback address'],
    ['localhost', 'localhost is a loopback host name'],
    ['localhost.', 'localhost. is a loopback host name'],
    ['img.localhost', 'img.localhost is a loopback host name'],
    ['LocalHost', 'localhost is a loopback host name'],
  ])('literal spelling %s is refused with no connection', async (host, reason) => {
    const url = `http://${host}:${main.port}/ok.png`;
    const resolve = resolverOf({});
    const err = await failure(loadImageBytes(url, 0, { policy: createMediaPolicy({ resolve }) }));
    expect(err.message).toBe(`image 0: ${url} is refused: ${reason} ${HINT}`);
    expect(resolve).not.toHaveBeenCalled();
    expect(main.connections).toBe(0);
  });

  it.each(['[::1]', '[0:0:0:0:0:0:0:1]', '[0::1]', '[::0:1]'])('IPv6 loopback %s is refused with no connection', async (host) => {
    const url = `http://${host}:${v6?.port ?? 9}/ok.png`;
    const err = await failure(loadImageBytes(url, 0));
    expect(err.message).toBe(`image 0: ${url} is refused: ::1 is a loopback address ${HINT}`);
    expect(v6?.connections ?? 0).toBe(0);
  });

  it.each(['127.1', '2130706433', '0x7f.0.0.1', '0177.0.0.1', '[::ffff:127.0.0.1]', '[::ffff:7f00:1]'])(
    'with the opt-in, spelling %s reaches the loopback server',
    async (host) => {
      const bytes = await loadImageBytes(`http://${host}:${main.port}/ok.png`, 0, { policy: optIn });
      expect(Buffer.from(bytes).equals(PNG_HEAD)).toBe(true);
      expect(main.connections).toBe(1);
    },
  );

  it.for(['[::1]', '[0:0:0:0:0:0:0:1]'])('with the opt-in, IPv6 spelling %s reaches the ::1 server', async (host, ctx) => {
    if (!v6) return ctx.skip();
    const bytes = await loadImageBytes(`http://${host}:${v6.port}/ok.png`, 0, { policy: optIn });
    expect(Buffer.from(bytes).equals(PNG_HEAD)).toBe(true);
    expect(v6.connections).toBe(1);
  });

  it('with the opt-in, localhost names are resolved like any other name', async () => {
    const resolve = resolverOf({ localhost: ['127.0.0.1'], 'img.localhost': ['127.0.0.1'] });
    const policy = createMediaPolicy({ resolve, allowPrivateHosts: true });
    expect((await loadImageBytes(`http://localhost:${main.port}/ok.png`, 0, { policy })).byteLength).toBe(PNG_HEAD.byteLength);
    expect((await loadImageBytes(`http://img.localhost:${main.port}/ok.png`, 0, { policy })).byteLength).toBe(PNG_HEAD.byteLength);
    expect(resolve.mock.calls.map((c) => c[0])).toEqual(['localhost', 'img.localhost']);
  });

  it('a name resolving to loopback is refused without the opt-in and the server sees no connection', async () => {
    const resolve = resolverOf({ 'img.test': ['127.0.0.1'] });
    const url = `http://img.test:${main.port}/ok.png`;
    const err = await failure(loadImageBytes(url, 0, { policy: createMediaPolicy({ resolve }) }));
    expect(err.message).toBe(`image 0: ${url} is refused: img.test resolves to a loopback address ${HINT}`);
    expect(resolve).toHaveBeenCalledTimes(1);
    expect(main.connections).toBe(0);
  });

  it.each([
    ['10.0.0.1', `img.test resolves to a private address ${HINT}`],
    ['169.254.169.254', 'img.test resolves to a cloud metadata address, which is never fetched'],
    ['169.254.10.10', `img.test resolves to a link-local address ${HINT}`],
    ['100.64.0.1', `img.test resolves to a shared (CGNAT) address ${HINT}`],
    ['fd00::1', `img.test resolves to a private address ${HINT}`],
    ['fe80::1', `img.test resolves to a link-local address ${HINT}`],
    ['::ffff:10.0.0.1', `img.test resolves to a private address (IPv4-mapped) ${HINT}`],
    ['64:ff9b::a9fe:a9fe', 'img.test resolves to a cloud metadata address (NAT64), which is never fetched'],
    ['198.18.0.1', `img.test resolves to a benchmarking address ${HINT}`],
    ['224.0.0.251', 'img.test resolves to a multicast address, which is never fetched'],
  ])('a name resolving to %s is refused and no request is opened', async (address, reason) => {
    const request = countingRequest();
    const resolve = resolverOf({ 'img.test': [address] });
    const err = await failure(loadImageBytes('http://img.test/x.png', 4, { policy: createMediaPolicy({ resolve }), request }));
    expect(err.message).toBe(`image 4: http://img.test/x.png is refused: ${reason}`);
    expect(request).not.toHaveBeenCalled();
    expect(resolve).toHaveBeenCalledTimes(1);
  });

  it('one refused address among the answers refuses the host', async () => {
    const request = countingRequest();
    const policy = createMediaPolicy({ resolve: resolverOf({ 'img.test': ['93.184.215.14', '10.0.0.1'] }) });
    expect((await failure(loadImageBytes('http://img.test/x.png', 0, { policy, request }))).message).toBe(
      `image 0: http://img.test/x.png is refused: img.test resolves to a private address ${HINT}`,
    );
    const withOptIn = createMediaPolicy({ allowPrivateHosts: true, resolve: resolverOf({ 'img.test': ['127.0.0.1', '169.254.169.254'] }) });
    expect((await failure(loadImageBytes(`http://img.test:${main.port}/ok.png`, 0, { policy: withOptIn, request }))).message).toContain(
      'is refused: img.test resolves to a cloud metadata address',
    );
    expect(request).not.toHaveBeenCalled();
    expect(main.connections).toBe(0);
  });

  it('connects to the checked address with one resolution and keeps the Host header', async () => {
    const request = countingRequest();
    const resolve = resolverOf({ 'img.test': ['127.0.0.1'] });
    // img.test exists in no DNS, so the download succeeding proves no second lookup happened.
    const bytes = await loadImageBytes(`http://img.test:${main.port}/ok.png`, 0, { policy: createMediaPolicy({ resolve, allowPrivateHosts: true }), request });
    expect(Buffer.from(bytes).equals(PNG_HEAD)).toBe(true);
    expect(resolve).toHaveBeenCalledTimes(1);
    expect(request).toHaveBeenCalledTimes(1);
    expect(pinnedAddresses(request.mock.calls[0]![0])).toEqual(['127.0.0.1']);
    expect(main.hosts).toEqual([`img.test:${main.port}`]);
  });

  it('the default policy fetches from a public address (connection diverted to loopback by the test)', async () => {
    const pinned: string[][] = [];
    const request = divertedRequest(pinned);
    const policy = createMediaPolicy({ resolve: resolverOf({ 'public.test': ['93.184.215.14'] }) });
    const bytes = await loadImageBytes(`http://public.test:${main.port}/ok.png`, 0, { policy, request });
    expect(Buffer.from(bytes).equals(PNG_HEAD)).toBe(true);
    expect(pinned).toEqual([['93.184.215.14']]);
  });
});

describe('redirects', () => {
  it('follows a chain within maxRedirects, checking each hop', async () => {
    const request = countingRequest();
    const resolve = resolverOf({ 'img.test': ['127.0.0.1'] });
    const policy = createMediaPolicy({ resolve, allowPrivateHosts: true });
    const bytes = await loadImageBytes(`http://img.test:${main.port}/r/3`, 0, { policy, request });
    expect(Buffer.from(bytes).equals(PNG_HEAD)).toBe(true);
    expect(request).toHaveBeenCalledTimes(4);
    expect(resolve).toHaveBeenCalledTimes(4); // once per hop, never twice for one hop
    expect(main.connections).toBe(4);
  });

  it('refuses a chain beyond maxRedirects without opening the next hop', async () => {
    const url = `${base}/r/4`;
    expect((await failure(loadImageBytes(url, 0, { policy: optIn }))).message).toBe(
      `image 0: ${url} redirects more than 3 times; at most 3 redirects are followed`,
    );
    expect(main.connections).toBe(4);
    const none = createMediaPolicy({ allowPrivateHosts: true, maxRedirects: 0 });
    expect((await failure(loadImageBytes(`${base}/r/1`, 0, { policy: none }))).message).toBe(
      `image 0: ${base}/r/1 redirects more than 0 times; at most 0 redirects are followed`,
    );
  });

  it('a redirect to an address even the opt-in refuses is not followed, and its server sees nothing', async () => {
    // On Linux a connect to 0.0.0.0 lands on loopback, so a missing check would show up on `target`.
    const hop = `http://0.0.0.0:${target.port}/ok.png`;
    const url = `${base}/to?u=${encodeURIComponent(hop)}`;
    const err = await failure(loadImageBytes(url, 0, { policy: optIn }));
    expect(err.message).toBe(`image 0: ${url} redirects to ${hop}, which is refused: 0.0.0.0 is an unspecified address, which is never fetched`);
    expect(target.connections).toBe(0);
  });

  it('a redirect to the metadata address is refused before any connection to it', async () => {
    const request = countingRequest();
    const policy = createMediaPolicy({ allowPrivateHosts: true, resolve: resolverOf({ 'img.test': ['127.0.0.1'], 'meta.test': ['169.254.169.254'] }) });
    for (const [hop, shown, reason] of [
      ['http://169.254.169.254/latest/meta-data/', 'http://169.254.169.254/latest/meta-data/', '169.254.169.254 is a cloud metadata address'],
      ['http://meta.test/latest/meta-data/', 'http://meta.test/latest/meta-data/', 'meta.test resolves to a cloud metadata address'],
      [
        'http://[::ffff:169.254.169.254]/',
        'http://[::ffff:a9fe:a9fe]/',
        '::ffff:a9fe:a9fe is the IPv4-mapped form of 169.254.169.254, a cloud metadata address',
      ],
    ]) {
      request.mockClear();
      const url = `http://img.test:${main.port}/to?u=${encodeURIComponent(hop!)}`;
      const err = await failure(loadImageBytes(url, 0, { policy, request }));
      expect(err.message).toBe(`image 0: ${url} redirects to ${shown}, which is refused: ${reason}, which is never fetched`);
      expect(request).toHaveBeenCalledTimes(1); // the first hop only
    }
  });

  it('with the default policy, a public host redirecting inwards is refused with no connection inward', async () => {
    const resolve = resolverOf({ 'public.test': ['93.184.215.14'] });
    const policy = createMediaPolicy({ resolve });
    for (const [hop, reason] of [
      [`http://127.0.0.1:${target.port}/ok.png`, `127.0.0.1 is a loopback address ${HINT}`],
      [`http://127.0.0.1:22/`, `127.0.0.1 is a loopback address ${HINT}`],
      ['http://169.254.169.254/latest/meta-data/', '169.254.169.254 is a cloud metadata address, which is never fetched'],
      [`http://localhost:${target.port}/ok.png`, `localhost is a loopback host name ${HINT}`],
      ['http://10.0.0.1/x.png', `10.0.0.1 is a private address ${HINT}`],
      ['file:///etc/passwd', "its scheme is 'file:', only http: and https: are fetched"],
    ] as const) {
      const pinned: string[][] = [];
      const request = divertedRequest(pinned);
      const url = `http://public.test:${main.port}/to?u=${encodeURIComponent(hop)}`;
      const err = await failure(loadImageBytes(url, 0, { policy, request }));
      expect(err.message).toBe(`image 0: ${url} redirects to ${hop}, which is refused: ${reason}`);
      expect(pinned).toEqual([['93.184.215.14']]); // only the public first hop was opened
    }
    expect(target.connections).toBe(0);
  });

  it('a redirect off the allowlist is refused and its server sees no connection', async () => {
    const resolve = resolverOf({ 'img.test': ['127.0.0.1'] });
    const policy = createMediaPolicy({ resolve, allowPrivateHosts: true, allowedMediaDomains: ['img.test'] });
    const hop = `http://127.0.0.1:${target.port}/ok.png`;
    const url = `http://img.test:${main.port}/to?u=${encodeURIComponent(hop)}`;
    expect((await failure(loadImageBytes(url, 0, { policy }))).message).toBe(
      `image 0: ${url} redirects to ${hop}, which is refused: 127.0.0.1 is not in allowed_media_domains (img.test)`,
    );
    expect(target.connections).toBe(0);
    expect(main.connections).toBe(1);
  });
});

describe('allowed_media_domains', () => {
  it('only listed names are fetched, matched case-insensitively without a trailing dot', async () => {
    const resolve = resolverOf({ 'img.test': ['127.0.0.1'], 'IMG.TEST.': ['127.0.0.1'], 'img.test.': ['127.0.0.1'], 'other.test': ['127.0.0.1'] });
    const policy = createMediaPolicy({ resolve, allowPrivateHosts: true, allowedMediaDomains: ['Img.Test.'] });
    expect((await loadImageBytes(`http://img.test:${main.port}/ok.png`, 0, { policy })).byteLength).toBe(PNG_HEAD.byteLength);
    expect((await loadImageBytes(`http://IMG.TEST.:${main.port}/ok.png`, 0, { policy })).byteLength).toBe(PNG_HEAD.byteLength);
    expect(main.connections).toBe(2);
    for (const host of ['other.test', '127.0.0.1', 'sub.img.test']) {
      const url = `http://${host}:${main.port}/ok.png`;
      expect((await failure(loadImageBytes(url, 1, { policy }))).message).toBe(
        `image 1: ${url} is refused: ${host} is not in allowed_media_domains (img.test)`,
      );
    }
    expect(resolve.mock.calls.map((c) => c[0])).toEqual(['img.test', 'img.test.']); // refused names are not even resolved
    expect(main.connections).toBe(2);
  });

  it('a listed name still has to resolve to an allowed address', async () => {
    const policy = createMediaPolicy({ resolve: resolverOf({ 'img.test': ['127.0.0.1'] }), allowedMediaDomains: ['img.test'] });
    const url = `http://img.test:${main.port}/ok.png`;
    expect((await failure(loadImageBytes(url, 0, { policy }))).message).toBe(`image 0: ${url} is refused: img.test resolves to a loopback address ${HINT}`);
    expect(main.connections).toBe(0);
  });
});

describe('failures reveal nothing about the target', () => {
  it('a closed port is "the connection failed", with no errno, address or port detail', async () => {
    const closed = await listen(servePng);
    close(closed);
    const url = `http://127.0.0.1:${closed.port}/x.png`;
    expect((await failure(loadImageBytes(url, 0, { policy: optIn }))).message).toBe(`image 0: cannot download ${url}: the connection failed`);
    const hop = `http://127.0.0.1:${closed.port}/y.png`;
    const via = `${base}/to?u=${encodeURIComponent(hop)}`;
    expect((await failure(loadImageBytes(via, 0, { policy: optIn }))).message).toBe(
      `image 0: cannot download ${via}: its redirect to ${hop}: the connection failed`,
    );
  });

  it('an unknown name is "host not found", whatever the resolver said', async () => {
    const policy = createMediaPolicy({ resolve: async () => Promise.reject(new Error('queryA ETIMEOUT 10.0.0.53')) });
    expect((await failure(loadImageBytes('http://nowhere.test/x.png', 0, { policy }))).message).toBe(
      'image 0: cannot download http://nowhere.test/x.png: host not found',
    );
  });

  it('a body cut short is reported without the socket error', async () => {
    const url = `${base}/reset`;
    expect((await failure(loadImageBytes(url, 0, { policy: optIn }))).message).toBe(
      `image 0: cannot download ${url}: the connection failed before the image was complete`,
    );
  });
});

describe('the timeout covers the whole download', () => {
  it('a body trickling in slowly hits the timeout', async () => {
    const url = `${base}/trickle`;
    const started = Date.now();
    const err = await failure(loadImageBytes(url, 0, { policy: optIn, timeoutMs: 300 }));
    expect(err.message).toBe(`image 0: download of ${url} timed out after 300 ms`);
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('a resolver that never answers hits the timeout', async () => {
    const policy = createMediaPolicy({ resolve: () => new Promise(() => {}) });
    expect((await failure(loadImageBytes('http://stuck.test/x.png', 0, { policy, timeoutMs: 100 }))).message).toBe(
      'image 0: download of http://stuck.test/x.png timed out after 100 ms',
    );
  });

  it('redirect hops share one deadline', async () => {
    const url = `${base}/to?u=${encodeURIComponent('/slow')}`;
    expect((await failure(loadImageBytes(url, 0, { policy: optIn, timeoutMs: 300 }))).message).toBe(`image 0: download of ${url} timed out after 300 ms`);
  });
});

describe('https', () => {
  let dir: string | undefined;
  let tls: Listener | undefined;
  let ca: Buffer | undefined;
  const servernames: (string | false | undefined)[] = [];

  beforeAll(async () => {
    try {
      dir = mkdtempSync(join(tmpdir(), 'fetch-tls-'));
      const [key, cert] = [join(dir, 'key.pem'), join(dir, 'cert.pem')];
      execFileSync(
        'openssl',
        [
          'req',
          '-x509',
          '-newkey',
          'ec',
          '-pkeyopt',
          'ec_paramgen_curve:prime256v1',
          '-nodes',
          '-keyout',
          key,
          '-out',
          cert,
          '-days',
          '1',
          '-subj',
          '/CN=img.test',
          '-addext',
          'subjectAltName=DNS:img.test',
        ],
        { stdio: 'ignore' },
      );
      ca = readFileSync(cert);
      const options = { key: readFileSync(key), cert: ca };
      tls = await listen(
        (req, res) => {
          servernames.push((req.socket as TLSSocket & { servername?: string | false }).servername); // set by Node, missing from @types/node 20
          servePng(req, res);
        },
        '127.0.0.1',
        (h) => createHttpsServer(options, h),
      );
    } catch {
      tls = undefined; // no openssl: the https tests skip
    }
  });
  afterAll(() => {
    close(tls);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const policy = createMediaPolicy({ allowPrivateHosts: true, resolve: resolverOf({ 'img.test': ['127.0.0.1'], 'other.test': ['127.0.0.1'] }) });
  const trusting = vi.fn<HttpRequestFn>((options) => httpsRequest({ ...options, ca }));

  it('verifies the certificate and sends SNI for the name in the URL, not the pinned address', async (ctx) => {
    if (!tls) return ctx.skip();
    const bytes = await loadImageBytes(`https://img.test:${tls.port}/ok.png`, 0, { policy, request: trusting });
    expect(Buffer.from(bytes).equals(PNG_HEAD)).toBe(true);
    expect(servernames).toEqual(['img.test']);
    expect(tls.hosts).toEqual([`img.test:${tls.port}`]);
    expect(pinnedAddresses(trusting.mock.calls[0]![0])).toEqual(['127.0.0.1']);
  });

  it('a certificate that does not match, or is not trusted, fails as a TLS failure', async (ctx) => {
    if (!tls) return ctx.skip();
    const wrongName = `https://other.test:${tls.port}/ok.png`;
    expect((await failure(loadImageBytes(wrongName, 0, { policy, request: trusting }))).message).toBe(
      `image 0: cannot download ${wrongName}: the TLS handshake failed`,
    );
    const untrusted = `https://img.test:${tls.port}/ok.png`;
    expect((await failure(loadImageBytes(untrusted, 0, { policy }))).message).toBe(`image 0: cannot download ${untrusted}: the TLS handshake failed`);
  });
});
