// A small inline SVG trend for the Overview (the last minute, one point per second); the
// number beside it carries the value, the line only the shape. It stretches to its cell
// (the stroke keeps its width).
export function Sparkline({ values, label, tone }: { values: number[]; label: string; tone: 'inline' | 'shm' }) {
  const w = 160;
  const h = 32;
  const max = Math.max(1, ...values);
  const step = values.length > 1 ? w / (values.length - 1) : w;
  const points = values.map((v, i) => `${(i * step).toFixed(1)},${(h - 2 - (v / max) * (h - 4)).toFixed(1)}`).join(' ');
  return (
    <svg className={`spark spark-${tone}`} height={h} viewBox={`0 0 ${w} ${h}`} preserveAspectRatio="none" role="img" aria-label={label}>
      <line x1="0" x2={w} y1={h - 1} y2={h - 1} className="spark-base" vectorEffect="non-scaling-stroke" />
      {values.length > 1 && <polyline points={points} fill="none" strokeWidth="1.5" vectorEffect="non-scaling-stroke" />}
    </svg>
  );
}
