/**
 * The tenant's activity: where notices are e-mailed, the notices Hookrail sent (first dead letter, digests,
 * auto-disable, recovery), and the audit trail of every change made with the tenant's credentials.
 */
import { type AuditEvent, api, type Notification } from '../api.ts';
import { h, link, replace } from '../dom.ts';
import { time } from '../format.ts';
import { badge, field, notice, pageQuery, pager, run, table } from './common.ts';

const targetLink = (type: string, id: string) =>
  type === 'endpoint'
    ? link(`#/endpoints/${id}`, id)
    : type === 'delivery'
      ? link(`#/deliveries/${id}`, id)
      : id;

function channelForm(email: string | null, status: HTMLElement): HTMLElement {
  const input = h('input', {
    type: 'email',
    name: 'email',
    value: email ?? '',
    placeholder: 'ops@example.com',
  });
  const save = h('button', { type: 'submit', class: 'primary' }, 'Save');
  const form = h(
    'form',
    { class: 'card', 'aria-label': 'Notification e-mail' },
    h('h2', null, 'Notification e-mail'),
    field('Send notices to', input, 'Empty: notices are only listed below, never e-mailed.'),
    save,
  );
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    void run(save, status, async () => {
      const value = input.value.trim() || null;
      await api('PUT', '/v1/notification-channel', { email: value });
      notice(status, 'ok', value ? `Notices go to ${value}.` : 'Notices are no longer e-mailed.');
    });
  });
  return form;
}

/** A list with "Load more", newest first. */
function pagedTable<T>(
  title: string,
  path: string,
  head: string[],
  row: (x: T) => ReturnType<typeof h>[] | (string | Node)[],
  testId: string,
  status: HTMLElement,
): HTMLElement {
  const body = h('div', null, h('p', { class: 'muted' }, 'Loading…'));
  const more = h('button', { type: 'button', hidden: true }, 'Load more');
  const load = pager<T>({
    page: (cursor) => api('GET', `${path}?${pageQuery(cursor)}`),
    draw: (items) =>
      replace(
        body,
        items.length ? table(head, items.map(row), testId) : h('p', { class: 'muted' }, 'Nothing yet.'),
      ),
    more,
  });
  more.addEventListener('click', () => void run(more, status, () => load(false)));
  void run(null, status, () => load(true));
  return h('section', { class: 'card', 'aria-label': title }, h('h2', null, title), body, more);
}

export async function activityView(main: HTMLElement): Promise<void> {
  const status = h('div');
  const channel = await api<{ email: string | null }>('GET', '/v1/notification-channel');
  replace(
    main,
    h('h1', null, 'Activity'),
    status,
    channelForm(channel.email, status),
    pagedTable<Notification>(
      'Notices',
      '/v1/notifications',
      ['Sent', 'Kind', 'Subject', 'Endpoint', 'E-mail'],
      (n) => [
        time(n.created_at),
        badge(n.kind, 'notice'),
        n.subject,
        n.endpoint_id ? link(`#/endpoints/${n.endpoint_id}`, n.endpoint_id) : '—',
        n.email_to ? `${n.status} to ${n.email_to}` : n.status,
      ],
      'notifications',
      status,
    ),
    pagedTable<AuditEvent>(
      'Audit trail',
      '/v1/audit-events',
      ['When', 'Who', 'Action', 'Target', 'Details'],
      (a) => [
        time(a.created_at),
        h('code', null, a.actor),
        a.action,
        targetLink(a.target_type, a.target_id),
        Object.keys(a.details).length ? h('code', null, JSON.stringify(a.details)) : '',
      ],
      'audit',
      status,
    ),
  );
}
