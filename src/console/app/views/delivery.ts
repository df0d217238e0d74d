/**
 * One delivery: its state, every attempt, and the request inspector — exactly what was sent (each hop's headers,
 * the body bytes) and what came back — with a command to send the same request again from your own machine.
 */
import { type AttemptDetail, type AttemptSummary, api, type Delivery, type Page } from '../api.ts';
import { confirmDialog } from '../dialogs.ts';
import { copyable, copyButton, h, link, replace } from '../dom.ts';
import { count, ms, time } from '../format.ts';
import { badge, facts, message, notice, run, table } from './common.ts';

const quote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

/** Headers curl writes itself from the command (and must, to match what it sends). */
const CURL_OWN = new Set(['host', 'content-length', 'connection']);

/**
 * The attempt as a curl command. Its webhook-timestamp is the attempt's: a receiver that enforces a tolerance
 * (Standard Webhooks libraries allow five minutes) refuses it later, which is the point of the tolerance.
 */
export function curlOf(a: AttemptDetail): string {
  const first = a.request.hops[0];
  const lines = [`curl -X POST ${quote(a.request.url)}`];
  for (const [k, v] of Object.entries(first?.headers ?? {})) {
    if (!CURL_OWN.has(k)) lines.push(`  -H ${quote(`${k}: ${v}`)}`);
  }
  if (a.request.body !== null) lines.push(`  --data-raw ${quote(a.request.body)}`);
  return lines.join(' \\\n');
}

const headerTable = (headers: Record<string, string>, testId: string) =>
  table(
    ['Header', 'Value'],
    Object.entries(headers).map(([k, v]) => [h('code', null, k), h('code', null, v)]),
    testId,
  );

function inspector(a: AttemptDetail): HTMLElement {
  const prettyBody = (() => {
    if (a.request.body === null) return 'The event is no longer kept (retention).';
    // Indented for reading only when that keeps every byte's meaning: a parse rounds integers beyond 2^53 and
    // rewrites `1.10`, so a body that does not come back from a round trip unchanged is shown exactly as sent.
    try {
      const parsed: unknown = JSON.parse(a.request.body);
      return JSON.stringify(parsed) === a.request.body ? JSON.stringify(parsed, null, 2) : a.request.body;
    } catch {
      return a.request.body;
    }
  })();
  return h(
    'section',
    { class: 'card', 'aria-label': 'Request inspector', 'data-testid': 'inspector' },
    h('h2', null, `Attempt ${a.attempt_no} `, badge(a.outcome)),
    facts([
      ['Started', time(a.timings.started_at)],
      ['Answer', a.response?.status ? String(a.response.status) : (a.error_class ?? '—')],
      ['Error', a.error_message ?? '—'],
      [
        'Time',
        `queue ${ms(a.timings.queue_ms)} · Hookrail ${ms(a.timings.platform_ms)} · your endpoint ${ms(a.timings.consumer_ms)}`,
      ],
    ]),
    h('h3', null, 'Request'),
    a.request.hops.map((hop, i) => [
      h(
        'p',
        null,
        h('b', null, i === 0 ? 'POST ' : `Redirect ${i}: POST `),
        h('code', null, hop.url),
        hop.status !== null ? ` → ${hop.status}` : '',
      ),
      headerTable(hop.headers, `request-headers-${i}`),
    ]),
    h(
      'p',
      null,
      h('b', null, 'Body'),
      ` (${count(a.request.body_size ?? 0)} bytes; sent exactly as stored, shown formatted)`,
    ),
    h('pre', { 'data-testid': 'request-body' }, prettyBody),
    h('h3', null, 'Response'),
    a.response
      ? [
          headerTable(a.response.headers, 'response-headers'),
          h('p', null, h('b', null, 'Body'), ' (first 4 KiB)'),
          h(
            'pre',
            { 'data-testid': 'response-body' },
            a.response.body_text ?? `base64: ${a.response.body_base64}`,
          ),
        ]
      : h('p', { class: 'muted' }, 'No response: ', a.error_message ?? a.error_class ?? ''),
    h('h3', null, 'Send it again yourself ', copyButton(curlOf(a))),
    h('pre', { class: 'command', 'data-testid': 'curl' }, curlOf(a)),
  );
}

async function replay(d: Delivery, status: HTMLElement) {
  const ok = await confirmDialog({
    title: 'Replay delivery',
    content: [
      h(
        'p',
        null,
        'Sends event ',
        h('code', null, d.event_id),
        ' again as a new delivery with the same webhook-id (',
        h('code', null, d.webhook_id),
        '), so a receiver that dedupes on it will ignore it if it was already processed.',
      ),
    ],
    confirm: 'Replay',
  });
  if (!ok) return;
  const created = await api<Delivery>('POST', `/v1/deliveries/${d.id}/replay`, {});
  notice(status, 'ok', 'Replay queued: ', link(`#/deliveries/${created.id}`, created.id), '.');
}

export async function deliveryView(main: HTMLElement, id: string, query: URLSearchParams): Promise<void> {
  const [d, attempts] = await Promise.all([
    api<Delivery>('GET', `/v1/deliveries/${id}`),
    api<Page<AttemptSummary>>('GET', `/v1/deliveries/${id}/attempts`),
  ]);
  const status = h('div');
  // The attempt named in the link, if it is one of this delivery's; else the latest.
  const asked = query.get('attempt');
  const selected = (attempts.data.find((a) => a.id === asked) ?? attempts.data.at(-1))?.id ?? null;
  const replayButton = h('button', { type: 'button', class: 'primary' }, 'Replay…');
  replayButton.addEventListener('click', () => void run(replayButton, status, () => replay(d, status)));
  const detail = h('div', null, selected ? h('p', { class: 'muted' }, 'Loading attempt…') : null);
  replace(
    main,
    h(
      'p',
      { class: 'crumbs' },
      link('#/endpoints', 'Endpoints'),
      ' / ',
      link(`#/endpoints/${d.endpoint_id}`, d.endpoint_id),
      ' / ',
      d.id,
    ),
    h('h1', null, d.event_type, ' ', badge(d.status)),
    status,
    h('div', { class: 'actions' }, d.status === 'pending' ? null : replayButton),
    h(
      'section',
      { class: 'card', 'aria-label': 'Delivery' },
      facts([
        ['webhook-id', copyable(d.webhook_id)],
        ['Event', h('code', null, d.event_id)],
        ['Status', [d.status, d.status_reason ? ` — ${d.status_reason}` : '']],
        ['Attempts', count(d.attempts)],
        ['Created', time(d.created_at)],
        ['Next attempt', time(d.next_attempt_at)],
        ['Replay of', d.replayed_from ? link(`#/deliveries/${d.replayed_from}`, d.replayed_from) : '—'],
      ]),
    ),
    h(
      'section',
      { class: 'card', 'aria-label': 'Attempts' },
      h('h2', null, 'Attempts'),
      attempts.data.length
        ? table(
            ['#', 'Started', 'Outcome', 'Status', 'Error', 'Hookrail', 'Endpoint', ''],
            attempts.data.map((a) => [
              String(a.attempt_no),
              time(a.timings.started_at),
              badge(a.outcome),
              a.status_code === null ? '—' : String(a.status_code),
              a.error_class ?? '',
              ms(a.timings.platform_ms),
              ms(a.timings.consumer_ms),
              a.id === selected
                ? h('b', null, 'inspecting')
                : link(`#/deliveries/${d.id}?attempt=${a.id}`, 'Inspect'),
            ]),
            'attempts',
          )
        : h('p', { class: 'muted' }, 'No attempt yet.'),
    ),
    detail,
  );
  if (selected) {
    api<AttemptDetail>('GET', `/v1/attempts/${selected}`).then(
      (a) => replace(detail, inspector(a)),
      (e) => replace(detail, h('p', { class: 'error' }, message(e))),
    );
  }
}
