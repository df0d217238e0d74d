/**
 * Step-up authentication (PRODUCT.md §3): a tenant proves possession of its TOTP seed and receives a token valid
 * for 5 minutes, sent as `X-Step-Up-Token` on elevated calls (changing an endpoint URL, …).
 *
 * The token is stateless: `su1.<tenantId>.<expiresMs>.<mac>`, where `mac` is KeyService.mac over everything before
 * it. Any process sharing the master key verifies it without a database read; nothing can be revoked early, which
 * is why it lives only 5 minutes. It is bound to the tenant, not to one tenant key.
 *
 * Limits of this process-local guard: a TOTP code is refused when reused within its window
 * and failures are rate-limited, but both memories are per process. With several control processes behind a load
 * balancer (PostgreSQL), a code could be used once per process within its ±30 s window, and an attacker holding the
 * tenant key gets the failure budget once per process. Closing that needs a store method that records the last
 * accepted TOTP step per tenant with a compare-and-set (accept step s only if s > last), shared by all processes.
 */
import { timingSafeEqual } from 'node:crypto';
import { ApiError } from '../domain/errors.ts';
import { matchTotpStep, TOTP_STEP_SECONDS } from '../domain/totp.ts';
import type { Clock } from '../ports/clock.ts';
import type { KeyService } from '../ports/key-service.ts';
import type { Store } from '../ports/store.ts';
import { totpAad } from './manage-tenants.ts';

export const STEP_UP_TTL_MS = 5 * 60 * 1000;
export const STEP_UP_HEADER = 'x-step-up-token';
export const STEP_UP_URL = '/v1/auth/step-up';
/** Failed TOTP attempts a tenant may make per window before answering 429. */
export const STEP_UP_MAX_FAILURES = 5;
export const STEP_UP_FAILURE_WINDOW_MS = 5 * 60 * 1000;

const TOKEN_VERSION = 'su1';
const TOKEN_RE = /^su1\.(ten_[0-9A-Z]{26})\.(\d{1,15})\.([A-Za-z0-9_-]{43})$/;
const MAX_TRACKED_TENANTS = 10_000;

export interface StepUpDeps {
  store: Store;
  clock: Clock;
  keys: KeyService;
}

/** Per-process memory of used TOTP steps and recent failures, per tenant. */
export class StepUpGuard {
  private readonly lastStep = new Map<string, number>();
  private readonly failures = new Map<string, { count: number; since: number }>();

  /** Seconds to wait when the tenant has exhausted its failure budget, else null. */
  blockedFor(tenantId: string, now: number): number | null {
    const f = this.failures.get(tenantId);
    if (!f || now - f.since >= STEP_UP_FAILURE_WINDOW_MS) return null;
    if (f.count < STEP_UP_MAX_FAILURES) return null;
    return Math.max(1, Math.ceil((f.since + STEP_UP_FAILURE_WINDOW_MS - now) / 1000));
  }

  recordFailure(tenantId: string, now: number): void {
    const f = this.failures.get(tenantId);
    if (!f || now - f.since >= STEP_UP_FAILURE_WINDOW_MS) {
      if (this.failures.size >= MAX_TRACKED_TENANTS) this.failures.clear();
      this.failures.set(tenantId, { count: 1, since: now });
    } else f.count++;
  }

  /** True when `step` is newer than every step accepted before for the tenant; records it. */
  acceptStep(tenantId: string, step: number): boolean {
    const last = this.lastStep.get(tenantId);
    if (last !== undefined && step <= last) return false;
    // Bounded: evict the least recently accepted tenant (Map keeps insertion order; re-insert moves to the end).
    // Clearing everything instead would re-open the replay window for every tenant at once.
    if (this.lastStep.size >= MAX_TRACKED_TENANTS) {
      const oldest = this.lastStep.keys().next().value;
      if (oldest !== undefined) this.lastStep.delete(oldest);
    }
    this.lastStep.delete(tenantId);
    this.lastStep.set(tenantId, step);
    this.failures.delete(tenantId);
    return true;
  }
}

const signedPart = (tenantId: string, expiresAt: number) => `${TOKEN_VERSION}.${tenantId}.${expiresAt}`;

/** Checks a TOTP code against the tenant's sealed seed and mints a step-up token. */
export async function issueStepUpToken(
  deps: StepUpDeps,
  guard: StepUpGuard,
  input: { tenantId: string; totp: string },
): Promise<{ token: string; expiresAt: number }> {
  const now = deps.clock.now();
  const wait = guard.blockedFor(input.tenantId, now);
  if (wait !== null) {
    throw new ApiError(
      'rate_limited',
      'Too many wrong TOTP codes; wait before trying again.',
      undefined,
      wait,
    );
  }
  const tenant = await deps.store.tenantGet({ id: input.tenantId });
  if (!tenant) throw new ApiError('unauthorized');
  const seed = deps.keys.open(tenant.totpSeedSealed, totpAad(tenant.id));
  let step: number | null;
  try {
    step = matchTotpStep(seed, input.totp, now);
  } finally {
    seed.fill(0);
  }
  if (step === null || !guard.acceptStep(tenant.id, step)) {
    guard.recordFailure(tenant.id, now);
    throw new ApiError(
      'invalid_totp',
      step === null
        ? 'The TOTP code is wrong or outside the accepted window (±30 s).'
        : `This TOTP code was already used; wait for the next one (every ${TOTP_STEP_SECONDS} s).`,
    );
  }
  const expiresAt = now + STEP_UP_TTL_MS;
  const data = signedPart(tenant.id, expiresAt);
  return { token: `${data}.${deps.keys.mac(data)}`, expiresAt };
}

function refuse(reason: 'missing' | 'invalid' | 'expired'): never {
  throw new ApiError(
    'step_up_required',
    reason === 'missing' ? undefined : `The step-up token is ${reason}; get a fresh one.`,
    { step_up_url: STEP_UP_URL, reason },
  );
}

/** Throws 403 step_up_required unless `header` is a valid, unexpired step-up token for this tenant. */
export function requireStepUp(
  deps: Pick<StepUpDeps, 'clock' | 'keys'>,
  tenantId: string,
  header: string | string[] | undefined,
): void {
  if (header === undefined) refuse('missing');
  const m = typeof header === 'string' ? TOKEN_RE.exec(header) : null;
  if (!m) refuse('invalid');
  const [, tokenTenant = '', expiresText = '', mac = ''] = m;
  const expected = Buffer.from(deps.keys.mac(`${TOKEN_VERSION}.${tokenTenant}.${expiresText}`), 'utf8');
  const given = Buffer.from(mac, 'utf8');
  if (expected.length !== given.length || !timingSafeEqual(expected, given) || tokenTenant !== tenantId) {
    refuse('invalid');
  }
  if (Number(expiresText) <= deps.clock.now()) refuse('expired');
}
