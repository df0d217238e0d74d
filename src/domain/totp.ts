/**
 * TOTP (RFC 6238 over HOTP, RFC 4226) for the tenant step-up (PRODUCT.md §3): HMAC-SHA-1, 6 digits, 30 s
 * steps — the only parameters every authenticator app supports. SHA-1 is fine here: HOTP relies on HMAC's
 * PRF property, not on collision resistance. The caller passes the time; this module has no clock.
 *
 * Replay within the acceptance window is not prevented here (that needs state). Use `matchTotpStep` and
 * refuse a step that is not greater than the last one accepted for the tenant.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export const TOTP_STEP_SECONDS = 30;
export const TOTP_DIGITS = 6;
/** 160-bit seeds, the RFC 4226 recommendation and what authenticator apps expect. */
export const TOTP_SEED_BYTES = 20;

export function totpStep(nowMs: number): number {
  return Math.floor(nowMs / 1000 / TOTP_STEP_SECONDS);
}

export function hotpCode(seed: Buffer, counter: number, digits = TOTP_DIGITS): string {
  if (!Number.isSafeInteger(counter) || counter < 0)
    throw new RangeError('counter must be a non-negative integer');
  const msg = Buffer.alloc(8);
  msg.writeBigUInt64BE(BigInt(counter));
  const mac = createHmac('sha1', seed).update(msg).digest();
  // Dynamic truncation (RFC 4226 §5.3): the low nibble of the last byte picks a 31-bit window.
  const offset = mac[mac.length - 1]! & 0x0f;
  const binary = mac.readUInt32BE(offset) & 0x7fffffff;
  return String(binary % 10 ** digits).padStart(digits, '0');
}

export function totpCode(seed: Buffer, nowMs: number, digits = TOTP_DIGITS): string {
  return hotpCode(seed, totpStep(nowMs), digits);
}

/**
 * The step whose code equals `code` within ±`window` steps of now (default ±30 s, for clock skew and typing
 * time), or null. Every candidate is compared in constant time and none short-circuits, so timing reveals
 * neither the code nor which step matched.
 */
export function matchTotpStep(seed: Buffer, code: string, nowMs: number, window = 1): number | null {
  if (!Number.isSafeInteger(window) || window < 0 || window > 10)
    throw new RangeError('window must be 0..10');
  if (!/^\d{6}$/.test(code)) return null;
  const given = Buffer.from(code, 'utf8');
  const current = totpStep(nowMs);
  let matched: number | null = null;
  for (let step = current - window; step <= current + window; step++) {
    if (step < 0) continue;
    const ok = timingSafeEqual(Buffer.from(hotpCode(seed, step), 'utf8'), given);
    if (ok && matched === null) matched = step;
  }
  return matched;
}

export function verifyTotp(seed: Buffer, code: string, nowMs: number, window = 1): boolean {
  return matchTotpStep(seed, code, nowMs, window) !== null;
}

const B32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

/** RFC 4648 base32. otpauth URIs use it without padding, so padding is optional. */
export function base32Encode(data: Uint8Array, options: { padding?: boolean } = {}): string {
  let out = '';
  let acc = 0;
  let bits = 0;
  for (const byte of data) {
    acc = (acc << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      out += B32[(acc >>> bits) & 31];
    }
    acc &= (1 << bits) - 1;
  }
  if (bits > 0) out += B32[(acc << (5 - bits)) & 31];
  if (options.padding ?? true) while (out.length % 8 !== 0) out += '=';
  return out;
}

/**
 * Case-insensitive (people type seeds by hand); trailing padding optional. Throws on characters outside the
 * alphabet and on lengths no byte string encodes to, rather than silently decoding a different seed.
 */
export function base32Decode(text: string): Buffer {
  const body = text.toUpperCase().replace(/=+$/, '');
  if (![0, 2, 4, 5, 7].includes(body.length % 8)) throw new Error('invalid base32 length');
  const out: number[] = [];
  let acc = 0;
  let bits = 0;
  for (const ch of body) {
    const v = B32.indexOf(ch);
    if (v < 0) throw new Error('invalid base32 character');
    acc = (acc << 5) | v;
    bits += 5;
    if (bits >= 8) {
      bits -= 8;
      out.push((acc >>> bits) & 0xff);
    }
    acc &= (1 << bits) - 1;
  }
  return Buffer.from(out);
}

/** The provisioning URI that authenticator apps scan (Key Uri Format); parameters spelled out for old apps. */
export function otpauthUri(label: string, seed: Buffer, issuer = 'Hookrail'): string {
  const params = new URLSearchParams({
    secret: base32Encode(seed, { padding: false }),
    issuer,
    algorithm: 'SHA1',
    digits: String(TOTP_DIGITS),
    period: String(TOTP_STEP_SECONDS),
  });
  return `otpauth://totp/${encodeURIComponent(issuer)}:${encodeURIComponent(label)}?${params.toString()}`;
}
