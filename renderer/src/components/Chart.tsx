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

const AXIS_FONT = '11px system-ui, sans-serif';

/** Axis styling from the theme. */
export function themedAxis(extra: uPlot.Axis = {}): uPlot.Axis {
  return {
    stroke: cssVar('--text-muted'),
    grid: { stroke: cssVar('--grid'), width: 1 },
    ticks: { stroke: cssVar('--grid'), width: 1 },
    font: AXIS_FONT,
    ...extra,
  };
}

let measurer: CanvasRenderingContext2D | null | undefined;

const pad2 = (n: number) => String(n).padStart(2, '0');

/**
 * A time axis (seconds) of one line of labels: `:35` for a tick, the whole local time
 * (`14:03:00`) at the first tick and at each minute. uPlot's own puts the date and hour on a
 * second line at the first tick and at each minute, and in a narrow chart (1024 px) a minute
 * next to the first tick drew the two over each other.
 */
export function timeAxis(extra: uPlot.Axis = {}): uPlot.Axis {
  return themedAxis({
    space: 60,
    values: (_u, splits) =>
      splits.map((s, i) => {
        const d = new Date(s * 1000);
        const seconds = `:${pad2(d.getSeconds())}`;
        return i === 0 || d.getSeconds() === 0 ? `${pad2(d.getHours())}:${pad2(d.getMinutes())}${seconds}` : seconds;
      }),
    ...extra,
  });
}

/**
 * Where the x axis's labels were drawn, in CSS px from the chart's left edge: [left, right, text,
 * line] for each line of each label. The canvas cannot be read, so the layout check reads this
 * to find labels drawn over each other.
 */
function xLabelBoxes(u: uPlot): Array<[number, number, string, number]> {
  const axis = u.axes[0] as uPlot.Axis & { _splits?: number[] | null; _values?: Array<string | number | null> | null };
  if (!axis?._splits || !axis._values) return [];
  measurer ??= document.createElement('canvas').getContext('2d');
  if (!measurer) return [];
  measurer.font = AXIS_FONT;
  const left = u.over.offsetLeft;
  const boxes: Array<[number, number, string, number]> = [];
  axis._splits.forEach((split, i) => {
    const value = axis._values![i];
    if (value === null || value === undefined || value === '') return;
    // A split is a value of the scale (an index on an ordinal one, as its positions are).
    const x = left + u.valToPos(split, 'x');
    String(value)
      .split('\n')
      .forEach((line, n) => {
        const width = measurer!.measureText(line).width;
        if (line !== '') boxes.push([Math.round(x - width / 2), Math.round(x + width / 2), line, n]);
      });
  });
  return boxes;
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
    const built = options(width);
    const noteLabels = (self: uPlot) => {
      el.dataset.xLabels = JSON.stringify(xLabelBoxes(self));
    };
    const hooks = { ...built.hooks, draw: [...(built.hooks?.draw ?? []), noteLabels] };
    const u = new uPlot({ ...built, hooks, width, height }, dataRef.current, el);
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
  return <div ref={wrap} className="chart" role="img" aria-label={label} data-sum={sum} style={{ minHeight: height + 34 }} />;
}
