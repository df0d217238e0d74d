/** Pieces the views share: health badges, notices, key–value tables, and running an action with feedback. */
import { ApiFailure, type Page } from '../api.ts';
import { type Child, h } from '../dom.ts';

export const badge = (text: string, kind: string = text) => h('span', { class: `badge ${kind}` }, text);

export function facts(rows: [string, Child][]): HTMLElement {
  return h(
    'dl',
    { class: 'facts' },
    rows.map(([k, v]) => [h('dt', null, k), h('dd', null, v)]),
  );
}

export function table(head: string[], rows: Child[][], testId?: string): HTMLElement {
  return h(
    'table',
    { 'data-testid': testId },
    h(
      'thead',
      null,
      h(
        'tr',
        null,
        head.map((x) => h('th', null, x)),
      ),
    ),
    h(
      'tbody',
      null,
      rows.map((r) =>
        h(
          'tr',
          null,
          r.map((c) => h('td', null, c)),
        ),
      ),
    ),
  );
}

export const message = (e: unknown) =>
  e instanceof ApiFailure ? `${e.message} (${e.code})` : e instanceof Error ? e.message : String(e);

/** A line under the page's heading saying what just happened (or what went wrong). */
export function notice(host: HTMLElement, kind: 'ok' | 'error', ...content: Child[]): void {
  host.replaceChildren(
    h('p', { class: `notice ${kind}`, role: kind === 'error' ? 'alert' : 'status' }, ...content),
  );
}

/** Runs `action` with its button disabled, reporting failures in `host`. */
export async function run(button: HTMLButtonElement | null, host: HTMLElement, action: () => Promise<void>) {
  if (button) button.disabled = true;
  try {
    await action();
  } catch (e) {
    notice(host, 'error', message(e));
  } finally {
    if (button) button.disabled = false;
  }
}

export const field = (label: string, input: HTMLElement, hint?: string) =>
  h('label', { class: 'field' }, h('span', null, label), input, hint ? h('small', null, hint) : null);

/**
 * A list read a page at a time (the API's `?cursor=`), with its "Load more" button. `load(true)` starts again from
 * the first page (a filter changed, an item was added). Only the latest load draws: a page still on its way when a
 * newer load starts is dropped, so a list never shows rows of a filter no longer chosen.
 */
export function pager<T>(o: {
  page: (cursor: string | null) => Promise<Page<T>>;
  draw: (items: T[]) => void;
  more: HTMLButtonElement;
}): (reset: boolean) => Promise<void> {
  let items: T[] = [];
  let cursor: string | null = null;
  let latest = 0;
  return async (reset) => {
    const mine = ++latest;
    const page = await o.page(reset ? null : cursor);
    if (mine !== latest) return;
    items = reset ? page.data : items.concat(page.data);
    cursor = page.next_cursor;
    o.more.hidden = cursor === null;
    o.draw(items);
  };
}

/** The API's list query: a page of 50 after `cursor`, with `extra` filters. */
export function pageQuery(cursor: string | null, extra: Record<string, string> = {}): URLSearchParams {
  const q = new URLSearchParams({ limit: '50', ...extra });
  if (cursor) q.set('cursor', cursor);
  return q;
}
