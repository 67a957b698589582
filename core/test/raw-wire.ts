// Bytes on a socket, the way an attacker sends them: a request line no HTTP client would
// write, a WebSocket frame no browser would send. For the tests and the reliability suite;
// loopback only (every address is checked), every wait bounded.
import net from 'node:net';
import { randomBytes } from 'node:crypto';

function loopback(host: string): string {
  if (host !== 'localhost' && host !== '::1' && host !== '[::1]' && !/^127\./.test(host)) throw new Error(`raw-wire sends only to loopback, not ${host}`);
  return host.replace(/^\[|\]$/g, '');
}

function hostPort(base: string): { host: string; port: number } {
  const u = new URL(base);
  return { host: loopback(u.hostname), port: Number(u.port) };
}

export interface RawReply {
  /** The status of the first response, 0 when none came. */
  status: number;
  head: string;
  body: string;
  /** The server closed (or reset) the connection. */
  closed: boolean;
  error?: string;
  ms: number;
}

/**
 * Send `bytes` to `base` (http://127.0.0.1:port) and read what comes back until the first
 * response is complete (by its content-length), the server closes, or `timeoutMs` passes.
 * `{host}` in the bytes becomes the host:port of `base` (the servers check the Host header).
 */
export function rawRequest(base: string, bytes: string | Buffer, timeoutMs = 5000): Promise<RawReply> {
  const { host, port } = hostPort(base);
  const data = typeof bytes === 'string' ? Buffer.from(bytes.replaceAll('{host}', `${new URL(base).host}`), 'latin1') : bytes;
  const t0 = performance.now();
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    let got = Buffer.alloc(0);
    let settled = false;
    const finish = (closed: boolean, error?: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      const text = got.toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      const head = end >= 0 ? text.slice(0, end) : text;
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1] ?? 0);
      resolve({
        status,
        head,
        body: end >= 0 ? Buffer.from(text.slice(end + 4), 'latin1').toString('utf8') : '',
        closed,
        ...(error ? { error } : {}),
        ms: performance.now() - t0,
      });
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    // A write that fails also emits 'error', which answers the call (below).
    socket.on('connect', () => socket.write(data, () => {}));
    socket.on('data', (d: Buffer) => {
      got = Buffer.concat([got, d]);
      // An interim 100 Continue is not the answer: skip it.
      let text = got.toString('latin1');
      while (/^HTTP\/1\.[01] 1\d\d /.test(text) && text.includes('\r\n\r\n')) {
        got = got.subarray(text.indexOf('\r\n\r\n') + 4);
        text = got.toString('latin1');
      }
      const end = text.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = text.slice(0, end);
      const length = /\r\ncontent-length: *(\d+)/i.exec(head)?.[1];
      if (length !== undefined && got.length >= end + 4 + Number(length)) finish(false);
      else if (/\r\ntransfer-encoding: *chunked/i.test(head) && text.endsWith('\r\n0\r\n\r\n')) finish(false);
      else if (length === undefined && !/\r\ntransfer-encoding/i.test(head) && /^HTTP\/1\.[01] (?:204|304)/.test(head)) finish(false);
    });
    socket.on('end', () => finish(true));
    socket.on('close', () => finish(true));
    socket.on('error', (e: NodeJS.ErrnoException) => finish(true, e.code ?? e.message));
  });
}

/** One WebSocket frame as bytes, with every field settable, sane or not. */
export function wsFrame(o: { opcode: number; payload?: Buffer | string; fin?: boolean; rsv?: number; mask?: boolean; declaredLength?: bigint }): Buffer {
  const payload = typeof o.payload === 'string' ? Buffer.from(o.payload) : (o.payload ?? Buffer.alloc(0));
  const length = o.declaredLength ?? BigInt(payload.length);
  const masked = o.mask !== false;
  const head: number[] = [((o.fin === false ? 0 : 1) << 7) | ((o.rsv ?? 0) << 4) | (o.opcode & 0x0f)];
  const maskBit = masked ? 0x80 : 0;
  if (length < 126n) head.push(maskBit | Number(length));
  else if (length < 65536n) head.push(maskBit | 126, Number(length >> 8n) & 0xff, Number(length) & 0xff);
  else {
    head.push(maskBit | 127);
    for (let i = 7; i >= 0; i--) head.push(Number((length >> BigInt(8 * i)) & 0xffn));
  }
  if (!masked) return Buffer.concat([Buffer.from(head), payload]);
  const key = randomBytes(4);
  const body = Buffer.from(payload.map((b, i) => b ^ key[i % 4]!));
  return Buffer.concat([Buffer.from(head), key, body]);
}

export interface RawWebSocket {
  /** Write bytes as they are (frames from wsFrame, or garbage). */
  send(bytes: Buffer): void;
  /** The close code of the server's close frame, 'closed' when the connection ended without one, 'open' when nothing came within `timeoutMs`. */
  closeCode(timeoutMs?: number): Promise<number | 'closed' | 'open'>;
  /** Text frames the server sent so far. */
  texts(): string[];
  destroy(): void;
}

/** Open `/api/events` on the console at `base` with `token`, by hand. */
export function rawWebSocket(base: string, token: string, timeoutMs = 5000): Promise<RawWebSocket> {
  const { host, port } = hostPort(base);
  const key = randomBytes(16).toString('base64');
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host, port });
    let buffer = Buffer.alloc(0);
    let upgraded = false;
    let code: number | 'closed' | undefined;
    const texts: string[] = [];
    const waiters = new Set<() => void>();
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error('no WebSocket handshake answer'));
    }, timeoutMs);
    const settle = (c: number | 'closed') => {
      code ??= c;
      for (const w of [...waiters]) w();
    };
    const readFrames = () => {
      while (buffer.length >= 2) {
        const opcode = buffer[0]! & 0x0f;
        let len = buffer[1]! & 0x7f;
        let at = 2;
        if (len === 126) {
          if (buffer.length < 4) return;
          len = buffer.readUInt16BE(2);
          at = 4;
        } else if (len === 127) {
          if (buffer.length < 10) return;
          len = Number(buffer.readBigUInt64BE(2));
          at = 10;
        }
        if (buffer.length < at + len) return;
        const payload = buffer.subarray(at, at + len);
        buffer = buffer.subarray(at + len);
        if (opcode === 1) texts.push(payload.toString('utf8'));
        if (opcode === 8) settle(payload.length >= 2 ? payload.readUInt16BE(0) : 1005);
      }
    };
    socket.on('connect', () => {
      socket.write(
        `GET /api/events HTTP/1.1\r\nHost: ${new URL(base).host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: mmtc.v1, mmtc.token.${token}\r\n\r\n`,
      );
    });
    socket.on('data', (d: Buffer) => {
      buffer = Buffer.concat([buffer, d]);
      if (!upgraded) {
        const end = buffer.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = buffer.subarray(0, end).toString('latin1');
        buffer = buffer.subarray(end + 4);
        clearTimeout(timer);
        if (!/^HTTP\/1\.1 101/.test(head)) {
          socket.destroy();
          return reject(new Error(`WebSocket upgrade refused: ${head.split('\r\n')[0]}`));
        }
        upgraded = true;
        resolve({
          send: (bytes) => socket.write(bytes, () => {}), // a failed write emits 'error' too: the close code says 'closed'
          closeCode: (ms = 5000) =>
            new Promise((done) => {
              if (code !== undefined) return done(code);
              const t = setTimeout(() => {
                waiters.delete(check);
                done('open');
              }, ms);
              const check = () => {
                clearTimeout(t);
                waiters.delete(check);
                done(code!);
              };
              waiters.add(check);
            }),
          texts: () => texts,
          destroy: () => socket.destroy(),
        });
      }
      readFrames();
    });
    socket.on('close', () => settle('closed'));
    socket.on('error', () => settle('closed'));
  });
}

/** The frames that broke the console before its WebSocket had an error listener, with the close code each must get. */
export const BAD_WS_FRAMES: ReadonlyArray<{ label: string; bytes: () => Buffer; code: number }> = [
  { label: 'text null', bytes: () => wsFrame({ opcode: 1, payload: 'null' }), code: 1003 },
  { label: 'text [] (not an object)', bytes: () => wsFrame({ opcode: 1, payload: '[]' }), code: 1003 },
  { label: 'op and stream not strings', bytes: () => wsFrame({ opcode: 1, payload: '{"op":1,"stream":{}}' }), code: 1003 },
  { label: 'a binary frame', bytes: () => wsFrame({ opcode: 2, payload: '{"op":"subscribe","stream":"config"}' }), code: 1003 },
  { label: 'a 65 KiB message', bytes: () => wsFrame({ opcode: 1, payload: Buffer.alloc(65 * 1024, 0x61) }), code: 1009 },
  { label: 'unmasked client frame 81 02 68 69', bytes: () => Buffer.from([0x81, 0x02, 0x68, 0x69]), code: 1002 },
  { label: 'opcode 3 (reserved)', bytes: () => wsFrame({ opcode: 3, payload: 'x' }), code: 1002 },
  { label: 'RSV1 set without an extension', bytes: () => wsFrame({ opcode: 1, payload: 'x', rsv: 4 }), code: 1002 },
  { label: 'RSV3 set', bytes: () => wsFrame({ opcode: 1, payload: 'x', rsv: 1 }), code: 1002 },
  { label: 'invalid UTF-8 text', bytes: () => wsFrame({ opcode: 1, payload: Buffer.from([0xc3, 0x28, 0xff]) }), code: 1007 },
  { label: 'a 2^63 declared length', bytes: () => wsFrame({ opcode: 1, payload: Buffer.alloc(0), declaredLength: 2n ** 63n }), code: 1009 },
  { label: 'a fragmented control frame', bytes: () => wsFrame({ opcode: 9, payload: 'x', fin: false }), code: 1002 },
  { label: 'a continuation with nothing to continue', bytes: () => wsFrame({ opcode: 0, payload: 'x' }), code: 1002 },
  {
    label: 'an unknown stream',
    bytes: () =>
      wsFrame({
        opcode: 1,
        payload:
          '{"op":"subscribe","stream":"\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9"}',
      }),
    code: 1008,
  },
];

/** Request lines that stopped the router or the console before their targets were parsed defensively, each to be a 400. */
export const BAD_REQUEST_TARGETS: readonly string[] = [
  '/%',
  '/assets/%ZZ.js',
  '/%E0%A4%A',
  'http://[',
  'http://a:99999999/v1/chat/completions',
  'http://[::1',
  '//[/x',
  '/api/%zz',
];
