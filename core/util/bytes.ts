// How a size reads, everywhere: the router's messages, the CLI's reports and the console's
// screens (which take these through the console contract). Binary units (KiB, MiB, GiB) with
// three significant digits: 24 → "24 B", 75264 → "73.5 KiB", 2408448 → "2.30 MiB",
// 21 MiB → "21.0 MiB". The value and its unit come apart too, so a table can right-align
// digits and keep the unit in a column of its own.

const BINARY = ['B', 'KiB', 'MiB', 'GiB', 'TiB'] as const;

export interface Quantity {
  value: string;
  unit: string;
}

/** A number with three significant digits (no fewer than its integer digits): 0 → "0", 2.3 → "2.30", 73.5 → "73.5", 512 → "512". */
export function threeDigits(v: number): string {
  const a = Math.abs(v);
  if (a === 0) return '0';
  if (a >= 100) return v.toFixed(0);
  if (a >= 10) return v.toFixed(1);
  return v.toFixed(2);
}

/** A size as a value and a binary unit; "–" for a size that is not a number. */
export function bytesParts(n: number): Quantity {
  if (!Number.isFinite(n)) return { value: '–', unit: '' };
  const sign = n < 0 ? '-' : '';
  let v = Math.abs(n);
  let i = 0;
  while (v >= 1024 && i < BINARY.length - 1) {
    v /= 1024;
    i += 1;
  }
  if (i === 0) return { value: `${sign}${Math.round(v)}`, unit: 'B' };
  return { value: `${sign}${threeDigits(v)}`, unit: BINARY[i]! };
}

/** A size in words: "2.30 MiB". */
export function formatBytes(n: number): string {
  const q = bytesParts(n);
  return `${q.value} ${q.unit}`.trim();
}

/** A size in MiB whatever it is, for a figure set in MiB (the pixel cache's budget): 1226833 → "1.17 MiB", 0 → "0 MiB", 5 → "<0.01 MiB". */
export function formatMiB(n: number): string {
  if (!Number.isFinite(n)) return '–';
  const mib = n / (1024 * 1024);
  if (mib === 0) return '0 MiB';
  if (mib > 0 && mib < 0.01) return '<0.01 MiB';
  return `${threeDigits(mib)} MiB`;
}
