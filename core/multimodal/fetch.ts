// Where image bytes come from: `data:` URLs (base64), http(s) URLs (size cap, timeout,
// content-type check) and, from the CLI only, local files. Every failure is an
// ImageInputError naming the image's index and the cause, with the HTTP status the API
// should answer (400 bad input, 413 too large).
import { promises as fs } from 'node:fs';
import { fileURLToPath } from 'node:url';

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
}

export const DEFAULT_MAX_IMAGE_BYTES = 20 * 1024 * 1024;

function mib(n: number): string {
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

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
  if (approx > maxBytes) throw new ImageInputError(index, `image is ${mib(approx)}, above the ${mib(maxBytes)} limit`, 413);
  const bytes = Buffer.from(payload, 'base64');
  // Node's decoder skips characters outside the alphabet, so a payload that is not base64
  // decodes to fewer bytes than its length promises: one comparison instead of a regex pass.
  const unpadded = payload.length - (payload.endsWith('==') ? 2 : payload.endsWith('=') ? 1 : 0);
  if (bytes.byteLength !== Math.floor((unpadded * 3) / 4) || payload.length % 4 === 1) throw new ImageInputError(index, 'data: URL payload is not valid base64');
  if (bytes.byteLength === 0) throw new ImageInputError(index, 'data: URL holds no bytes');
  return bytes;
}

async function fromHttp(url: string, index: number, maxBytes: number, timeoutMs: number): Promise<Uint8Array> {
  let res: Response;
  try {
    res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs), redirect: 'follow' });
  } catch (err) {
    const e = err as Error;
    if (e.name === 'TimeoutError') throw new ImageInputError(index, `download of ${url} timed out after ${timeoutMs} ms`);
    throw new ImageInputError(index, `cannot download ${url}: ${(e.cause as Error)?.message ?? e.message}`);
  }
  if (!res.ok) throw new ImageInputError(index, `download of ${url} answered HTTP ${res.status}`);
  const type = (res.headers.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
  if (!type.startsWith('image/') && type !== 'application/octet-stream') {
    await res.body?.cancel();
    throw new ImageInputError(index, `${url} has content type '${type || 'none'}', expected image/*`);
  }
  const declared = Number(res.headers.get('content-length') ?? NaN);
  if (Number.isFinite(declared) && declared > maxBytes) {
    await res.body?.cancel();
    throw new ImageInputError(index, `image at ${url} is ${mib(declared)}, above the ${mib(maxBytes)} limit`, 413);
  }
  const chunks: Uint8Array[] = [];
  let total = 0;
  const reader = res.body?.getReader();
  if (!reader) throw new ImageInputError(index, `${url} returned no body`);
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      await reader.cancel();
      throw new ImageInputError(index, `image at ${url} is above the ${mib(maxBytes)} limit`, 413);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks, total);
}

async function fromFile(file: string, index: number, maxBytes: number): Promise<Uint8Array> {
  let stat;
  try {
    stat = await fs.stat(file);
  } catch (err) {
    throw new ImageInputError(index, `cannot read ${file}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}`);
  }
  if (!stat.isFile()) throw new ImageInputError(index, `${file} is not a file`);
  if (stat.size > maxBytes) throw new ImageInputError(index, `${file} is ${mib(stat.size)}, above the ${mib(maxBytes)} limit`, 413);
  return fs.readFile(file);
}

export async function loadImageBytes(source: string, index: number, options: ImageSourceOptions = {}): Promise<Uint8Array> {
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_IMAGE_BYTES;
  if (source.startsWith('data:')) return fromDataUrl(source, index, maxBytes);
  if (/^https?:\/\//i.test(source)) return fromHttp(source, index, maxBytes, options.timeoutMs ?? 10_000);
  if (options.allowFiles) {
    if (source.startsWith('file://')) return fromFile(fileURLToPath(source), index, maxBytes);
    if (!/^[a-z][a-z0-9+.-]*:/i.test(source)) return fromFile(source, index, maxBytes);
  }
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(source)?.[1];
  throw new ImageInputError(index, scheme ? `unsupported image URL scheme '${scheme}:', expected data:, http: or https:` : 'image_url.url must be a data: or http(s) URL');
}
