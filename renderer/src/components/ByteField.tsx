// A threshold in bytes typed with a unit (B, KiB, MiB), validated as the operator types:
// the value must be a whole number of bytes, as multimodal_shm_min_bytes requires
// (ShmMinBytesSchema). Every edit goes up: the bytes when the text parses, else the text with
// its unit, so an invalid entry stands in the draft (named there by the schema, Review & apply
// off) instead of the last valid size typed on the way to it.
import { useEffect, useId, useState } from 'react';
import { fieldProblem, formatValue, ShmMinBytesSchema } from '../../../core/console/contract.ts';
import { BYTE_UNITS, formatBytes, naturalUnit, parseByteInput, type ByteUnit } from '../lib/format.ts';

/** What the draft holds for an entry that does not parse: the text and its unit ("1.5 B"). */
const typedBytes = (text: string, unit: ByteUnit) => (text.trim() === '' ? '' : `${text.trim()} ${unit}`);

/** The field's text and unit for a value from the draft: a number in its natural unit, or an invalid entry read back. */
function shown(value: number | string | undefined, factor: (u: ByteUnit) => number): { text: string; unit: ByteUnit } {
  if (typeof value === 'number') {
    const unit = naturalUnit(value);
    return { text: String(value / factor(unit)), unit };
  }
  const m = /^(.*) (\S+)$/.exec(value ?? '');
  const unit = BYTE_UNITS.find((u) => u.unit === m?.[2])?.unit;
  return m && unit ? { text: m[1]!, unit } : { text: value ?? '', unit: 'KiB' };
}

export function ByteField({
  label,
  field = 'multimodal_shm_min_bytes',
  value,
  onChange,
  disabled,
  describedBy,
}: {
  label: string;
  /** The setting it edits, as its errors name it. */
  field?: string;
  value: number | string | undefined;
  onChange: (bytes: number | string) => void;
  disabled?: boolean;
  describedBy?: string;
}) {
  const id = useId();
  const factor = (u: ByteUnit) => BYTE_UNITS.find((x) => x.unit === u)!.factor;
  const [initial] = useState(() => shown(value, factor));
  const [unit, setUnit] = useState<ByteUnit>(initial.unit);
  const [text, setText] = useState(initial.text);

  // Follow outside changes (a discard, a calibration recommendation, another worker's value)
  // unless they are what the field already says.
  useEffect(() => {
    const parsed = parseByteInput(text, unit);
    if (typeof value === 'number' ? parsed.ok && parsed.bytes === value : value === typedBytes(text, unit)) return;
    const next = shown(value, factor);
    setUnit(next.unit);
    setText(next.text);
    // eslint-disable-next-line react-hooks/exhaustive-deps -- follow the value from outside only; the text being typed is this field's own
  }, [value]);

  // Every edit goes up: the bytes when the text parses, else the text with its unit.
  const commit = (t: string, u: ByteUnit) => {
    const parsed = parseByteInput(t, u);
    if (!parsed.ok) return onChange(typedBytes(t, u));
    if (parsed.bytes !== value) onChange(parsed.bytes);
  };

  // Named as every field names its problem: the setting, the value typed, what was expected.
  const parsed = parseByteInput(text, unit);
  const error = !parsed.ok
    ? text.trim() === '' && value === undefined
      ? null
      : `invalid value ${formatValue(typedBytes(text, unit))} for ${field}: ${parsed.message}`
    : fieldProblem(ShmMinBytesSchema, field, parsed.bytes);
  return (
    <div className="field bytefield">
      <label htmlFor={id}>{label}</label>
      <div className="bytefield-row">
        <input
          id={id}
          inputMode="decimal"
          className={`input num ${error ? 'invalid' : ''}`}
          value={text}
          disabled={disabled}
          aria-invalid={error ? true : undefined}
          aria-describedby={[error ? `${id}-err` : `${id}-hint`, describedBy].filter(Boolean).join(' ')}
          onChange={(e) => {
            setText(e.target.value);
            commit(e.target.value, unit);
          }}
        />
        <select
          aria-label={`${label}: unit`}
          className="select"
          value={unit}
          disabled={disabled}
          onChange={(e) => {
            const u = e.target.value as ByteUnit;
            setUnit(u);
            commit(text, u);
          }}
        >
          {BYTE_UNITS.map((u) => (
            <option key={u.unit} value={u.unit}>
              {u.unit}
            </option>
          ))}
        </select>
      </div>
      {error ? (
        <div id={`${id}-err`} className="field-error" role="alert">
          <span aria-hidden="true">✕ </span>
          {error}
        </div>
      ) : (
        <div id={`${id}-hint`} className="field-hint">
          {parsed.ok
            ? `${parsed.bytes.toLocaleString('en-US')} bytes (${formatBytes(parsed.bytes)})${parsed.bytes === 0 ? ': every tensor, even empty ones' : ''}`
            : 'a whole number of bytes; 0 sends every tensor through /dev/shm'}
        </div>
      )}
    </div>
  );
}
