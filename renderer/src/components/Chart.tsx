// uPlot in React: the chart is created once per options identity and fed new data with
// setData (no React re-render of the canvas), resized with its container, and rebuilt when
// the colour scheme flips so axes and series take the theme's CSS variables.
import { useEffect, useRef, useState } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

export function cssVar(name: string): string {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || '#888';
}

export function useColorScheme(): 'light' | 'dark' {
  const query = typeof matchMedia === 'undefined' ? null : matchMedia('(prefers-color-scheme: dark)');
  const [scheme, setScheme] = useState<'light' | 'dark'>(query?.matches ? 'dark' : 'light');
  useEffect(() => {
    if (!query) return;
    const on = () => setScheme(query.matches ? 'dark' : 'light');
    query.addEventListener('change', on);
    return () => query.removeEventListener('change', on);
  }, [query]);
  return scheme;
}

/** Axis styling from the theme. */
export function themedAxis(extra: uPlot.Axis = {}): uPlot.Axis {
  return {
    stroke: cssVar('--text-muted'),
    grid: { stroke: cssVar('--grid'), width: 1 },
    ticks: { stroke: cssVar('--grid'), width: 1 },
    font: '11px system-ui, sans-serif',
    ...extra,
  };
}

export function UChart({
  options,
  data,
  height,
  label,
}: {
  options: (width: number) => uPlot.Options;
  data: uPlot.AlignedData;
  height: number;
  label: string;
}) {
  const wrap = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const scheme = useColorScheme();
  const dataRef = useRef(data);
  dataRef.current = data;

  useEffect(() => {
    const el = wrap.current;
    if (!el) return;
    const width = Math.max(200, el.clientWidth);
    const u = new uPlot({ ...options(width), width, height }, dataRef.current, el);
    plot.current = u;
    const ro = new ResizeObserver(() => {
      const w = Math.max(200, el.clientWidth);
      if (Math.abs(w - u.width) > 1) u.setSize({ width: w, height });
    });
    ro.observe(el);
    return () => {
      ro.disconnect();
      u.destroy();
      plot.current = null;
    };
    // options is a builder; rebuild on theme or height change only.
  }, [scheme, height, options]);

  useEffect(() => {
    plot.current?.setData(data);
  }, [data]);

  // What the chart plots, summed over its series (a test reads it; the canvas cannot be read).
  let sum = 0;
  for (const series of data.slice(1) as Array<ArrayLike<number | null | undefined>>) for (let i = 0; i < series.length; i++) sum += series[i] ?? 0;
  return <div ref={wrap} className="chart" role="img" aria-label={label} data-sum={sum} style={{ height: height + 34 }} />;
}
