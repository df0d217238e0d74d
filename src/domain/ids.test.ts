import { describe, expect, it } from 'vitest';
import { seededRandom } from '../../test/support/seeded-random.ts';
import { ID_PREFIXES, type IdKind, idTime, isId, newId, ulid } from './ids.ts';

/** The ULID spelled out the obvious way, one character at a time: the reference the fast version must match. */
function referenceUlid(nowMs: number, entropy: Uint8Array): string {
  const alphabet = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
  let time = '';
  for (let t = Math.floor(nowMs), i = 0; i < 10; i++, t = Math.floor(t / 32)) time = alphabet[t % 32] + time;
  let bitsText = '';
  for (const byte of entropy.subarray(0, 10)) bitsText += byte.toString(2).padStart(8, '0');
  let random = '';
  for (let i = 0; i < 80; i += 5) random += alphabet[Number.parseInt(bitsText.slice(i, i + 5), 2)];
  return time + random;
}

describe('ulid', () => {
  it('encodes the time as the ULID specification does', () => {
    // The specification's example timestamp, and the largest time it allows.
    expect(ulid(1469918176385, new Uint8Array(10)).slice(0, 10)).toBe('01ARYZ6S41');
    expect(ulid(2 ** 48 - 1, new Uint8Array(10)).slice(0, 10)).toBe('7ZZZZZZZZZ');
    expect(ulid(0, new Uint8Array(10))).toBe('0'.repeat(26));
    expect(ulid(0, new Uint8Array(10).fill(0xff))).toBe(`${'0'.repeat(10)}${'Z'.repeat(16)}`);
  });

  it('matches the character-at-a-time reference on random times and entropy', () => {
    const random = seededRandom(42);
    for (let i = 0; i < 2_000; i++) {
      const now = Math.floor(random.float() * 2 ** 48);
      const entropy = random.bytes(10);
      expect(ulid(now, entropy)).toBe(referenceUlid(now, entropy));
    }
  });

  it('sorts by time as plain strings, and refuses short entropy', () => {
    const random = seededRandom(7);
    const times = [0, 1, 31, 32, 1_700_000_000_000, 1_700_000_000_001, 2 ** 48 - 1];
    const ids = times.map((t) => ulid(t, random.bytes(10)));
    expect([...ids].sort()).toEqual(ids);
    expect(() => ulid(0, new Uint8Array(9))).toThrow(/10 bytes/);
  });
});

describe('newId', () => {
  it('is the kind prefix, an underscore and the ULID, for every kind', () => {
    const random = seededRandom(3);
    for (const kind of Object.keys(ID_PREFIXES) as IdKind[]) {
      const entropy = random.bytes(10);
      const id = newId(kind, 1_700_000_000_123, entropy);
      expect(id).toBe(`${ID_PREFIXES[kind]}_${referenceUlid(1_700_000_000_123, entropy)}`);
      expect(isId(kind, id)).toBe(true);
    }
  });

  it('gives each call its own string: ids made one after another do not share or change each other', () => {
    const random = seededRandom(9);
    const a = newId('event', 1, random.bytes(10));
    const before = `${a}`;
    const b = newId('delivery', 2, random.bytes(10));
    const c = ulid(3, random.bytes(10));
    expect(a).toBe(before);
    expect(new Set([a, b, c]).size).toBe(3);
    expect(isId('event', a) && isId('delivery', b)).toBe(true);
  });
});

describe('idTime', () => {
  it('reads back the millisecond an id was minted at, and nothing from what is not an id of the kind', () => {
    const random = seededRandom(11);
    for (const t of [0, 1, 1_700_000_000_123, 2 ** 48 - 1]) {
      expect(idTime('delivery', newId('delivery', t, random.bytes(10)))).toBe(t);
    }
    expect(idTime('delivery', newId('event', 5, random.bytes(10)))).toBeNull();
    expect(idTime('delivery', 'dlv_1')).toBeNull();
  });
});
