import { describe, expect, it } from 'vitest';
import { seededRandom } from '../../test/support/seeded-random.ts';
import {
  base32Decode,
  base32Encode,
  hotpCode,
  matchTotpStep,
  otpauthUri,
  totpCode,
  verifyTotp,
} from './totp.ts';

const RFC_SEED = Buffer.from('12345678901234567890', 'ascii');

describe('RFC 6238 appendix B (SHA-1)', () => {
  it.each([
    [59, '94287082'],
    [1111111109, '07081804'],
    [1111111111, '14050471'],
    [1234567890, '89005924'],
    [2000000000, '69279037'],
    [20000000000, '65353130'],
  ])('T=%i → %s (8 digits) and its last 6 digits', (seconds, code8) => {
    expect(totpCode(RFC_SEED, seconds * 1000, 8)).toBe(code8);
    expect(totpCode(RFC_SEED, seconds * 1000)).toBe(code8.slice(2));
  });
});

describe('RFC 4226 appendix D (HOTP)', () => {
  it('matches the first counters', () => {
    const expected = ['755224', '287082', '359152', '969429', '338314', '254676', '287922', '162583'];
    expect(expected.map((_, i) => hotpCode(RFC_SEED, i))).toEqual(expected);
  });
});

describe('verifyTotp', () => {
  const t = 1111111111_000; // step 37037037, code 050471
  it('accepts the current code', () => {
    expect(verifyTotp(RFC_SEED, '050471', t)).toBe(true);
    expect(matchTotpStep(RFC_SEED, '050471', t)).toBe(37037037);
  });

  it('accepts the neighbouring steps with window 1, not with window 0', () => {
    const previous = totpCode(RFC_SEED, t - 30_000);
    const next = totpCode(RFC_SEED, t + 30_000);
    expect(verifyTotp(RFC_SEED, previous, t)).toBe(true);
    expect(verifyTotp(RFC_SEED, next, t)).toBe(true);
    expect(matchTotpStep(RFC_SEED, previous, t)).toBe(37037036);
    expect(verifyTotp(RFC_SEED, previous, t, 0)).toBe(false);
    expect(verifyTotp(RFC_SEED, next, t, 0)).toBe(false);
  });

  it('rejects codes two steps away', () => {
    expect(verifyTotp(RFC_SEED, totpCode(RFC_SEED, t - 60_000), t)).toBe(false);
    expect(verifyTotp(RFC_SEED, totpCode(RFC_SEED, t + 60_000), t)).toBe(false);
  });

  it.each(['', '05047', '0504710', '05047a', ' 050471', '٠٥٠٤٧١', '050471\n'])(
    'rejects malformed %j',
    (code) => {
      expect(verifyTotp(RFC_SEED, code, t)).toBe(false);
    },
  );

  it('rejects a code made with another seed', () => {
    const other = seededRandom(3).bytes(20);
    expect(verifyTotp(RFC_SEED, totpCode(other, t), t)).toBe(false);
  });

  it('rejects an out-of-range window', () => {
    expect(() => verifyTotp(RFC_SEED, '050471', t, -1)).toThrow(RangeError);
    expect(() => verifyTotp(RFC_SEED, '050471', t, 11)).toThrow(RangeError);
  });

  it('does not wrap below step 0 near the epoch', () => {
    expect(verifyTotp(RFC_SEED, hotpCode(RFC_SEED, 0), 1000)).toBe(true);
  });
});

describe('base32 (RFC 4648 §10 vectors)', () => {
  it.each([
    ['', ''],
    ['f', 'MY======'],
    ['fo', 'MZXQ===='],
    ['foo', 'MZXW6==='],
    ['foob', 'MZXW6YQ='],
    ['fooba', 'MZXW6YTB'],
    ['foobar', 'MZXW6YTBOI======'],
  ])('%j ↔ %s', (plain, encoded) => {
    expect(base32Encode(Buffer.from(plain))).toBe(encoded);
    expect(base32Decode(encoded).toString()).toBe(plain);
    expect(base32Decode(encoded.replace(/=/g, '').toLowerCase()).toString()).toBe(plain);
  });

  it('roundtrips random seeds without padding', () => {
    const rnd = seededRandom(11);
    for (let n = 0; n < 40; n++) {
      const seed = rnd.bytes(n);
      const encoded = base32Encode(seed, { padding: false });
      expect(encoded).not.toContain('=');
      expect(base32Decode(encoded).equals(seed)).toBe(true);
    }
  });

  it.each(['MZXW1', 'MZXW6YTB0', 'M', 'MZX', 'MZXW6Y'])('rejects %j', (bad) => {
    expect(() => base32Decode(bad)).toThrow();
  });
});

describe('otpauthUri', () => {
  it('builds a Key Uri Format URI with the unpadded base32 seed', () => {
    const uri = otpauthUri('tenant ten_01/acme', RFC_SEED);
    expect(uri).toBe(
      'otpauth://totp/Hookrail:tenant%20ten_01%2Facme?secret=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ&issuer=Hookrail&algorithm=SHA1&digits=6&period=30',
    );
    const secret = new URL(uri).searchParams.get('secret')!;
    expect(base32Decode(secret).equals(RFC_SEED)).toBe(true);
  });
});
