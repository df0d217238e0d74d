/**
 * Typed, prefixed, time-sortable identifiers (`evt_01J…`). The body is a ULID: 48 bits of milliseconds then 80
 * bits of entropy, in Crockford base32, so ids sort by creation time as plain strings in both stores. Time and
 * entropy are passed in; this module has no clock.
 */
export const ID_PREFIXES = {
  tenant: 'ten',
  apiKey: 'key',
  event: 'evt',
  endpoint: 'ep',
  delivery: 'dlv',
  attempt: 'att',
  secret: 'sec',
  replay: 'rpl',
  audit: 'aud',
  message: 'msg',
  notification: 'ntf',
} as const;

export type IdKind = keyof typeof ID_PREFIXES;

const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

export function ulid(nowMs: number, entropy: Uint8Array): string {
  if (entropy.length < 10) throw new Error('ulid needs 10 bytes of entropy');
  let out = '';
  let t = Math.floor(nowMs);
  for (let i = 0; i < 10; i++) {
    out = ALPHABET[t % 32] + out;
    t = Math.floor(t / 32);
  }
  // 80 bits of entropy → 16 base32 characters, 5 bits at a time.
  let acc = 0;
  let bits = 0;
  for (let i = 0; i < 10; i++) {
    acc = (acc << 8) | (entropy[i] as number);
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      out += ALPHABET[(acc >> bits) & 31];
    }
    acc &= (1 << bits) - 1;
  }
  return out;
}

export function newId(kind: IdKind, nowMs: number, entropy: Uint8Array): string {
  return `${ID_PREFIXES[kind]}_${ulid(nowMs, entropy)}`;
}

const ID_RE = /^[a-z]{2,3}_[0-9A-HJKMNP-TV-Z]{26}$/;

/** True when `value` looks like an id of `kind`; used to answer 404 early for malformed ids. */
export function isId(kind: IdKind, value: string): boolean {
  return value.startsWith(`${ID_PREFIXES[kind]}_`) && ID_RE.test(value);
}
