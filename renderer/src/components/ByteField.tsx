// A threshold in bytes typed with a unit (B, KiB, MiB), validated as the operator types:
// the value must be a whole number of bytes, as multimodal_shm_min_bytes requires
// (ShmMinBytesSchema). Calls onValid only with a value the schema accepts.
import { useEffect, useId, useState } from 'react';
import { ShmMinBytesSchema } from '../../../core/console/contract.ts';
import { BYTE_UNITS, formatBytes, naturalUnit, parseByteInput, type ByteUnit } from '../lib/format.ts';

export function ByteField({ label, value, onValid, disabled, describedBy }: { label: string; value: number | undefined; onValid: (bytes: number) => void; disabled?: boolean; describedBy?: string }) {
  const id = useId();
  const initialUnit = value === undefined ? 'KiB' : naturalUnit(value);
  const [unit, setUnit] = useState<ByteUnit>(initialUnit);
  const factor = (u: ByteUnit) => BYTE_UNITS.find((x) => x.unit === u)!.factor;
  const [text, setText] = useState(value === undefined ? '' : String(value / factor(initialUnit)));
  const [error, setError] = useState<string | null>(null);

  // Follow outside changes (a discard, a calibration recommendation) unless mid-edit of the same value.
  useEffect(() => {
    if (value === undefined) return;
    const parsed = parseByteInput(text, unit);
    if (parsed.ok && parsed.bytes === value) return;
    const u = naturalUnit(value);
    setUnit(u);
    setText(String(value / factor(u)));
    setError(null);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [value]);

  const commit = (t: string, u: ByteUnit) => {
    const parsed = parseByteInput(t, u);
    if (!parsed.ok) return setError(parsed.message);
    const checked = ShmMinBytesSchema.safeParse(parsed.bytes);
    if (!checked.success) return setError(checked.error.issues[0]?.message ?? 'invalid');
    setError(null);
    if (parsed.bytes !== value) onValid(parsed.bytes);
  };

  const parsed = parseByteInput(text, unit);
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
          {parsed.ok ? `${parsed.bytes.toLocaleString('en-US')} bytes (${formatBytes(parsed.bytes)})${parsed.bytes === 0 ? ': every tensor, even empty ones' : ''}` : 'a whole number of bytes; 0 sends every tensor through /dev/shm'}
        </div>
      )}
    </div>
  );
}
