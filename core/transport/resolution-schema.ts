// The shape of a worker's resolved transport settings with their provenance (resolve.ts
// computes it; `mmtc config resolve --json`, the console's precedence ladder and the
// contract all show it): for each knob the value, the winning layer, and every layer's raw
// value, state and origin. zod only, so the console contract and the renderer share it.
import { z } from 'zod';
import { ShmMinBytesSchema, TransportModeSchema, WorkerTypeSchema } from '../config/schema.ts';

export const TRANSPORT_LAYERS = ['worker', 'router', 'env', 'env_legacy', 'default'] as const;
export const TransportLayerSchema = z.enum(TRANSPORT_LAYERS);
export type TransportLayer = z.infer<typeof TransportLayerSchema>;

export const LAYER_STATES = [
  'won', // this layer decided the value
  'beaten', // set and valid, but a higher layer won
  'unset',
  'blank', // env variable set to whitespace: same as unset
  'invalid', // env variable not parseable: warned, ignored
  'not_consulted', // alias while the canonical variable is set
] as const;
export const LayerStateSchema = z.enum(LAYER_STATES);
export type LayerState = z.infer<typeof LayerStateSchema>;

function layerReading<V extends z.ZodType>(value: V) {
  return z.object({
    layer: TransportLayerSchema,
    /** The name the operator knows this input by: key path, env variable, "built-in default". */
    name: z.string(),
    /** Where it was set: "router.yaml:3:1", "--multimodal-tensor-transport", "createRouter()"; absent when not set. */
    origin: z.string().optional(),
    /** What the layer holds as given (env: the untrimmed string), null when unset. */
    raw: z.union([z.string(), z.number()]).nullable(),
    /** The parsed value, null when unset or invalid. */
    value: value.nullable(),
    state: LayerStateSchema,
  });
}

function resolvedKnob<V extends z.ZodType>(value: V) {
  return z.object({ value, source: TransportLayerSchema, layers: z.array(layerReading(value)), warnings: z.array(z.string()) });
}

export const ResolvedWorkerTransportSchema = z.object({
  url: z.string(),
  /** Where the worker's entry came from ("router.yaml:5:5", "--worker-urls", "embedded default"). */
  origin: z.string().optional(),
  worker_type: WorkerTypeSchema,
  /** Whose per-worker overrides apply (differs from `url` under disaggregation). */
  overrides_from: z.string(),
  multimodal_tensor_transport: resolvedKnob(TransportModeSchema),
  multimodal_shm_min_bytes: resolvedKnob(ShmMinBytesSchema),
  notes: z.array(z.string()),
});
export type ResolvedWorkerTransport = z.infer<typeof ResolvedWorkerTransportSchema>;

type AnyLayerReading = z.infer<ReturnType<typeof layerReading<z.ZodType>>>;
/** One layer's reading, typed by the knob's value. */
export type LayerReading<T> = Omit<AnyLayerReading, 'value'> & { value: T | null };
/** One knob's resolution, typed by its value. */
export type ResolvedKnob<T> = { value: T; source: TransportLayer; layers: LayerReading<T>[]; warnings: string[] };
