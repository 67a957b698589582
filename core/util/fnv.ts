// FNV-1a 64-bit (offset basis 0xcbf29ce484222325, prime 0x100000001b3) over bytes, as 16
// lowercase hex digits: the checksum the router, the reference worker and the tests print of
// a tensor. Runs on two 32-bit halves instead of BigInt, which is much slower (measured:
// docs/performance.md, "Where the comments' measurements went: transport and preprocessing"):
// the prime is 2^40 + 0x1b3, so h*prime = h*0x1b3 + (h << 40), and h << 40 only adds lo << 8
// to the high word.
export function fnv1a64(bytes: Uint8Array, seed?: { hi: number; lo: number }): { hi: number; lo: number } {
  let hi = seed?.hi ?? 0xcbf29ce4;
  let lo = seed?.lo ?? 0x84222325;
  for (let i = 0; i < bytes.length; i++) {
    lo ^= bytes[i]!;
    const loTimes = (lo >>> 0) * 0x1b3;
    const carry = Math.floor(loTimes / 0x100000000);
    hi = (hi * 0x1b3 + carry + ((lo << 8) >>> 0)) >>> 0;
    lo = loTimes >>> 0;
  }
  return { hi, lo };
}

export function fnv1a64Hex(bytes: Uint8Array): string {
  const { hi, lo } = fnv1a64(bytes);
  return hi.toString(16).padStart(8, '0') + lo.toString(16).padStart(8, '0');
}
