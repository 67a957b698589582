// Strings typed by people (CLI flags, environment variables) parsed into knob values.
// Modes are trimmed and case-insensitive here ("  SHM " is shm); the YAML/JSON form stays
// strict lowercase. Thresholds are plain decimal digits: "64k", "-1", "1.5", "NaN", "1e6"
// are refused. The accepted-values text comes from the schema, never restated here.
import { ShmMinBytesSchema, TransportModeSchema, type TransportKnob, type TransportKnobValues } from './schema.ts';

export type LooseParse<T> = { ok: true; value: T } | { ok: false; expected: string };

function firstMessage(result: { success: false; error: { issues: Array<{ message: string }> } }): string {
  return result.error.issues[0]?.message ?? 'invalid value';
}

export function parseLooseMode(raw: string): LooseParse<TransportKnobValues['multimodal_tensor_transport']> {
  const result = TransportModeSchema.safeParse(raw.trim().toLowerCase());
  return result.success ? { ok: true, value: result.data } : { ok: false, expected: firstMessage(result) };
}

export function parseLooseBytes(raw: string): LooseParse<number> {
  const trimmed = raw.trim();
  const result = ShmMinBytesSchema.safeParse(/^\d+$/.test(trimmed) ? Number(trimmed) : trimmed);
  return result.success ? { ok: true, value: result.data } : { ok: false, expected: firstMessage(result) };
}

export function parseLooseKnob<K extends TransportKnob>(knob: K, raw: string): LooseParse<TransportKnobValues[K]> {
  return (knob === 'multimodal_tensor_transport' ? parseLooseMode(raw) : parseLooseBytes(raw)) as LooseParse<TransportKnobValues[K]>;
}
