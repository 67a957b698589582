// The image identity the workers key their caches on, as the gateway derives it: BLAKE3 of
// the encoded bytes (vLLM's mm_hashes, its hex), and TokenSpeed's content_hash (BLAKE3 of that
// hex). The vectors are BLAKE3's published ones; the "hello" chain is the gateway's derivation
// worked by hand (assemble.rs hash_hex_strings over hasher.rs hash_image).
import { describe, expect, it } from 'vitest';
import { blake3, mediaHash, mediaHashHex, tokenSpeedContentHash } from './media-hash.ts';

describe('the media hash', () => {
  it('is BLAKE3: the published vectors', () => {
    expect(blake3(new Uint8Array(0)).toString('hex')).toBe('af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262');
    // BLAKE3's test-vector input: bytes 0..250 repeating, 1024 of them (one whole chunk).
    const input = Uint8Array.from({ length: 1024 }, (_, i) => i % 251);
    expect(blake3(input).toString('hex')).toBe('42214739f095a406f3fc83deb889744ac00df831c10daa55189b5d121c855af7');
  });

  it('gives vLLM the hex and TokenSpeed BLAKE3 of that hex, as the gateway does', () => {
    const hash = mediaHash(Buffer.from('hello'));
    expect(mediaHashHex(hash)).toBe('ea8f163db38682925e4491c5e58d4bb3506ef8c14eb78a86e908c5624a67200f');
    const content = tokenSpeedContentHash(hash);
    expect(content.toString('hex')).toBe('6cd17c61c7e42c50586ee5f3f54dbc4f809f71073fc176ed2ae865103dd33625');
    // What the TokenSpeed servicer makes of it: the first 8 bytes, little-endian, for the pad value.
    expect(content.readBigUInt64LE(0)).toBe(5777243966994698604n);
  });

  it('hashes a large image across chunks the same every time, and a view of a larger buffer by its own bytes', () => {
    const big = Buffer.alloc(5 * 1024 * 1024 + 7, 0x5a);
    const a = mediaHash(big);
    expect(mediaHash(Buffer.from(big))).toEqual(a);
    const padded = Buffer.concat([Buffer.from([1, 2, 3]), big]);
    expect(mediaHash(padded.subarray(3))).toEqual(a);
  });
});
