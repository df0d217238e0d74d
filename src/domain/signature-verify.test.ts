import { Webhook } from 'standardwebhooks';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { verifySignature } from './signature-verify.ts';

const SECRET = 'whsec_7iCoM8lWAMcEZE6mQhZvmLRgfaJY/7SC';
const OTHER = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const ID = 'msg_2KWPBgLlAfxdpx2AI54pPJ85f4W';
const TS = 1674087231;
const BODY = Buffer.from('{"type":"contact.created","data":{"id":"1"}}');
const SIG = new Webhook(SECRET).sign(ID, new Date(TS * 1000), BODY);
const OTHER_SIG = new Webhook(OTHER).sign(ID, new Date(TS * 1000), BODY);

const input = (o: Partial<Parameters<typeof verifySignature>[0]> = {}) => ({
  secrets: [SECRET],
  webhookId: ID,
  timestamp: String(TS),
  signature: SIG,
  body: BODY,
  nowSeconds: TS,
  toleranceSeconds: 300,
  ...o,
});

describe('verifySignature agrees with the reference library (standardwebhooks)', () => {
  afterEach(() => vi.useRealTimers());

  /** The reference verdict, its clock set to `now` (its tolerance is fixed at 300 s). */
  function reference(secret: string, signature: string, body: Buffer, now: number): boolean {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(now * 1000);
    try {
      new Webhook(secret).verify(body, {
        'webhook-id': ID,
        'webhook-timestamp': String(TS),
        'webhook-signature': signature,
      });
      return true;
    } catch {
      return false;
    } finally {
      vi.useRealTimers();
    }
  }

  const sig = SIG.slice(3);
  it.each([
    ['our signature', SECRET, SIG, BODY, TS],
    ['a wrong secret', OTHER, SIG, BODY, TS],
    ['a changed body', SECRET, SIG, Buffer.from(`${BODY.toString()} `), TS],
    ['300 s old', SECRET, SIG, BODY, TS + 300],
    ['301 s old', SECRET, SIG, BODY, TS + 301],
    ['300 s ahead', SECRET, SIG, BODY, TS - 300],
    ['301 s ahead', SECRET, SIG, BODY, TS - 301],
    ['ours after another', SECRET, `${OTHER_SIG} ${SIG}`, BODY, TS],
    ['ours before another', SECRET, `${SIG} ${OTHER_SIG}`, BODY, TS],
    ['a v1a entry and ours', SECRET, `v1a,${Buffer.alloc(64).toString('base64')} ${SIG}`, BODY, TS],
    ['double spaces', SECRET, `${OTHER_SIG}  ${SIG}`, BODY, TS],
    ['comma-separated entries, ours first', SECRET, `v1,${sig},v1,x`, BODY, TS],
    ['comma-separated entries, ours second', SECRET, `v1,x,v1,${sig}`, BODY, TS],
    ['another version tag', SECRET, `v2,${sig}`, BODY, TS],
    ['unpadded base64', SECRET, `v1,${sig.replace(/=+$/, '')}`, BODY, TS],
    ['a trailing space', SECRET, `${SIG} `, BODY, TS],
  ])('%s', (_name, secret, signature, body, now) => {
    const ours = verifySignature(input({ secrets: [secret], signature, body, nowSeconds: now }));
    expect(ours.valid).toBe(reference(secret, signature, body, now));
  });
});

describe('verifySignature', () => {
  it('checks the headers, then the timestamp, then the signature', () => {
    expect(verifySignature(input({ webhookId: '', timestamp: null }))).toEqual({
      valid: false,
      reason: 'missing_header',
      header: 'webhook-id',
    });
    expect(verifySignature(input({ signature: '' }))).toMatchObject({ header: 'webhook-signature' });
    expect(verifySignature(input({ secrets: [OTHER], nowSeconds: TS + 301 }))).toEqual({
      valid: false,
      reason: 'timestamp_too_old',
      timestamp: TS,
      now: TS + 301,
      signatureMatches: false,
    });
  });

  it('names the first of the secrets that matches, and the header entry it matched', () => {
    const header = `${SIG} ${OTHER_SIG}`;
    expect(verifySignature(input({ secrets: [OTHER, SECRET], signature: header }))).toEqual({
      valid: true,
      secretIndex: 0,
      signature: OTHER_SIG,
      timestamp: TS,
    });
  });

  it('skips the timestamp check with a tolerance of 0', () => {
    expect(verifySignature(input({ nowSeconds: TS + 86_400 * 365, toleranceSeconds: 0 }))).toMatchObject({
      valid: true,
    });
  });

  it.each([
    ['timestamp', { timestamp: `${TS}abc` }, 'webhook-timestamp'],
    ['timestamp', { timestamp: '-1' }, 'webhook-timestamp'],
    ['timestamp', { timestamp: '99999999999999999999' }, 'webhook-timestamp'],
    ['id', { webhookId: 'msg.1' }, 'webhook-id'],
  ])('refuses a %s Hookrail never sends', (_name, o, header) => {
    expect(verifySignature(input(o))).toEqual({ valid: false, reason: 'invalid_header', header });
  });
});
