/**
 * Small SVG charts for the endpoint page: bars per time bucket (stacked for the latency split) and a line for the
 * backlog. Each mark carries its value in a <title> (shown on hover) and in data attributes. A bucket without data
 * draws nothing: an empty hour is not a 0% success rate.
 */
import { h, s } from './dom.ts';

export interface Series {
  name: string;
  cls: string;
  values: (number | null)[];
}

const W = 600;
const H = 150;
const PAD = { left: 44, right: 8, top: 8, bottom: 22 };

function frame(title: string, testId: string, series: Series[], svg: SVGElement): HTMLElement {
  const legend = h(
    'span',
    { class: 'legend' },
    series.map((x) => h('span', null, h('i', { class: `swatch ${x.cls}` }), x.name)),
  );
  return h(
    'figure',
    { class: 'chart', 'data-testid': testId },
    h('figcaption', null, h('b', null, title), legend),
    svg,
  );
}

function axes(labels: string[], max: number, unit: string): SVGElement[] {
  const plotH = H - PAD.top - PAD.bottom;
  const bw = (W - PAD.left - PAD.right) / Math.max(1, labels.length);
  const ticks = [0, Math.floor(labels.length / 2), labels.length - 1].filter((v, i, a) => a.indexOf(v) === i);
  return [
    s('line', { x1: PAD.left, x2: W - PAD.right, y1: PAD.top + plotH, y2: PAD.top + plotH, class: 'axis' }),
    s(
      'text',
      { x: PAD.left - 4, y: PAD.top + 8, class: 'tick', 'text-anchor': 'end' },
      `${niceNumber(max)}${unit}`,
    ),
    s('text', { x: PAD.left - 4, y: PAD.top + plotH, class: 'tick', 'text-anchor': 'end' }, `0${unit}`),
    ...ticks.map((i) =>
      s(
        'text',
        { x: PAD.left + i * bw + bw / 2, y: H - 6, class: 'tick', 'text-anchor': 'middle' },
        labels[i] ?? '',
      ),
    ),
  ];
}

const niceNumber = (n: number) => (n >= 100 ? String(Math.round(n)) : String(Math.round(n * 10) / 10));

/** Bars per bucket; with several series, stacked in their order. */
export function barChart(o: {
  title: string;
  testId: string;
  labels: string[];
  series: Series[];
  unit: string;
  max?: number;
  format: (v: number) => string;
  /** Class of the mark drawn for a value of 0 (a 0% hour must not look like an idle one); none: nothing drawn. */
  zero?: string;
}): HTMLElement {
  const n = o.labels.length;
  const totals = o.labels.map((_, i) => o.series.reduce((sum, x) => sum + (x.values[i] ?? 0), 0));
  const max = o.max ?? Math.max(1, ...totals);
  const plotH = H - PAD.top - PAD.bottom;
  const bw = (W - PAD.left - PAD.right) / Math.max(1, n);
  const bars: SVGElement[] = [];
  for (let i = 0; i < n; i++) {
    let y = PAD.top + plotH;
    for (const x of o.series) {
      const v = x.values[i];
      if (v === null || v === undefined) continue;
      const zeroMark = v === 0 && o.zero !== undefined;
      const height = zeroMark ? 3 : (Math.min(v, max) / max) * plotH;
      y -= height;
      bars.push(
        s(
          'rect',
          {
            x: PAD.left + i * bw + 1,
            y,
            width: Math.max(1, bw - 2),
            height: Math.max(v > 0 ? 1 : 0, height),
            class: zeroMark ? o.zero : x.cls,
            'data-bucket': i,
            'data-series': x.name,
            'data-value': v,
          },
          s('title', null, `${o.labels[i]} — ${x.name}: ${o.format(v)}`),
        ),
      );
    }
  }
  const svg = s(
    'svg',
    { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': o.title, preserveAspectRatio: 'none' },
    ...axes(o.labels, max, o.unit),
    ...bars,
  );
  return frame(o.title, o.testId, o.series, svg);
}

/** One line through the buckets' values, with a dot per bucket. */
export function lineChart(o: {
  title: string;
  testId: string;
  labels: string[];
  series: Series;
  unit: string;
  format: (v: number) => string;
}): HTMLElement {
  const values = o.series.values.map((v) => v ?? 0);
  const max = Math.max(1, ...values);
  const plotH = H - PAD.top - PAD.bottom;
  const bw = (W - PAD.left - PAD.right) / Math.max(1, values.length);
  const pt = (v: number, i: number) =>
    [PAD.left + i * bw + bw / 2, PAD.top + plotH - (v / max) * plotH] as const;
  const points = values.map((v, i) => pt(v, i).join(',')).join(' ');
  const dots = values.map((v, i) => {
    const [cx, cy] = pt(v, i);
    return s(
      'circle',
      { cx, cy, r: 3, class: o.series.cls, 'data-bucket': i, 'data-series': o.series.name, 'data-value': v },
      s('title', null, `${o.labels[i]} — ${o.series.name}: ${o.format(v)}`),
    );
  });
  const svg = s(
    'svg',
    { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': o.title, preserveAspectRatio: 'none' },
    ...axes(o.labels, max, o.unit),
    s('polyline', { points, class: `line ${o.series.cls}` }),
    ...dots,
  );
  return frame(o.title, o.testId, [o.series], svg);
}
