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

/**
 * Refuses event data nested deeper than MAX_JSON_DEPTH (400 `validation_failed`, field `data`). Measured on the
 * text that is stored and delivered, not on the parsed value: with a duplicated key JSON.parse keeps only the last
 * value, while the text keeps every one, and a consumer parses all of it.
 */
export function checkDataDepth(dataText: string): void {
  if (jsonDepth(dataText) > MAX_JSON_DEPTH) {
    throw new ApiError('validation_failed', `data is nested deeper than ${MAX_JSON_DEPTH} levels.`, {
      field: 'data',
    });
  }
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;

/**
 * Nesting depth of objects and arrays in JSON text (JSON.parse has accepted it), counted up to MAX_JSON_DEPTH + 1:
 * a deeper text answers as soon as that is reached. One pass over character codes, brackets inside strings
 * skipped, no recursion and no allocation (it runs on every event at intake).
 */
export function jsonDepth(text: string): number {
  let depth = 0;
  let max = 0;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      // To the closing quote; an escape's next character is never it.
      for (i++; i < n; i++) {
        const s = text.charCodeAt(i);
        if (s === BACKSLASH) i++;
        else if (s === QUOTE) break;
      }
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > max) {
        max = depth;
        if (max > MAX_JSON_DEPTH) return max;
      }
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      depth--;
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
