// Every router setting the dedicated panels do not cover (request limits, media fetching,
// preprocessing memory, …), edited from the schema itself: the contract's RouterConfigSchema
// validates each value as it is typed (an invalid one stands in the draft, named there), so a setting added to the router later shows here
// with its default and origin without a UI change.
import { useId } from 'react';
import type { z } from 'zod';
import { useDraftText, useTypedText } from '../lib/useTypedText.ts';
import { StartFlagNote } from './StartFlagNote.tsx';
import { Breakable } from './ui.tsx';
import {
  DEFAULT_PIXEL_CACHE_MB,
  fieldProblem,
  PIXEL_CACHE_ENV,
  RouterConfigSchema,
  type ConfigView,
  type RouterConfig,
} from '../../../core/console/contract.ts';
import { mayBeUnset, setRouterField, typedNumber } from '../lib/draft.ts';
import { formatBytes } from '../lib/format.ts';

const HANDLED = new Set([
  'host',
  'port',
  'model_path',
  'policy',
  'multimodal_tensor_transport',
  'multimodal_shm_min_bytes',
  'request_timeout_secs',
  'health_check_interval_secs',
  'workers',
  'disaggregation',
  'prefill_policy',
  'decode_policy',
  'encode_policy',
]);

/** What an optional setting means when it is left unset (its default is computed at start, not a fixed value). */
const UNSET_MEANS: Record<string, string> = {
  multimodal_shm_max_outstanding_bytes: 'half of /dev/shm free at start',
  multimodal_pixel_cache_mb: `${PIXEL_CACHE_ENV}, else ${DEFAULT_PIXEL_CACHE_MB} MiB`,
};

type Shape = Record<string, z.ZodType>;
const shape = (RouterConfigSchema as unknown as { shape: Shape }).shape;

/** A setting's choices when its schema is an enum (under .default()/.optional()), else undefined. */
function choicesOf(key: string): readonly string[] | undefined {
  let s = shape[key] as unknown as { options?: readonly string[]; def?: { innerType?: unknown } } | undefined;
  for (let depth = 0; s && depth < 4; depth++) {
    if (Array.isArray(s.options)) return s.options;
    s = s.def?.innerType as typeof s;
  }
  return undefined;
}

function unitOf(key: string): 'bytes' | 's' | 'px' | '' {
  if (key.endsWith('_bytes')) return 'bytes';
  if (key.endsWith('_secs')) return 's';
  if (key.endsWith('_pixels')) return 'px';
  return '';
}

function hintOf(unit: ReturnType<typeof unitOf>, v: number): string {
  if (unit === 'bytes') return formatBytes(v);
  if (unit === 'px') return `${(v / 1e6).toFixed(1)} Mpx`;
  return '';
}

/**
 * A number typed into the draft by typedNumber's rule (blank unsets only a setting without a
 * default), with the schema's own sentence under it: `problemOf` checks the value as the
 * setting will hold it (for a field of a map, the whole map), naming the field and the value.
 */
function NumberInput({
  id,
  unit,
  optional,
  value,
  problemOf,
  onChange,
}: {
  id: string;
  unit: ReturnType<typeof unitOf>;
  optional: boolean;
  value: number | string | undefined;
  problemOf: (typed: number | string | undefined) => string | null;
  onChange: (n: number | string | undefined) => void;
}) {
  const [text, setText] = useTypedText(value, { optional });
  const typed = typedNumber(text, { optional });
  const err = problemOf(typed);
  const shown = typeof typed === 'number' ? hintOf(unit, typed) : '';
  return (
    <>
      <input
        id={id}
        className={`input num input-small ${err ? 'invalid' : ''}`}
        inputMode="decimal"
        value={text}
        placeholder={optional ? 'unset' : ''}
        aria-invalid={err ? true : undefined}
        aria-describedby={`${id}-msg`}
        onChange={(e) => {
          // What is typed goes into the draft as typed (typedNumber): an invalid value is named
          // there by the schema and keeps Review & apply off, never the last valid one.
          setText(e.target.value);
          onChange(typedNumber(e.target.value, { optional }));
        }}
      />
      <span id={`${id}-msg`} className={err ? 'field-error small' : 'field-hint small'}>
        {err ?? (unit ? `${unit}${shown ? ` · ${shown}` : ''}` : '')}
      </span>
    </>
  );
}

/** A list of strings typed comma-separated, into the draft as typed and checked by its schema; the text follows the draft (Discard empties it again). */
function ListInput({ id, keyName, value, onChange }: { id: string; keyName: string; value: string[] | undefined; onChange: (list: string[]) => void }) {
  const read = (t: string) =>
    t
      .split(',')
      .map((x) => x.trim())
      .filter(Boolean);
  const [text, setText] = useDraftText(value ?? [], (v) => v.join(', '), read);
  const err = fieldProblem(shape[keyName]!, keyName, read(text));
  return (
    <>
      <input
        id={id}
        className={`input mono ${err ? 'invalid' : ''}`}
        value={text}
        placeholder="none (comma-separated)"
        aria-invalid={err ? true : undefined}
        aria-describedby={err ? `${id}-msg` : undefined}
        onChange={(e) => {
          setText(e.target.value);
          onChange(read(e.target.value));
        }}
      />
      {err && (
        <span id={`${id}-msg`} className="field-error small">
          {err}
        </span>
      )}
    </>
  );
}

export function GenericSettings({
  view,
  config,
  edit,
  effective = {},
}: {
  view: ConfigView;
  config: RouterConfig;
  edit: (f: (d: RouterConfig) => RouterConfig) => void;
  effective?: Record<string, number | null | undefined>;
}) {
  const id = useId();
  const keys = Object.keys(shape).filter((k) => !HANDLED.has(k));
  if (keys.length === 0) return null;
  const cfg: Record<string, unknown> = config;
  const defaults: Record<string, unknown> = view.defaults;
  const set = (k: string, v: unknown) => edit((d) => setRouterField(d, k as keyof RouterConfig, v as never));
  return (
    <table className="table settings">
      <thead>
        <tr>
          <th scope="col">Setting</th>
          <th scope="col">Value</th>
          <th scope="col">Default</th>
          <th scope="col">From</th>
        </tr>
      </thead>
      <tbody>
        {keys.map((k) => {
          const v = cfg[k];
          const d = defaults[k];
          const sample = v ?? d;
          const fid = `${id}-${k}`;
          let control;
          const choices = choicesOf(k);
          if (choices) {
            const optional = shape[k]?.safeParse(undefined).success && d === undefined;
            control = (
              <select
                id={fid}
                className="select select-small mono"
                value={(v as string | undefined) ?? (d as string | undefined) ?? ''}
                onChange={(e) => set(k, e.target.value || undefined)}
              >
                {optional && <option value="">unset</option>}
                {choices.map((c) => (
                  <option key={c} value={c}>
                    {c}
                  </option>
                ))}
              </select>
            );
          } else if (typeof sample === 'boolean') {
            control = <input id={fid} type="checkbox" checked={Boolean(v)} onChange={(e) => set(k, e.target.checked)} />;
          } else if (Array.isArray(sample)) {
            control = <ListInput id={fid} keyName={k} value={v as string[] | undefined} onChange={(list) => set(k, list)} />;
          } else if (sample && typeof sample === 'object') {
            const obj = (v ?? d) as Record<string, number | string>;
            control = (
              <span className="subfields">
                {Object.entries(obj).map(([sub, n]) => (
                  <span key={sub} className="subfield">
                    <label htmlFor={`${fid}-${sub}`}>{sub}</label>
                    <NumberInput
                      id={`${fid}-${sub}`}
                      unit=""
                      optional={false}
                      value={n}
                      problemOf={(x) => fieldProblem(shape[k]!, k, { ...obj, [sub]: x })}
                      onChange={(x) => set(k, { ...obj, [sub]: x })}
                    />
                  </span>
                ))}
              </span>
            );
          } else {
            const optional = mayBeUnset(shape[k]!);
            control = (
              <NumberInput
                id={fid}
                unit={unitOf(k)}
                optional={optional}
                value={v as number | string | undefined}
                problemOf={(x) => fieldProblem(shape[k]!, k, x)}
                onChange={(n) => set(k, n)}
              />
            );
          }
          return (
            <tr key={k}>
              <td>
                <label htmlFor={typeof sample === 'object' && sample && !Array.isArray(sample) ? undefined : fid} className="mono">
                  <Breakable text={k} />
                </label>
              </td>
              <td className="setting-control">{control}</td>
              <td className="mono small">
                {d === undefined ? (
                  <span className="muted">
                    {UNSET_MEANS[k] ? (
                      <>
                        {UNSET_MEANS[k]}
                        {v === undefined && typeof effective[k] === 'number' ? <> (now {formatBytes(effective[k])})</> : null}
                      </>
                    ) : (
                      'unset'
                    )}
                  </span>
                ) : Array.isArray(d) ? (
                  d.length ? (
                    d.join(', ')
                  ) : (
                    'none'
                  )
                ) : typeof d === 'object' ? (
                  Object.entries(d as object)
                    .map(([a, b]) => `${a}=${String(b)}`)
                    .join(', ')
                ) : (
                  `${String(d)}${typeof d === 'number' && hintOf(unitOf(k), d) ? ` (${hintOf(unitOf(k), d)})` : ''}`
                )}
              </td>
              <td className="muted small">
                {view.origins[k] ?? (v === undefined && !UNSET_MEANS[k] ? 'unset' : 'default')}
                <StartFlagNote view={view} setting={k} />
              </td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}
