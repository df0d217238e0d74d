/**
 * Lost delivery rows rebuilt from the two systems of record (ADR-15): the accepted events (what Hookrail was asked
 * to send) and the attempt log (what it did). The `deliveries` rows are the queue and its projection; when some are
 * lost (a partial restore, a hand edit), the stores read a batch of events with what survives of them and write what
 * planReconstruction decides (OperationsStore.deliveryReconstruct). Pure: no clock, no ids minted here.
 *
 * For each event fan-out has taken (not a test event, which was addressed to one endpoint):
 * - every delivery the attempt log names for it (attempts.event_id) whose row is missing comes back under its own
 *   id, endpoint and webhook-id, in the state its attempts prove (stateFromLog);
 * - every live endpoint of its tenant that subscribes to its type now, was created before it was accepted, and has
 *   neither a delivery row nor an attempt for it gets a new pending delivery, due now, as fan-out would have made.
 *
 * What the log cannot tell (each a limit of the reconstruction, docs/cli.md):
 * - subscriptions are judged as they are now: an endpoint that changed its event types, or unsubscribed and
 *   subscribed again, since the event was accepted, is judged by its current filters; an endpoint created in the
 *   same millisecond as the event, or after it, gets nothing (fan-out may have given it one);
 * - a delivery withdrawn without an attempt (`skipped` by a re-enable, `cancelled` by an unsubscribe that was
 *   later undone) left no trace and comes back pending; one skipped after attempts comes back pending too, unless
 *   a surviving replay names it;
 * - a replay (`replayed_from`) comes back as a plain delivery: the log does not say what it replayed;
 * - the 72 h window is judged at `now`: a delivery whose next attempt would start beyond it comes back dead
 *   (max_age), where the delivery plane would still have made that one late attempt;
 * - attempts recorded before the log kept their event have none, and tie nothing back.
 */
import { matchesEventType } from './event-types.ts';
import { idFloor, idTime } from './ids.ts';
import { nextAttemptDecision } from './retry-schedule.ts';

export type LoggedOutcome = 'delivered' | 'retryable' | 'permanent';

/** One attempt of the log, as the reconstruction reads it. */
export interface LoggedAttempt {
  deliveryId: string;
  endpointId: string;
  eventId: string;
  startedAt: number;
  finishedAt: number;
  outcome: LoggedOutcome;
  /** The `webhook-id` header of its first hop; null when none was recorded (`circuit_open`, `platform_error`). */
  webhookId: string | null;
}

/**
 * Where the delivery's endpoint stands toward its event now, i.e. what would have become of it while pending:
 * `subscribed` (enabled or disabled: a disabled endpoint keeps its backlog), or the reason it would have been
 * cancelled with (an acknowledged unsubscribe, a deleted endpoint or tenant, ADR-16).
 */
export type Standing = 'subscribed' | 'unsubscribed' | 'endpoint_deleted' | 'tenant_deleted';

export type RebuiltStatus = 'pending' | 'delivered' | 'dead' | 'cancelled' | 'skipped';

/** A delivery row's projection columns, as rebuilt. */
export interface RebuiltState {
  status: RebuiltStatus;
  statusReason: string | null;
  attempts: number;
  firstAttemptAt: number | null;
  lastAttemptAt: number | null;
  /** Now for a pending one (due at once), else null. */
  nextAttemptAt: number | null;
  /** The webhook-id the attempts were sent with; null when none was sent (the store mints one). */
  webhookId: string | null;
  /** When it settled, for a delivered or dead one (its retention and statistics count from then); else now. */
  updatedAt: number;
}

/**
 * The state one delivery's attempts prove, given oldest first (by start): `delivered` if one was delivered; `dead`
 * if the last was permanent, or by the retry schedule's own rule when the next attempt would start now
 * (nextAttemptDecision: the attempt budget is spent, or now is past the 72 h window from the first attempt);
 * otherwise what a pending delivery would be now — `skipped` when a surviving replay names it (only a finished
 * delivery is replayed, and the log shows it neither delivered nor dead), `cancelled` when its endpoint no longer
 * stands (`standing`), else `pending`, due now.
 */
export function stateFromLog(
  attempts: readonly LoggedAttempt[],
  o: { now: number; standing: Standing; replayed: boolean },
): RebuiltState {
  const first = attempts[0];
  const last = attempts[attempts.length - 1];
  if (!first || !last) throw new RangeError('a delivery from the log has at least one attempt');
  const base = {
    attempts: attempts.length,
    firstAttemptAt: first.startedAt,
    lastAttemptAt: last.startedAt,
    webhookId: attempts.find((a) => a.webhookId !== null)?.webhookId ?? null,
  };
  const delivered = attempts.find((a) => a.outcome === 'delivered');
  if (delivered) {
    return {
      ...base,
      status: 'delivered',
      statusReason: null,
      nextAttemptAt: null,
      updatedAt: delivered.finishedAt,
    };
  }
  const dead = (reason: string): RebuiltState => ({
    ...base,
    status: 'dead',
    statusReason: reason,
    nextAttemptAt: null,
    updatedAt: last.finishedAt,
  });
  if (last.outcome === 'permanent') return dead('permanent_failure');
  const decision = nextAttemptDecision({
    attemptsMade: attempts.length,
    firstAttemptAt: first.startedAt,
    now: o.now,
    random: 0,
    retryAfterMs: 0,
  });
  if (decision.kind === 'dead_letter') return dead(decision.reason);
  const withdrawn = (status: 'skipped' | 'cancelled', reason: string): RebuiltState => ({
    ...base,
    status,
    statusReason: reason,
    nextAttemptAt: null,
    updatedAt: o.now,
  });
  if (o.replayed) return withdrawn('skipped', 'skipped_on_enable');
  if (o.standing !== 'subscribed') return withdrawn('cancelled', o.standing);
  return { ...base, status: 'pending', statusReason: null, nextAttemptAt: o.now, updatedAt: o.now };
}

/** An event of the batch, with what the stores know of it. */
export interface BatchEvent {
  seq: number;
  id: string;
  tenantId: string;
  type: string;
  resourceId: string | null;
  createdAt: number;
  /** Fan-out has taken it (SQLite: at or below the cursor; PostgreSQL: no fan-out stream row left). */
  fannedOut: boolean;
  /** Addressed to one endpoint (a test event, events.endpoint_id): fan-out never takes it. */
  testEvent: boolean;
}

/** An endpoint as it is now. */
export interface EndpointNow {
  id: string;
  tenantId: string;
  eventTypes: readonly string[];
  createdAt: number;
  deleted: boolean;
}

export interface ReconstructionInput {
  events: readonly BatchEvent[];
  /** deliveryKey(event, endpoint) of every delivery row the batch's events have (replays included). */
  existing: ReadonlySet<string>;
  /** The attempts of the batch's events whose delivery row is missing, in any order. */
  lost: readonly LoggedAttempt[];
  /** The lost deliveries that a surviving delivery names as `replayed_from`. */
  replayed: ReadonlySet<string>;
  /** The live endpoints of the events' tenants, and the lost deliveries' endpoints (deleted ones too). */
  endpoints: readonly EndpointNow[];
  /** The events' tenants that are deleted. */
  deletedTenants: ReadonlySet<string>;
  now: number;
}

export interface PlannedDelivery {
  /** `log`: recreated from its attempts; `new`: never attempted, made as fan-out makes one. */
  source: 'log' | 'new';
  /** The lost delivery's id; null for a new one (the store mints it, as fan-out does). */
  deliveryId: string | null;
  endpointId: string;
  event: BatchEvent;
  state: RebuiltState;
  /** From the delivery id (fan-out mints it when it creates the row); now for a new one. */
  createdAt: number;
}

export const deliveryKey = (eventId: string, endpointId: string) => `${eventId} ${endpointId}`;

/**
 * Where a batch's walk through the events starts: after the last event the previous batch looked at, or at the
 * first id minted at `since` (an event's id is minted at its acceptance, with the time of its `created_at`), which
 * ever is later. One bound, so a store ranges its index by it alone.
 */
export function walkFrom(p: { after: string | null; since: number }): { op: '>' | '>='; id: string } {
  const floor = idFloor('event', p.since);
  return p.after !== null && p.after >= floor ? { op: '>', id: p.after } : { op: '>=', id: floor };
}

/** What to write for one batch, in event order; within an event, from the log first, each by endpoint id. */
export function planReconstruction(input: ReconstructionInput): PlannedDelivery[] {
  const { now } = input;
  const endpoints = new Map(input.endpoints.map((e) => [e.id, e]));
  const liveByTenant = new Map<string, EndpointNow[]>();
  for (const e of [...input.endpoints].sort((a, b) => cmp(a.id, b.id))) {
    if (e.deleted) continue;
    const list = liveByTenant.get(e.tenantId);
    if (list) list.push(e);
    else liveByTenant.set(e.tenantId, [e]);
  }
  const lostByEvent = new Map<string, Map<string, LoggedAttempt[]>>();
  for (const a of input.lost) {
    let byDelivery = lostByEvent.get(a.eventId);
    if (!byDelivery) {
      byDelivery = new Map();
      lostByEvent.set(a.eventId, byDelivery);
    }
    const list = byDelivery.get(a.deliveryId);
    if (list) list.push(a);
    else byDelivery.set(a.deliveryId, [a]);
  }

  const out: PlannedDelivery[] = [];
  for (const ev of input.events) {
    if (!ev.fannedOut || ev.testEvent) continue;
    const tenantDeleted = input.deletedTenants.has(ev.tenantId);
    const attempted = new Set<string>();
    const fromLog: PlannedDelivery[] = [];
    for (const [deliveryId, attempts] of lostByEvent.get(ev.id) ?? []) {
      attempts.sort((a, b) => a.startedAt - b.startedAt);
      const endpointId = attempts[0]!.endpointId;
      attempted.add(endpointId);
      const ep = endpoints.get(endpointId);
      const standing: Standing = tenantDeleted
        ? 'tenant_deleted'
        : !ep || ep.deleted
          ? 'endpoint_deleted'
          : matchesEventType(ep.eventTypes, ev.type)
            ? 'subscribed'
            : 'unsubscribed';
      fromLog.push({
        source: 'log',
        deliveryId,
        endpointId,
        event: ev,
        state: stateFromLog(attempts, { now, standing, replayed: input.replayed.has(deliveryId) }),
        createdAt: idTime('delivery', deliveryId) ?? attempts[0]!.startedAt,
      });
    }
    supersede(fromLog, now);
    out.push(...fromLog.sort((a, b) => cmp(a.endpointId, b.endpointId) || cmp(a.deliveryId!, b.deliveryId!)));
    if (tenantDeleted) continue;
    for (const ep of liveByTenant.get(ev.tenantId) ?? []) {
      if (ep.createdAt >= ev.createdAt || !matchesEventType(ep.eventTypes, ev.type)) continue;
      if (attempted.has(ep.id) || input.existing.has(deliveryKey(ev.id, ep.id))) continue;
      out.push({
        source: 'new',
        deliveryId: null,
        endpointId: ep.id,
        event: ev,
        state: {
          status: 'pending',
          statusReason: null,
          attempts: 0,
          firstAttemptAt: null,
          lastAttemptAt: null,
          nextAttemptAt: now,
          webhookId: null,
          updatedAt: now,
        },
        createdAt: now,
      });
    }
  }
  return out;
}

const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/**
 * At most one live delivery per (event, endpoint) comes back. A replay shares its original's webhook-id, and both
 * rows may be lost together: when one of the pair's lost deliveries was delivered, the others that would come back
 * pending are `skipped` (the event reached the endpoint: sending it again would break ADR-15's rule); when none was,
 * only the newest pending one stays pending. Reason `superseded`.
 */
function supersede(fromLog: PlannedDelivery[], now: number): void {
  const byEndpoint = new Map<string, PlannedDelivery[]>();
  for (const d of fromLog) {
    const list = byEndpoint.get(d.endpointId);
    if (list) list.push(d);
    else byEndpoint.set(d.endpointId, [d]);
  }
  for (const pair of byEndpoint.values()) {
    if (pair.length < 2) continue;
    const delivered = pair.some((d) => d.state.status === 'delivered');
    const pending = pair
      .filter((d) => d.state.status === 'pending')
      .sort((a, b) => cmp(a.deliveryId!, b.deliveryId!));
    const keep = delivered ? null : pending.at(-1);
    for (const d of pending) {
      if (d === keep) continue;
      d.state = {
        ...d.state,
        status: 'skipped',
        statusReason: 'superseded',
        nextAttemptAt: null,
        updatedAt: now,
      };
    }
  }
}
