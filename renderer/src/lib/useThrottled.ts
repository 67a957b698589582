import { useEffect, useRef, useState } from 'react';

/** `value`, but updated at most every `ms` (the latest value lands at the end of the interval). */
export function useThrottled<T>(value: T, ms: number): T {
  const [shown, setShown] = useState(value);
  const last = useRef(0);
  const latest = useRef(value);
  latest.current = value;
  useEffect(() => {
    const now = performance.now();
    const wait = last.current + ms - now;
    if (wait <= 0) {
      last.current = now;
      setShown(value);
      return;
    }
    const t = setTimeout(() => {
      last.current = performance.now();
      setShown(latest.current);
    }, wait);
    return () => clearTimeout(t);
  }, [value, ms]);
  return shown;
}
