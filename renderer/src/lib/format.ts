// How numbers read in the console: sizes come from the one byte formatter (core/util/bytes.ts,
// through the console contract) so a screen, the router's errors and `mmtc doctor` agree;
// throughput per second in decimal units (kB/s, MB/s, GB/s, as link speeds are quoted), durations
// in ms or µs, times as the operator's local clock. Every formatter returns a value and a unit
// separately too, so tables can right-align digits and keep the unit in its own column.

import { bytesParts, formatBytes, formatMiB, threeDigits, type Quantity } from '../../../core/console/contract.ts';
import { typedNumber } from './draft.ts';

export { bytesParts, formatBytes, formatMiB, threeDigits, type Quantity };

const DECIMAL_RATE = ['B/s', 'kB/s', 'MB/s', 'GB/s', 'TB/s'] as const;

/** Bytes per second in decimal units: 1.2e9 → "1.20 GB/s". */
export function rateParts(bytesPerSecond: number): Quantity {
  if (!Number.isFinite(bytesPerSecond)) return { value: '–', unit: '' };
  let v = Math.abs(bytesPerSecond);
  let i = 0;
  while (v >= 1000 && i < DECIMAL_RATE.length - 1) {
    v /= 1000;
    i += 1;
  }
  return { value: i === 0 ? String(Math.round(v)) : threeDigits(v), unit: DECIMAL_RATE[i]! };
}

export function formatRate(bytesPerSecond: number): string {
  const q = rateParts(bytesPerSecond);
  return `${q.value} ${q.unit}`;
}

/** A count per second: 4 → "4.0/s", 5321 → "5.32k/s". */
export function formatCountRate(perSecond: number): string {
  if (!Number.isFinite(perSecond)) return '–';
  if (perSecond >= 1_000_000) return `${threeDigits(perSecond / 1_000_000)}M/s`;
  if (perSecond >= 1000) return `${threeDigits(perSecond / 1000)}k/s`;
  return `${perSecond.toFixed(1)}/s`;
}

/** 0.4 → "0.40 ms", 12.345 → "12.3 ms", 1234 → "1.23 s". */
export function formatMs(ms: number): string {
  if (!Number.isFinite(ms)) return '–';
  if (ms >= 1000) return `${threeDigits(ms / 1000)} s`;
  return `${threeDigits(ms)} ms`;
}

export function formatMicros(us: number): string {
  if (!Number.isFinite(us)) return '–';
  return us >= 10_000 ? `${threeDigits(us / 1000)} ms` : `${Math.round(us)} µs`;
}

export function formatInt(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

export function formatPercent(share: number): string {
  if (!Number.isFinite(share)) return '–';
  return `${(share * 100).toFixed(share > 0 && share < 0.1 ? 1 : 0)} %`;
}

/**
 * A hit rate, hits / (hits + misses), in whole percent: "50 %"; never "100 %" while there was
 * a miss (">99 %") nor "0 %" after a hit ("<1 %"); null before the first lookup.
 */
export function formatHitRate(hits: number, misses: number): string | null {
  const lookups = hits + misses;
  if (lookups <= 0) return null;
  const pct = Math.round((100 * hits) / lookups);
  if (pct === 100 && misses > 0) return '>99 %';
  if (pct === 0 && hits > 0) return '<1 %';
  return `${pct} %`;
}

const pad = (n: number, w = 2) => String(n).padStart(w, '0');

/** Local wall-clock time with milliseconds: "14:03:07.412". */
export function formatClock(ms: number): string {
  const d = new Date(ms);
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

/** Local date and time: "2026-12-01 14:03:07". */
export function formatDateTime(ms: number): string {
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** "3 s ago", "5 min ago", "2 h ago" relative to `now`. */
export function formatAgo(ms: number, now = Date.now()): string {
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86_400)} d ago`;
}

export const BYTE_UNITS = [
  { unit: 'B', factor: 1 },
  { unit: 'KiB', factor: 1024 },
  { unit: 'MiB', factor: 1024 * 1024 },
] as const;
export type ByteUnit = (typeof BYTE_UNITS)[number]['unit'];

/** The largest unit that shows `bytes` as a whole number (65536 → 64 KiB, 1000 → 1000 B). */
export function naturalUnit(bytes: number): ByteUnit {
  for (const u of [...BYTE_UNITS].reverse()) if (bytes >= u.factor && bytes % u.factor === 0) return u.unit;
  return 'B';
}

/**
 * Parse what the operator typed in a threshold field with the chosen unit: the byte count,
 * or what was expected instead. A number is typedNumber's (digits with an optional sign and
 * fraction), and its count of bytes must be whole, so 1.5 KiB is fine (1536) but 0.3 KiB is
 * not; whether the count is in range (-1) is the schema's to say, in its words.
 */
export function parseByteInput(text: string, unit: ByteUnit): { ok: true; bytes: number } | { ok: false; message: string } {
  const t = text.trim();
  if (t === '') return { ok: false, message: 'expected a size' };
  const n = typedNumber(t);
  if (typeof n !== 'number') return { ok: false, message: 'expected a number (e.g. 64) with its unit picked beside it' };
  const factor = BYTE_UNITS.find((u) => u.unit === unit)!.factor;
  const bytes = n * factor;
  if (!Number.isSafeInteger(bytes)) return { ok: false, message: `expected a whole number of bytes; ${t} ${unit} is ${bytes} bytes` };
  return { ok: true, bytes };
}
