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
const CODES = Uint8Array.from(ALPHABET, (c) => c.charCodeAt(0));
const ULID_LENGTH = 26;
const UNDERSCORE = 0x5f;

/**
 * Where an id is spelled out as character codes before it becomes one string, one array per id length (every id
 * of a kind has the same length). Ids are made several times per event on the hot paths; building them a character
 * at a time made ~26 intermediate strings each and was ~6 % of the intake thread's allocations (bench:delivery,
 * SQLite). This way: ~0.1 µs and one string per id, against ~0.65 µs. Synchronous use only, so one set per thread.
 */
const scratches: number[][] = [];
const scratchOf = (length: number): number[] => (scratches[length] ??= new Array<number>(length).fill(0));

/**
 * Writes the ULID of (nowMs, entropy) into `out` from `at`: the time as 10 characters of 5 bits (written as a low
 * 30-bit and a high 18-bit half, so that every step is integer arithmetic), then the 80 bits of entropy as 16
 * characters, 5 bytes → 8 characters at a time.
 */
function writeUlid(out: number[], at: number, nowMs: number, entropy: Uint8Array): void {
  if (entropy.length < 10) throw new Error('ulid needs 10 bytes of entropy');
  const t = Math.floor(nowMs);
  let lo = t % 0x40000000;
  let hi = (t - lo) / 0x40000000;
  for (let i = at + 9; i >= at + 4; i--) {
    out[i] = CODES[lo & 31] as number;
    lo >>>= 5;
  }
  for (let i = at + 3; i >= at; i--) {
    out[i] = CODES[hi & 31] as number;
    hi >>>= 5;
  }
  for (let g = 0, o = at + 10; g < 10; g += 5, o += 8) {
    const b0 = entropy[g] as number;
    const b1 = entropy[g + 1] as number;
    const b2 = entropy[g + 2] as number;
    const b3 = entropy[g + 3] as number;
    const b4 = entropy[g + 4] as number;
    out[o] = CODES[b0 >> 3] as number;
    out[o + 1] = CODES[((b0 & 7) << 2) | (b1 >> 6)] as number;
    out[o + 2] = CODES[(b1 >> 1) & 31] as number;
    out[o + 3] = CODES[((b1 & 1) << 4) | (b2 >> 4)] as number;
    out[o + 4] = CODES[((b2 & 15) << 1) | (b3 >> 7)] as number;
    out[o + 5] = CODES[(b3 >> 2) & 31] as number;
    out[o + 6] = CODES[((b3 & 3) << 3) | (b4 >> 5)] as number;
    out[o + 7] = CODES[b4 & 31] as number;
  }
}

/** `nowMs` must be an integer of milliseconds in [0, 2^48), as ULIDs allow. */
export function ulid(nowMs: number, entropy: Uint8Array): string {
  const out = scratchOf(ULID_LENGTH);
  writeUlid(out, 0, nowMs, entropy);
  return String.fromCharCode.apply(null, out);
}

export function newId(kind: IdKind, nowMs: number, entropy: Uint8Array): string {
  const prefix = ID_PREFIXES[kind];
  const out = scratchOf(prefix.length + 1 + ULID_LENGTH);
  for (let i = 0; i < prefix.length; i++) out[i] = prefix.charCodeAt(i);
  out[prefix.length] = UNDERSCORE;
  writeUlid(out, prefix.length + 1, nowMs, entropy);
  return String.fromCharCode.apply(null, out);
}

/** The smallest id of `kind` minted at or after `ms`: ids sort by time, so `id < idFloor(kind, t)` is "made before t". */
export const idFloor = (kind: IdKind, ms: number): string => newId(kind, Math.max(0, ms), new Uint8Array(10));

const ID_RE = /^[a-z]{2,3}_[0-9A-HJKMNP-TV-Z]{26}$/;

/** The millisecond an id was minted at (its ULID's time), or null when `value` is not an id of `kind`. */
export function idTime(kind: IdKind, value: string): number | null {
  if (!isId(kind, value)) return null;
  const at = ID_PREFIXES[kind].length + 1;
  let t = 0;
  for (let i = at; i < at + 10; i++) t = t * 32 + ALPHABET.indexOf(value[i] as string);
  return t;
}

/** True when `value` looks like an id of `kind`; used to answer 404 early for malformed ids. */
export function isId(kind: IdKind, value: string): boolean {
  return value.startsWith(`${ID_PREFIXES[kind]}_`) && ID_RE.test(value);
}
