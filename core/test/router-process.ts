// What tests of a router running as its own process (`mmtc router`, `mmtc serve`, `npm start`)
// look at: its pixel-cache files in /dev/shm, made by a real chat request with an image.
import { readdirSync } from 'node:fs';
import sharp from 'sharp';
import { expect } from 'vitest';

/** The pixel-cache files of the router with this pid in /dev/shm: its entries and the cache's heartbeat (seq 0). */
export const cacheFilesOf = (pid: number): string[] => readdirSync('/dev/shm').filter((f) => new RegExp(`^smg-tokenspeed-cache-\\d+-${pid}-`).test(f));

/** Pixel-cache files in /dev/shm of any of these pids. */
export const cacheFilesOfAny = (pids: number[]): string[] => pids.flatMap(cacheFilesOf);

/** Ask the router at `base` about one image; then wait (up to 5 s) until `files()` shows its cache entry and heartbeat. */
export async function cacheAnImage(base: string, files: number | (() => string[])): Promise<string[]> {
  const list = typeof files === 'number' ? () => cacheFilesOf(files) : files;
  const png = await sharp({ create: { width: 96, height: 64, channels: 3, background: { r: 200, g: 40, b: 90 } } })
    .png()
    .toBuffer();
  const res = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'qwen2-vl-mini',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'image_url', image_url: { url: `data:image/png;base64,${png.toString('base64')}` } },
            { type: 'text', text: 'What is it?' },
          ],
        },
      ],
    }),
  });
  expect(res.status, await res.text()).toBe(200);
  for (let i = 0; i < 250 && list().length < 2; i++) await new Promise((resolve) => setTimeout(resolve, 20));
  return list();
}
