// Strings typed by people (CLI flags, environment variables) parsed through the same schemas
// as the YAML file, so the accepted-values text is the schema's and never restated here.
// Values are trimmed; modes are case-insensitive here ("  SHM " is shm) while the YAML/JSON
// form stays strict lowercase; numbers must be plain decimal digits, so "64k", "-1", "1.5",
// "NaN" and "1e6" are refused as thresholds and ports.
import type { z } from 'zod';
import { invalidValueMessage, type ConfigIssue } from './errors.ts';
import { PortSchema, ShmMinBytesSchema, TransportModeSchema, type TransportKnob, type TransportKnobValues } from './schema.ts';

export type LooseParse<T> = { ok: true; value: T } | { ok: false; expected: string };

/**
 * `raw` through `schema`: trimmed, lowercased for `lowercase`, plain digits turned into a
 * number for `digits` (and a plain decimal such as 0.5 for `decimal`).
 */
export function parseLoose<T>(schema: z.ZodType<T>, raw: string, options: { digits?: boolean; decimal?: boolean; lowercase?: boolean } = {}): LooseParse<T> {
  let text = raw.trim();
  if (options.lowercase) text = text.toLowerCase();
  const numeric = options.decimal ? /^\d+(?:\.\d+)?$/ : /^\d+$/;
  const result = schema.safeParse(options.digits && numeric.test(text) ? Number(text) : text);
  return result.success ? { ok: true, value: result.data } : { ok: false, expected: result.error.issues[0]?.message ?? 'invalid value' };
}

export const parseLooseMode = (raw: string) => parseLoose(TransportModeSchema, raw, { lowercase: true });
export const parseLooseBytes = (raw: string) => parseLoose(ShmMinBytesSchema, raw, { digits: true });
export const parseLoosePort = (raw: string) => parseLoose(PortSchema, raw, { digits: true });

export function parseLooseKnob<K extends TransportKnob>(knob: K, raw: string): LooseParse<TransportKnobValues[K]> {
  return (knob === 'multimodal_tensor_transport' ? parseLooseMode(raw) : parseLooseBytes(raw)) as LooseParse<TransportKnobValues[K]>;
}

/** A flag's parsed value, or undefined with an issue naming the flag and the value pushed to `issues`. */
export function flagValue<T>(flag: string, raw: string, parse: (raw: string) => LooseParse<T>, issues: ConfigIssue[]): T | undefined {
  const result = parse(raw);
  if (result.ok) return result.value;
  issues.push({ path: flag, message: invalidValueMessage(flag, raw.trim(), result.expected) });
  return undefined;
}
