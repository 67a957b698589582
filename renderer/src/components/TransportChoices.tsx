// The two transport choices every level offers (router-wide on Router, per worker on Workers):
// the mode, with "inherit" meaning not set at this level, and the SHM threshold.
import { useId } from 'react';
import { MODE_HELP, TRANSPORT_MODES, type Mode } from '../lib/vocab.ts';
import { ByteField } from './ByteField.tsx';

export function ModeChoice({
  name,
  value,
  onChange,
  inherit,
  legend,
}: {
  name: string;
  value: Mode | undefined;
  onChange: (m: Mode | undefined) => void;
  inherit: string;
  legend: string;
}) {
  const id = useId();
  return (
    <fieldset className="choices">
      <legend>{legend}</legend>
      <label className={`choice ${value === undefined ? 'checked' : ''}`}>
        <input type="radio" name={`${name}-${id}`} checked={value === undefined} onChange={() => onChange(undefined)} />
        <span className="choice-title">inherit</span>
        <span className="choice-help">{inherit}</span>
      </label>
      {TRANSPORT_MODES.map((m) => (
        <label key={m} className={`choice ${value === m ? 'checked' : ''}`}>
          <input type="radio" name={`${name}-${id}`} value={m} checked={value === m} onChange={() => onChange(m)} />
          <span className="choice-title">{m}</span>
          <span className="choice-help">{MODE_HELP[m]}</span>
        </label>
      ))}
    </fieldset>
  );
}

export function ThresholdChoice({
  value,
  onChange,
  inherit,
  label,
}: {
  value: number | string | undefined;
  onChange: (n: number | string | undefined) => void;
  inherit: string;
  label: string;
}) {
  const id = useId();
  return (
    <fieldset className="choices">
      <legend>{label}</legend>
      <label className={`choice ${value === undefined ? 'checked' : ''}`}>
        <input type="radio" name={`thr-${id}`} checked={value === undefined} onChange={() => onChange(undefined)} />
        <span className="choice-title">inherit</span>
        <span className="choice-help">{inherit}</span>
      </label>
      <label className={`choice ${value !== undefined ? 'checked' : ''}`}>
        <input type="radio" name={`thr-${id}`} checked={value !== undefined} onChange={() => onChange(value ?? 65536)} />
        <span className="choice-title">set here</span>
        <span className="choice-help">tensors of at least this size go through /dev/shm when the mode allows it</span>
      </label>
      {value !== undefined && <ByteField label="Threshold" value={value} onChange={(n) => onChange(n)} />}
    </fieldset>
  );
}
