// What the HTTP servers (the router's API, the console, a reference worker's bootstrap server) do with what a client sends
// before any route sees it: nothing a client sends may reach an uncaught exception.
//
//   - The request target is parsed once, defensively: `GET http://[ HTTP/1.1`,
//     `POST http://a:99999999/v1/chat/completions` (not a URL) and `GET /%` (not decodable)
//     are a 400 naming the problem, where they were an exception that stopped the process.
//   - A body the server will not read to its end is answered, then the connection closed,
//     in an order that lets the answer arrive (answerThenClose).
import type { IncomingMessage, ServerResponse } from 'node:http';

/** How much of a bad request target an error message quotes. */
const QUOTED_TARGET = 80;

export type RequestTarget = { ok: true; pathname: string; query: URLSearchParams } | { ok: false; error: string };

/** The path of a request target, or why it is not one (for a 400). */
export function requestTarget(raw: string | undefined): RequestTarget {
  const target = raw ?? '/';
  const quoted = JSON.stringify(target.length > QUOTED_TARGET ? `${target.slice(0, QUOTED_TARGET)}…` : target);
  let url: URL;
  try {
    url = new URL(target, 'http://request-target');
  } catch {
    return { ok: false, error: `the request target ${quoted} is not a valid URL` };
  }
  try {
    decodeURIComponent(url.pathname);
  } catch {
    return { ok: false, error: `the request target ${quoted} has a malformed percent-encoding` };
  }
  return { ok: true, pathname: url.pathname, query: url.searchParams };
}

/**
 * Answer `status` with `body` (JSON) and close the connection without reading the rest of
 * the request's body. Closing with unread data queued would reset the connection and lose
 * the answer, and Node closes a connection as soon as an answer marked `connection: close`
 * has ended: so the answer goes out whole (its length says where it ends) but is ended only
 * once what is already on its way has drained (not kept), or after 2 s, when the connection
 * is closed for good.
 */
export function answerThenClose(req: IncomingMessage, res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { ...headers, connection: 'close', 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.write(text);
  const done = () => {
    if (!res.writableEnded) res.end();
  };
  req.on('data', () => {});
  req.once('end', done);
  req.resume();
  setTimeout(() => {
    done();
    req.destroy();
  }, 2000).unref();
}

/** The deepest nesting `value` reaches, counted without recursion, stopping past `limit`. */
export function nestingDepth(value: unknown, limit: number): number {
  let deepest = 0;
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (depth + 1 > deepest) deepest = depth + 1;
    if (deepest > limit) return deepest;
    for (const child of Array.isArray(v) ? v : Object.values(v)) if (child !== null && typeof child === 'object') stack.push([child, depth + 1]);
  }
  return deepest;
}
