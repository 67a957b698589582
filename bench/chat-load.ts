// What bench:router and bench:epd share: a keep-alive HTTP client that times chat requests
// (with the router's Server-Timing spans), bursts at a given concurrency, percentiles, and the
// one 1080p JPEG chat body both send.
import { execFileSync } from 'node:child_process';
import { closeSync, constants, mkdtempSync, openSync, readFileSync, rmSync, unlinkSync, writeSync } from 'node:fs';
import os from 'node:os';
import http from 'node:http';
import path from 'node:path';
import { pythonWithPillow } from '../core/test/python.ts';

export const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};

export interface Sample {
  ms: number;
  timing: Record<string, number>;
}

// node:http with a keep-alive agent: less client-side work per request than fetch (undici),
// and the client shares the machine's two cores with router and worker (measured:
// docs/performance.md, "fetch against node:http in the load clients").
export const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

/**
 * One request. A router closes a keep-alive connection idle for 5 s (Node's default), and the
 * agent may pick that socket just as it closes: such a request, which never reached the router,
 * is sent once more on a new connection, and only that attempt is timed.
 */
export async function request(url: string, body: Uint8Array): Promise<Sample> {
  try {
    return await attempt(url, body);
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { noResponse?: boolean };
    if (!e.noResponse || (e.code !== 'ECONNRESET' && e.message !== 'socket hang up')) throw err;
    return attempt(url, body);
  }
}

function attempt(url: string, body: Uint8Array): Promise<Sample> {
  const u = new URL(`${url}/v1/chat/completions`);
  const t = performance.now();
  let responded = false;
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': body.byteLength },
      },
      (res) => {
        responded = true;
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const ms = performance.now() - t;
          if (res.statusCode !== 200) return reject(new Error(`HTTP ${res.statusCode}: ${Buffer.concat(chunks).toString()}`));
          const timing = Object.fromEntries(
            String(res.headers['server-timing'] ?? '')
              .split(', ')
              .map((p) => {
                const [name, dur] = p.split(';dur=');
                return [name!, Number(dur)];
              }),
          );
          resolve({ ms, timing });
        });
        res.on('error', reject);
      },
    );
    req.on('error', (err) => reject(Object.assign(err, { noResponse: !responded })));
    req.end(body);
  });
}

export async function burst(url: string, body: Uint8Array, concurrency: number, count: number): Promise<{ samples: Sample[]; wallMs: number }> {
  const samples: Sample[] = [];
  let next = 0;
  const t = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        next += 1;
        samples.push(await request(url, body));
      }
    }),
  );
  return { samples, wallMs: performance.now() - t };
}

/** A chat request with one 1080p JPEG (written under `dir`), encoded once: the client's own cost stays out of the numbers. */
export function chatBody1080p(dir: string): Buffer {
  const jpeg = path.join(dir, '1080p.jpg');
  execFileSync(pythonWithPillow(), [
    '-c',
    `import numpy as np; from PIL import Image
h, w = 1080, 1920; y, x = np.mgrid[0:h, 0:w]; rng = np.random.default_rng(3)
r = (128 + 100 * np.sin(x / 37.0) * np.cos(y / 23.0)).astype(np.uint8); g = ((x * 255) // w).astype(np.uint8)
b = (((x // 64 + y // 64) % 2) * 200 + rng.integers(0, 40, (h, w))).astype(np.uint8)
Image.fromarray(np.dstack([r, g, b])).save('${jpeg}', quality=90)`,
  ]);
  return Buffer.from(
    JSON.stringify({
      model: 'bench',
      max_tokens: 16,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'image_url', image_url: { url: `data:image/jpeg;base64,${readFileSync(jpeg).toString('base64')}` } },
            { type: 'text', text: 'Describe the image.' },
          ],
        },
      ],
    }),
  );
}

let bareSeq = 0;
/** The baseline of a placement: one bare write of `bytes` to a new /dev/shm file, in ms (the file is removed). */
export function bareWrite(bytes: Uint8Array): number {
  // Named as a router names its files, so an interrupted run's file is swept like any orphan.
  const file = path.join('/dev/shm', `smg-tokenspeed-${process.pid}-${BigInt(Date.now()) * 1_000_000n}-${++bareSeq}`);
  const t = performance.now();
  const fd = openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    for (let done = 0; done < bytes.byteLength;) done += writeSync(fd, bytes, done, bytes.byteLength - done, done);
  } finally {
    closeSync(fd);
  }
  const ms = performance.now() - t;
  unlinkSync(file);
  return ms;
}

/** Run `measure` in a scratch directory of its own, removed afterwards with the keep-alive agent's sockets. */
export async function inScratchDir(prefix: string, measure: (dir: string) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  try {
    await measure(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
    agent.destroy();
  }
}
