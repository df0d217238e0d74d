/** Leasing due deliveries fairly across endpoints (SQLite). */
import { decideAttempt } from '../../domain/circuit-breaker.ts';
import { type EndpointRuntime, parseRuntime } from '../../domain/endpoint-runtime.ts';
import type { LaneBinding } from '../../domain/lanes.ts';
import { leaseRoom } from '../../domain/lease-room.ts';
import { replayAllowance, replayPaced, replayTatAllowingOne } from '../../domain/replay-pacing.ts';
import type {
  DeliveryRecord,
  DeliveryStatus,
  LeasedDelivery,
  LeaseKinds,
  Ordering,
} from '../../ports/delivery-store.ts';
import { saveRuntime } from './operations-store.ts';
import { EARLIEST_DUE } from './queue-due.ts';
import type { Row, St } from './rows.ts';

/**
 * The binding as a condition on `q.lane` (domain/lanes.ts bindingServes); '' for every lane. Constants only (lane
 * numbers are validated integers), so the statement text is fixed per binding and its prepared form is cached.
 */
export function laneCondition(lanes: LaneBinding | undefined): string {
  if (!lanes) return '';
  const parts: string[] = [];
  if (lanes.shared === 'all') parts.push(`(q.lane >= 'shared:' AND q.lane < 'shared;')`);
  else if (lanes.shared.length > 0) {
    for (const n of lanes.shared)
      if (!Number.isSafeInteger(n) || n < 0) throw new RangeError('bad lane number');
    parts.push(`q.lane IN (${lanes.shared.map((n) => `'shared:${n}'`).join(', ')})`);
  }
  if (lanes.dedicated) parts.push(`(q.lane >= 'dedicated:' AND q.lane < 'dedicated;')`);
  if (parts.length === 0) throw new RangeError('a lane binding must name at least one lane');
  return `AND (${parts.join(' OR ')})`;
}

/**
 * The delivery columns a due-row read returns, as arrays in this order (dueDelivery maps them), then with
 * `withEvent` the event's data, creation time and traceparent. Arrays, not objects: on Node 20 better-sqlite3 builds a row
 * object one property at a time through the V8 API (a name lookup and a map transition per column). Measured
 * (docs/benchmarks-delivery-log.md, nineteenth round): 3.2–3.8 µs per row read as an array and mapped by a
 * literal, against 6.2–7.2 µs as an object (the 21 columns of `d.*` then). One due row is read per leased delivery.
 */
const DUE_COLUMNS = `d.id, d.tenant_id, d.endpoint_id, d.event_id, d.event_type, d.resource_id, d.webhook_id, d.status,
  d.attempts, d.next_attempt_at, d.first_attempt_at, d.last_attempt_at, d.status_reason, d.replayed_from, d.created_at,
  d.updated_at, d.lease_owner`;
const NEXT_ATTEMPT_AT = 9;
const REPLAYED_FROM = 13;
const LEASE_OWNER = 16;
const EVENT_DATA = 17;
const EVENT_CREATED_AT = 18;
const EVENT_TRACE_PARENT = 19;

/** A due row (DUE_COLUMNS, then the event's columns when read withEvent). */
export type DueRow = unknown[];

export const dueDelivery = (r: DueRow): DeliveryRecord => ({
  id: r[0] as string,
  tenantId: r[1] as string,
  endpointId: r[2] as string,
  eventId: r[3] as string,
  eventType: r[4] as string,
  resourceId: r[5] as string | null,
  webhookId: r[6] as string,
  status: r[7] as DeliveryStatus,
  attempts: r[8] as number,
  nextAttemptAt: r[NEXT_ATTEMPT_AT] as number | null,
  firstAttemptAt: r[10] as number | null,
  lastAttemptAt: r[11] as number | null,
  statusReason: r[12] as string | null,
  replayedFrom: r[13] as string | null,
  createdAt: r[14] as number,
  updatedAt: r[15] as number,
});

/**
 * Due, unleased deliveries of one endpoint, oldest due first, at most `room`, as its ordering mode allows:
 * `endpoint` — only the head (the oldest undelivered event), and only while nothing of the endpoint is in flight;
 * `resource` — only the oldest pending delivery of its resource, and only while no delivery of the resource is in
 * flight (one leased under `none` before a mode change counts too), so at most one per resource is ever in flight;
 * deliveries without a resource id, and all under `none`, are unordered. With `withEvent`, each row also carries
 * its event's data and creation time. Of the rows, at most `firstRoom` are not replays and at most `replayRoom` are
 * (0: none of that kind; such a delivery still holds back what its ordering mode puts behind it). The two kinds are
 * read apart, replays through their own small index, so neither kind's rows can hide the other's behind a LIMIT.
 */
export function dueRows(
  st: St,
  c: Row,
  now: number,
  room: number,
  withEvent: boolean,
  firstRoom = room,
  replayRoom = room,
): DueRow[] {
  if (c.ordering === 'endpoint') {
    if ((c.inflight as number) > 0) return [];
    const head = st(withEvent ? HEAD_WITH_EVENT : HEAD)
      .raw()
      .all(c.endpoint_id) as DueRow[];
    return head.filter(
      (r) =>
        r[LEASE_OWNER] === null &&
        (r[NEXT_ATTEMPT_AT] as number) <= now &&
        (r[REPLAYED_FROM] === null ? firstRoom : replayRoom) > 0 &&
        r[r.length - 1] === 0,
    );
  }
  const byResource = c.ordering === 'resource' ? 1 : 0;
  const first =
    firstRoom > 0
      ? (st(withEvent ? DUE_WITH_EVENT : DUE)
          .raw()
          .all(c.endpoint_id, now, byResource, Math.min(room, firstRoom)) as DueRow[])
      : [];
  const replays =
    replayRoom > 0
      ? (st(withEvent ? DUE_REPLAYS_WITH_EVENT : DUE_REPLAYS)
          .raw()
          .all(c.endpoint_id, now, byResource, Math.min(room, replayRoom)) as DueRow[])
      : [];
  if (replays.length === 0) return first;
  if (first.length === 0) return replays;
  // Both kinds: oldest due first across them, at most `room`.
  return [...first, ...replays]
    .sort((a, b) => (a[NEXT_ATTEMPT_AT] as number) - (b[NEXT_ATTEMPT_AT] as number))
    .slice(0, room);
}

// The due-row reads' texts, made once (each lease reads per endpoint, and the statement cache is keyed by the text).
// By the event's rowid (`seq`; replays copy it with the event id): one B-tree lookup instead of two through the id.
const eventColumns = (withEvent: boolean) => (withEvent ? ', ev.data, ev.created_at, ev.trace_parent' : '');
const eventJoin = (withEvent: boolean) => (withEvent ? 'JOIN events ev ON ev.seq = d.event_seq' : '');
/**
 * The head, and (last column) whether an earlier event of the tenant still awaits fan-out. Fan-out is one loop of
 * serial transactions, so a fanned-out event's delivery never has an unfanned event before it — but a test event's
 * delivery is made at once (test-event.ts), with a sequence number beyond the fan-out cursor, and must not be sent
 * ahead of events accepted before it. Reads only the events past the cursor, by rowid; none once fan-out has caught
 * up with the head.
 */
const headSql = (withEvent: boolean) =>
  `SELECT ${DUE_COLUMNS}${eventColumns(withEvent)},
          EXISTS (SELECT 1 FROM events e
                   WHERE e.seq > (SELECT seq FROM fanout_cursor WHERE id = 1) AND e.seq < d.event_seq
                     AND e.tenant_id = d.tenant_id AND e.endpoint_id IS NULL) AS behind_unfanned
     FROM deliveries d ${eventJoin(withEvent)}
   WHERE d.endpoint_id = ? AND d.status = 'pending' ORDER BY d.event_seq LIMIT 1`;
// First deliveries through deliveries_ready; replays through deliveries_replays_ready (named: the planner has no
// statistics to tell that it holds only the few replays, and walking deliveries_ready would read the backlog).
const dueSql = (withEvent: boolean, replays: boolean) =>
  `SELECT ${DUE_COLUMNS}${eventColumns(withEvent)}
     FROM deliveries d ${replays ? 'INDEXED BY deliveries_replays_ready' : ''} ${eventJoin(withEvent)}
   WHERE d.endpoint_id = ? AND d.status = 'pending' AND d.lease_owner IS NULL AND d.next_attempt_at <= ?
     AND d.replayed_from IS ${replays ? 'NOT NULL' : 'NULL'}
     AND (? = 0 OR d.resource_id IS NULL OR NOT EXISTS (
       SELECT 1 FROM deliveries x WHERE x.endpoint_id = d.endpoint_id AND x.resource_id = d.resource_id
         AND x.status = 'pending' AND x.resource_id IS NOT NULL
         AND (x.event_seq < d.event_seq OR x.lease_owner IS NOT NULL)))
   ORDER BY d.next_attempt_at LIMIT ? + 0`;
const HEAD = headSql(false);
const HEAD_WITH_EVENT = headSql(true);
const DUE = dueSql(false, false);
const DUE_WITH_EVENT = dueSql(true, false);
const DUE_REPLAYS = dueSql(false, true);
const DUE_REPLAYS_WITH_EVENT = dueSql(true, true);

/**
 * Endpoints with a due, unleased replay (the partial index deliveries_replays_ready) that the replay pacing lets
 * start one now (`replay_tat` at most replayTatAllowingOne): `replaysOnly` leases. A paced endpoint takes no
 * candidate place and keeps its turn, so the endpoints behind it are leased meanwhile.
 */
const HAS_DUE_REPLAY = `AND (q.replay_tat IS NULL OR q.replay_tat <= ?)
  AND q.endpoint_id IN (SELECT r.endpoint_id FROM deliveries r INDEXED BY deliveries_replays_ready
  WHERE r.status = 'pending' AND r.lease_owner IS NULL AND r.replayed_from IS NOT NULL AND r.next_attempt_at <= ?)`;

const SERVED = `UPDATE endpoint_queue SET inflight = inflight + @n, last_served_at = @now, next_due_at = ${EARLIEST_DUE},
    replay_tat = @tat
  WHERE endpoint_id = @id`;

/** Runs inside a transaction (the caller's: turn-commit.ts). */
export function createLease(st: St) {
  const lease = (
    owner: string,
    now: number,
    limit: number,
    perEndpoint: number,
    leaseMs: number,
    lanes?: LaneBinding,
    kinds: LeaseKinds = {},
  ): LeasedDelivery[] => {
    const inLanes = laneCondition(lanes);
    const onlyReplays = kinds.replaysOnly ? HAS_DUE_REPLAY : '';
    let firstLeft = kinds.firstLimit ?? limit;
    let replaysLeft = kinds.replayLimit ?? limit;
    limit = Math.min(limit, firstLeft + replaysLeft);
    if (limit <= 0) return [];
    // Blocked endpoints (circuit open, no probe due: circuit-breaker.ts blockedUntil) are passed over; the
    // circuit-open pass records their due deliveries (circuit-open.ts).
    // Least recently served first; how much each may take is domain/lease-room.ts's (an endpoint at its ramped cap
    // takes no candidate place: the next ones in rotation order are read instead).
    const candidates: Array<{ c: Row; runtime: EndpointRuntime; room: number }> = [];
    for (let after: [number, string] = [-1, '']; candidates.length < limit; ) {
      const want = limit - candidates.length;
      const batch = st(
        `SELECT q.endpoint_id, q.inflight, q.runtime, q.last_served_at, q.lane, q.replay_tat, e.max_concurrency,
             e.ordering, e.url, e.headers, e.tenant_id
           FROM endpoint_queue q JOIN endpoints e ON e.id = q.endpoint_id
           WHERE q.next_due_at <= ? AND (q.blocked_until IS NULL OR q.blocked_until <= ?) AND q.inflight < e.max_concurrency ${inLanes}
             ${onlyReplays} AND (q.last_served_at > ? OR (q.last_served_at = ? AND q.endpoint_id > ?))
           ORDER BY q.last_served_at, q.endpoint_id LIMIT ? + 0`,
      ).all(
        ...(onlyReplays ? [now, now, replayTatAllowingOne(now), now] : [now, now]),
        after[0],
        after[0],
        after[1],
        want,
      ) as Row[];
      for (const c of batch) {
        const runtime = parseRuntime((c.runtime as string | null) ?? null);
        const room = leaseRoom(
          {
            maxConcurrency: c.max_concurrency as number,
            inflight: c.inflight as number,
            ordering: c.ordering as Ordering,
            circuit: runtime.circuit,
          },
          now,
          perEndpoint,
        );
        if (room !== null) candidates.push({ c, runtime, room });
      }
      const last = batch[batch.length - 1];
      if (!last || batch.length < want) break;
      after = [last.last_served_at as number, last.endpoint_id as string];
    }
    const out: LeasedDelivery[] = [];
    const leaseUntil = now + leaseMs;
    const mark = st(
      `UPDATE deliveries SET lease_owner = ?, lease_until = ?, updated_at = ?, lease_lane = ?
         WHERE id = ? AND lease_owner IS NULL`,
    );
    for (const { c, runtime, room } of candidates) {
      if (out.length >= limit) break;
      const endpointId = c.endpoint_id as string;
      const take = Math.min(room, limit - out.length);
      // Replays within the replay budget and the endpoint's replay pacing (domain/replay-pacing.ts).
      const tat = c.replay_tat as number | null;
      const replayRoom = replaysLeft > 0 ? Math.min(replaysLeft, replayAllowance(tat, now)) : 0;
      // Visited with no room (its head in flight) or no budget left for its kind, it is still marked served: its
      // turn is over.
      const rows = take > 0 ? dueRows(st, c, now, take, true, firstLeft, replayRoom) : [];
      const endpoint = {
        id: endpointId,
        tenantId: c.tenant_id as string,
        url: c.url as string,
        headers: JSON.parse(c.headers as string),
      };
      let claimed = false;
      let replays = 0;
      for (const r of rows) {
        if (r[REPLAYED_FROM] === null) firstLeft--;
        else replays++;
        const delivery = dueDelivery(r);
        mark.run(owner, leaseUntil, now, c.lane, delivery.id);
        // The circuit decides per delivery, in this transaction: send, send as the one probe, or skip.
        const decision = decideAttempt(runtime.circuit, now);
        if (decision.kind === 'send' && decision.probe) {
          runtime.circuit = decision.claim;
          claimed = true;
        }
        // As stored after the lease (which sets updated_at), like deliveryGet would return it.
        delivery.updatedAt = now;
        out.push({
          mode: decision.kind === 'skip' ? 'circuit_open' : decision.probe ? 'probe' : 'send',
          delivery,
          endpoint,
          event: {
            id: delivery.eventId,
            type: delivery.eventType,
            createdAt: r[EVENT_CREATED_AT] as number,
            data: r[EVENT_DATA] as string,
            traceParent: r[EVENT_TRACE_PARENT] as string | null,
          },
          leaseUntil,
        });
      }
      replaysLeft -= replays;
      if (claimed) saveRuntime(st, endpointId, runtime);
      // One write of the queue row: its in-flight count, its turn in the rotation, its due time (recomputed after
      // the marks above took the leased deliveries out of the unleased set) and its replay schedule.
      st(SERVED).run({
        n: rows.length,
        now,
        id: endpointId,
        tat: replays > 0 ? replayPaced(tat, now, replays).tat : tat,
      });
    }
    return out;
  };
  return lease;
}
