// Where image bytes come from: `data:` URLs (base64), http(s) URLs (address policy from
// media-policy.ts, redirects re-checked per hop, size cap, one overall timeout,
// content-type check) and, from the CLI only, local files. Every failure is an
// ImageInputError naming the image's index and the cause, with the HTTP status the API
// should answer (400 bad input, 413 too large).
import { promises as fs } from 'node:fs';
import { request as httpRequest, type ClientRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest, type RequestOptions } from 'node:https';
import { fileURLToPath } from 'node:url';
import { DEFAULT_MEDIA_POLICY, checkMediaUrl, classifyAddress, type MediaPolicy, type ResolvedAddress, type UrlCheck } from './media-policy.ts';
import { formatBytes } from '../util/bytes.ts';

export class ImageInputError extends Error {
  override readonly name = 'ImageInputError';
  constructor(
    readonly index: number,
    readonly reason: string,
    readonly status: 400 | 413 = 400,
  ) {
    super(`image ${index}: ${reason}`);
  }
}

export interface ImageSourceOptions {
  /** Largest accepted image, in bytes (decoded size for data: URLs). */
  maxBytes?: number;
  /** Timeout of an http(s) download. */
  timeoutMs?: number;
  /** Local paths and file:// URLs: only for the CLI, never for API requests. */
  allowFiles?: boolean;
  /** Which http(s) hosts may be fetched; the default refuses every non-public address. */
  policy?: MediaPolicy;
  /** Test hook: opens each HTTP exchange (default node:http / node:https request). */
  request?: HttpRequestFn;
  /** Bytes all images of one request may bring together, shared by their loads. */
  requestBudget?: RequestImageBudget;
}

/**
 * What all images of one request may bring together. Downloads run at once, so each one
 * takes its bytes from here as they arrive: the request stops at its limit, not at the
 * limit times its image count.
 */
export class RequestImageBudget {
  private taken = 0;
  constructor(
    readonly limit: number,
    /** How the limit is named in the error (its config key). */
    readonly name = 'max_request_image_bytes',
  ) {}

  take(index: number, bytes: number): void {
    this.taken += bytes;
    if (this.taken > this.limit) throw new ImageInputError(index, `the request's images are above ${formatBytes(this.limit)} in all (${this.name})`, 413);
  }
}

export const DEFAULT_MAX_IMAGE_BYTES = 20 * 1024 * 1024;

function fromDataUrl(url: string, index: number, maxBytes: number): Uint8Array {
  const comma = url.indexOf(',');
  if (comma < 0) throw new ImageInputError(index, 'malformed data: URL (no comma)');
  const meta = url.slice(5, comma).toLowerCase();
  const parts = meta.split(';');
  const mime = parts[0] || 'text/plain';
  if (!mime.startsWith('image/')) throw new ImageInputError(index, `data: URL has content type '${mime}', expected image/*`);
  if (!parts.includes('base64')) throw new ImageInputError(index, 'data: URL must be base64-encoded (data:image/png;base64,…)');
  let payload = url.slice(comma + 1);
  if (/\s/.test(payload.slice(0, 256))) payload = payload.replace(/\s+/g, ''); // line-wrapped base64
  const approx = Math.floor((payload.length * 3) / 4);
  if (approx > maxBytes) throw new ImageInputError(index, `image is ${formatBytes(approx)}, above the ${formatBytes(maxBytes)} limit (max_image_bytes)`, 413);
  const bytes = Buffer.from(payload, 'base64');
  // Node's decoder skips characters outside the alphabet, so a payload that is not base64
  // decodes to fewer bytes than its length promises: one comparison instead of a regex pass.
  const unpadded = payload.length - (payload.endsWith('==') ? 2 : payload.endsWith('=') ? 1 : 0);
  if (bytes.byteLength !== Math.floor((unpadded * 3) / 4) || payload.length % 4 === 1)
    throw new ImageInputError(index, 'data: URL payload is not valid base64');
  if (bytes.byteLength === 0) throw new ImageInputError(index, 'data: URL holds no bytes');
  return bytes;
}

/** Opens one HTTP exchange; tests inject a wrapper to observe (or forbid) connections. */
export type HttpRequestFn = (options: RequestOptions) => ClientRequest;

const defaultRequest: HttpRequestFn = (options) => (options.protocol === 'https:' ? httpsRequest : httpRequest)(options);

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);

class Timeout extends Error {}

/** Rejects with Timeout once the download's deadline passes, whatever `work` is doing. */
function beforeDeadline<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(new Timeout());
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new Timeout());
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

// The lookup hands Node the addresses the policy already checked, so the socket cannot
// connect anywhere else and no second DNS answer (a rebinding one) is ever consulted.
function pinnedLookup(addresses: readonly ResolvedAddress[]): NonNullable<RequestOptions['lookup']> {
  return (_host: string, opts: { all?: boolean }, cb: (err: Error | null, address: string | ResolvedAddress[], family?: number) => void) => {
    if (opts?.all)
      cb(
        null,
        addresses.map((a) => ({ ...a })),
      );
    else cb(null, addresses[0]!.address, addresses[0]!.family);
  };
}

function send(request: HttpRequestFn, target: Extract<UrlCheck, { verdict: 'allowed' }>, signal: AbortSignal): Promise<IncomingMessage> {
  const { url, hostname, addresses } = target;
  const literal = classifyAddress(hostname) !== null;
  return new Promise((resolve, reject) => {
    const req = request({
      protocol: url.protocol,
      hostname,
      port: url.port || (url.protocol === 'https:' ? 443 : 80),
      path: `${url.pathname}${url.search}`,
      method: 'GET',
      headers: { host: url.host, accept: 'image/*', 'accept-encoding': 'identity' },
      lookup: pinnedLookup(addresses),
      // TLS verifies the certificate against the name the client asked for, not the address.
      ...(url.protocol === 'https:' && !literal ? { servername: hostname.replace(/\.$/, '') } : {}),
      agent: false, // a pooled socket could outlive the check that allowed it
      signal,
    });
    req.once('response', (res: IncomingMessage) => {
      res.on('error', () => {}); // readBody reports body failures; a late one must not crash the process
      resolve(res);
    });
    req.on('error', reject); // kept for the request's lifetime: a late error after the response is a no-op
    req.end();
  });
}

// What a connection failure says: the category only. errno, address and port would tell
// the client which internal ports are open.
function connectionFailure(err: unknown): string {
  const code = String((err as NodeJS.ErrnoException)?.code ?? '');
  if (/^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|HOSTNAME_)/.test(code) || code.includes('CERT')) return 'the TLS handshake failed';
  return 'the connection failed';
}

function readBody(res: IncomingMessage, source: string, index: number, maxBytes: number, budget: RequestImageBudget | undefined): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    res.on('data', (chunk: Buffer) => {
      total += chunk.byteLength;
      if (total > maxBytes) {
        res.destroy();
        reject(new ImageInputError(index, `image at ${source} is above the ${formatBytes(maxBytes)} limit (max_image_bytes)`, 413));
        return;
      }
      try {
        budget?.take(index, chunk.byteLength);
      } catch (err) {
        res.destroy();
        reject(err);
        return;
      }
      chunks.push(chunk);
    });
    res.once('end', () => resolve(Buffer.concat(chunks, total)));
    res.once('error', reject);
    res.once('close', () => {
      if (!res.complete) reject(new Error('closed before the body was complete'));
    });
  });
}

async function download(
  source: string,
  index: number,
  maxBytes: number,
  policy: MediaPolicy,
  request: HttpRequestFn,
  signal: AbortSignal,
  budget: RequestImageBudget | undefined,
): Promise<Uint8Array> {
  let url: URL;
  try {
    url = new URL(source);
  } catch {
    throw new ImageInputError(index, `${source} is not a valid URL`);
  }
  for (let hop = 0; ; hop++) {
    const check = await beforeDeadline(checkMediaUrl(policy, url), signal);
    const where = hop === 0 ? '' : `its redirect to ${url.href}: `;
    if (check.verdict === 'refused') {
      throw new ImageInputError(
        index,
        hop === 0 ? `${source} is refused: ${check.reason}` : `${source} redirects to ${url.href}, which is refused: ${check.reason}`,
      );
    }
    if (check.verdict === 'not-found') throw new ImageInputError(index, `cannot download ${source}: ${where}host not found`);
    let res: IncomingMessage;
    try {
      res = await send(request, check, signal);
    } catch (err) {
      if (signal.aborted) throw new Timeout();
      throw new ImageInputError(index, `cannot download ${source}: ${where}${connectionFailure(err)}`);
    }
    const status = res.statusCode ?? 0;
    const location = res.headers.location;
    if (REDIRECT_STATUSES.has(status) && location) {
      res.destroy();
      if (hop >= policy.maxRedirects)
        throw new ImageInputError(index, `${source} redirects more than ${policy.maxRedirects} times; at most ${policy.maxRedirects} redirects are followed`);
      try {
        url = new URL(location, url);
      } catch {
        throw new ImageInputError(index, `${source} redirects to an invalid URL`);
      }
      continue;
    }
    if (status < 200 || status > 299) {
      res.destroy();
      throw new ImageInputError(index, `download of ${source} answered HTTP ${status}`);
    }
    const type = (res.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    if (!type.startsWith('image/') && type !== 'application/octet-stream') {
      res.destroy();
      throw new ImageInputError(index, `${source} has content type '${type || 'none'}', expected image/*`);
    }
    const declared = Number(res.headers['content-length'] ?? NaN);
    if (Number.isFinite(declared) && declared > maxBytes) {
      res.destroy();
      throw new ImageInputError(index, `image at ${source} is ${formatBytes(declared)}, above the ${formatBytes(maxBytes)} limit (max_image_bytes)`, 413);
    }
    let bytes: Uint8Array;
    try {
      bytes = await readBody(res, source, index, maxBytes, budget);
    } catch (err) {
      if (err instanceof ImageInputError) throw err;
      if (signal.aborted) throw new Timeout();
      throw new ImageInputError(index, `cannot download ${source}: the connection failed before the image was complete`);
    }
    if (bytes.byteLength === 0) throw new ImageInputError(index, `${source} returned an empty body`);
    return bytes;
  }
}

async function fromHttp(
  source: string,
  index: number,
  maxBytes: number,
  timeoutMs: number,
  policy: MediaPolicy,
  request: HttpRequestFn,
  budget: RequestImageBudget | undefined,
): Promise<Uint8Array> {
  // One deadline for resolution, every redirect hop and the body, so a server that
  // trickles bytes cannot hold the request open past timeoutMs.
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(), timeoutMs);
  try {
    return await download(source, index, maxBytes, policy, request, deadline.signal, budget);
  } catch (err) {
    if (err instanceof Timeout || (deadline.signal.aborted && !(err instanceof ImageInputError))) {
      throw new ImageInputError(index, `download of ${source} timed out after ${timeoutMs} ms`);
    }
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

async function fromFile(file: string, index: number, maxBytes: number): Promise<Uint8Array> {
  let stat;
  try {
    stat = await fs.stat(file);
  } catch (err) {
    throw new ImageInputError(index, `cannot read ${file}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}`);
  }
  if (!stat.isFile()) throw new ImageInputError(index, `${file} is not a file`);
  if (stat.size > maxBytes)
    throw new ImageInputError(index, `${file} is ${formatBytes(stat.size)}, above the ${formatBytes(maxBytes)} limit (max_image_bytes)`, 413);
  return fs.readFile(file);
}

export async function loadImageBytes(source: string, index: number, options: ImageSourceOptions = {}): Promise<Uint8Array> {
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_IMAGE_BYTES;
  if (source.startsWith('data:')) {
    const bytes = fromDataUrl(source, index, maxBytes);
    options.requestBudget?.take(index, bytes.byteLength);
    return bytes;
  }
  if (/^https?:\/\//i.test(source)) {
    return fromHttp(
      source,
      index,
      maxBytes,
      options.timeoutMs ?? 10_000,
      options.policy ?? DEFAULT_MEDIA_POLICY,
      options.request ?? defaultRequest,
      options.requestBudget,
    );
  }
  if (options.allowFiles) {
    if (source.startsWith('file://')) return fromFile(fileURLToPath(source), index, maxBytes);
    if (!/^[a-z][a-z0-9+.-]*:/i.test(source)) return fromFile(source, index, maxBytes);
  }
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(source)?.[1];
  throw new ImageInputError(
    index,
    scheme ? `unsupported image URL scheme '${scheme}:', expected data:, http: or https:` : 'image_url.url must be a data: or http(s) URL',
  );
}
