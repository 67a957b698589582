// The text of a number field whose value goes into the draft as typed (typedNumber): it
// follows a change from outside (Discard, undo, a rebase, another worker's value) and leaves
// the operator's own typing alone, which already says what the draft holds.
import { useEffect, useState } from 'react';
import { typedNumber } from './draft.ts';

export function useTypedText(value: number | string | undefined, options: { decimal?: boolean } = {}): [string, (text: string) => void] {
  const [text, setText] = useState(value === undefined ? '' : String(value));
  useEffect(() => {
    if ((typedNumber(text, options) ?? '') !== (value ?? '')) setText(value === undefined ? '' : String(value));
    // eslint-disable-next-line react-hooks/exhaustive-deps -- follow the value from outside only; the text being typed is the field's own
  }, [value]);
  return [text, setText];
}
