/**
 * Subscription matching: an endpoint's `event_types` holds exact types (`order.created`), prefix wildcards
 * (`order.*`, matching `order.created` and `order.line.added` but not `order` itself) or `*` (everything).
 */
import { EVENT_TYPE_PATTERN } from './event-rules.ts';

const TYPE_RE = new RegExp(EVENT_TYPE_PATTERN);
export const MAX_EVENT_TYPE_FILTERS = 100;

export function isValidEventTypeFilter(filter: string): boolean {
  if (filter === '*') return true;
  if (filter.endsWith('.*')) return TYPE_RE.test(filter.slice(0, -2));
  return TYPE_RE.test(filter);
}

export function matchesEventType(filters: readonly string[], type: string): boolean {
  for (const f of filters) {
    if (f === '*' || f === type) return true;
    if (f.endsWith('.*') && type.startsWith(f.slice(0, -1))) return true;
  }
  return false;
}
