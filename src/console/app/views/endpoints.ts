/** The endpoint list: every endpoint of the tenant with its health at a glance, and registering a new one. */
import { api, type Endpoint, type Health, type Page } from '../api.ts';
import { showOnce } from '../dialogs.ts';
import { copyable, h, link, replace } from '../dom.ts';
import { age, count, pct } from '../format.ts';
import { badge, field, notice, pageQuery, pager, run, table } from './common.ts';

const HEALTH_READS_AT_ONCE = 6;

/** Reads health for each endpoint, a few requests at a time. */
async function healthOf(endpoints: Endpoint[]): Promise<Map<string, Health | null>> {
  const out = new Map<string, Health | null>();
  let next = 0;
  const worker = async () => {
    while (next < endpoints.length) {
      const e = endpoints[next++]!;
      out.set(e.id, await api<Health>('GET', `/v1/endpoints/${e.id}/health`).catch(() => null));
    }
  };
  await Promise.all(Array.from({ length: HEALTH_READS_AT_ONCE }, worker));
  return out;
}

function row(e: Endpoint, health: Health | null) {
  return [
    link(`#/endpoints/${e.id}`, e.url),
    e.description ?? '',
    health ? badge(health.state) : badge(e.status, e.status === 'enabled' ? 'unknown' : 'disabled'),
    health ? pct(health.success_rate_percent.last_hour) : '—',
    health ? count(health.backlog.depth) : '—',
    health ? age(health.backlog.oldest_pending_age_seconds) : '—',
    health ? `${health.concurrency.in_flight} / ${health.concurrency.effective}` : '—',
  ];
}

function createForm(status: HTMLElement, onCreated: () => void): HTMLElement {
  const url = h('input', {
    name: 'url',
    type: 'url',
    required: true,
    placeholder: 'https://example.com/webhooks',
  });
  const description = h('input', { name: 'description', maxlength: 1000 });
  const types = h('input', { name: 'event_types', value: '*', required: true });
  const submit = h('button', { type: 'submit', class: 'primary' }, 'Create endpoint');
  const form = h(
    'form',
    { class: 'card', 'aria-label': 'New endpoint' },
    h('h2', null, 'New endpoint'),
    field('URL', url),
    field('Description', description),
    field('Event types', types, 'Comma-separated: exact types, prefixes like order.*, or * for all.'),
    submit,
  );
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    void run(submit, status, async () => {
      const created = await api<Endpoint & { secret: { secret: string } }>('POST', '/v1/endpoints', {
        url: url.value.trim(),
        ...(description.value.trim() ? { description: description.value.trim() } : {}),
        event_types: types.value
          .split(',')
          .map((t) => t.trim())
          .filter(Boolean),
      });
      form.reset();
      await showOnce('Endpoint created', [
        h(
          'p',
          null,
          'Its signing secret is shown now and never again. Store it where your receiver reads it.',
        ),
        copyable(created.secret.secret, 'new-secret'),
      ]);
      notice(status, 'ok', 'Created ', link(`#/endpoints/${created.id}`, created.url), '.');
      onCreated();
    });
  });
  return form;
}

export async function endpointsView(main: HTMLElement): Promise<void> {
  const status = h('div');
  const list = h('div', { class: 'card' }, h('p', { class: 'muted' }, 'Loading…'));
  const more = h('button', { type: 'button' }, 'Load more');
  const load = pager<ReturnType<typeof row>>({
    page: async (cursor) => {
      const page = await api<Page<Endpoint>>('GET', `/v1/endpoints?${pageQuery(cursor)}`);
      const health = await healthOf(page.data);
      return { data: page.data.map((e) => row(e, health.get(e.id) ?? null)), next_cursor: page.next_cursor };
    },
    draw: (rows) =>
      replace(
        list,
        rows.length === 0
          ? h('p', { class: 'muted' }, 'No endpoints yet. Create one below.')
          : table(
              [
                'URL',
                'Description',
                'Health',
                'Success (1 h)',
                'Backlog',
                'Oldest pending',
                'In flight / cap',
              ],
              rows,
              'endpoints',
            ),
        more,
      ),
    more,
  });
  more.addEventListener('click', () => void run(more, status, () => load(false)));

  replace(
    main,
    h('h1', null, 'Endpoints'),
    status,
    list,
    createForm(status, () => void load(true)),
  );
  await load(true);
}
