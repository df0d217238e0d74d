/**
 * What intake accepts as an event. Pure checks that the HTTP schema cannot express (nesting depth) and the
 * canonical form fixed at intake: `data` is serialised once, here, and those exact bytes are what every delivery
 * of the event embeds.
 */
import { createHash } from 'node:crypto';

/** `order.created`, `invoice.payment_failed`, `v2.user.deleted`: dot-separated segments of [A-Za-z0-9_-]. */
export const EVENT_TYPE_PATTERN = '^[A-Za-z0-9_-]+(\\.[A-Za-z0-9_-]+)*$';
export const EVENT_TYPE_MAX = 128;
export const RESOURCE_ID_MAX = 256;
/** Printable ASCII, no spaces — what Stripe-style clients send as idempotency keys (UUIDs, ULIDs …). */
export const IDEMPOTENCY_KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;
export const IDEMPOTENCY_WINDOW_MS = 24 * 60 * 60 * 1000;
export const MAX_JSON_DEPTH = 32;
export const MAX_EVENT_BODY_BYTES = 256 * 1024;

/** Depth of nested objects/arrays; iterative so a hostile document cannot exhaust the stack. */
export function jsonDepth(value: unknown): number {
  let max = 0;
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [v, d] = stack.pop() as [unknown, number];
    if (v === null || typeof v !== 'object') continue;
    const depth = d + 1;
    if (depth > max) max = depth;
    if (depth > MAX_JSON_DEPTH) return depth;
    for (const child of Array.isArray(v) ? v : Object.values(v)) stack.push([child, depth]);
  }
  return max;
}

/** Fingerprint of what a request asked for, to tell an honest retry from an idempotency key reused for another request. */
export function eventRequestHash(type: string, resourceId: string | null, canonicalData: string): string {
  return createHash('sha256')
    .update(type)
    .update('\0')
    .update(resourceId ?? '')
    .update('\0')
    .update(canonicalData)
    .digest('hex');
}
