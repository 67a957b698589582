// How the console page reaches the window: through the privileged scheme `mmtc-app://console/`,
// served from dist/renderer and nowhere else. A standard, secure scheme gives the page a real
// origin of its own (so CSP 'self', the sender-frame check and the navigation guard can name
// it) where file:// would give every local file the same opaque one. Each response carries
// the security headers (security.ts), since header hooks do not see custom-scheme responses.
//
// Paths are resolved inside the root and refused when they leave it (`..`, `%2e%2e`, `%2f`);
// paths with no extension are the page's own routes and get index.html. When the renderer is
// not built, every page is a one-line explanation of how to build it.
import { protocol } from 'electron';
import { existsSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { SECURITY_HEADERS } from './security.ts';

export const APP_SCHEME = 'mmtc-app';
export const APP_HOST = 'console';
export const APP_ORIGIN = `${APP_SCHEME}://${APP_HOST}`;
export const APP_ENTRY_URL = `${APP_ORIGIN}/index.html`;

/** The renderer build (vite, `npm run build:renderer`). */
export const RENDERER_ROOT = fileURLToPath(new URL('../dist/renderer', import.meta.url));

export const RENDERER_MISSING_MESSAGE =
  'The console UI is not built: run `npm run build:renderer` (looked for dist/renderer/index.html), then start the app again.';

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.webp': 'image/webp',
  '.ico': 'image/x-icon',
  '.woff': 'font/woff',
  '.woff2': 'font/woff2',
  '.ttf': 'font/ttf',
  '.wasm': 'application/wasm',
};

/**
 * Register the scheme's privileges. Electron accepts this only before the app is ready.
 * standard: real origin and relative URLs; secure: counts as a secure context; fetch: the page
 * may fetch its own assets; code cache: faster second start. No CSP bypass, no service workers.
 */
export function registerAppScheme(): void {
  protocol.registerSchemesAsPrivileged([{ scheme: APP_SCHEME, privileges: { standard: true, secure: true, supportFetchAPI: true, codeCache: true } }]);
}

export function rendererIsBuilt(root: string = RENDERER_ROOT): boolean {
  return existsSync(path.join(root, 'index.html'));
}

/** A request URL as a file inside root, or why it is refused (status and a sentence). */
export type RendererPath = { file: string; spaRoute: boolean } | { status: number; reason: string };

export function resolveRendererPath(root: string, requestUrl: string): RendererPath {
  let url: URL;
  try {
    url = new URL(requestUrl);
  } catch {
    return { status: 400, reason: `not a URL: ${JSON.stringify(requestUrl)}` };
  }
  if (url.protocol !== `${APP_SCHEME}:` || url.host.toLowerCase() !== APP_HOST) {
    return { status: 404, reason: `${requestUrl} is not on ${APP_ORIGIN}` };
  }
  let decoded: string;
  try {
    decoded = decodeURIComponent(url.pathname);
  } catch {
    return { status: 400, reason: `the path of ${requestUrl} is not valid percent-encoding` };
  }
  if (decoded.includes('\0') || decoded.includes('\\')) return { status: 400, reason: `the path of ${requestUrl} has a NUL or backslash` };
  const relative = decoded.replace(/^\/+/, '') || 'index.html';
  const base = path.resolve(root);
  const file = path.resolve(base, relative);
  const inside = path.relative(base, file);
  if (inside === '' || inside === '..' || inside.startsWith(`..${path.sep}`) || path.isAbsolute(inside)) {
    return { status: 403, reason: `${requestUrl} resolves outside the renderer build` };
  }
  return { file, spaRoute: path.extname(relative) === '' };
}

function respond(status: number, body: ConstructorParameters<typeof Response>[0], contentType: string, method: string): Response {
  return new Response(method === 'HEAD' ? null : body, {
    status,
    headers: { ...SECURITY_HEADERS, 'Content-Type': contentType, 'Cache-Control': 'no-cache' },
  });
}

async function isFile(file: string): Promise<boolean> {
  try {
    return (await stat(file)).isFile();
  } catch {
    return false; // missing or unreadable: not a file this protocol can serve (the caller answers 404)
  }
}

function textPage(message: string): string {
  const escaped = message.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
  return `<!doctype html><html><head><meta charset="utf-8"><title>mm-transport-console</title></head><body><p>${escaped}</p></body></html>\n`;
}

/** The handler of the app's scheme: files from root only, with the security headers on every answer. */
export function createRendererHandler(options: { root?: string; log?: (line: string) => void } = {}): (request: Request) => Promise<Response> {
  const root = options.root ?? RENDERER_ROOT;
  const log = options.log ?? (() => {});
  let toldMissing = false;
  return async (request) => {
    const method = request.method.toUpperCase();
    if (method !== 'GET' && method !== 'HEAD')
      return respond(405, textPage(`${method} is not served; the console's files are read with GET`), 'text/html; charset=utf-8', method);
    const resolved = resolveRendererPath(root, request.url);
    if ('status' in resolved) {
      log(`refused ${request.url}: ${resolved.reason}`);
      return respond(resolved.status, textPage(resolved.reason), 'text/html; charset=utf-8', method);
    }
    const index = path.join(path.resolve(root), 'index.html');
    if (!(await isFile(index))) {
      if (!toldMissing) log(RENDERER_MISSING_MESSAGE);
      toldMissing = true;
      return respond(503, textPage(RENDERER_MISSING_MESSAGE), 'text/html; charset=utf-8', method);
    }
    let file = resolved.file;
    if (!(await isFile(file))) {
      if (!resolved.spaRoute) return respond(404, textPage(`not found: ${new URL(request.url).pathname}`), 'text/html; charset=utf-8', method);
      file = index;
    }
    const type = CONTENT_TYPES[path.extname(file).toLowerCase()] ?? 'application/octet-stream';
    return respond(200, method === 'HEAD' ? null : await readFile(file), type, method);
  };
}

/** Serve the app's scheme on the default session. Only after the app is ready. */
export function handleAppProtocol(options: { root?: string; log?: (line: string) => void } = {}): void {
  protocol.handle(APP_SCHEME, createRendererHandler(options));
}
