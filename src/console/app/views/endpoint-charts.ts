/** The endpoint page's charts: success rate, the latency split (Hookrail vs the endpoint) and the backlog. */
import { api, type Stats } from '../api.ts';
import { barChart, lineChart } from '../charts.ts';
import { h, replace } from '../dom.ts';
import { clock, count, day, ms, plural } from '../format.ts';

export const WINDOWS = ['1h', '24h', '7d'] as const;
export type Window = (typeof WINDOWS)[number];

export async function chartsSection(endpointId: string, window: Window): Promise<HTMLElement> {
  const stats = await api<Stats>('GET', `/v1/endpoints/${endpointId}/stats?window=${window}`);
  const label = window === '7d' ? (iso: string) => `${day(iso)} ${clock(iso)}` : clock;
  const labels = stats.buckets.map((b) => label(b.start));
  const b = stats.buckets;
  const switcher = h(
    'nav',
    { class: 'tabs', 'aria-label': 'Chart window' },
    WINDOWS.map((w) =>
      h(
        'a',
        { href: `#/endpoints/${endpointId}?window=${w}`, 'aria-current': w === window ? 'page' : null },
        w,
      ),
    ),
  );
  const section = h('section', { class: 'card charts', 'aria-label': 'Charts' });
  replace(
    section,
    h('h2', null, 'Last ', window, switcher),
    barChart({
      title: 'Success rate',
      testId: 'chart-success',
      labels,
      unit: '%',
      max: 100,
      zero: 'fail',
      series: [{ name: 'delivered', cls: 'ok', values: b.map((x) => x.success_rate_percent) }],
      format: (v) => `${v}%`,
    }),
    barChart({
      title: 'Latency split (mean per attempt)',
      testId: 'chart-latency',
      labels,
      unit: ' ms',
      series: [
        { name: 'Hookrail (platform)', cls: 'platform', values: b.map((x) => x.latency_ms.platform) },
        { name: 'your endpoint (consumer)', cls: 'consumer', values: b.map((x) => x.latency_ms.consumer) },
      ],
      format: ms,
    }),
    lineChart({
      title: 'Backlog (pending deliveries)',
      testId: 'chart-backlog',
      labels,
      unit: '',
      series: { name: 'pending', cls: 'backlog', values: b.map((x) => x.backlog) },
      format: count,
    }),
    h(
      'p',
      { class: 'muted' },
      plural(
        b.reduce((n, x) => n + x.attempts, 0),
        'attempt',
      ),
      ', ',
      plural(
        b.reduce((n, x) => n + x.dead_lettered, 0),
        'dead letter',
      ),
      ' in this window. ',
      'Queue wait is not in the split: it is time before the attempt, not time spent on it.',
    ),
  );
  return section;
}
