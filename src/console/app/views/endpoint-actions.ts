/**
 * What a tenant can do to an endpoint from its page: send a test event, rotate the signing secret, disable it,
 * re-enable it with an explicit backlog choice (ADR-14), and replay its dead letters. Each goes through a dialog
 * that says what will happen first.
 */
import {
  ApiFailure,
  api,
  type Backlog,
  type Delivery,
  type Endpoint,
  type Replayed,
  type SecretRotated,
} from '../api.ts';
import { confirmDialog, showOnce } from '../dialogs.ts';
import { copyable, h, link } from '../dom.ts';
import { age, count, plural, time } from '../format.ts';
import { field, notice, run } from './common.ts';

type Done = () => void;

const isoOf = (local: string) => (local ? new Date(local).toISOString() : undefined);

async function sendTest(e: Endpoint, status: HTMLElement) {
  const sent = await api<{ delivery: Delivery }>('POST', `/v1/endpoints/${e.id}/test`, {});
  notice(status, 'ok', 'Test event sent: ', link(`#/deliveries/${sent.delivery.id}`, sent.delivery.id), '.');
}

async function rotate(e: Endpoint, status: HTMLElement, done: Done) {
  const overlap = h(
    'select',
    { name: 'overlap' },
    h('option', { value: String(7 * 86400), selected: true }, '7 days (default)'),
    h('option', { value: String(86400) }, '1 day'),
    h('option', { value: '3600' }, '1 hour'),
    h('option', { value: '0' }, 'none: retire the current secret now'),
  );
  const ok = await confirmDialog({
    title: 'Rotate signing secret',
    content: [
      h(
        'p',
        null,
        'A new secret signs every delivery from now on. During the overlap the current secret signs too (two ',
        'signatures per request), so your receiver can switch without failing any request.',
      ),
      field('Overlap', overlap),
    ],
    confirm: 'Rotate',
  });
  if (!ok) return;
  const rotated = await api<SecretRotated>('POST', `/v1/endpoints/${e.id}/secrets`, {
    overlap_seconds: Number(overlap.value),
  });
  await showOnce('New signing secret', [
    h('p', null, 'Shown now and never again. Give it to your receiver before the overlap ends.'),
    copyable(rotated.secret, 'rotated-secret'),
    rotated.previous
      ? h(
          'p',
          { class: 'muted' },
          'The previous secret keeps signing until ',
          time(rotated.previous.active_until),
          '.',
        )
      : h('p', { class: 'muted' }, 'The previous secret no longer signs.'),
  ]);
  notice(status, 'ok', 'Secret rotated.');
  done();
}

async function disable(e: Endpoint, status: HTMLElement, done: Done) {
  const ok = await confirmDialog({
    title: 'Disable endpoint',
    content: [
      h(
        'p',
        null,
        'Nothing is sent to ',
        h('code', null, e.url),
        ' while it is disabled. New events still make deliveries: they wait as backlog, and when you re-enable ',
        'it you choose whether they are delivered.',
      ),
    ],
    confirm: 'Disable',
    danger: true,
  });
  if (!ok) return;
  await api('POST', `/v1/endpoints/${e.id}/disable`, {});
  notice(status, 'ok', 'Endpoint disabled.');
  done();
}

async function enable(e: Endpoint, status: HTMLElement, done: Done) {
  const backlog = await api<Backlog>('GET', `/v1/endpoints/${e.id}/backlog`);
  const choice = (value: string, label: string, hint: string, checked = false) =>
    h(
      'label',
      { class: 'choice' },
      h('input', { type: 'radio', name: 'backlog', value, checked }),
      h('span', null, h('b', null, label), ' — ', hint),
    );
  const from = h('input', { type: 'datetime-local', name: 'resume_from' });
  const form = h(
    'div',
    { role: 'radiogroup', 'aria-label': 'Backlog' },
    choice(
      'deliver',
      'Deliver it',
      `send the ${count(backlog.pending)} pending deliveries and re-queue the ${count(backlog.dead_letters)} dead ` +
        `letters, ramped up (about ${age(backlog.estimated_drain_seconds)})`,
    ),
    choice('skip', 'Skip it', 'mark the pending deliveries skipped; they stay in the history'),
    choice('resume_from', 'Resume from a time', 'skip events accepted before it, deliver the rest'),
    field('Resume from', from),
  );
  const picked = () => form.querySelector<HTMLInputElement>('input[name=backlog]:checked')?.value ?? null;
  const ok = await confirmDialog({
    title: 'Re-enable endpoint',
    content: [
      h(
        'p',
        null,
        `${plural(backlog.count, 'delivery', 'deliveries')} ${backlog.count === 1 ? 'waits' : 'wait'} for this endpoint`,
        backlog.oldest_created_at ? ` (oldest from ${time(backlog.oldest_created_at)})` : '',
        '. Choose what happens to them:',
      ),
      form,
    ],
    confirm: 'Re-enable',
    check: () => {
      const c = picked();
      if (!c) return 'Choose what happens to the backlog.';
      if (c === 'resume_from' && !from.value) return 'Give the time to resume from.';
      return null;
    },
  });
  if (!ok) return;
  const c = picked();
  const result = await api<{ requeued: number; skipped: number }>('POST', `/v1/endpoints/${e.id}/enable`, {
    backlog: c,
    ...(c === 'resume_from' ? { resume_from: isoOf(from.value) } : {}),
  });
  notice(
    status,
    'ok',
    `Endpoint enabled: ${count(result.requeued)} due now, ${count(result.skipped)} skipped.`,
  );
  done();
}

async function replay(e: Endpoint, status: HTMLElement, done: Done) {
  const since = h('input', { type: 'datetime-local', name: 'since' });
  const until = h('input', { type: 'datetime-local', name: 'until' });
  // Delivered ones too: after a receiver acknowledged deliveries it then failed to process, for example.
  const which = h(
    'select',
    { name: 'status' },
    h('option', { value: 'dead', selected: true }, 'dead letters'),
    h('option', { value: 'delivered' }, 'delivered'),
    h('option', { value: 'dead,delivered' }, 'dead letters and delivered'),
  );
  const ok = await confirmDialog({
    title: 'Replay deliveries',
    content: [
      h(
        'p',
        null,
        'Each matching delivery in the range (and not replayed before) is sent again with its original ',
        'webhook-id, at most 10 per second. Leave a bound empty for no bound.',
      ),
      field('Replay', which),
      field('Created from', since),
      field('Created before', until),
    ],
    confirm: 'Replay',
  });
  if (!ok) return;
  // The end of the range is fixed now, so the request confirmed below matches what the count was made of.
  const body: Record<string, unknown> = {
    status: which.value.split(','),
    since: isoOf(since.value),
    until: isoOf(until.value) ?? new Date().toISOString(),
  };
  let result: Replayed;
  try {
    result = await api<Replayed>('POST', `/v1/endpoints/${e.id}/replay`, body);
  } catch (err) {
    if (!(err instanceof ApiFailure) || err.code !== 'confirmation_required') throw err;
    const n = Number(err.details.count);
    const again = await confirmDialog({
      title: `Replay ${count(n)} deliveries?`,
      content: [
        h(
          'p',
          null,
          `That sends ${count(n)} requests, taking about ${age(Number(err.details.estimated_seconds))}.`,
        ),
      ],
      confirm: `Replay ${count(n)}`,
      danger: true,
    });
    if (!again) return;
    // What the person confirmed is this count: if more have finished since, the API asks again (409).
    result = await api<Replayed>('POST', `/v1/endpoints/${e.id}/replay`, {
      ...body,
      confirm: true,
      expected_count: n,
    });
  }
  notice(
    status,
    'ok',
    `${count(result.count)} replays queued (about ${age(result.estimated_seconds)}).`,
    result.more ? ' More match: replay again for the rest.' : '',
  );
  done();
}

export function actionBar(e: Endpoint, status: HTMLElement, done: Done): HTMLElement {
  const button = (label: string, action: (b: HTMLButtonElement) => Promise<void>, cls?: string) => {
    const b = h('button', { type: 'button', class: cls }, label);
    b.addEventListener('click', () => void run(b, status, () => action(b)));
    return b;
  };
  return h(
    'div',
    { class: 'actions' },
    button('Send test event', () => sendTest(e, status)),
    button('Rotate secret', () => rotate(e, status, done)),
    button('Replay…', () => replay(e, status, done)),
    e.status === 'enabled'
      ? button('Disable', () => disable(e, status, done), 'danger')
      : button('Re-enable…', () => enable(e, status, done), 'primary'),
  );
}
