/**
 * API keys (PRODUCT.md §2): `hkp_` for producers (capture plane only), `hkt_` for tenants. 32 random bytes in
 * base64url, shown once; only the SHA-256 hex digest is stored. A fast unsalted hash is enough because the
 * key carries 256 bits of entropy — there is nothing to brute-force, unlike a password. Keys are looked up by
 * hash, so no secret-dependent comparison happens in our code.
 *
 * `prefix` (the first 12 characters: `hkp_` + 8 key characters, 48 bits) is stored in clear so operators and
 * tenants can recognise a key in lists and audit entries; it is far too short to help guess the rest.
 */
import { createHash } from 'node:crypto';

// Structurally the Random port (src/ports/clock.ts): the domain imports no ports, only node:crypto and itself.
type RandomBytes = { bytes(n: number): Buffer };

export const API_KEY_PREFIXES = { producer: 'hkp_', tenant: 'hkt_' } as const;
export type ApiKeyKind = keyof typeof API_KEY_PREFIXES;
export const API_KEY_BYTES = 32;
export const API_KEY_DISPLAY_PREFIX_LENGTH = 12;
const API_KEY_RE = /^hk[pt]_[A-Za-z0-9_-]{43}$/;

export interface GeneratedApiKey {
  key: string;
  hash: string;
  prefix: string;
}

export function generateApiKey(kind: ApiKeyKind, random: RandomBytes): GeneratedApiKey {
  const key = API_KEY_PREFIXES[kind] + random.bytes(API_KEY_BYTES).toString('base64url');
  return { key, hash: hashApiKey(key), prefix: key.slice(0, API_KEY_DISPLAY_PREFIX_LENGTH) };
}

export function hashApiKey(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

/**
 * The kind a presented bearer token claims to be, or null when it is not shaped like one of our keys. Lets
 * the API reject garbage and route producer vs tenant lookups before touching the store; authenticity is
 * still decided only by the hash lookup.
 */
export function apiKeyKind(key: string): ApiKeyKind | null {
  if (!API_KEY_RE.test(key)) return null;
  return key.startsWith(API_KEY_PREFIXES.producer) ? 'producer' : 'tenant';
}
