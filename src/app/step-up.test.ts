import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../test/support/fake-clock.ts';
import { createLocalKeyService } from '../adapters/crypto/envelope.ts';
import { requireStepUp, STEP_UP_MAX_FAILURES, STEP_UP_TTL_MS, stepUpWait } from './step-up.ts';

const TENANT = 'ten_01JZ0000000000000000000000';

describe('step-up tokens', () => {
  const keys = createLocalKeyService({ masterKey: Buffer.alloc(32, 1) });
  const clock = new FakeClock();
  const mint = (tenantId: string, expiresAt: number, k = keys) => {
    const data = `su1.${tenantId}.${expiresAt}`;
    return `${data}.${k.mac(data)}`;
  };
  const reason = (header: string | string[] | undefined, tenantId = TENANT) => {
    try {
      requireStepUp({ clock, keys }, tenantId, header);
      return 'ok';
    } catch (err) {
      return (err as { details: { reason: string } }).details.reason;
    }
  };

  it('verifies on any process sharing the master key, and only there', () => {
    const token = mint(TENANT, clock.now() + STEP_UP_TTL_MS);
    expect(reason(token)).toBe('ok');
    const otherProcess = createLocalKeyService({ masterKey: Buffer.alloc(32, 1) });
    expect(() => requireStepUp({ clock, keys: otherProcess }, TENANT, token)).not.toThrow();
    const otherKey = createLocalKeyService({ masterKey: Buffer.alloc(32, 2) });
    expect(reason(mint(TENANT, clock.now() + 1000, otherKey))).toBe('invalid');
  });

  it('refuses missing, malformed, foreign, tampered and expired tokens', () => {
    const token = mint(TENANT, clock.now() + 1000);
    expect(reason(undefined)).toBe('missing');
    expect(reason([token, token])).toBe('invalid');
    expect(reason(`${token}x`)).toBe('invalid');
    expect(reason(token, 'ten_01JZ0000000000000000000001')).toBe('invalid');
    expect(reason(token.replace(/\.(\d+)\./, (_, n) => `.${Number(n) + 1}.`))).toBe('invalid');
    expect(reason(token.replace(/\.(\d+)\./, (_, n) => `.0${n}.`))).toBe('invalid');
    expect(reason(mint(TENANT, clock.now()))).toBe('expired');
  });
});

describe('stepUpWait', () => {
  const MIN = 60_000;
  it('waits once the budget is used up in the window, until the window passes', () => {
    expect(stepUpWait({ failures: 0, failuresSince: null }, 1000)).toBeNull();
    expect(stepUpWait({ failures: STEP_UP_MAX_FAILURES - 1, failuresSince: 1000 }, 1000)).toBeNull();
    expect(stepUpWait({ failures: STEP_UP_MAX_FAILURES, failuresSince: 1000 }, 1000)).toBe(300);
    expect(stepUpWait({ failures: STEP_UP_MAX_FAILURES, failuresSince: 1000 }, 1000 + 4 * MIN + 30_500)).toBe(
      30,
    );
    expect(stepUpWait({ failures: STEP_UP_MAX_FAILURES, failuresSince: 1000 }, 1000 + 5 * MIN - 1)).toBe(1);
    expect(stepUpWait({ failures: STEP_UP_MAX_FAILURES, failuresSince: 1000 }, 1000 + 5 * MIN)).toBeNull();
  });
});
