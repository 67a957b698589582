// The shape of the environment layer as the router reads it (env.ts) and as the console
// shows it: for each transport knob, the canonical variable and its deprecated alias, the
// state each was found in, the value the layer contributes and the warnings it deserves.
// zod only, so the console contract and the renderer share it.
import { z } from 'zod';
import { ShmMinBytesSchema, TransportModeSchema, type TransportKnob, type TransportKnobValues } from './schema.ts';

export const ENV_VARIABLE_STATES = [
  'unset', // not in the environment
  'blank', // set to '' or whitespace: treated as unset
  'valid',
  'invalid', // set but not parseable: warned, ignored
  'not_consulted', // alias while the canonical variable is set
] as const;
export const EnvVariableStateSchema = z.enum(ENV_VARIABLE_STATES);
export type EnvVariableState = z.infer<typeof EnvVariableStateSchema>;

export const EnvVariableReadingSchema = z.object({
  name: z.string(),
  /** As found in the environment, untrimmed; absent when unset. */
  raw: z.string().optional(),
  state: EnvVariableStateSchema,
});
export type EnvVariableReading = z.infer<typeof EnvVariableReadingSchema>;

function knobReading<K extends string, V extends z.ZodType>(knob: K, value: V) {
  return z.object({
    knob: z.literal(knob),
    canonical: EnvVariableReadingSchema,
    legacy: EnvVariableReadingSchema,
    /** The value this layer contributes, if any. */
    value: value.optional(),
    source: z.enum(['env', 'env_legacy']).optional(),
    warnings: z.array(z.string()),
  });
}

export const TransportEnvironmentSchema = z.object({
  multimodal_tensor_transport: knobReading('multimodal_tensor_transport', TransportModeSchema),
  multimodal_shm_min_bytes: knobReading('multimodal_shm_min_bytes', ShmMinBytesSchema),
  /** All warnings of both knobs, in a stable order: what is logged once at start. */
  warnings: z.array(z.string()),
});
export type TransportEnvironment = z.infer<typeof TransportEnvironmentSchema>;
type KnobReadingShape = z.infer<ReturnType<typeof knobReading<string, z.ZodType>>>;
/** One knob's reading, typed by the knob. */
export type EnvKnobReading<K extends TransportKnob> = Omit<KnobReadingShape, 'knob' | 'value'> & { knob: K; value?: TransportKnobValues[K] };
