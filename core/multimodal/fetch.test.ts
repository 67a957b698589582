import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ImageInputError, loadImageBytes } from './fetch.ts';

const PNG_HEAD = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
let server: Server;
let base: string;
beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url === '/ok.png') return res.writeHead(200, { 'content-type': 'image/png' }).end(PNG_HEAD);
    if (req.url === '/page') return res.writeHead(200, { 'content-type': 'text/html' }).end('<html>');
    if (req.url === '/big') return res.writeHead(200, { 'content-type': 'image/jpeg', 'content-length': String(50 * 1024 * 1024) }).end();
    if (req.url === '/chunked-big') {
      res.writeHead(200, { 'content-type': 'image/jpeg' });
      for (let i = 0; i < 40; i++) res.write(Buffer.alloc(64 * 1024));
      return res.end();
    }
    if (req.url === '/slow') return setTimeout(() => res.writeHead(200, { 'content-type': 'image/png' }).end(PNG_HEAD), 2000);
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => {
  server.closeAllConnections();
  server.close();
});

async function failure(p: Promise<unknown>): Promise<ImageInputError> {
  const err = await p.catch((e: unknown) => e);
  expect(err).toBeInstanceOf(ImageInputError);
  return err as ImageInputError;
}

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
    expect(Buffer.from(await loadImageBytes(`${base}/ok.png`, 0)).equals(PNG_HEAD)).toBe(true);
    expect((await failure(loadImageBytes(`${base}/page`, 1))).message).toBe(`image 1: ${base}/page has content type 'text/html', expected image/*`);
    expect((await failure(loadImageBytes(`${base}/missing`, 1))).message).toBe(`image 1: download of ${base}/missing answered HTTP 404`);
    expect((await failure(loadImageBytes(`${base}/big`, 1))).status).toBe(413);
    expect((await failure(loadImageBytes(`${base}/chunked-big`, 1, { maxBytes: 1024 * 1024 }))).status).toBe(413);
    expect((await failure(loadImageBytes(`${base}/slow`, 1, { timeoutMs: 200 }))).message).toBe(`image 1: download of ${base}/slow timed out after 200 ms`);
  });

  it('local files only when allowed (the CLI)', async () => {
    expect((await failure(loadImageBytes('file:///etc/hostname', 0))).message).toBe("image 0: unsupported image URL scheme 'file:', expected data:, http: or https:");
    expect((await loadImageBytes('/etc/hostname', 0, { allowFiles: true })).byteLength).toBeGreaterThan(0);
    expect((await failure(loadImageBytes('/no/such/file.png', 3, { allowFiles: true }))).message).toBe('image 3: cannot read /no/such/file.png: no such file');
  });
});
