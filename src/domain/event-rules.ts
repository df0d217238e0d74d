/**
 * What intake accepts as an event. Pure checks that the HTTP schema cannot express (nesting depth), run on the
 * parsed `data`; what is stored, hashed and delivered is `data`'s JSON text exactly as the producer sent it
 * (domain/raw-json-member.ts), never a re-serialisation of the parsed value.
 */
import { createHash } from 'node:crypto';
import { ApiError } from './errors.ts';

/** `order.created`, `invoice.payment_failed`, `v2.user.deleted`: dot-separated segments of [A-Za-z0-9_-]. */
export const EVENT_TYPE_PATTERN = '^[A-Za-z0-9_-]+(\\.[A-Za-z0-9_-]+)*$';
export const EVENT_TYPE_MAX = 128;
export const RESOURCE_ID_MAX = 256;
/** Printable ASCII, no spaces — what Stripe-style clients send as idempotency keys (UUIDs, ULIDs …). */
export const IDEMPOTENCY_KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;
export const IDEMPOTENCY_WINDOW_MS = 24 * 60 * 60 * 1000;
export const MAX_JSON_DEPTH = 32;
export const MAX_EVENT_BODY_BYTES = 256 * 1024;

/** Refuses event data nested deeper than MAX_JSON_DEPTH (400 `validation_failed`, field `data`). */
export function checkDataDepth(data: unknown): void {
  if (jsonDepth(data) > MAX_JSON_DEPTH) {
    throw new ApiError('validation_failed', `data is nested deeper than ${MAX_JSON_DEPTH} levels.`, {
      field: 'data',
    });
  }
}

/**
 * Depth of nested objects/arrays, counted up to MAX_JSON_DEPTH + 1: a deeper value answers as soon as that is
 * reached, so the recursion is bounded and a hostile document cannot exhaust the stack. Allocates nothing (it runs
 * on every event at intake).
 */
export function jsonDepth(value: unknown): number {
  return depthBelow(value, 0);
}

function depthBelow(value: unknown, above: number): number {
  if (value === null || typeof value !== 'object') return above;
  const depth = above + 1;
  if (depth > MAX_JSON_DEPTH) return depth;
  let max = depth;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const d = depthBelow(value[i], depth);
      if (d > max) {
        if (d > MAX_JSON_DEPTH) return d;
        max = d;
      }
    }
  } else {
    // Parsed JSON: plain objects with own properties only.
    const record = value as Record<string, unknown>;
    for (const key in record) {
      const d = depthBelow(record[key], depth);
      if (d > max) {
        if (d > MAX_JSON_DEPTH) return d;
        max = d;
      }
    }
  }
  return max;
}

/**
 * Fingerprint of what a request asked for, to tell an honest retry from an idempotency key reused for another
 * request. It covers `data`'s text as sent, byte for byte: the same key with data that differs only in bytes
 * (`9007199254740993` against `…992`, which parse to the same number; `1.10` against `1.1`; whitespace) is a
 * different request, because what would be delivered differs.
 */
export function eventRequestHash(type: string, resourceId: string | null, dataText: string): string {
  return createHash('sha256')
    .update(type)
    .update('\0')
    .update(resourceId ?? '')
    .update('\0')
    .update(dataText)
    .digest('hex');
}
