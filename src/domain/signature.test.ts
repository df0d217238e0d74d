import { createHash } from 'node:crypto';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { seededRandom } from '../../test/support/seeded-random.ts';
import {
  generateSecret,
  isValidSecret,
  parseSecret,
  signatureContent,
  signatureHeader,
  signV1,
} from './signature.ts';

// Frozen test vectors (independently recomputed with OpenSSL and verified with
// standardwebhooks@1.1.1 and svix@1.99.1). Changing any of these is a breaking change for every consumer.
const V1 = {
  secret: 'whsec_7iCoM8lWAMcEZE6mQhZvmLRgfaJY/7SC',
  id: 'msg_2KWPBgLlAfxdpx2AI54pPJ85f4W',
  ts: 1674087231,
  body: Buffer.from(
    '{"type":"contact.created","timestamp":"2022-11-03T20:26:10.344522Z","data":{"id":"1f81eb52-5198-4599-803e-771906343485"}}',
    'utf8',
  ),
  contentSha256: '42ad38dd06607dd47cfcde7062f7d41f04a807a2b109b42161334ab34100cb06',
  header: 'v1,RYGGToyn8exrYitQzqtOo9qa6WR3QyhLPVByBHSUWl8=',
};
const V2 = {
  secret: 'whsec_tnDbD7Ba0F2QcdRO8oU4Z8eShJIZEAhFNvOd4YTPavA=',
  id: 'msg_01HZX3Q9V4N8T2M6R5K7J0AB1C',
  ts: 1700000000,
  body: Buffer.from(
    '7b0a20202274797065223a2022696e766f6963652e70616964222c0a20202264617461223a207b22637573746f6d6572223a20225a6fc3ab20c391c3bac3b1657a222c2022616d6f756e74223a2022e282ac31322e3530222c20226e6f7465223a20227461625c7471756f74655c2220f09f8e89227d0a7d0a',
    'hex',
  ),
  contentSha256: 'aa14ebf14d1c11901995b12378714a9dcd5721850470601815d596cf43a00664',
  header: 'v1,3szN+3d1zPqUWQ7I+UyPIR2hjTBSKU/gLWfI7RIfftY=',
};
const V3 = {
  previous: 'whsec_BKz6QBTPA1FuZSceriaIyNz0DAYcWvpJ',
  current: 'whsec_yIJ3GiNuRBD0dCbBp8awBVzLDAJ5+aGVhEVhNnFp5xg=',
  id: 'msg_rotation_0001',
  ts: 1767225600,
  body: Buffer.from('{"type":"endpoint.secret_rotated","data":{}}', 'utf8'),
  contentSha256: '877bfd5759986a43f60a5b260db183eb3e6315c791484235fd48f3219f8309bd',
  sigPrevious: 'v1,1cSR36VlgrPCgsAGXWgJozA4s+ti1lzkAd+AIaRo7cQ=',
  sigCurrent: 'v1,MEZM+anYPi1FwZNdsaf3DEy65gkHv9Vue5mkm0xwUj8=',
};
const UNRELATED = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('frozen test vectors (contract)', () => {
  it('V2 body is the byte-exact JS literal of the frozen vector', () => {
    const literal =
      '{\n  "type": "invoice.paid",\n  "data": {"customer": "Zoë Ñúñez", "amount": "€12.50", "note": "tab\\tquote\\" 🎉"}\n}\n';
    expect(V2.body.equals(Buffer.from(literal, 'utf8'))).toBe(true);
  });

  it.each([
    ['V1', V1],
    ['V2', V2],
  ])('%s: canonical content and signature', (_name, v) => {
    expect(sha256(signatureContent(v.id, v.ts, v.body))).toBe(v.contentSha256);
    expect(signV1(v.secret, v.id, v.ts, v.body)).toBe(v.header);
    expect(signatureHeader([v.secret], v.id, v.ts, v.body)).toBe(v.header);
  });

  it('V3: rotation header carries both signatures, newest first as given', () => {
    expect(sha256(signatureContent(V3.id, V3.ts, V3.body))).toBe(V3.contentSha256);
    expect(signV1(V3.previous, V3.id, V3.ts, V3.body)).toBe(V3.sigPrevious);
    expect(signV1(V3.current, V3.id, V3.ts, V3.body)).toBe(V3.sigCurrent);
    expect(signatureHeader([V3.current, V3.previous], V3.id, V3.ts, V3.body)).toBe(
      `${V3.sigCurrent} ${V3.sigPrevious}`,
    );
  });
});

describe('verification by consumer libraries', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  // Both libraries fix their tolerance at ±300 s against Date.now, so the clock is placed near the vector.
  const atVectorTime = (ts: number, offsetSeconds = 30) => {
    vi.useFakeTimers();
    vi.setSystemTime((ts + offsetSeconds) * 1000);
  };
  const headers = (id: string, ts: number, signature: string) => ({
    'webhook-id': id,
    'webhook-timestamp': String(ts),
    'webhook-signature': signature,
  });
  const libraries = [
    ['standardwebhooks', (s: string) => new StandardWebhook(s)],
    ['svix', (s: string) => new SvixWebhook(s)],
  ] as const;

  describe.each(libraries)('%s', (_name, make) => {
    it.each([
      ['V1', V1],
      ['V2', V2],
    ])('accepts our signature for %s', (_v, v) => {
      atVectorTime(v.ts);
      const header = signatureHeader([v.secret], v.id, v.ts, v.body);
      expect(make(v.secret).verify(v.body, headers(v.id, v.ts, header))).toEqual(
        JSON.parse(v.body.toString('utf8')),
      );
    });

    it('accepts the two-secret rotation header with either secret', () => {
      atVectorTime(V3.ts);
      const header = signatureHeader([V3.current, V3.previous], V3.id, V3.ts, V3.body);
      for (const secret of [V3.current, V3.previous]) {
        expect(make(secret).verify(V3.body, headers(V3.id, V3.ts, header))).toEqual({
          type: 'endpoint.secret_rotated',
          data: {},
        });
      }
    });

    it('accepts a freshly generated secret and signature', () => {
      const secret = generateSecret(seededRandom(7));
      const ts = 1_800_000_000;
      atVectorTime(ts, -120);
      const body = Buffer.from('{"id":"evt_1","type":"order.created","data":{"n":1}}');
      const header = signatureHeader([secret], 'msg_01J0000000000000000000000', ts, body);
      expect(make(secret).verify(body, headers('msg_01J0000000000000000000000', ts, header))).toEqual(
        JSON.parse(body.toString()),
      );
    });

    it('rejects a tampered body', () => {
      atVectorTime(V1.ts);
      const tampered = Buffer.from(V1.body.toString('utf8').replace('contact.created', 'contact.deleted'));
      expect(() => make(V1.secret).verify(tampered, headers(V1.id, V1.ts, V1.header))).toThrow(
        /No matching signature/,
      );
    });

    it('rejects an unrelated secret, including on the rotation header', () => {
      atVectorTime(V3.ts);
      const header = signatureHeader([V3.current, V3.previous], V3.id, V3.ts, V3.body);
      expect(() => make(UNRELATED).verify(V3.body, headers(V3.id, V3.ts, header))).toThrow(
        /No matching signature/,
      );
    });

    it('rejects a different webhook-id (the id is bound into the signature)', () => {
      atVectorTime(V1.ts);
      expect(() => make(V1.secret).verify(V1.body, headers('msg_other', V1.ts, V1.header))).toThrow();
    });

    it('rejects the signature outside the 300 s tolerance', () => {
      atVectorTime(V1.ts, 301);
      expect(() => make(V1.secret).verify(V1.body, headers(V1.id, V1.ts, V1.header))).toThrow();
    });

    it("library's own sign() equals ours", () => {
      expect(make(V2.secret).sign(V2.id, new Date(V2.ts * 1000), V2.body)).toBe(V2.header);
    });
  });
});

describe('secrets', () => {
  it('generates whsec_ + base64 of 32 bytes, deterministic under a seeded random', () => {
    const a = generateSecret(seededRandom(1));
    expect(a).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(parseSecret(a)).toHaveLength(32);
    expect(generateSecret(seededRandom(1))).toBe(a);
    expect(generateSecret(seededRandom(2))).not.toBe(a);
  });

  it('parses the vector secrets (24 and 32 bytes)', () => {
    expect(parseSecret(V1.secret)).toHaveLength(24);
    expect(parseSecret(V2.secret)).toHaveLength(32);
  });

  it.each([
    ['no prefix', '7iCoM8lWAMcEZE6mQhZvmLRgfaJY/7SC'],
    ['wrong prefix', 'whsk_7iCoM8lWAMcEZE6mQhZvmLRgfaJY/7SC'],
    ['empty', 'whsec_'],
    ['too short (16 bytes)', `whsec_${Buffer.alloc(16, 1).toString('base64')}`],
    ['too long (65 bytes)', `whsec_${Buffer.alloc(65, 1).toString('base64')}`],
    ['base64url alphabet', 'whsec_7iCoM8lWAMcEZE6mQhZvmLRgfaJY_7SC'],
    ['missing padding', 'whsec_tnDbD7Ba0F2QcdRO8oU4Z8eShJIZEAhFNvOd4YTPavA'],
    ['non-canonical trailing bits', 'whsec_tnDbD7Ba0F2QcdRO8oU4Z8eShJIZEAhFNvOd4YTPavB='],
    ['embedded whitespace', 'whsec_7iCoM8lWAMcEZE6m QhZvmLRgfaJY/7S'],
  ])('rejects %s', (_name, secret) => {
    expect(() => parseSecret(secret)).toThrow();
    expect(isValidSecret(secret)).toBe(false);
  });
});

describe('input guards', () => {
  it('refuses an empty secret list', () => {
    expect(() => signatureHeader([], V1.id, V1.ts, V1.body)).toThrow(/at least one/);
  });

  it.each([1.5, -1, Number.NaN])('refuses timestamp %s', (ts) => {
    expect(() => signatureContent(V1.id, ts, V1.body)).toThrow(/webhook-timestamp/);
  });

  it.each(['', 'msg.1', 'msg 1'])('refuses webhook-id %j', (id) => {
    expect(() => signatureContent(id, V1.ts, V1.body)).toThrow(/webhook-id/);
  });
});
