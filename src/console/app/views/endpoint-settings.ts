/**
 * An endpoint's settings and signing secrets. Editing sends only what changed; a new URL is an elevated change
 * (ADR-16) and goes through the step-up code. A secret that still signs beside a newer one can be retired early,
 * once the receiver has switched.
 */
import { api, type Endpoint, type SecretMetadata } from '../api.ts';
import { confirmDialog } from '../dialogs.ts';
import { h } from '../dom.ts';
import { time } from '../format.ts';
import { withStepUp } from '../step-up.ts';
import { facts, field, notice, run, table } from './common.ts';

type Done = () => void;

/** The API's limit (MAX_DESCRIPTION_LENGTH). */
const MAX_DESCRIPTION = 1000;

const headerLines = (headers: Record<string, string>) =>
  Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}`)
    .join('\n');

/** "name: value" per line; null with the offending line when one has no colon. */
function parseHeaders(text: string): Record<string, string> | string {
  const out: Record<string, string> = {};
  for (const line of text.split('\n').map((l) => l.trim())) {
    if (!line) continue;
    const at = line.indexOf(':');
    if (at <= 0) return line;
    out[line.slice(0, at).trim().toLowerCase()] = line.slice(at + 1).trim();
  }
  return out;
}

const sameList = (a: string[], b: string[]) => a.length === b.length && a.every((x, i) => x === b[i]);
const sameHeaders = (a: Record<string, string>, b: Record<string, string>) =>
  headerLines(a) === headerLines(b);

async function edit(e: Endpoint, status: HTMLElement, done: Done) {
  const url = h('input', { name: 'url', type: 'url', value: e.url, required: true });
  // A textarea: an input would drop a stored description's line breaks and so change it on every save.
  const description = h(
    'textarea',
    { name: 'description', rows: 2, maxlength: MAX_DESCRIPTION },
    e.description ?? '',
  );
  const types = h('input', { name: 'event_types', value: e.event_types.join(', '), required: true });
  const cap = h('input', {
    name: 'max_concurrency',
    type: 'number',
    min: 1,
    max: 100,
    value: e.max_concurrency,
  });
  const headers = h('textarea', { name: 'headers', rows: 3 }, headerLines(e.headers));
  const ok = await confirmDialog({
    title: 'Edit endpoint',
    content: [
      field('URL', url, 'Changing it asks for your authenticator code.'),
      field('Description', description),
      field('Event types', types, 'Comma-separated: exact types, prefixes like order.*, or *.'),
      field('Deliveries in flight at once', cap),
      field('Custom headers', headers, 'One "name: value" per line, sent with every delivery.'),
    ],
    confirm: 'Save',
    check: () => {
      const parsed = parseHeaders(headers.value);
      return typeof parsed === 'string' ? `Not a "name: value" header line: ${parsed}` : null;
    },
  });
  if (!ok) return;
  const patch: Record<string, unknown> = {};
  if (url.value.trim() !== e.url) patch.url = url.value.trim();
  if (description.value !== (e.description ?? '')) patch.description = description.value.trim() || null;
  const list = types.value
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean);
  if (!sameList(list, e.event_types)) patch.event_types = list;
  if (Number(cap.value) !== e.max_concurrency) patch.max_concurrency = Number(cap.value);
  const parsed = parseHeaders(headers.value) as Record<string, string>;
  if (!sameHeaders(parsed, e.headers)) patch.headers = parsed;
  if (Object.keys(patch).length === 0) return notice(status, 'ok', 'Nothing changed.');
  const saved = await withStepUp((extra) => api<Endpoint>('PATCH', `/v1/endpoints/${e.id}`, patch, extra));
  if (saved === null) return;
  notice(status, 'ok', `Saved: ${Object.keys(patch).join(', ')}.`);
  done();
}

export function settingsCard(e: Endpoint, status: HTMLElement, done: Done): HTMLElement {
  const button = h('button', { type: 'button' }, 'Edit…');
  button.addEventListener('click', () => void run(button, status, () => edit(e, status, done)));
  return h(
    'section',
    { class: 'card', 'aria-label': 'Settings', 'data-testid': 'settings' },
    h('h2', null, 'Settings ', button),
    facts([
      ['URL', h('code', null, e.url)],
      ['Description', e.description ?? '—'],
      ['Event types', e.event_types.join(', ')],
      ['Ordering', e.ordering],
      ['In flight at most', String(e.max_concurrency)],
      ['Custom headers', Object.keys(e.headers).length ? h('pre', null, headerLines(e.headers)) : '—'],
      ['Created', time(e.created_at)],
    ]),
  );
}

export async function secretsCard(e: Endpoint, status: HTMLElement, done: Done): Promise<HTMLElement> {
  const secrets = (await api<{ data: SecretMetadata[] }>('GET', `/v1/endpoints/${e.id}/secrets`)).data;
  const retire = (s: SecretMetadata) => {
    const b = h('button', { type: 'button', class: 'danger' }, 'Retire now');
    b.addEventListener('click', () =>
      run(b, status, async () => {
        const ok = await confirmDialog({
          title: 'Retire signing secret',
          content: [
            h('p', null, 'Deliveries stop carrying a signature made with ', h('code', null, s.id), '.'),
            h('p', null, 'Do this only once your receiver verifies with the newer secret.'),
          ],
          confirm: 'Retire',
          danger: true,
        });
        if (!ok) return;
        await api('DELETE', `/v1/endpoints/${e.id}/secrets/${s.id}`);
        notice(status, 'ok', `Secret ${s.id} retired.`);
        done();
      }),
    );
    return b;
  };
  return h(
    'section',
    { class: 'card', 'aria-label': 'Signing secrets' },
    h('h2', null, 'Signing secrets'),
    table(
      ['Secret', 'Signs from', 'Signs until', ''],
      secrets.map((s, i) => [
        h('code', null, s.id),
        time(s.active_from),
        s.active_until ? time(s.active_until) : 'until rotated',
        i > 0 ? retire(s) : '',
      ]),
      'secrets',
    ),
    h('p', { class: 'muted' }, 'Secrets are never shown again after rotation. Newest first.'),
  );
}
