// The browser binding of the console contract: `POST /api/<command>` with a JSON body, one
// WebSocket (`/api/events`) for the streams, and the built renderer as static files.
//
// Guards, in order, on every request:
//   - Host must name the bound address (127.0.0.1:port, localhost:port, …): a page on another
//     origin that rebinds its DNS name to 127.0.0.1 sends its own name and gets 403.
//   - Origin, when the browser sends one, must be this console's own: 403 otherwise.
//   - The API needs the per-launch token: `Authorization: Bearer <token>` on commands, the
//     subprotocol `mmtc.token.<token>` on the WebSocket (browsers cannot set headers there).
//     Without it: 401, and the WebSocket upgrade is refused. The token travels in the URL
//     the server prints only as a fragment (`#token=…`), which browsers never send, and the
//     page keeps it in memory; it is compared in constant time and never logged.
//   - Commands take `application/json` only (a cross-origin form cannot send it without a
//     preflight this server never answers).
// Every response carries a strict Content-Security-Policy and nosniff.
//
// Nothing a client sends reaches an uncaught exception (docs/console.md, "Security"): a
// request target that is no URL or no valid percent-encoding is a 400, a body over
// MAX_COMMAND_BODY a 413 JSON answer (then the connection closes), JSON nested deeper than
// MAX_JSON_DEPTH a 400; on the WebSocket a frame that breaks the protocol (unmasked, a
// reserved opcode or bit, invalid UTF-8, over 64 KiB) closes that connection with the
// protocol's close code, and a message that is not {op, stream} closes it with 1003/1008.
import { timingSafeEqual } from 'node:crypto';
import { createReadStream, existsSync, statSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { WebSocketServer, type WebSocket } from 'ws';
import type { ConsoleBackend } from './backend.ts';
import { CONTENT_SECURITY_POLICY } from './csp.ts';
import { answerThenClose, nestingDepth, requestTarget } from '../router/http-request.ts';
import { ContractError, isCommandName, STREAM_NAMES, type ErrorCode, type StreamName } from './contract.ts';

export const TOKEN_SUBPROTOCOL_PREFIX = 'mmtc.token.';
export const EVENTS_SUBPROTOCOL = 'mmtc.v1';
/** A command's body: a draft of MAX_WORKERS workers with their labels is well under it. */
export const MAX_COMMAND_BODY = 256 * 1024;
/** Nesting a command's JSON may have: a configuration needs 4 levels; 100,000 overflowed the stack (500). */
export const MAX_JSON_DEPTH = 32;
/** Bytes one WebSocket message may have (the client sends only {op, stream}). */
export const MAX_WS_MESSAGE = 64 * 1024;
/** A WebSocket with more than this waiting to go out gets no new traffic batch until it drains. */
const MAX_BUFFERED = 1024 * 1024;

const STATUS: Record<ErrorCode, number> = {
  invalid_input: 400,
  invalid_config: 422,
  conflict: 409,
  restart_required: 409,
  file_drift: 409,
  checks_failed: 412,
  not_found: 404,
  unauthorized: 401,
  forbidden: 403,
  busy: 429,
  internal: 500,
};

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
  '.woff2': 'font/woff2',
  '.map': 'application/json',
};

export interface ConsoleServerOptions {
  backend: ConsoleBackend;
  host: string;
  port: number;
  token: string;
  /** The built renderer (index.html and its assets). */
  staticDir: string;
}

export interface RunningConsoleServer {
  /** The console's address, without the token. */
  url: string;
  port: number;
  close(): Promise<void>;
}

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\./.test(host);
}

/** Host header values that name this server: what DNS rebinding cannot fake. */
function allowedHosts(bound: string, port: number): Set<string> {
  const names = new Set<string>(['localhost', '127.0.0.1', '[::1]']);
  if (bound === '0.0.0.0' || bound === '::') {
    names.add(os.hostname().toLowerCase());
    for (const list of Object.values(os.networkInterfaces())) for (const a of list ?? []) names.add(a.family === 'IPv6' ? `[${a.address}]` : a.address);
  } else names.add(bound.includes(':') ? `[${bound}]` : bound.toLowerCase());
  return new Set([...names].map((n) => `${n}:${port}`));
}

function sameToken(given: string | undefined, token: string): boolean {
  if (!given) return false;
  const a = Buffer.from(given);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

function securityHeaders(extra: Record<string, string> = {}): Record<string, string> {
  return {
    'content-security-policy': CONTENT_SECURITY_POLICY,
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'x-frame-options': 'DENY',
    ...extra,
  };
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, securityHeaders({ 'content-type': 'application/json', 'cache-control': 'no-store' }));
  res.end(JSON.stringify(body));
}

function sendContractError(res: ServerResponse, err: ContractError): void {
  sendJson(res, STATUS[err.code], err.toWire());
}

/** A body this server will not read to its end: answered with `status`, then the connection closes. */
class BodyTooLarge extends ContractError<'invalid_input'> {
  readonly status = 413;
}

function readJson(req: IncomingMessage): Promise<unknown> {
  const tooLarge = () =>
    new BodyTooLarge(
      'invalid_input',
      `the command body is above ${MAX_COMMAND_BODY / 1024} KiB (a configuration of the most workers allowed fits well within it)`,
    );
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length'] ?? NaN);
    if (Number.isFinite(declared) && declared > MAX_COMMAND_BODY) return reject(tooLarge());
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (c: Buffer) => {
      size += c.length;
      if (size > MAX_COMMAND_BODY) {
        req.off('data', onData);
        reject(tooLarge());
        return;
      }
      chunks.push(c);
    };
    req.on('data', onData);
    req.on('end', () => {
      if (size > MAX_COMMAND_BODY) return;
      const text = Buffer.concat(chunks).toString('utf8');
      let value: unknown;
      try {
        value = text === '' ? {} : JSON.parse(text);
      } catch (err) {
        return reject(new ContractError('invalid_input', `the command body is not valid JSON: ${(err as Error).message}`));
      }
      if (nestingDepth(value, MAX_JSON_DEPTH) > MAX_JSON_DEPTH)
        return reject(new ContractError('invalid_input', `the command body is nested deeper than ${MAX_JSON_DEPTH} levels`));
      resolve(value);
    });
    req.on('error', reject);
  });
}

/** The page served when the renderer has not been built: it says so and what to do, nothing more. */
const NOT_BUILT = `<!doctype html><meta charset="utf-8"><title>mm-transport-console</title>
<p>The console's user interface has not been built in this checkout.</p>
<p>Run <code>npm run build:renderer</code>, then reload this page. The router and the console API are running.</p>`;

/** `pathname` has been through requestTarget(), so it decodes. */
function serveStatic(staticDir: string, pathname: string, res: ServerResponse): void {
  const rel = pathname === '/' ? 'index.html' : decodeURIComponent(pathname).replace(/^\/+/, '');
  const file = path.resolve(staticDir, rel);
  if (!file.startsWith(path.resolve(staticDir) + path.sep) || rel.includes('\0')) {
    res.writeHead(404, securityHeaders({ 'content-type': 'text/plain' })).end('not found');
    return;
  }
  if (!existsSync(file) || !statSync(file).isFile()) {
    if (pathname === '/' || pathname === '/index.html') {
      res.writeHead(200, securityHeaders({ 'content-type': 'text/html; charset=utf-8' })).end(NOT_BUILT);
      return;
    }
    res.writeHead(404, securityHeaders({ 'content-type': 'text/plain' })).end('not found');
    return;
  }
  const type = CONTENT_TYPES[path.extname(file)] ?? 'application/octet-stream';
  // Built assets have content hashes in their names; index.html must always be fresh.
  const cache = path.basename(file) === 'index.html' ? 'no-cache' : 'public, max-age=31536000, immutable';
  res.writeHead(200, securityHeaders({ 'content-type': type, 'cache-control': cache }));
  createReadStream(file).pipe(res);
}

/** One events WebSocket: subscribe and unsubscribe messages, each stream's payloads as JSON text, a protocol breach closes it. */
function serveEventSocket(ws: WebSocket, backend: ConsoleBackend): void {
  const subscriptions = new Map<StreamName, () => void>();
  const send = (stream: StreamName, payload: unknown) => {
    if (ws.readyState === ws.OPEN) ws.send(JSON.stringify({ stream, payload }));
  };
  // A frame that breaks the protocol (unmasked, reserved opcode or bits, invalid UTF-8, a
  // length over MAX_WS_MESSAGE or 2^53): ws closes this connection with the matching code
  // (1002, 1007, 1009) and reports it here; without a listener it was thrown, and the process stopped.
  ws.on('error', () => {});
  ws.on('message', (data, isBinary) => {
    if (isBinary) return ws.close(1003, 'expected a JSON text message');
    let msg: unknown;
    try {
      msg = JSON.parse(String(data));
    } catch {
      return ws.close(1003, 'expected JSON');
    }
    if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) return ws.close(1003, 'expected {"op": …, "stream": …}');
    const { op, stream: named } = msg as { op?: unknown; stream?: unknown };
    if (typeof op !== 'string' || typeof named !== 'string') return ws.close(1003, 'expected {"op": …, "stream": …} with strings');
    const stream = named as StreamName;
    // The name is cut: ws throws for a close reason over 123 bytes.
    if (!STREAM_NAMES.includes(stream)) return ws.close(1008, `no stream '${named.slice(0, 20)}'`);
    if (op === 'subscribe' && !subscriptions.has(stream)) {
      subscriptions.set(
        stream,
        backend.subscribe(stream, (payload) => send(stream, payload), { canSend: () => ws.bufferedAmount < MAX_BUFFERED }),
      );
    } else if (op === 'unsubscribe') {
      subscriptions.get(stream)?.();
      subscriptions.delete(stream);
    }
  });
  ws.on('close', () => {
    for (const off of subscriptions.values()) off();
    subscriptions.clear();
  });
}

export async function startConsoleServer(options: ConsoleServerOptions): Promise<RunningConsoleServer> {
  const { backend, token } = options;
  let hosts = new Set<string>();
  let origins = new Set<string>();

  const guard = (req: IncomingMessage): ContractError | undefined => {
    const host = (req.headers.host ?? '').toLowerCase();
    if (!hosts.has(host)) return new ContractError('forbidden', `this console answers only to ${[...hosts].join(', ')}, not to Host '${host}'`);
    const origin = req.headers.origin;
    if (origin !== undefined && !origins.has(origin.toLowerCase())) return new ContractError('forbidden', `requests from origin '${origin}' are not accepted`);
    return undefined;
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      // handle() answers what it meets; this is for a bug of its own, answered and not fatal.
      if (!res.headersSent) sendContractError(res, new ContractError('internal', (err as Error)?.message ?? String(err)));
      else res.destroy();
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const refused = guard(req);
    if (refused) return sendContractError(res, refused);
    const target = requestTarget(req.url);
    if (!target.ok) return answerThenClose(req, res, 400, new ContractError('invalid_input', target.error).toWire(), securityHeaders());
    const url = { pathname: target.pathname };
    if (!url.pathname.startsWith('/api/')) {
      if (req.method !== 'GET' && req.method !== 'HEAD')
        return sendContractError(res, new ContractError('not_found', `no route for ${req.method} ${url.pathname}`));
      return serveStatic(options.staticDir, url.pathname, res);
    }
    const auth = req.headers.authorization;
    if (!sameToken(auth?.startsWith('Bearer ') ? auth.slice(7) : undefined, token)) {
      return sendContractError(
        res,
        new ContractError('unauthorized', 'missing or wrong console token: open the URL mmtc serve printed (it ends with #token=…)'),
      );
    }
    const command = url.pathname.slice('/api/'.length);
    if (req.method !== 'POST') return sendContractError(res, new ContractError('not_found', `console commands are POST /api/<command>, not ${req.method}`));
    if (!isCommandName(command)) return sendContractError(res, new ContractError('not_found', `no console command '${command}'`));
    if (!(req.headers['content-type'] ?? '').toLowerCase().startsWith('application/json')) {
      return sendJson(res, 415, new ContractError('invalid_input', 'console commands take a JSON body (content-type: application/json)').toWire());
    }
    try {
      const input = await readJson(req);
      const output = await backend.invoke(command, input, { client: 'http' });
      sendJson(res, 200, output);
    } catch (err) {
      if (err instanceof BodyTooLarge) return answerThenClose(req, res, err.status, err.toWire(), securityHeaders({ 'cache-control': 'no-store' }));
      sendContractError(res, err instanceof ContractError ? err : new ContractError('internal', (err as Error).message));
    }
  }

  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: MAX_WS_MESSAGE,
    handleProtocols: (protocols) => (protocols.has(EVENTS_SUBPROTOCOL) ? EVENTS_SUBPROTOCOL : false),
  });
  server.on('upgrade', (req, socket, head) => {
    // From here the socket is ours: a reset by the client must not become an uncaught 'error'.
    socket.on('error', () => socket.destroy());
    const refuse = (status: number, text: string) => {
      socket.write(`HTTP/1.1 ${status} ${text}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
      socket.destroy();
    };
    const refused = guard(req);
    if (refused) return refuse(403, 'Forbidden');
    const target = requestTarget(req.url);
    if (!target.ok) return refuse(400, 'Bad Request');
    if (target.pathname !== '/api/events') return refuse(404, 'Not Found');
    const offered = String(req.headers['sec-websocket-protocol'] ?? '')
      .split(',')
      .map((p) => p.trim());
    const given = offered.find((p) => p.startsWith(TOKEN_SUBPROTOCOL_PREFIX))?.slice(TOKEN_SUBPROTOCOL_PREFIX.length);
    if (!sameToken(given, token)) return refuse(401, 'Unauthorized');
    wss.handleUpgrade(req, socket, head, (ws) => serveEvents(ws));
  });

  const sockets = new Set<WebSocket>();
  const serveEvents = (ws: WebSocket) => {
    sockets.add(ws);
    ws.on('close', () => sockets.delete(ws));
    serveEventSocket(ws, backend);
  };

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  hosts = allowedHosts(options.host, port);
  origins = new Set([...hosts].map((h) => `http://${h}`));
  const shown = isLoopback(options.host) ? '127.0.0.1' : options.host.includes(':') ? `[${options.host}]` : options.host;
  return {
    url: `http://${options.host === '0.0.0.0' || options.host === '::' ? os.hostname() : shown}:${port}/`,
    port,
    close: async () => {
      for (const ws of sockets) ws.terminate();
      wss.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
