import { useEffect, useState } from 'react';

/** The current unix second, updated every second while the component is mounted: windows that end "now" move on even when no data arrives. */
export function useNowSecond(): number {
  const [now, setNow] = useState(() => Math.floor(Date.now() / 1000));
  useEffect(() => {
    const t = setInterval(() => setNow(Math.floor(Date.now() / 1000)), 1000);
    return () => clearInterval(t);
  }, []);
  return now;
}
