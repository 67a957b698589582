// Seeded inputs below the HTTP client: request lines and headers no client library would
// write, and WebSocket frames no browser would send (the attacks of issue 23, then random
// variations of them). Each case is drawn from its own generator (seed, case index), so
// `--seed N --only fuzz/raw-http` replays it exactly.
import { BAD_REQUEST_TARGETS, BAD_WS_FRAMES, wsFrame } from '../../core/test/raw-wire.ts';
import type { Rng } from '../lib/rng.ts';

export interface RawHttpCase {
  label: string;
  bytes: Buffer;
  /** The request declares more body than it sends: the server may wait for the rest (body_timeout_secs) rather than answer. */
  bodyWithheld: boolean;
}

const METHODS = ['GET', 'POST', 'HEAD', 'PUT', 'DELETE', 'OPTIONS', 'CONNECT', 'TRACE', 'PATCH', 'get', 'G\u00e9T', 'GET GET', '', 'X'.repeat(300)];
const VERSIONS = ['HTTP/1.1', 'HTTP/1.0', 'HTTP/2.0', 'HTTP/9.9', 'HTTP/1.1 extra', 'http/1.1', '', 'HTTP/1.'];
const PATHS = [
  '/',
  '/health',
  '/metrics',
  '/v1/models',
  '/v1/chat/completions',
  '/api/overview',
  '/api/config.get',
  '/api/events',
  '/index.html',
  '/assets/x.js',
];
const NASTY_TARGET_PARTS = [
  '%',
  '%Z',
  '%ZZ',
  '%E0%A4%A',
  '%00',
  '%2e%2e/',
  '../',
  '[',
  ']',
  '::',
  ':99999999',
  ':-1',
  '?',
  '#',
  '\u00e9',
  '\u{1F600}',
  '*',
  '//',
  '\\',
  ';',
  '@',
  'a'.repeat(5000),
];

function target(rng: Rng): string {
  const r = rng.next();
  if (r < 0.3) return rng.pick(BAD_REQUEST_TARGETS);
  if (r < 0.4)
    return rng.pick([
      '*',
      '',
      ' ',
      'http://',
      'https://[::1]:0/health',
      `http://127.0.0.1:${rng.int(0, 99_999_999)}${rng.pick(PATHS)}`,
      'http://a@b@c/',
      `http://[${rng.string(8, '0123456789abcdef:.%[]')}]/health`,
    ]);
  let t = rng.pick(PATHS);
  for (let k = rng.int(1, 3); k > 0; k--) {
    const at = rng.int(0, t.length);
    t = t.slice(0, at) + rng.pick(NASTY_TARGET_PARTS) + t.slice(at);
  }
  return rng.chance(0.2)
    ? `http://${rng.pick(['127.0.0.1', 'localhost', '[::1]', 'a', '[', ''])}${rng.chance(0.5) ? `:${rng.int(0, 99_999_999)}` : ''}${t}`
    : t;
}

/** One request as raw bytes; `host` is the Host header the server accepts (host:port). */
export function rawHttpCase(rng: Rng, i: number, host: string, token: string | undefined): RawHttpCase {
  const specials = BAD_REQUEST_TARGETS.flatMap((t) => ['GET', 'POST'].map((m) => `${m} ${t}`));
  const special = i < specials.length ? specials[i]! : undefined;
  const [method, tgt] = special
    ? [special.split(' ')[0]!, special.slice(special.indexOf(' ') + 1)]
    : [rng.chance(0.8) ? rng.pick(['GET', 'POST']) : rng.pick(METHODS), target(rng)];
  const version = special || rng.chance(0.85) ? 'HTTP/1.1' : rng.pick(VERSIONS);
  const headers: string[] = [];
  const hostChoice = rng.next();
  if (special || hostChoice < 0.8) headers.push(`Host: ${host}`);
  else if (hostChoice < 0.9) headers.push(`Host: ${host}`, `Host: evil.example`);
  else if (hostChoice < 0.95) headers.push(`Host: ${rng.pick(['', '[', 'a:b:c', '\u00e9', host + 'x'])}`);
  if (token && rng.chance(0.5)) headers.push(`Authorization: Bearer ${rng.chance(0.8) ? token : rng.string(40)}`);
  const body =
    method === 'POST'
      ? rng.pick(['{}', '{"messages":[{"role":"user","content":"hi"}]}', '', 'null', '{"a":' + '['.repeat(rng.int(1, 2000)), rng.string(200)])
      : '';
  let bodyWithheld = false;
  const framing = special ? 0 : rng.next();
  if (framing < 0.7) headers.push(`Content-Length: ${Buffer.byteLength(body)}`);
  else if (framing < 0.8) headers.push(`Content-Length: ${rng.pick(['-1', 'abc', '1e3', '99999999999999999999', '0x10', ' 5', '5, 6'])}`);
  else if (framing < 0.85) {
    headers.push(`Content-Length: ${Buffer.byteLength(body) + rng.int(1, 100)}`);
    bodyWithheld = true;
  } else if (framing < 0.9) headers.push('Transfer-Encoding: chunked', `Content-Length: ${Buffer.byteLength(body)}`);
  else if (framing < 0.95) headers.push(`Transfer-Encoding: ${rng.pick(['gzip', 'chunked, identity', 'x'])}`);
  if (method === 'POST' && rng.chance(0.8))
    headers.push(`Content-Type: ${rng.pick(['application/json', 'text/plain', 'application/json; charset=utf-7', ''])}`);
  if (!special && rng.chance(0.1))
    headers.push(
      rng.pick([
        'X-Injected: a\rb',
        `X-Long: ${'a'.repeat(rng.int(1000, 20_000))}`,
        'Bad Header Name: x',
        ': empty name',
        'Upgrade: websocket',
        'Connection: Upgrade',
        'Expect: 100-continue',
      ]),
    );
  const line = `${method} ${tgt} ${version}`.trimEnd();
  const chunked = headers.some((h) => /^Transfer-Encoding: chunked$/.test(h)) && !headers.some((h) => h.startsWith('Content-Length'));
  const payload = chunked ? `${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n` : body;
  return {
    label: special ? `issue 23: ${special.slice(0, 50)}` : `${method.slice(0, 8) || '(none)'} ${version || '(no version)'}`,
    bytes: Buffer.from(`${line}\r\n${headers.join('\r\n')}\r\n\r\n${payload}`, 'utf8'),
    bodyWithheld,
  };
}

export interface WsCase {
  label: string;
  frames: Buffer[];
  /** Close codes the server may answer with ('open': it must not close); undefined: anything but 1011 (internal error), as a random frame may be a valid close with any code to echo. */
  expect?: ReadonlyArray<number | 'open'>;
}

/** Frames for one connection: the issue's bad frames first, then random ones. */
export function wsCase(rng: Rng, i: number): WsCase {
  if (i < BAD_WS_FRAMES.length) {
    const f = BAD_WS_FRAMES[i]!;
    return { label: `issue 23: ${f.label}`, frames: [f.bytes()], expect: [f.code] };
  }
  const r = rng.next();
  if (r < 0.15) {
    const stream = rng.pick(['traffic', 'config', 'calibration']);
    return {
      label: 'valid subscribe/unsubscribe and ping',
      frames: [
        wsFrame({ opcode: 1, payload: JSON.stringify({ op: 'subscribe', stream }) }),
        wsFrame({ opcode: 9, payload: 'p' }),
        wsFrame({ opcode: 1, payload: JSON.stringify({ op: 'unsubscribe', stream }) }),
      ],
      expect: ['open'],
    };
  }
  if (r < 0.3) {
    const text = rng.pick([
      'null',
      '1',
      '"x"',
      'true',
      '[]',
      '{}',
      '{"op":"subscribe"}',
      '{"stream":"traffic"}',
      '{"op":null,"stream":"traffic"}',
      '{"op":"subscribe","stream":"nope"}',
      '{',
      rng.string(100),
    ]);
    return { label: 'text message of the wrong shape', frames: [wsFrame({ opcode: 1, payload: text })], expect: [1003, 1007, 1008, 'open'] };
  }
  const frames: Buffer[] = [];
  for (let k = rng.int(1, 3); k > 0; k--) {
    const opcode = rng.chance(0.5) ? rng.pick([0, 1, 2, 8, 9, 10]) : rng.int(0, 15);
    const payload = Buffer.from(rng.bytes(rng.pick([0, 1, 2, 125, 126, 200, 70_000])));
    frames.push(
      wsFrame({
        opcode,
        payload,
        fin: rng.chance(0.8),
        rsv: rng.chance(0.8) ? 0 : rng.int(1, 7),
        mask: rng.chance(0.9),
        ...(rng.chance(0.1) ? { declaredLength: BigInt(rng.pick([0, 1, 127, 65_535, 65_536, 2 ** 32, 2 ** 53])) * (rng.chance(0.5) ? 1n : 2n ** 10n) } : {}),
      }),
    );
  }
  if (rng.chance(0.1)) frames.push(Buffer.from(rng.bytes(rng.int(1, 64))));
  return { label: 'random frames', frames };
}
