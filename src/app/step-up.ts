/**
 * Step-up authentication (PRODUCT.md §3): a tenant proves possession of its TOTP seed and receives a token valid
 * for 5 minutes, sent as `X-Step-Up-Token` on elevated calls (changing an endpoint URL, …). The operator does the
 * same with its own seed (configuration: bootstrap/admin-token.ts) for its elevated call, deleting a tenant; here
 * `tenantId` null stands for the operator.
 *
 * The token is stateless: `su1.<tenantId or "operator">.<expiresMs>.<mac>`, where `mac` is KeyService.mac over
 * everything before it. Any process sharing the master key verifies it without a database read; nothing can be
 * revoked early, which is why it lives only 5 minutes. It is bound to the tenant (or the operator), not to one key:
 * a tenant's token never passes for the operator's, nor one tenant's for another's.
 *
 * A code is accepted once and wrong codes are rate-limited per tenant, in the store (StepUpState), so the limits
 * hold across every process: of two control processes given one code, one accepts it (a compare-and-set on the last
 * accepted step), and the failure budget is the tenant's, not each process's.
 */
import { timingSafeEqual } from 'node:crypto';
import { ApiError } from '../domain/errors.ts';
import { matchTotpStep, TOTP_STEP_SECONDS } from '../domain/totp.ts';
import type { Clock } from '../ports/clock.ts';
import type { KeyService } from '../ports/key-service.ts';
import type { StepUpState, Store } from '../ports/store.ts';
import { totpAad } from './manage-tenants.ts';

export const STEP_UP_TTL_MS = 5 * 60 * 1000;
export const STEP_UP_HEADER = 'x-step-up-token';
export const STEP_UP_URL = '/v1/auth/step-up';
/** Failed TOTP attempts a tenant may make per window before answering 429. */
export const STEP_UP_MAX_FAILURES = 5;
export const STEP_UP_FAILURE_WINDOW_MS = 5 * 60 * 1000;

const TOKEN_VERSION = 'su1';
const TOKEN_RE = /^su1\.(ten_[0-9A-Z]{26}|operator)\.(\d{1,15})\.([A-Za-z0-9_-]{43})$/;
const subjectOf = (tenantId: string | null) => tenantId ?? 'operator';

export interface StepUpDeps {
  store: Store;
  clock: Clock;
  keys: KeyService;
  /** The operator's TOTP seed; null where the control API is not served (no step-up route there). */
  operatorTotpSeed: Buffer | null;
}

/**
 * Seconds to wait when the tenant has used up its budget in the current window, else null (the rule the store's
 * stepUpCharge applies in one statement).
 */
export function stepUpWait(
  state: Pick<StepUpState, 'failures' | 'failuresSince'>,
  now: number,
): number | null {
  const since = state.failuresSince;
  if (since === null || now - since >= STEP_UP_FAILURE_WINDOW_MS) return null;
  if (state.failures < STEP_UP_MAX_FAILURES) return null;
  return Math.max(1, Math.ceil((since + STEP_UP_FAILURE_WINDOW_MS - now) / 1000));
}

const signedPart = (tenantId: string | null, expiresAt: number) =>
  `${TOKEN_VERSION}.${subjectOf(tenantId)}.${expiresAt}`;

/**
 * Whose seed a try is checked against: the live tenant's (sealed), or the operator's (configured). Refuses a tenant
 * that is gone, and the operator where this process has no seed (it does not serve control).
 */
async function seedSource(deps: StepUpDeps, tenantId: string | null) {
  if (tenantId === null) {
    const seed = deps.operatorTotpSeed;
    if (seed === null) throw new ApiError('forbidden');
    return () => Buffer.from(seed);
  }
  const tenant = await deps.store.tenantGet({ id: tenantId });
  if (!tenant) throw new ApiError('unauthorized');
  return () => deps.keys.open(tenant.totpSeedSealed, totpAad(tenant.id));
}

/** Checks a TOTP code against the tenant's (null: the operator's) seed and mints a step-up token. */
export async function issueStepUpToken(
  deps: StepUpDeps,
  input: { tenantId: string | null; totp: string },
): Promise<{ token: string; expiresAt: number }> {
  const now = deps.clock.now();
  const { tenantId } = input;
  const openSeed = await seedSource(deps, tenantId);
  // Every try is counted before its code is checked, and a right code clears the count: so tries in flight at once
  // cannot get past the budget between a check and a count.
  const charged = await deps.store.stepUpCharge({
    tenantId,
    now,
    windowMs: STEP_UP_FAILURE_WINDOW_MS,
    max: STEP_UP_MAX_FAILURES,
  });
  if (!charged) {
    const state = await deps.store.stepUpState({ tenantId });
    throw new ApiError(
      'rate_limited',
      'Too many wrong TOTP codes; wait before trying again.',
      undefined,
      (state && stepUpWait(state, now)) ?? 1,
    );
  }
  // Opened only for a try within the budget, and wiped once checked.
  const seed = openSeed();
  let step: number | null;
  try {
    step = matchTotpStep(seed, input.totp, now);
  } finally {
    seed.fill(0);
  }
  if (step === null || !(await deps.store.stepUpAccept({ tenantId, step }))) {
    throw new ApiError(
      'invalid_totp',
      step === null
        ? 'The TOTP code is wrong or outside the accepted window (±30 s).'
        : `This TOTP code was already used; wait for the next one (every ${TOTP_STEP_SECONDS} s).`,
    );
  }
  const expiresAt = now + STEP_UP_TTL_MS;
  const data = signedPart(tenantId, expiresAt);
  return { token: `${data}.${deps.keys.mac(data)}`, expiresAt };
}

function refuse(reason: 'missing' | 'invalid' | 'expired'): never {
  throw new ApiError(
    'step_up_required',
    reason === 'missing' ? undefined : `The step-up token is ${reason}; get a fresh one.`,
    { step_up_url: STEP_UP_URL, reason },
  );
}

/** Throws 403 step_up_required unless `header` is a valid, unexpired step-up token for this tenant (null: the operator). */
export function requireStepUp(
  deps: Pick<StepUpDeps, 'clock' | 'keys'>,
  tenantId: string | null,
  header: string | string[] | undefined,
): void {
  if (header === undefined) refuse('missing');
  const m = typeof header === 'string' ? TOKEN_RE.exec(header) : null;
  if (!m) refuse('invalid');
  const [, tokenTenant = '', expiresText = '', mac = ''] = m;
  const expected = Buffer.from(deps.keys.mac(`${TOKEN_VERSION}.${tokenTenant}.${expiresText}`), 'utf8');
  const given = Buffer.from(mac, 'utf8');
  if (
    expected.length !== given.length ||
    !timingSafeEqual(expected, given) ||
    tokenTenant !== subjectOf(tenantId)
  ) {
    refuse('invalid');
  }
  if (Number(expiresText) <= deps.clock.now()) refuse('expired');
}
