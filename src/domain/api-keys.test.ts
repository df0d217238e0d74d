import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { seededRandom } from '../../test/support/seeded-random.ts';
import { apiKeyKind, generateApiKey, hashApiKey } from './api-keys.ts';

describe('generateApiKey', () => {
  it.each([
    ['producer', 'hkp_'],
    ['tenant', 'hkt_'],
  ] as const)('%s keys start with %s and carry 32 base64url bytes', (kind, prefix) => {
    const { key, hash, prefix: shown } = generateApiKey(kind, seededRandom(5));
    expect(key).toMatch(/^hk[pt]_[A-Za-z0-9_-]{43}$/);
    expect(key.startsWith(prefix)).toBe(true);
    expect(Buffer.from(key.slice(4), 'base64url')).toHaveLength(32);
    expect(shown).toBe(key.slice(0, 12));
    expect(shown.startsWith(prefix)).toBe(true);
    expect(hash).toBe(createHash('sha256').update(key).digest('hex'));
    expect(hash).toMatch(/^[0-9a-f]{64}$/);
  });

  it('is deterministic under a seeded random and differs across seeds and draws', () => {
    expect(generateApiKey('tenant', seededRandom(1)).key).toBe(generateApiKey('tenant', seededRandom(1)).key);
    const rnd = seededRandom(1);
    const a = generateApiKey('tenant', rnd);
    const b = generateApiKey('tenant', rnd);
    expect(a.key).not.toBe(b.key);
    expect(a.hash).not.toBe(b.hash);
    expect(generateApiKey('tenant', seededRandom(2)).key).not.toBe(a.key);
  });

  it('uses the bytes of the injected random', () => {
    const bytes = seededRandom(8).bytes(32);
    expect(generateApiKey('producer', seededRandom(8)).key).toBe(`hkp_${bytes.toString('base64url')}`);
  });
});

describe('hashApiKey', () => {
  it('is SHA-256 hex of the whole key, prefix included', () => {
    // Pinned: stored hashes must stay valid across releases.
    expect(hashApiKey('hkp_abc')).toBe('75922f081a0bff4cc38b3459dfa3a2ac03a85ad047480551e7e389138fbca784');
    expect(hashApiKey('hkp_abc')).not.toBe(hashApiKey('hkt_abc'));
  });
});

describe('apiKeyKind', () => {
  const { key: producer } = generateApiKey('producer', seededRandom(3));
  const { key: tenant } = generateApiKey('tenant', seededRandom(3));
  it.each([
    [producer, 'producer'],
    [tenant, 'tenant'],
    [producer.slice(0, -1), null],
    [`${producer}x`, null],
    [`hkx_${producer.slice(4)}`, null],
    [`${producer.slice(0, -1)}=`, null],
    ['', null],
    ['whsec_abc', null],
  ])('%j → %s', (key, kind) => {
    expect(apiKeyKind(key)).toBe(kind);
  });
});
