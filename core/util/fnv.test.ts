import { describe, expect, it } from 'vitest';
import { fnv1a64, fnv1a64Hex } from './fnv.ts';

const bytes = (s: string) => new TextEncoder().encode(s);
/** Every byte value, three times over: carries through both 32-bit halves. */
const allBytes = Uint8Array.from({ length: 768 }, (_, i) => i % 256);

describe('FNV-1a 64', () => {
  it.each([
    ['the empty input (the offset basis)', new Uint8Array(0), 'cbf29ce484222325'],
    ['"a"', bytes('a'), 'af63dc4c8601ec8c'],
    ['"foobar"', bytes('foobar'), '85944171f73967e8'],
    ['every byte value three times', allBytes, '4f33c513c2e95c25'],
  ])('%s hashes to the reference value (a 64-bit multiply in Python)', (_name, input, hex) => {
    expect(fnv1a64Hex(input)).toBe(hex);
  });

  it('continues from a seed: two chunks hash as their concatenation', () => {
    const seed = fnv1a64(allBytes.subarray(0, 300));
    const { hi, lo } = fnv1a64(allBytes.subarray(300), seed);
    expect(hi.toString(16).padStart(8, '0') + lo.toString(16).padStart(8, '0')).toBe('4f33c513c2e95c25');
  });
});
