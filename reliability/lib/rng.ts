// A small seeded PRNG (mulberry32) so every fuzz case and every load mix is reproducible
// from the seed the suite prints: `--seed N --only <scenario>` replays it exactly.
export class Rng {
  private state: number;
  constructor(readonly seed: number) {
    this.state = seed >>> 0 || 0x9e3779b9;
  }

  /** A float in [0, 1). */
  next(): number {
    let t = (this.state = (this.state + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [lo, hi] (both included). */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)]!;
  }

  bytes(n: number): Uint8Array {
    const out = new Uint8Array(n);
    for (let i = 0; i < n; i++) out[i] = Math.floor(this.next() * 256);
    return out;
  }

  string(maxLen: number, alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789_-./: \t\n\\"\'{}[],#&*!|>%@`\u00e9\u4e2d\u{1F600}\u0000'): string {
    const chars = [...alphabet];
    let s = '';
    const n = this.int(0, maxLen);
    for (let i = 0; i < n; i++) s += this.pick(chars);
    return s;
  }

  /** A child generator for one case, so adding draws in one case does not shift the others. */
  fork(salt: number): Rng {
    return new Rng(hashSeed(this.seed, salt));
  }
}

export function hashSeed(a: number, b: number): number {
  let h = (a ^ 0x85ebca6b) >>> 0;
  h = Math.imul(h ^ (b + 0x9e3779b9), 0xc2b2ae35) >>> 0;
  h ^= h >>> 16;
  return h >>> 0;
}

/** Numbers and strings that break parsers: what every fuzzer mixes in. */
export const NASTY_NUMBERS: readonly unknown[] = [
  0,
  -1,
  1,
  -0,
  0.5,
  1e-300,
  1e300,
  2 ** 31,
  2 ** 32,
  2 ** 53,
  2 ** 53 + 2,
  -(2 ** 53),
  1e15,
  65535,
  65536,
  1e21,
  Number.MAX_SAFE_INTEGER,
  Number.MIN_VALUE,
];
export const NASTY_STRINGS: readonly string[] = [
  '',
  ' ',
  '0',
  '-1',
  '1e6',
  '0x10',
  '1_000',
  'NaN',
  'Infinity',
  'null',
  'true',
  '\u0000',
  '../../etc/passwd',
  '%s%n',
  '\u202e',
  'a'.repeat(10_000),
  '\ud800',
  '{"a":1}',
  '[',
  "'",
  '"',
  '\\',
  'SHM',
  ' inline ',
  'auto\n',
  'grpc://127.0.0.1:1',
  'unix:///',
  'grpc://[::1]:0',
  'grpc://a:99999',
];

export function nastyValue(rng: Rng, depth = 0): unknown {
  switch (rng.int(0, depth > 2 ? 5 : 8)) {
    case 0:
      return rng.pick(NASTY_NUMBERS);
    case 1:
      return rng.pick(NASTY_STRINGS);
    case 2:
      return rng.string(24);
    case 3:
      return rng.pick([true, false, null]);
    case 4:
      return rng.int(-1000, 100_000);
    case 5:
      return rng.next() * 1000 - 500;
    case 6:
      return Array.from({ length: rng.int(0, 4) }, () => nastyValue(rng, depth + 1));
    case 7: {
      const o: Record<string, unknown> = {};
      for (let i = rng.int(0, 4); i > 0; i--)
        o[rng.pick(['a', 'url', 'port', 'image', '__proto__', 'constructor', rng.string(8)])] = nastyValue(rng, depth + 1);
      return o;
    }
    default:
      return undefined;
  }
}

/** Change one thing in a JSON-like value: a field's value, a removed or added field, a type swap. */
export function mutate(value: unknown, rng: Rng, depth = 0): unknown {
  if (value === null || typeof value !== 'object' || depth > 6) return rng.chance(0.8) ? nastyValue(rng) : value;
  if (Array.isArray(value)) {
    const copy = [...value];
    const r = rng.next();
    if (copy.length > 0 && r < 0.6) {
      const i = rng.int(0, copy.length - 1);
      copy[i] = mutate(copy[i], rng, depth + 1);
    } else if (r < 0.75) copy.push(nastyValue(rng));
    else if (r < 0.9 && copy.length > 0) copy.splice(rng.int(0, copy.length - 1), 1);
    else return nastyValue(rng);
    return copy;
  }
  const copy: Record<string, unknown> = { ...(value as Record<string, unknown>) };
  const keys = Object.keys(copy);
  const r = rng.next();
  if (keys.length > 0 && r < 0.6) {
    const k = rng.pick(keys);
    copy[k] = mutate(copy[k], rng, depth + 1);
  } else if (r < 0.75) copy[rng.pick(['extra', 'url', '__proto__', 'toString', rng.string(10)])] = nastyValue(rng);
  else if (r < 0.9 && keys.length > 0) delete copy[rng.pick(keys)];
  else return nastyValue(rng);
  return copy;
}
