// The text of a field whose value goes into the draft as typed: it follows every change from
// outside (Discard, undo, a rebase, another worker's value) and leaves the operator's own
// typing alone, which already says what the draft holds. The one rule of every text-typed
// field (numbers, lists, labels): a field always shows the draft, and Discard resets it.
import { useEffect, useState } from 'react';
import { typedNumber } from './draft.ts';

/**
 * `[text, setText]` of a field showing `value` as `show(value)`: whenever `value` changes to
 * something the text does not already read as (`read(text)`), the text becomes `show(value)`.
 */
export function useDraftText<T>(value: T, show: (value: T) => string, read: (text: string) => unknown): [string, (text: string) => void] {
  const [text, setText] = useState(() => show(value));
  const key = JSON.stringify(value);
  useEffect(() => {
    if (JSON.stringify(read(text)) !== key) setText(show(value));
    // eslint-disable-next-line react-hooks/exhaustive-deps -- follow the value from outside only; the text being typed is the field's own
  }, [key]);
  return [text, setText];
}

/** A number field's text (typedNumber's rule; `optional`: blank is unset). */
export function useTypedText(value: number | string | undefined, options: { optional?: boolean } = {}): [string, (text: string) => void] {
  return useDraftText(
    value,
    (v) => (v === undefined ? '' : String(v)),
    (t) => typedNumber(t, options),
  );
}
