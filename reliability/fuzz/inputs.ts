// Inputs for the fuzzers that go through real processes: OpenAI chat bodies, image inputs
// and console contract inputs, each drawn from a case's own generator. Every URL a fuzzer
// could send is forced onto loopback first (loopbackOnly), so no input ever makes the router
// reach beyond this machine: the router refuses loopback image URLs by policy, and a worker
// URL on loopback is only ever one of ours or a closed port.
import sharp, { type Sharp } from 'sharp';
import { mutate, nastyValue, type Rng } from '../lib/rng.ts';

/** Every string that names a host other than loopback now names 127.0.0.1. */
export function loopbackOnly<T>(value: T): T {
  const fix = (s: string) =>
    s.replace(/^(grpc|https?|wss?):\/\/(\[[^\]]*\]|[^/:?#]*)/i, (m, scheme: string, host: string) =>
      /^(127\.0\.0\.1|\[::1\]|localhost)$/i.test(host) ? m : `${scheme}://127.0.0.1`,
    );
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return fix(v);
    if (Array.isArray(v)) return v.map(walk);
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v as Record<string, unknown>).map(([k, x]) => [k, walk(x)]));
    return v;
  };
  return walk(value) as T;
}

export interface HttpCase {
  label: string;
  body: Buffer | string;
  headers?: Record<string, string>;
  method?: string;
  path?: string;
  /** The body is the valid base request with its one image untouched (a 200 must carry that image's fingerprint). */
  baseImage?: boolean;
  stream?: boolean;
}

export function chatWith(url: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    model: 'qwen2-vl-mini',
    messages: [
      {
        role: 'user',
        content: [
          { type: 'image_url', image_url: { url } },
          { type: 'text', text: 'describe' },
        ],
      },
    ],
    ...extra,
  };
}

const SPECIAL_BODIES = (url: string): Array<[string, unknown]> => [
  ['max_tokens 1e15', chatWith(url, { max_tokens: 1e15 })],
  ['max_tokens 0', chatWith(url, { max_tokens: 0 })],
  ['max_tokens 1.5', chatWith(url, { max_tokens: 1.5 })],
  ['max_tokens string', chatWith(url, { max_tokens: '16' })],
  ['temperature 3', chatWith(url, { temperature: 3 })],
  ['top_p -1', chatWith(url, { top_p: -1 })],
  ['n 2', chatWith(url, { n: 2 })],
  ['stream "yes"', chatWith(url, { stream: 'yes' })],
  ['stop 5 items', chatWith(url, { stop: ['a', 'b', 'c', 'd', 'e'] })],
  ['no messages', { messages: [] }],
  ['messages object', { messages: { role: 'user' } }],
  ['role tool', { messages: [{ role: 'tool', content: 'x' }] }],
  ['content number', { messages: [{ role: 'user', content: 5 }] }],
  ['content null', { messages: [{ role: 'user', content: null }] }],
  ['part type audio', { messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: 'AAAA' } }] }] }],
  ['image part without url', { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: {} }] }] }],
  ['image url file://', chatWith('file:///etc/passwd')],
  ['image url loopback', chatWith('http://127.0.0.1:1/x.png')],
  ['image url localhost', chatWith('http://localhost:1/x.png')],
  ['image url metadata', chatWith('http://169.254.169.254/latest/meta-data')],
  ['image url ftp', chatWith('ftp://127.0.0.1/x.png')],
  ['image url javascript', chatWith('javascript:alert(1)')],
  ['data url text/plain', chatWith('data:text/plain;base64,aGVsbG8=')],
  ['data url not base64', chatWith('data:image/png,hello')],
  ['data url empty', chatWith('data:image/png;base64,')],
  ['data url invalid base64', chatWith('data:image/png;base64,!!!!****')],
  ['data url no comma', chatWith('data:image/png;base64')],
  ['unknown top-level field', chatWith(url, { frobnicate: true })],
  ['__proto__ field', JSON.parse(`{"__proto__": {"polluted": 1}, "messages": [{"role": "user", "content": "hi"}]}`)],
  ['text only', { messages: [{ role: 'user', content: 'hello' }] }],
  [
    'system + user',
    {
      messages: [
        { role: 'system', content: 'be brief' },
        {
          role: 'user',
          content: [
            { type: 'image_url', image_url: { url } },
            { type: 'text', text: 'x' },
          ],
        },
      ],
    },
  ],
  ['17 images', { messages: [{ role: 'user', content: Array.from({ length: 17 }, () => ({ type: 'image_url', image_url: { url } })) }] }],
  ['unicode text', { messages: [{ role: 'user', content: '\u202e\ud83d\ude00\u0000\u4e2d\ufffd' }] }],
];

const RAW_BODIES: Array<[string, string | Buffer]> = [
  ['empty', ''],
  ['null', 'null'],
  ['array', '[]'],
  ['string', '"hi"'],
  ['number', '42'],
  ['not json', 'hello'],
  ['bom', '\ufeff{"messages":[{"role":"user","content":"hi"}]}'],
  ['trailing garbage', '{"messages":[{"role":"user","content":"hi"}]}xyz'],
  ['duplicate keys', '{"messages":[{"role":"user","content":"hi"}],"messages":5}'],
  ['invalid utf-8', Buffer.concat([Buffer.from('{"messages":[{"role":"user","content":"'), Buffer.from([0xff, 0xfe, 0xc0, 0x80]), Buffer.from('"}]}')])],
  ['lone surrogate escape', '{"messages":[{"role":"user","content":"\\ud800"}]}'],
  ['deep arrays 1e5', '['.repeat(100_000) + ']'.repeat(100_000)],
  ['deep objects 2e4', '{"a":'.repeat(20_000) + '1' + '}'.repeat(20_000)],
  ['deep messages', `{"messages":${'['.repeat(50_000)}${']'.repeat(50_000)}}`],
  ['huge number', '{"messages":[{"role":"user","content":"hi"}],"max_tokens":1e999}'],
  ['NaN literal', '{"messages":[{"role":"user","content":"hi"}],"max_tokens":NaN}'],
];

export function openaiCase(rng: Rng, i: number, imageUrl: string): HttpCase {
  const specials = SPECIAL_BODIES(imageUrl);
  if (i < specials.length) return { label: `special: ${specials[i]![0]}`, body: JSON.stringify(loopbackOnly(specials[i]![1])) };
  if (i < specials.length + RAW_BODIES.length) {
    const [label, body] = RAW_BODIES[i - specials.length]!;
    return { label: `raw: ${label}`, body };
  }
  const r = rng.next();
  const stream = rng.chance(0.3);
  const base = chatWith(imageUrl, stream ? { stream: true } : {});
  if (r < 0.15) return { label: 'valid', body: JSON.stringify(base), baseImage: true, stream };
  if (r < 0.7) {
    let v: unknown = base;
    for (let k = rng.int(1, 3); k > 0; k--) v = mutate(v, rng);
    return { label: 'mutated', body: JSON.stringify(loopbackOnly(v) ?? null) ?? 'null', stream };
  }
  if (r < 0.8) {
    const text = JSON.stringify(base);
    return { label: 'truncated', body: text.slice(0, rng.int(0, text.length - 1)) };
  }
  if (r < 0.85) return { label: 'random bytes', body: Buffer.from(rng.bytes(rng.int(0, 2000))) };
  if (r < 0.92)
    return {
      label: 'wrong content-type',
      body: JSON.stringify(base),
      headers: { 'content-type': rng.pick(['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', '']) },
      baseImage: true,
    };
  if (r < 0.96)
    return {
      label: 'wrong method or path',
      body: JSON.stringify(base),
      method: rng.pick(['GET', 'PUT', 'DELETE', 'PATCH']),
      path: rng.pick([
        '/v1/chat/completions',
        '/v1/chat/completions/',
        '/v1/completions',
        '/v1/../v1/chat/completions',
        '/%2e%2e/',
        '/v1/chat/completions?x=1',
      ]),
    };
  return {
    label: 'mutated value',
    body: JSON.stringify(
      loopbackOnly(
        chatWith(imageUrl, {
          [rng.pick(['max_tokens', 'max_completion_tokens', 'temperature', 'top_p', 'stop', 'stream', 'stream_options', 'n', 'user', 'model'])]:
            nastyValue(rng),
        }),
      ),
    ),
  };
}

// ---------------------------------------------------------------- images

export interface ImageCase {
  label: string;
  /** The data: URL (or other URL) to send. */
  url: string;
  /** The image bytes when the URL carries an image to check a 200 against. */
  bytes?: Buffer;
}

const MIME: Record<string, string> = { png: 'image/png', jpeg: 'image/jpeg', webp: 'image/webp', gif: 'image/gif' };
const dataUrl = (mime: string, b: Buffer | Uint8Array) => `data:${mime};base64,${Buffer.from(b).toString('base64')}`;

async function noise(width: number, height: number, channels: 1 | 2 | 3 | 4, seed: number): Promise<Sharp> {
  const px = Buffer.alloc(width * height * channels);
  let x = seed | 1;
  for (let i = 0; i < px.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    px[i] = ((i % (width * channels)) * 3 + (x & 31)) & 255;
  }
  return sharp(px, { raw: { width, height, channels } });
}

/** Images made once per run, for the cases to cut, flip and forge. */
export async function imageBank(): Promise<Record<string, Buffer>> {
  const bank: Record<string, Buffer> = {};
  bank['rgb.png'] = await (await noise(120, 90, 3, 1)).png().toBuffer();
  bank['rgba.png'] = await (await noise(100, 100, 4, 2)).png().toBuffer();
  bank['gray.png'] = await (await noise(90, 60, 1, 3)).png().toBuffer();
  bank['graya.png'] = await (await noise(64, 64, 2, 4)).png().toBuffer();
  bank['16bit.png'] = await (await noise(80, 80, 3, 5)).png().toColourspace('rgb16').toBuffer();
  bank['palette.png'] = await (await noise(96, 64, 3, 6)).png({ palette: true }).toBuffer();
  bank['interlaced.png'] = await (await noise(90, 90, 3, 7)).png({ progressive: true }).toBuffer();
  bank['photo.jpg'] = await (await noise(160, 120, 3, 8)).jpeg({ quality: 80 }).toBuffer();
  bank['progressive.jpg'] = await (await noise(160, 120, 3, 9)).jpeg({ progressive: true }).toBuffer();
  bank['gray.jpg'] = await (await noise(100, 80, 1, 10)).jpeg().toBuffer();
  bank['cmyk.jpg'] = await (await noise(90, 90, 3, 11)).toColourspace('cmyk').jpeg().toBuffer();
  bank['lossy.webp'] = await (await noise(128, 96, 3, 12)).webp({ quality: 70 }).toBuffer();
  bank['lossless.webp'] = await (await noise(96, 96, 4, 13)).webp({ lossless: true }).toBuffer();
  bank['still.gif'] = await (await noise(80, 60, 3, 14)).gif().toBuffer();
  const frames = async (n: number, w: number, h: number, fmt: 'gif' | 'webp') => {
    const raw = Buffer.alloc(w * h * 3 * n);
    for (let i = 0; i < raw.length; i++) raw[i] = (i * 7 + Math.floor(i / (w * h * 3)) * 40) & 255;
    const img = sharp(raw, { raw: { width: w, height: h * n, channels: 3, pageHeight: h } as never });
    return fmt === 'gif' ? img.gif().toBuffer() : img.webp({ quality: 50 }).toBuffer();
  };
  bank['300 frames.gif'] = await frames(300, 48, 48, 'gif');
  bank['60 frames.webp'] = await frames(60, 64, 64, 'webp');
  bank['bomb 10000x10000.png'] = await sharp({ create: { width: 10_000, height: 10_000, channels: 3, background: '#000' } })
    .png({ compressionLevel: 9 })
    .toBuffer();
  bank['1x4000.png'] = await (await noise(1, 4000, 3, 15)).png().toBuffer();
  bank['4000x1.png'] = await (await noise(4000, 1, 3, 16)).png().toBuffer();
  bank['28x5600.png'] = await (await noise(28, 5600, 3, 17)).png().toBuffer();
  bank['30x6100.png'] = await (await noise(30, 6100, 3, 18)).png().toBuffer();
  bank['1x1.png'] = await (await noise(1, 1, 3, 19)).png().toBuffer();
  bank['27x27.jpg'] = await (await noise(27, 27, 3, 20)).jpeg().toBuffer();
  bank['tiff'] = await (await noise(64, 64, 3, 21)).tiff().toBuffer();
  return bank;
}

/** A PNG whose IHDR claims `w`×`h` (the CRC is left as it was). */
function forgedPng(png: Buffer, w: number, h: number): Buffer {
  const b = Buffer.from(png);
  b.writeUInt32BE(w >>> 0, 16);
  b.writeUInt32BE(h >>> 0, 20);
  return b;
}
function forgedGif(gif: Buffer, w: number, h: number): Buffer {
  const b = Buffer.from(gif);
  b.writeUInt16LE(w, 6);
  b.writeUInt16LE(h, 8);
  return b;
}
function forgedJpeg(jpeg: Buffer, w: number, h: number): Buffer {
  const b = Buffer.from(jpeg);
  for (let i = 2; i + 9 < b.length;) {
    const marker = b[i + 1]!;
    if (marker >= 0xc0 && marker <= 0xc2) {
      b.writeUInt16BE(h, i + 5);
      b.writeUInt16BE(w, i + 7);
      return b;
    }
    i += 2 + b.readUInt16BE(i + 2);
  }
  return b;
}

const NOT_IMAGES: Array<[string, string, Buffer]> = [
  ['svg', 'image/svg+xml', Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="10000" height="10000"><image href="file:///etc/passwd"/></svg>')],
  ['bmp', 'image/bmp', Buffer.concat([Buffer.from('BM'), Buffer.alloc(60)])],
  ['ico', 'image/x-icon', Buffer.from([0, 0, 1, 0, 1, 0, 16, 16, 0, 0, 1, 0, 32, 0, 0, 0, 0, 0, 22, 0, 0, 0])],
  ['pdf', 'image/png', Buffer.from('%PDF-1.4\n1 0 obj\n<<>>\nendobj\n')],
  ['heif', 'image/heic', Buffer.concat([Buffer.from([0, 0, 0, 24]), Buffer.from('ftypheic'), Buffer.alloc(16)])],
  ['html', 'image/png', Buffer.from('<html><script>alert(1)</script></html>')],
  ['zip', 'image/png', Buffer.from([0x50, 0x4b, 0x03, 0x04, ...Array(26).fill(0)])],
  ['png magic only', 'image/png', Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])],
  ['jpeg magic only', 'image/jpeg', Buffer.from([0xff, 0xd8, 0xff])],
  ['gif magic only', 'image/gif', Buffer.from('GIF89a')],
  ['riff webp header only', 'image/webp', Buffer.concat([Buffer.from('RIFF'), Buffer.alloc(4), Buffer.from('WEBPVP8X'), Buffer.alloc(18, 0xff)])],
];

export function imageCase(rng: Rng, i: number, bank: Record<string, Buffer>): ImageCase {
  const names = Object.keys(bank);
  const fixed: ImageCase[] = [
    ...names.map((n) => ({
      label: `bank: ${n}`,
      url: dataUrl(n === 'tiff' ? 'image/tiff' : (MIME[n.split('.').pop()!] ?? 'image/png'), bank[n]!),
      bytes: bank[n]!,
    })),
    ...NOT_IMAGES.map(([label, mime, b]) => ({ label: `not an image: ${label}`, url: dataUrl(mime, b) })),
    { label: 'png as image/jpeg', url: dataUrl('image/jpeg', bank['rgb.png']!), bytes: bank['rgb.png']! },
    { label: 'png as text/plain', url: dataUrl('text/plain', bank['rgb.png']!) },
    { label: 'png as application/octet-stream', url: dataUrl('application/octet-stream', bank['rgb.png']!) },
    { label: 'forged png 100000x100000', url: dataUrl('image/png', forgedPng(bank['rgb.png']!, 100_000, 100_000)) },
    { label: 'forged png 2^31x2^31', url: dataUrl('image/png', forgedPng(bank['rgb.png']!, 2 ** 31, 2 ** 31)) },
    { label: 'forged png 0x0', url: dataUrl('image/png', forgedPng(bank['rgb.png']!, 0, 0)) },
    { label: 'forged gif 65535x65535', url: dataUrl('image/gif', forgedGif(bank['still.gif']!, 65_535, 65_535)) },
    { label: 'forged jpeg 65500x65500', url: dataUrl('image/jpeg', forgedJpeg(bank['photo.jpg']!, 65_500, 65_500)) },
    { label: 'forged jpeg 1x65500', url: dataUrl('image/jpeg', forgedJpeg(bank['photo.jpg']!, 1, 65_500)) },
  ];
  if (i < fixed.length) return fixed[i]!;
  const name = rng.pick(names.filter((n) => !n.startsWith('bomb') && n !== 'tiff'));
  const src = bank[name]!;
  const mime = MIME[name.split('.').pop()!] ?? 'image/png';
  const r = rng.next();
  if (r < 0.35) {
    const cut = rng.int(0, src.length - 1);
    return { label: 'truncated', url: dataUrl(mime, src.subarray(0, cut)), bytes: src.subarray(0, cut) };
  }
  if (r < 0.7) {
    const b = Buffer.from(src);
    for (let k = rng.int(1, 8); k > 0; k--) b[rng.int(Math.min(8, b.length - 1), b.length - 1)] = rng.int(0, 255);
    return { label: 'bytes flipped', url: dataUrl(mime, b), bytes: b };
  }
  if (r < 0.8) {
    const b = Buffer.concat([src, Buffer.from(rng.bytes(rng.int(1, 5000)))]);
    return { label: 'trailing garbage', url: dataUrl(mime, b), bytes: b };
  }
  if (r < 0.9) {
    const w = rng.pick([1, 27, 28, 100, 65535, 2 ** 24, 2 ** 31]);
    const h = rng.pick([1, 27, 28, 100, 65535, 2 ** 24]);
    const forged = name.endsWith('.png')
      ? forgedPng(src, w, h)
      : name.endsWith('.gif')
        ? forgedGif(src, Math.min(w, 65535), Math.min(h, 65535))
        : name.endsWith('.jpg')
          ? forgedJpeg(src, Math.min(w, 65535), Math.min(h, 65535))
          : src;
    return { label: 'forged header size', url: dataUrl(mime, forged), bytes: forged };
  }
  return { label: 'random bytes', url: dataUrl(rng.pick(['image/png', 'image/jpeg', 'image/webp', 'image/gif']), Buffer.from(rng.bytes(rng.int(1, 3000)))) };
}

// ---------------------------------------------------------------- console contract

export interface ContractState {
  revision: number;
  config: Record<string, unknown> & { workers: Array<Record<string, unknown>> };
  workerUrl: string;
}

/** A valid input per command (as far as the current state goes); the fuzzer mutates these. */
export function validContractInput(command: string, s: ContractState, rng: Rng): unknown {
  const draft = { ...s.config, health_check_interval_secs: rng.int(1, 100) / 10 };
  switch (command) {
    case 'config.validate':
    case 'config.diff':
    case 'config.resolve':
      return rng.chance(0.5)
        ? { draft }
        : { yaml: `multimodal_tensor_transport: ${rng.pick(['inline', 'shm', 'auto', 'fast'])}\nworkers:\n  - url: ${s.workerUrl}\n` };
    case 'config.apply':
      return { draft, expectedRevision: s.revision };
    case 'config.importYaml':
      return { text: `multimodal_shm_min_bytes: ${rng.int(0, 1 << 20)}\n` };
    case 'config.rollback':
      return { revision: Math.max(1, s.revision - rng.int(0, 3)), expectedRevision: s.revision };
    case 'config.reloadFile':
      return { expectedRevision: s.revision };
    case 'workers.add':
      return { worker: { url: `grpc://127.0.0.1:${rng.int(1, 3)}` }, expectedRevision: s.revision };
    case 'workers.update':
      return { url: s.workerUrl, worker: { url: s.workerUrl, labels: { zone: rng.string(5) }, priority: rng.int(0, 100) }, expectedRevision: s.revision };
    case 'workers.remove':
      return { url: `grpc://127.0.0.1:${rng.int(1, 3)}`, expectedRevision: s.revision };
    case 'workers.resetShmLane':
    case 'workers.diagnose':
      return { url: s.workerUrl };
    case 'traffic.snapshot':
      return { limit: rng.int(1, 100) };
    case 'traffic.request':
      return { requestId: rng.pick(['chatcmpl-none', rng.string(12)]) };
    case 'traffic.sendTestRequest':
      return { url: s.workerUrl, width: rng.int(16, 200), height: rng.int(16, 200), format: rng.pick(['png', 'jpeg', 'webp']) };
    case 'transport.calibrate':
      return { url: s.workerUrl, samples: rng.pick([0, 21, -1, 1.5, '3']) };
    default:
      return {};
  }
}
