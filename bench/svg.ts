/**
 * A tiny horizontal grouped bar chart as a standalone SVG string: one group
 * per category (e.g. "direct", "through relay"), one bar per series (library).
 */

export interface Bar {
  series: string;
  value: number | null;
}

export interface ChartSpec {
  title: string;
  /** Unit shown after each value, e.g. "jobs/s". */
  unit: string;
  /** Say which way is better, shown under the title. */
  note?: string;
  groups: { label: string; bars: Bar[] }[];
  colors?: Record<string, string>;
  width?: number;
}

const PALETTE = ["#2f6fdf", "#e0803a", "#4caf7a", "#9b59b6", "#c0392b", "#7f8c8d"];

const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

function fmt(v: number): string {
  if (v >= 100) return Math.round(v).toLocaleString("en-US");
  if (v >= 10) return v.toFixed(1);
  return v.toFixed(2);
}

export function barChart(spec: ChartSpec): string {
  const width = spec.width ?? 720;
  const labelW = 150;
  const valueW = 110;
  const barH = 18;
  const gap = 4;
  const groupGap = 14;
  const top = spec.note ? 54 : 40;
  const series = [...new Set(spec.groups.flatMap((g) => g.bars.map((b) => b.series)))];
  const color = (s: string) => spec.colors?.[s] ?? PALETTE[series.indexOf(s) % PALETTE.length]!;
  const max = Math.max(1e-9, ...spec.groups.flatMap((g) => g.bars.map((b) => b.value ?? 0)));
  const plotW = width - labelW - valueW - 20;
  const out: string[] = [];
  let y = top;
  for (const g of spec.groups) {
    const h = g.bars.length * (barH + gap) - gap;
    out.push(`<text x="${labelW - 10}" y="${y + h / 2 + 4}" text-anchor="end" font-weight="bold">${esc(g.label)}</text>`);
    for (const b of g.bars) {
      const w = b.value == null ? 0 : Math.max(1, (b.value / max) * plotW);
      out.push(`<rect x="${labelW}" y="${y}" width="${w.toFixed(1)}" height="${barH}" fill="${color(b.series)}"><title>${esc(b.series)}</title></rect>`);
      const text = b.value == null ? "n/a" : `${fmt(b.value)} ${spec.unit}`;
      out.push(`<text x="${labelW + w + 6}" y="${y + barH - 5}">${esc(text)}</text>`);
      y += barH + gap;
    }
    y += groupGap - gap;
  }
  // Legend
  let lx = labelW;
  const ly = y + 6;
  for (const s of series) {
    out.push(`<rect x="${lx}" y="${ly}" width="12" height="12" fill="${color(s)}"/>`);
    out.push(`<text x="${lx + 16}" y="${ly + 11}">${esc(s)}</text>`);
    lx += 24 + s.length * 7.5;
  }
  const height = ly + 26;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="system-ui, -apple-system, Segoe UI, sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="#fff"/>`,
    `<text x="${width / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">${esc(spec.title)}</text>`,
    spec.note ? `<text x="${width / 2}" y="40" text-anchor="middle" fill="#555">${esc(spec.note)}</text>` : "",
    ...out,
    "</svg>",
    "",
  ].join("\n");
}
