/**
 * One delivery attempt, start to finish: sign, send, classify, decide what happens next. The result is an
 * AttemptCompletion — the attempt-log entry and the delivery's next state — which the worker writes in a batch.
 * Decisions come from the pure domain (outcome, retry schedule); time and randomness are injected.
 */
import { deliveryBody, deliveryHeaders } from '../domain/delivery-request.ts';
import { newId } from '../domain/ids.ts';
import { classifyOutcome } from '../domain/outcome.ts';
import { nextAttemptDecision, RESPONSE_STORED_BYTES } from '../domain/retry-schedule.ts';
import type { Clock, Random } from '../ports/clock.ts';
import type {
  AttemptCompletion,
  LeasedDelivery,
  SkipCompletion,
  SkippedDelivery,
} from '../ports/delivery-store.ts';
import type { HttpSender, OutboundRequest, SendResult } from '../ports/http-sender.ts';

export interface AttemptDeps {
  sender: HttpSender;
  clock: Clock;
  random: Random;
  userAgent: string;
  /** Active secrets of the endpoint, newest first. */
  secretsFor(tenantId: string, endpointId: string): Promise<string[]>;
}

/**
 * The completion names the lease it was made under (owner and `leaseUntil`), so the store applies it only while
 * that lease still holds: a completion written after the lease expired and the delivery was leased again, even by
 * this same process, is late and leaves the new lease's delivery and in-flight slot alone.
 *
 * `leasedAt` is the `now` of the leasing transaction: the attempt starts there (the circuit's probe claim and the
 * unsubscribe guarantee are decided at that instant), and anything between it and the request reaching the wire
 * counts as platform time.
 */
export async function deliverAttempt(
  deps: AttemptDeps,
  leased: LeasedDelivery,
  leaseOwner: string,
  leasedAt: number,
): Promise<AttemptCompletion> {
  const { delivery, endpoint, event } = leased;
  const startedAt = leasedAt;
  if (leased.mode === 'circuit_open')
    return { ...skippedAttempt(deps.random, leased, startedAt), leaseOwner, leaseUntil: leased.leaseUntil };
  const secrets = await deps.secretsFor(endpoint.tenantId, endpoint.id);

  let result: SendResult;
  if (secrets.length === 0) {
    // Cannot happen through the API (the last secret cannot be retired); never send an unsigned request. Hookrail's
    // state, not the endpoint's answer: a platform error.
    result = platformError('no active signing secret', startedAt, deps.clock.now());
  } else {
    result = await deps.sender.send(
      new SignedRequest(
        deps,
        endpoint.url,
        deliveryBody(event),
        delivery.webhookId,
        secrets,
        endpoint.headers,
      ),
    );
  }
  const { next, attempt } = attemptCompletion(deps.random, leased, startedAt, deps.clock.now(), result);
  return { next, attempt, leaseOwner, leaseUntil: leased.leaseUntil, probe: leased.mode === 'probe' };
}

/** The message of every attempt that failed on Hookrail's side: the cause goes to the log, never to the tenant. */
export const PLATFORM_ERROR_MESSAGE =
  "Hookrail could not make this attempt (an error on Hookrail's side, not the endpoint's)";

/**
 * The record of an attempt that deliverAttempt could not finish — its secret lookup, signing or sender threw (a
 * secret sealed under another master key, a bug): a failed `platform_error` attempt, rescheduled on the retry
 * schedule or dead-lettered at its limits, so the delivery ends delivered or dead-lettered as any other (PRODUCT.md
 * §6) instead of being leased again and again while nothing is recorded. It judges nothing of the endpoint
 * (outcome.ts judgesEndpoint). The caller logs the cause; the record holds only a generic message. What the attempt
 * may have sent is unknown, so no hops are recorded.
 */
export function platformFailedAttempt(
  deps: Pick<AttemptDeps, 'clock' | 'random'>,
  leased: LeasedDelivery,
  leaseOwner: string,
  leasedAt: number,
): AttemptCompletion {
  const finishedAt = Math.max(leasedAt, deps.clock.now());
  const result = platformError(PLATFORM_ERROR_MESSAGE, leasedAt, finishedAt);
  const { next, attempt } = attemptCompletion(deps.random, leased, leasedAt, finishedAt, result);
  return { next, attempt, leaseOwner, leaseUntil: leased.leaseUntil, probe: leased.mode === 'probe' };
}

function platformError(message: string, startedAt: number, finishedAt: number): SendResult {
  return {
    kind: 'error',
    errorClass: 'platform_error',
    message,
    hops: [],
    timings: { startedAt, wireAt: null, responseAt: null, finishedAt },
  };
}

/**
 * The request of one attempt, signed afresh for each hop. A class rather than an object literal with an arrow:
 * no closure per attempt (see undici-sender.ts on what closures cost here).
 */
class SignedRequest implements OutboundRequest {
  constructor(
    private readonly deps: AttemptDeps,
    readonly url: string,
    readonly body: Buffer,
    private readonly webhookId: string,
    private readonly secrets: string[],
    private readonly customHeaders: Record<string, string>,
  ) {}

  headersFor(hop: { sameOrigin: boolean }): Record<string, string> {
    return deliveryHeaders({
      webhookId: this.webhookId,
      nowMs: this.deps.clock.now(),
      body: this.body,
      secrets: this.secrets,
      userAgent: this.deps.userAgent,
      customHeaders: hop.sameOrigin ? this.customHeaders : null,
    });
  }
}

/**
 * A delivery that came due while its endpoint's circuit is open: no request leaves. The attempt is recorded as
 * failed (`circuit_open`) and rescheduled on the retry schedule, so the delivery's schedule keeps running through
 * the outage (PRODUCT.md §5). Synchronous: the store calls it inside the transaction that records the skip.
 */
export function skippedAttempt(random: Random, skipped: SkippedDelivery, at: number): SkipCompletion {
  const result: SendResult = {
    kind: 'error',
    errorClass: 'circuit_open',
    message: 'circuit open: not sent',
    hops: [],
    timings: { startedAt: at, wireAt: null, responseAt: null, finishedAt: at },
  };
  return attemptCompletion(random, skipped, at, at, result);
}

/** The attempt-log entry and the delivery's next state for what one attempt produced (pure given `random`). */
function attemptCompletion(
  random: Random,
  leased: SkippedDelivery,
  startedAt: number,
  finishedAt: number,
  result: SendResult,
): SkipCompletion {
  const { delivery, endpoint } = leased;
  const dueAt = delivery.nextAttemptAt ?? startedAt;
  const outcome =
    result.kind === 'response'
      ? classifyOutcome({
          kind: 'response',
          status: result.status,
          retryAfterHeader: result.headers['retry-after'] ?? null,
          nowMs: finishedAt,
        })
      : classifyOutcome({ kind: 'error', errorClass: result.errorClass });

  const attemptNo = delivery.attempts + 1;
  let next: AttemptCompletion['next'];
  if (outcome.result === 'delivered') next = { status: 'delivered' };
  else if (outcome.result === 'permanent') next = { status: 'dead', reason: 'permanent_failure' };
  else {
    const decision = nextAttemptDecision({
      attemptsMade: attemptNo,
      firstAttemptAt: delivery.firstAttemptAt ?? startedAt,
      now: finishedAt,
      random: random.float(),
      retryAfterMs: outcome.retryAfterMs,
    });
    next =
      decision.kind === 'retry'
        ? { status: 'pending', nextAttemptAt: decision.at }
        : { status: 'dead', reason: decision.reason };
  }

  const t = result.timings;
  const wireAt = t.wireAt ?? t.finishedAt;
  return {
    next,
    attempt: {
      id: newId('attempt', startedAt, random.bytes(10)),
      deliveryId: delivery.id,
      endpointId: endpoint.id,
      tenantId: endpoint.tenantId,
      eventId: delivery.eventId,
      attemptNo,
      url: endpoint.url,
      dueAt,
      startedAt,
      finishedAt,
      outcome: outcome.result,
      statusCode: result.kind === 'response' ? result.status : null,
      errorClass: outcome.result === 'delivered' ? null : outcome.errorClass,
      errorMessage: result.kind === 'error' ? result.message : null,
      request: {
        hops: result.hops.map((h) => ({ url: h.url, headers: h.requestHeaders, status: h.status })),
      },
      responseHeaders: result.kind === 'response' ? result.headers : null,
      responseBody:
        result.kind === 'response'
          ? result.bodyPrefix.subarray(0, RESPONSE_STORED_BYTES).toString('base64')
          : null,
      queueMs: Math.max(0, startedAt - dueAt),
      // Platform time: everything of ours before the request was on the wire (signing, secret lookup, connect).
      platformMs: Math.max(0, wireAt - startedAt),
      // Consumer time: on the wire until the answer was read, body included (a body dripped slowly is the
      // consumer's time too; reading stops at 64 KiB).
      consumerMs: t.responseAt !== null && t.wireAt !== null ? Math.max(0, t.finishedAt - t.wireAt) : null,
    },
  };
}
