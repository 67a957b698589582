// The app scheme: what it registers before ready, and what its handler answers for real files
// in a temporary renderer build (a secret next to the build stands for the rest of the disk).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';

const electron = vi.hoisted(() => ({ registered: [] as unknown[], handled: new Map<string, unknown>() }));
vi.mock('electron', () => ({
  protocol: {
    registerSchemesAsPrivileged: (schemes: unknown[]) => electron.registered.push(...schemes),
    handle: (scheme: string, handler: unknown) => electron.handled.set(scheme, handler),
  },
}));

import {
  APP_ENTRY_URL,
  APP_ORIGIN,
  APP_SCHEME,
  RENDERER_MISSING_MESSAGE,
  createRendererHandler,
  handleAppProtocol,
  registerAppScheme,
  resolveRendererPath,
} from './protocol.ts';
import { CONTENT_SECURITY_POLICY, SECURITY_HEADERS } from './security.ts';

let dir: string;
let root: string;
let handler: (request: Request) => Promise<Response>;
const log = vi.fn();

beforeAll(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'mmtc-protocol-'));
  root = path.join(dir, 'renderer');
  mkdirSync(path.join(root, 'assets'), { recursive: true });
  writeFileSync(path.join(root, 'index.html'), '<!doctype html><title>console</title><script type="module" src="/assets/app.js"></script>');
  writeFileSync(path.join(root, 'assets', 'app.js'), 'export {};');
  writeFileSync(path.join(root, 'assets', 'app.css'), 'body{}');
  writeFileSync(path.join(root, 'assets', 'data.v1'), 'opaque');
  writeFileSync(path.join(dir, 'secret.txt'), 'SECRET');
  handler = createRendererHandler({ root, log });
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const get = (url: string, method = 'GET') => handler(new Request(url, { method }));

function expectSecurityHeaders(response: Response) {
  expect(response.headers.get('content-security-policy')).toBe(CONTENT_SECURITY_POLICY);
  for (const [name, value] of Object.entries(SECURITY_HEADERS)) expect(response.headers.get(name), name).toBe(value);
}

describe('the app scheme', () => {
  it('is registered privileged as standard and secure, with no CSP bypass', () => {
    registerAppScheme();
    expect(electron.registered).toEqual([{ scheme: APP_SCHEME, privileges: { standard: true, secure: true, supportFetchAPI: true, codeCache: true } }]);
    expect(APP_ORIGIN).toBe('mmtc-app://console');
    expect(APP_ENTRY_URL).toBe('mmtc-app://console/index.html');
  });

  it('is handled by the renderer handler', () => {
    handleAppProtocol({ root });
    expect(electron.handled.get(APP_SCHEME)).toBeTypeOf('function');
  });
});

describe('the renderer handler', () => {
  it('serves files from the build with their type and the security headers', async () => {
    const page = await get(APP_ENTRY_URL);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(await page.text()).toContain('<title>console</title>');
    expectSecurityHeaders(page);

    const script = await get('mmtc-app://console/assets/app.js');
    expect(script.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expectSecurityHeaders(script);
    expect((await get('mmtc-app://console/assets/app.css')).headers.get('content-type')).toBe('text/css; charset=utf-8');
    expect((await get('mmtc-app://console/assets/data.v1')).headers.get('content-type')).toBe('application/octet-stream');
  });

  it("answers the page's own routes (no extension) with index.html, and a missing asset with 404", async () => {
    for (const url of ['mmtc-app://console/', 'mmtc-app://console/workers', 'mmtc-app://console/workers/detail?url=x']) {
      const response = await get(url);
      expect(response.status, url).toBe(200);
      expect(await response.text()).toContain('<title>console</title>');
    }
    const missing = await get('mmtc-app://console/assets/missing.js');
    expect(missing.status).toBe(404);
    expectSecurityHeaders(missing);
  });

  it('refuses every way out of the build directory, with the security headers', async () => {
    for (const url of [
      'mmtc-app://console/%2E%2E%2Fsecret.txt',
      'mmtc-app://console/assets/%2e%2e%2f%2e%2e%2fsecret.txt',
      'mmtc-app://console/..%2fsecret.txt',
      'mmtc-app://console/%2e%2e%5csecret.txt',
      'mmtc-app://console/%00index.html',
      'mmtc-app://console/%zz',
    ]) {
      const response = await get(url);
      expect([400, 403], url).toContain(response.status);
      expect(await response.text(), url).not.toContain('SECRET');
      expectSecurityHeaders(response);
    }
  });

  it('leaves whole `..` segments (plain or %2e%2e) to the URL parser, which keeps them inside the build', async () => {
    // new URL() removes dot segments, encoded ones included, before the handler sees the path.
    for (const url of ['mmtc-app://console/../../secret.txt', 'mmtc-app://console/%2e%2e/%2e%2e/secret.txt']) {
      const response = await get(url);
      expect(response.status, url).toBe(404);
      expect(await response.text()).not.toContain('SECRET');
    }
  });

  it('serves no other host and no method but GET and HEAD', async () => {
    expect((await get('mmtc-app://console.evil/index.html')).status).toBe(404);
    const post = await get(APP_ENTRY_URL, 'POST');
    expect(post.status).toBe(405);
    expectSecurityHeaders(post);
    const head = await get(APP_ENTRY_URL, 'HEAD');
    expect(head.status).toBe(200);
    expect(await head.text()).toBe('');
  });

  it('resolves paths inside the root only', () => {
    expect(resolveRendererPath(root, 'mmtc-app://console/assets/app.js')).toEqual({ file: path.join(root, 'assets', 'app.js'), spaRoute: false });
    expect(resolveRendererPath(root, 'mmtc-app://console/..%2f..%2fsecret.txt')).toMatchObject({ status: 403 });
    expect(resolveRendererPath(root, 'https://console/index.html')).toMatchObject({ status: 404 });
  });

  it('explains in one line how to build the renderer when it is not built', async () => {
    const missingLog = vi.fn();
    const unbuilt = createRendererHandler({ root: path.join(dir, 'not-built'), log: missingLog });
    for (const url of [APP_ENTRY_URL, 'mmtc-app://console/assets/app.js']) {
      const response = await unbuilt(new Request(url));
      expect(response.status).toBe(503);
      expectSecurityHeaders(response);
      expect(await response.text()).toContain('run `npm run build:renderer`');
    }
    expect(RENDERER_MISSING_MESSAGE).not.toContain('\n');
    expect(missingLog).toHaveBeenCalledExactlyOnceWith(RENDERER_MISSING_MESSAGE);
  });
});
