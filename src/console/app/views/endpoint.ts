/** One endpoint: health, charts, actions and its delivery history. */
import { api, type Delivery, type Endpoint, type Health } from '../api.ts';
import { h, link, replace } from '../dom.ts';
import { age, count, ms, pct, time } from '../format.ts';
import { badge, facts, message, pageQuery, pager, run, table } from './common.ts';
import { actionBar } from './endpoint-actions.ts';
import { chartsSection, WINDOWS, type Window } from './endpoint-charts.ts';
import { secretsCard, settingsCard } from './endpoint-settings.ts';

const STATUSES = ['', 'pending', 'delivered', 'dead', 'cancelled', 'skipped'];

/** The health API's reason codes in words (unknown codes are shown as they are). */
const REASONS: Record<string, string> = {
  disabled: 'The endpoint is disabled: nothing is sent.',
  circuit_open: 'The circuit is open: attempts pause until the next probe succeeds.',
  consecutive_failures: 'Several attempts in a row failed.',
  no_success_last_hour: 'No attempt succeeded in the last hour.',
  low_success_rate: 'The success rate over the last hour is low.',
  recent_dead_letter: 'A delivery was dead-lettered in the last 24 hours.',
};

function healthCard(health: Health): HTMLElement {
  const split = (name: string, x: { p50: number | null; p99: number | null }) => [name, ms(x.p50), ms(x.p99)];
  return h(
    'section',
    { class: 'card', 'aria-label': 'Health', 'data-testid': 'health' },
    h('h2', null, 'Health ', badge(health.state)),
    health.reasons.length
      ? h(
          'ul',
          { class: 'reasons' },
          health.reasons.map((r) => h('li', { 'data-reason': r }, REASONS[r] ?? r)),
        )
      : null,
    facts([
      [
        'Circuit',
        `${health.circuit.state}${health.circuit.next_probe_at ? `, next probe ${time(health.circuit.next_probe_at)}` : ''}`,
      ],
      ['Failures in a row', count(health.circuit.consecutive_failures)],
      [
        'In flight / cap',
        `${health.concurrency.in_flight} / ${health.concurrency.effective} (max ${health.concurrency.max})`,
      ],
      [
        'Success rate',
        `${pct(health.success_rate_percent.last_hour)} last hour, ${pct(health.success_rate_percent.last_24h)} last 24 h`,
      ],
      [
        'Attempts',
        `${count(health.attempts.last_hour)} last hour, ${count(health.attempts.last_24h)} last 24 h`,
      ],
      [
        'Backlog',
        `${count(health.backlog.depth)} pending (oldest ${age(health.backlog.oldest_pending_age_seconds)}), ${count(health.backlog.dead_letters)} dead letters`,
      ],
      ['Last success', time(health.last_success_at)],
      ['Last failure', time(health.last_failure_at)],
    ]),
    table(
      ['Last hour', 'p50', 'p99'],
      [
        split('Queue wait', health.latency_ms.queue),
        split('Hookrail (platform)', health.latency_ms.platform),
        split('Your endpoint (consumer)', health.latency_ms.consumer),
      ],
      'latency',
    ),
  );
}

function deliveriesSection(e: Endpoint, status: HTMLElement): HTMLElement {
  const filter = h(
    'select',
    { 'aria-label': 'Status' },
    STATUSES.map((x) => h('option', { value: x }, x || 'all')),
  );
  const body = h('div');
  const more = h('button', { type: 'button', hidden: true }, 'Load more');
  const load = pager<Delivery>({
    page: (cursor) =>
      api(
        'GET',
        `/v1/endpoints/${e.id}/deliveries?${pageQuery(cursor, filter.value ? { status: filter.value } : {})}`,
      ),
    draw: (deliveries) =>
      replace(
        body,
        deliveries.length
          ? table(
              ['Created', 'Event type', 'Status', 'Attempts', 'Next attempt', 'webhook-id'],
              deliveries.map(deliveryRow),
              'deliveries',
            )
          : h('p', { class: 'muted' }, 'No deliveries.'),
      ),
    more,
  });
  filter.addEventListener('change', () => void run(null, status, () => load(true)));
  more.addEventListener('click', () => void run(more, status, () => load(false)));
  void run(null, status, () => load(true));
  return h(
    'section',
    { class: 'card', 'aria-label': 'Deliveries' },
    h('h2', null, 'Deliveries ', filter),
    body,
    more,
  );
}

function deliveryRow(d: Delivery) {
  return [
    link(`#/deliveries/${d.id}`, time(d.created_at)),
    d.event_type,
    [badge(d.status), d.status_reason ? h('small', null, ' ', d.status_reason) : null],
    count(d.attempts),
    time(d.next_attempt_at),
    h('code', null, d.webhook_id),
  ];
}

export async function endpointView(main: HTMLElement, id: string, query: URLSearchParams): Promise<void> {
  const w = query.get('window');
  const window: Window = (WINDOWS as readonly string[]).includes(w ?? '') ? (w as Window) : '24h';
  const [endpoint, health] = await Promise.all([
    api<Endpoint>('GET', `/v1/endpoints/${id}`),
    api<Health>('GET', `/v1/endpoints/${id}/health`),
  ]);
  const status = h('div', { 'data-status': true });
  const secrets = h('section', { class: 'card' }, h('p', { class: 'muted' }, 'Loading secrets…'));
  // Draws the page again from the server's state after an action changed it (the action's notice is kept).
  const refresh = () => {
    const kept = [...status.childNodes];
    void endpointView(main, id, query).then(
      () => main.querySelector('[data-status]')?.replaceChildren(...kept),
      // The page could not be read again: the action's notice stays, with why the page is not current.
      (e) =>
        status.append(
          h('p', { class: 'notice error', role: 'alert' }, `Could not refresh the page: ${message(e)}`),
        ),
    );
  };
  const charts = h('section', { class: 'card' }, h('p', { class: 'muted' }, 'Loading charts…'));
  replace(
    main,
    h('p', { class: 'crumbs' }, link('#/endpoints', 'Endpoints'), ' / ', endpoint.id),
    h('h1', null, endpoint.url, ' ', badge(endpoint.status, endpoint.status)),
    status,
    h(
      'p',
      { class: 'muted' },
      endpoint.description ?? '',
      endpoint.description ? ' · ' : '',
      'Event types: ',
      endpoint.event_types.join(', '),
      endpoint.disabled_reason ? ` · Disabled: ${endpoint.disabled_reason}` : '',
    ),
    actionBar(endpoint, status, refresh),
    healthCard(health),
    charts,
    deliveriesSection(endpoint, status),
    settingsCard(endpoint, status, refresh),
    secrets,
  );
  secretsCard(endpoint, status, refresh).then(
    (section) => secrets.replaceWith(section),
    (e) => replace(secrets, h('p', { class: 'error' }, `Secrets: ${message(e)}`)),
  );
  chartsSection(id, window).then(
    (section) => charts.replaceWith(section),
    (e) => replace(charts, h('p', { class: 'error' }, `Charts: ${message(e)}`)),
  );
}
