// A dependency-free SVG line chart (log-scale y) for benchmark results, so the numbers
// people compare are plotted next to the tables in docs/performance.md.
export interface ChartSpec {
  title: string;
  xLabels: string[];
  series: Array<{ name: string; values: number[] }>;
  yUnit?: string;
}

const COLORS = ['#6b7280', '#2563eb', '#dc2626', '#16a34a', '#d97706', '#7c3aed'];

function escapeXml(s: string): string {
  return s.replace(/[<>&"]/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;' })[c]!);
}

export function renderLineChart(spec: ChartSpec): string {
  const W = 760;
  const H = 420;
  const left = 70;
  const right = 210;
  const top = 40;
  const bottom = 50;
  const all = spec.series.flatMap((s) => s.values).filter((v) => v > 0);
  const lo = Math.floor(Math.log10(Math.min(...all)));
  const hi = Math.ceil(Math.log10(Math.max(...all)));
  const x = (i: number) => left + (i * (W - left - right)) / Math.max(1, spec.xLabels.length - 1);
  const y = (v: number) => top + ((hi - Math.log10(v)) * (H - top - bottom)) / Math.max(1, hi - lo);
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${left}" y="22" font-size="15" font-weight="bold">${escapeXml(spec.title)}</text>`,
  ];
  for (let e = lo; e <= hi; e++) {
    const yy = y(10 ** e);
    parts.push(`<line x1="${left}" x2="${W - right}" y1="${yy}" y2="${yy}" stroke="#e5e7eb"/>`);
    parts.push(`<text x="${left - 8}" y="${yy + 4}" text-anchor="end">${10 ** e >= 1 ? 10 ** e : (10 ** e).toFixed(-e)}${spec.yUnit ?? ' ms'}</text>`);
  }
  spec.xLabels.forEach((label, i) => parts.push(`<text x="${x(i)}" y="${H - bottom + 20}" text-anchor="middle">${escapeXml(label)}</text>`));
  spec.series.forEach((s, k) => {
    const color = COLORS[k % COLORS.length];
    const dash = s.name.includes('hugetlb') ? ' stroke-dasharray="5 4"' : '';
    const pts = s.values.map((v, i) => `${x(i).toFixed(1)},${y(Math.max(v, 10 ** lo)).toFixed(1)}`).join(' ');
    parts.push(`<polyline fill="none" stroke="${color}" stroke-width="2"${dash} points="${pts}"/>`);
    s.values.forEach((v, i) =>
      parts.push(
        `<circle cx="${x(i).toFixed(1)}" cy="${y(Math.max(v, 10 ** lo)).toFixed(1)}" r="3" fill="${color}"><title>${escapeXml(`${s.name}: ${v.toFixed(3)}`)}</title></circle>`,
      ),
    );
    const ly = top + 10 + k * 20;
    parts.push(`<line x1="${W - right + 15}" x2="${W - right + 40}" y1="${ly}" y2="${ly}" stroke="${color}" stroke-width="2"${dash}/>`);
    parts.push(`<text x="${W - right + 46}" y="${ly + 4}">${escapeXml(s.name)}</text>`);
  });
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}

export interface BarChartSpec {
  title: string;
  groups: string[];
  series: Array<{ name: string; values: number[] }>;
  unit?: string;
}

/** Grouped horizontal bars, one group per configuration, values labelled. */
export function renderBarChart(spec: BarChartSpec): string {
  const W = 760;
  const barH = 16;
  const gap = 10;
  const left = 170;
  const right = 80;
  // Legend entries flow onto as many rows as they need (about 7 px per character at 12 px).
  const legend: Array<{ x: number; row: number }> = [];
  let lx = 10;
  let row = 0;
  for (const s of spec.series) {
    const width = 40 + s.name.length * 7;
    if (lx > 10 && lx + width > W - 10) {
      lx = 10;
      row += 1;
    }
    legend.push({ x: lx, row });
    lx += width;
  }
  const top = 60 + row * 18;
  const groupH = spec.series.length * barH + gap;
  const H = top + spec.groups.length * groupH + 20;
  const max = Math.max(...spec.series.flatMap((s) => s.values));
  const x = (v: number) => ((W - left - right) * v) / max;
  const unit = spec.unit ?? ' ms';
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="10" y="22" font-size="15" font-weight="bold">${escapeXml(spec.title)}</text>`,
  ];
  spec.series.forEach((s, k) => {
    const { x: legendX, row: r } = legend[k]!;
    parts.push(`<rect x="${legendX}" y="${34 + r * 18}" width="12" height="12" fill="${COLORS[(k + 1) % COLORS.length]}"/>`);
    parts.push(`<text x="${legendX + 18}" y="${45 + r * 18}">${escapeXml(s.name)}</text>`);
  });
  spec.groups.forEach((g, i) => {
    const gy = top + i * groupH;
    parts.push(`<text x="${left - 8}" y="${gy + (spec.series.length * barH) / 2 + 4}" text-anchor="end">${escapeXml(g)}</text>`);
    spec.series.forEach((s, k) => {
      const v = s.values[i]!;
      const y = gy + k * barH;
      parts.push(`<rect x="${left}" y="${y}" width="${x(v).toFixed(1)}" height="${barH - 2}" fill="${COLORS[(k + 1) % COLORS.length]}"/>`);
      parts.push(`<text x="${(left + x(v) + 4).toFixed(1)}" y="${y + barH - 5}">${v.toFixed(1)}${unit}</text>`);
    });
  });
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}
