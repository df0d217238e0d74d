/**
 * Standard Webhooks `v1` signatures (PRODUCT.md §4; docs/consumer-contract.md): HMAC-SHA256 over
 * `{webhook-id}.{webhook-timestamp}.{raw body}`, keyed with the base64-decoded part of a `whsec_` secret,
 * encoded as padded standard base64. Consumers verify with any Standard Webhooks library, so every byte of
 * the canonical string is a published contract guarded by frozen test vectors.
 *
 * Sign exactly the Buffer that is sent; never re-serialise between signing and sending. The body must be
 * valid UTF-8: the JS reference verifiers decode the payload to a string before hashing, so an HMAC over
 * invalid UTF-8 bytes would not verify for them.
 */
import { createHmac } from 'node:crypto';

// Structurally the Random port (src/ports/clock.ts): the domain imports no ports, only node:crypto and itself.
type RandomBytes = { bytes(n: number): Buffer };

export const SECRET_PREFIX = 'whsec_';
/** We generate 32 bytes; we accept 24..64 on import, the range the spec allows (Svix generates 24). */
export const SECRET_BYTES = 32;
const MIN_SECRET_BYTES = 24;
const MAX_SECRET_BYTES = 64;
const BASE64_RE = /^[A-Za-z0-9+/]+={0,2}$/;
// Ids from our own generators are `msg_<ULID>`; the spec forbids `.` because it is the field separator.
const WEBHOOK_ID_RE = /^[A-Za-z0-9_-]{1,255}$/;

export function generateSecret(random: RandomBytes): string {
  return SECRET_PREFIX + random.bytes(SECRET_BYTES).toString('base64');
}

/**
 * Returns the HMAC key bytes of a `whsec_` secret, or throws. Strict on purpose: the prefix is required (a
 * bare base64 string is ambiguous about its key type) and the base64 must be canonical, because Node's
 * decoder silently skips invalid characters and would otherwise yield a different key than the consumer's.
 */
export function parseSecret(secret: string): Buffer {
  if (!secret.startsWith(SECRET_PREFIX)) throw new Error(`signing secret must start with ${SECRET_PREFIX}`);
  const encoded = secret.slice(SECRET_PREFIX.length);
  if (!BASE64_RE.test(encoded) || encoded.length % 4 !== 0) {
    throw new Error('signing secret must be whsec_ followed by padded standard base64');
  }
  const key = Buffer.from(encoded, 'base64');
  if (key.toString('base64') !== encoded) throw new Error('signing secret is not canonical base64');
  if (key.length < MIN_SECRET_BYTES || key.length > MAX_SECRET_BYTES) {
    throw new Error(`signing secret must decode to ${MIN_SECRET_BYTES}..${MAX_SECRET_BYTES} bytes`);
  }
  return key;
}

export function isValidSecret(secret: string): boolean {
  try {
    parseSecret(secret);
    return true;
  } catch {
    return false;
  }
}

/**
 * The exact bytes that are signed. The timestamp must be a non-negative integer so that it serialises as
 * digits only (a verifier `parseInt`s it; anything else would sign a string the consumer never sees).
 */
export function signatureContent(webhookId: string, timestampSeconds: number, body: Buffer): Buffer {
  return Buffer.concat([Buffer.from(signedPrefix(webhookId, timestampSeconds), 'utf8'), body]);
}

/** `<webhook-id>.<timestamp>.`, checked: what precedes the body in the signed content. */
function signedPrefix(webhookId: string, timestampSeconds: number): string {
  if (!WEBHOOK_ID_RE.test(webhookId)) throw new Error('webhook-id must match [A-Za-z0-9_-]{1,255}');
  if (!Number.isSafeInteger(timestampSeconds) || timestampSeconds < 0) {
    throw new Error('webhook-timestamp must be a non-negative integer of seconds');
  }
  return `${webhookId}.${timestampSeconds}.`;
}

export function signV1(
  secretWhsec: string,
  webhookId: string,
  timestampSeconds: number,
  body: Buffer,
): string {
  // The same bytes as signatureContent, fed in two parts: no copy of the body per attempt and secret.
  const hmac = createHmac('sha256', parseSecret(secretWhsec));
  return `v1,${hmac.update(signedPrefix(webhookId, timestampSeconds), 'utf8').update(body).digest('base64')}`;
}

/**
 * The `webhook-signature` header value: one `v1,` entry per active secret, single-space separated, in the
 * order given. Callers pass the newest secret first; verifiers accept any matching entry regardless of order,
 * newest-first only makes the request inspector easier to read. An empty list is a bug (an unsigned request
 * must never leave), so it throws rather than producing an empty header.
 */
export function signatureHeader(
  secrets: readonly string[],
  webhookId: string,
  timestampSeconds: number,
  body: Buffer,
): string {
  if (secrets.length === 0) throw new Error('at least one active signing secret is required');
  if (secrets.length === 1) return signV1(secrets[0] as string, webhookId, timestampSeconds, body);
  return secrets.map((s) => signV1(s, webhookId, timestampSeconds, body)).join(' ');
}
