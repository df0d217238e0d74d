/** Leasing due deliveries fairly across endpoints and processes (locking: see delivery-store.ts). */
import { decideAttempt } from '../../domain/circuit-breaker.ts';
import { type EndpointRuntime, parseRuntime } from '../../domain/endpoint-runtime.ts';
import type { LaneBinding } from '../../domain/lanes.ts';
import { leaseRoom } from '../../domain/lease-room.ts';
import { replayAllowance, replayPaced, replayTatAllowingOne } from '../../domain/replay-pacing.ts';
import type { EndpointRecord, LeasedDelivery, LeaseKinds } from '../../ports/delivery-store.ts';
import type { TxRunner } from './migrate.ts';
import { type Db, recomputeDue } from './query-helpers.ts';
import { DELIVERY_COLUMNS, type DeliveryRow, prefixed, runtimeColumns, toDelivery } from './rows.ts';

type PickedRow = DeliveryRow & { ev_data: string; ev_created_at: number; ev_trace_parent: string | null };

interface Candidate {
  endpoint_id: string;
  inflight: number;
  max_concurrency: number;
  ordering: EndpointRecord['ordering'];
  url: string;
  headers: string;
  tenant_id: string;
  runtime: string | null;
  replay_tat: number | null;
}

/**
 * The binding as a condition on `q.lane` (domain/lanes.ts bindingServes); '' for every lane. Constants, not
 * parameters: `shared` and `dedicated` repeat the predicates of the partial rotation indexes of migration 0005
 * (so the planner can use them), and lane numbers are validated integers.
 */
export function laneCondition(lanes: LaneBinding | undefined): string {
  if (!lanes) return '';
  const parts: string[] = [];
  if (lanes.shared === 'all') parts.push(`q.lane >= 'shared:' AND q.lane < 'shared;'`);
  else if (lanes.shared.length > 0) {
    for (const n of lanes.shared)
      if (!Number.isSafeInteger(n) || n < 0) throw new RangeError('bad lane number');
    parts.push(`q.lane IN (${lanes.shared.map((n) => `'shared:${n}'`).join(', ')})`);
  }
  if (lanes.dedicated) parts.push(`q.lane >= 'dedicated:' AND q.lane < 'dedicated;'`);
  if (parts.length === 0) throw new RangeError('a lane binding must name at least one lane');
  return parts.length === 1 ? `AND ${parts[0]}` : `AND ((${parts.join(') OR (')}))`;
}

/**
 * An earlier event of the tenant that is not fanned out yet: its `fanout_pending` row is still there, or is being
 * deleted by a fan-out transaction that has not committed. Fan-out passes in several processes run concurrently
 * and may commit out of order, so without this the later event's delivery could become an
 * ordered endpoint's head, and be sent, before the earlier one's exists. Probed through the primary key from its
 * low end: rows below a fanned-out event's sequence number are only those of passes still in flight, so it reads a
 * handful. (SQLite's fan-out is one loop of serial transactions, so only a test event's delivery, made at once, can
 * be ahead of unfanned events there; sqlite/lease.ts checks the events past its cursor for that.)
 */
const EARLIER_UNFANNED = (seq: string, tenant: string) =>
  `SELECT 1 FROM fanout_pending f WHERE f.event_seq < ${seq} AND f.tenant_id = ${tenant}`;

/**
 * The due, unleased deliveries of the candidate endpoints in one statement (a LATERAL probe of the partial indexes
 * per endpoint), at most `room[i]` of the i-th, cut at `limit` in candidate order, as each endpoint's ordering mode
 * allows: `endpoint` — only the head (the oldest pending event), once due and unleased and no earlier event of the
 * tenant awaits fan-out; `resource` — only the oldest pending delivery of its resource, likewise, and only while none
 * of the resource is in flight (one leased under 'none' before a mode change counts too); deliveries without a
 * resource id, and all under `none`, are unordered. The caller holds the candidates' queue rows. With `withEvent`, each row also carries its event (`ev_data`,
 * `ev_created_at`). Of the rows, at most `firstLimit` are not replays and at most `replayLimit` are (0: that kind is
 * not read; what an ordering mode holds behind such a delivery stays queued too), and at most `replayRoom[i]` of
 * the i-th endpoint's are replays (its replay pacing; absent: no such limit).
 */
export async function pickDue(
  c: Db,
  cands: Array<Pick<Candidate, 'endpoint_id' | 'ordering'>>,
  room: number[],
  now: number,
  limit: number,
  withEvent: boolean,
  firstLimit = limit,
  replayLimit = limit,
  replayRoom: number[] = room,
): Promise<PickedRow[]> {
  // The event by its sequence number (the primary key, a bigint), as on SQLite, not by its text id: one key probe
  // per row (a fenced LATERAL), which is also what keeps the statement's plan index-driven when it is planned once
  // per connection (lease): joined plainly, a plan made while `events` was small hashed a scan of all of it.
  const [cols, join] = withEvent
    ? [
        ', ev.data AS ev_data, ev.created_at AS ev_created_at, ev.trace_parent AS ev_trace_parent',
        'CROSS JOIN LATERAL (SELECT data, created_at, trace_parent FROM events WHERE seq = cut.seq OFFSET 0) ev',
      ]
    : ['', ''];
  // Due rows of one kind (not replays: $7, replays: $8 and the endpoint's replay_room, each at most its budget):
  // replays through their own small partial index (deliveries_replays_ready), first deliveries through
  // deliveries_ready, so neither kind's rows can hide the other's behind the LIMIT.
  const ready = (replays: boolean) =>
    `(SELECT d.next_attempt_at AS k, d.event_seq AS seq, ${prefixed('d', DELIVERY_COLUMNS)} FROM deliveries d
       WHERE NOT c.head_only AND d.endpoint_id = c.endpoint_id AND d.status = 'pending'
         AND d.lease_owner IS NULL AND d.next_attempt_at <= $4 AND d.replayed_from IS ${replays ? 'NOT NULL' : 'NULL'}
         AND (NOT c.by_resource OR d.resource_id IS NULL OR (NOT EXISTS (
               SELECT 1 FROM deliveries x
                WHERE x.endpoint_id = d.endpoint_id AND x.resource_id = d.resource_id
                  AND x.status = 'pending'
                  AND (x.event_seq < d.event_seq OR x.lease_owner IS NOT NULL))
             AND NOT EXISTS (${EARLIER_UNFANNED('d.event_seq', 'd.tenant_id')})))
       ORDER BY d.next_attempt_at LIMIT LEAST(c.room, ${replays ? '$8, c.replay_room' : '$7'}))`;
  return (
    await c.query<PickedRow>(
      `WITH cand AS (
         SELECT * FROM unnest($1::text[], $2::int[], $3::boolean[], $6::boolean[], $9::int[])
                WITH ORDINALITY AS c(endpoint_id, room, head_only, by_resource, replay_room, rank)
          WHERE room > 0
       ),
       picked AS (
         SELECT c.rank, c.room AS ep_room, p.* FROM cand c
          CROSS JOIN LATERAL (
            ${ready(false)}
            UNION ALL
            ${ready(true)}
            UNION ALL
            (SELECT h.k, h.k AS seq, ${prefixed('h', DELIVERY_COLUMNS)} FROM (
                SELECT d.event_seq AS k, ${prefixed('d', DELIVERY_COLUMNS)}, d.lease_owner AS h_owner
                  FROM deliveries d
                 WHERE c.head_only AND d.endpoint_id = c.endpoint_id AND d.status = 'pending'
                 ORDER BY d.event_seq LIMIT 1) h
              WHERE h.h_owner IS NULL AND h.next_attempt_at <= $4
                AND (CASE WHEN h.replayed_from IS NULL THEN $7 ELSE LEAST($8, c.replay_room) END) > 0
                AND NOT EXISTS (${EARLIER_UNFANNED('h.k', 'h.tenant_id')}))
          ) p
       ),
       -- Each endpoint within its room (the two kinds together, oldest due first), each kind within its budget
       -- (in rotation order), then the call's limit over what is left.
       rooms AS (
         SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY rank ORDER BY k, id) AS en FROM picked) x
          WHERE en <= ep_room
       ),
       kinds AS (
         SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY replayed_from IS NULL ORDER BY rank, k, id) AS kn
                          FROM rooms) x
          WHERE kn <= CASE WHEN replayed_from IS NULL THEN $7 ELSE $8 END
       ),
       cut AS (
         SELECT * FROM (SELECT *, row_number() OVER (ORDER BY rank, k, id) AS rn FROM kinds) x
          WHERE rn <= $5
       )
       SELECT ${prefixed('cut', DELIVERY_COLUMNS)}${cols}
         FROM cut ${join}
        ORDER BY cut.rn`,
      [
        cands.map((cd) => cd.endpoint_id),
        room,
        cands.map((cd) => cd.ordering === 'endpoint'),
        now,
        limit,
        cands.map((cd) => cd.ordering === 'resource'),
        firstLimit,
        replayLimit,
        replayRoom,
      ],
    )
  ).rows;
}

/**
 * Endpoints with a due, unleased replay (the partial index deliveries_replays_ready) that the replay pacing lets
 * start one now (`replay_tat` at most replayTatAllowingOne, $5): `replaysOnly` leases. A paced endpoint takes no
 * candidate place and keeps its turn, so the endpoints behind it are leased meanwhile. (The allowance itself is
 * computed from the locked row: lease, below.)
 */
const HAS_DUE_REPLAY = `AND (q.replay_tat IS NULL OR q.replay_tat <= $5)
  AND q.endpoint_id IN (SELECT r.endpoint_id FROM deliveries r
  WHERE r.status = 'pending' AND r.lease_owner IS NULL AND r.replayed_from IS NOT NULL AND r.next_attempt_at <= $1)`;

/** Step 1 of lease (below): the candidate endpoints with their runtimes and room, their queue rows locked. */
async function candidates(
  c: Db,
  now: number,
  limit: number,
  perEndpoint: number,
  inLanes: string,
  onlyReplays: string,
) {
  // 1. Candidate endpoints, least recently served first, locked; rows other workers hold are skipped. The
  //    queue row comes back as locked (its current version), so its runtime is the one to compare-and-set,
  //    and the lane condition holds for its current lane (a lane move committed meanwhile is re-checked).
  //    How much each may take is domain/lease-room.ts's: an endpoint at its ramped cap takes no candidate place,
  //    and the next ones in rotation order are read instead. Usually one statement; one more per batch that had
  //    such endpoints.
  const cands: Candidate[] = [];
  const runtimes: EndpointRuntime[] = [];
  const rooms: number[] = [];
  for (let after: [number, string] = [-1, '']; cands.length < limit; ) {
    const want = limit - cands.length;
    const batch = (
      await c.query<Candidate & { last_served_at: number }>(
        `SELECT q.endpoint_id, q.inflight, q.runtime, q.last_served_at, q.replay_tat, e.max_concurrency, e.ordering,
                e.url, e.headers, e.tenant_id
           FROM endpoint_queue q
          -- Fenced (OFFSET 0): the endpoint is looked up per queue row, in rotation order, so the plan walks
          -- endpoint_queue_rotation and stops at LIMIT. Left to choose, the planner hash-joins every registered
          -- endpoint when few queue rows are due (8-17 ms against 1-4 ms per call at 40,000 endpoints).
          CROSS JOIN LATERAL (SELECT e.max_concurrency, e.ordering, e.url, e.headers, e.tenant_id
                                FROM endpoints e WHERE e.id = q.endpoint_id OFFSET 0) e
          WHERE q.next_due_at <= $1 AND (q.blocked_until IS NULL OR q.blocked_until <= $1) AND q.inflight < e.max_concurrency ${inLanes}
            ${onlyReplays} AND (q.last_served_at, q.endpoint_id) > ($3::bigint, $4::text)
          ORDER BY q.last_served_at, q.endpoint_id
          LIMIT $2
          FOR UPDATE OF q SKIP LOCKED`,
        onlyReplays
          ? [now, want, after[0], after[1], replayTatAllowingOne(now)]
          : [now, want, after[0], after[1]],
      )
    ).rows;
    for (const cd of batch) {
      const rt = parseRuntime(cd.runtime);
      const room = leaseRoom(
        {
          maxConcurrency: cd.max_concurrency,
          inflight: cd.inflight,
          ordering: cd.ordering,
          circuit: rt.circuit,
        },
        now,
        perEndpoint,
      );
      if (room === null) continue;
      cands.push(cd);
      runtimes.push(rt);
      rooms.push(Math.min(room, limit));
    }
    const last = batch[batch.length - 1];
    if (!last || batch.length < want) break;
    after = [last.last_served_at, last.endpoint_id];
  }
  return { cands, runtimes, rooms };
}

/**
 * Leasing, completion and expiry rely on one invariant: every writer of an existing delivery row locks its
 * endpoint's queue row first (fan-out only inserts). So once they hold the queue rows, those endpoints'
 * deliveries cannot change under them: they read them in one statement and write them by primary key in the
 * next, without re-checking guards. That also keeps every plan index-driven without statistics: a write
 * guarded by `status = 'pending' AND lease_owner IS NULL` would let the planner pick a full scan of a partial
 * index it believes tiny (O(backlog) per call, seen with autovacuum off).
 */
export async function lease(
  tx: TxRunner,
  owner: string,
  now: number,
  limit: number,
  perEndpoint: number,
  leaseMs: number,
  lanes?: LaneBinding,
  kinds: LeaseKinds = {},
) {
  const firstLimit = Math.min(kinds.firstLimit ?? limit, limit);
  const replayLimit = Math.min(kinds.replayLimit ?? limit, limit);
  limit = Math.min(limit, firstLimit + replayLimit);
  if (limit <= 0) return [];
  const inLanes = laneCondition(lanes);
  const onlyReplays = kinds.replaysOnly ? HAS_DUE_REPLAY : '';
  // Blocked endpoints (circuit open, no probe due: circuit-breaker.ts blockedUntil) are passed over; the
  // circuit-open pass records their due deliveries (circuit-open.ts).
  return tx(
    async (c) => {
      // Key probes only (PROBES_ONLY, query-helpers.ts): plans made once per connection, none reading a table whole.
      // Planned per call, binding steps 1 and 2 cost ~5 and ~12 µs of backend CPU per delivery in bench:delivery.
      const found = await candidates(c, now, limit, perEndpoint, inLanes, onlyReplays);
      if (found.cands.length === 0) return [];
      // 2. Their due deliveries, all endpoints in one statement (a LATERAL probe of the partial indexes per
      //    endpoint), cut at `limit` in rotation order. A later statement than 1, so its snapshot includes
      //    everything committed by whoever held the queue rows before (fan-out above all).
      //    Replays within each endpoint's replay pacing too (domain/replay-pacing.ts), from its locked queue row: the
      //    schedule is read and written under the lock that keeps the in-flight cap, so it holds across processes.
      const { cands, runtimes, rooms } = found;
      const replayRooms = cands.map((cd) => (replayLimit > 0 ? replayAllowance(cd.replay_tat, now) : 0));
      const picked = rooms.some((r) => r > 0)
        ? await pickDue(c, cands, rooms, now, limit, true, firstLimit, replayLimit, replayRooms)
        : [];

      const leaseUntil = now + leaseMs;

      // 3. The circuit decides per delivery, in rotation order: send, send as the one probe, or skip as
      //    circuit_open. A won probe claim is written back below, under the queue row lock taken in 1 — the
      //    compare-and-set that lets exactly one process probe per interval.
      const index = new Map(cands.map((cd, i) => [cd.endpoint_id, i]));
      const claimed = new Set<string>();
      const modes = picked.map((r): NonNullable<LeasedDelivery['mode']> => {
        const rt = runtimes[index.get(r.endpoint_id)!]!;
        const decision = decideAttempt(rt.circuit, now);
        if (decision.kind === 'skip') return 'circuit_open';
        if (!decision.probe) return 'send';
        rt.circuit = decision.claim;
        claimed.add(r.endpoint_id);
        return 'probe';
      });

      // 4. Mark them leased (by primary key) and update in-flight counts, rotation, due times, replay schedules and
      //    claimed runtimes of the visited endpoints (those reached before `limit` ran out, as on SQLite) in one
      //    statement; its snapshot does not see its own lease marks, so the recompute excludes the leased ids.
      const count = new Map<string, number>();
      const replays = new Map<string, number>();
      for (const r of picked) {
        count.set(r.endpoint_id, (count.get(r.endpoint_id) ?? 0) + 1);
        if (r.replayed_from !== null) replays.set(r.endpoint_id, (replays.get(r.endpoint_id) ?? 0) + 1);
      }
      const visited: string[] = [];
      const taken: number[] = [];
      const tats: Array<number | null> = [];
      const saved: Array<ReturnType<typeof runtimeColumns> | null> = [];
      let total = 0;
      for (const [i, cd] of cands.entries()) {
        if (total >= limit) break;
        const n = count.get(cd.endpoint_id) ?? 0;
        visited.push(cd.endpoint_id);
        taken.push(n);
        // The new schedule of an endpoint that started replays; null keeps the stored one.
        const r = replays.get(cd.endpoint_id) ?? 0;
        tats.push(r > 0 ? replayPaced(cd.replay_tat, now, r).tat : null);
        saved.push(claimed.has(cd.endpoint_id) ? runtimeColumns(runtimes[i]!) : null);
        total += n;
      }
      if (visited.length > 0) {
        await c.query(
          `WITH leased AS (
           -- The lane each is leased under: the queue row's, locked since 1 (a move waits for this commit).
           UPDATE deliveries SET lease_owner = $4, lease_until = $5, updated_at = $3,
                  lease_lane = (SELECT ql.lane FROM endpoint_queue ql WHERE ql.endpoint_id = deliveries.endpoint_id)
            WHERE id = ANY($6::text[]))
         UPDATE endpoint_queue q
            SET inflight = q.inflight + u.n, last_served_at = $3,
                next_due_at = ${recomputeDue({ exclude: '$6::text[]' })},
                runtime = COALESCE(u.runtime, q.runtime),
                failing_since = CASE WHEN u.runtime IS NULL THEN q.failing_since ELSE u.failing_since END,
                digest_due_at = CASE WHEN u.runtime IS NULL THEN q.digest_due_at ELSE u.digest_due_at END,
                blocked_until = CASE WHEN u.runtime IS NULL THEN q.blocked_until ELSE u.blocked_until END,
                replay_tat = COALESCE(u.replay_tat, q.replay_tat)
           FROM unnest($1::text[], $2::int[], $7::text[], $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[])
                AS u(endpoint_id, n, runtime, failing_since, digest_due_at, blocked_until, replay_tat)
          WHERE q.endpoint_id = u.endpoint_id`,
          [
            visited,
            taken,
            now,
            owner,
            leaseUntil,
            picked.map((r) => r.id),
            saved.map((x) => x?.json ?? null),
            saved.map((x) => x?.failingSince ?? null),
            saved.map((x) => x?.digestDueAt ?? null),
            saved.map((x) => x?.blockedUntil ?? null),
            tats,
          ],
        );
      }

      // One endpoint object per endpoint, shared by its leased deliveries (read only downstream), as on SQLite.
      const endpoints = new Map<string, LeasedDelivery['endpoint']>();
      return picked.map((r, i): LeasedDelivery => {
        let endpoint = endpoints.get(r.endpoint_id);
        if (!endpoint) {
          const cd = cands[index.get(r.endpoint_id)!]!;
          endpoint = {
            id: cd.endpoint_id,
            tenantId: cd.tenant_id,
            url: cd.url,
            headers: JSON.parse(cd.headers),
          };
          endpoints.set(r.endpoint_id, endpoint);
        }
        // As stored after the lease (which sets updated_at), like deliveryGet would return it.
        const delivery = toDelivery(r);
        delivery.updatedAt = now;
        return {
          mode: modes[i]!,
          delivery,
          endpoint,
          event: {
            id: r.event_id,
            type: r.event_type,
            createdAt: r.ev_created_at,
            data: r.ev_data,
            traceParent: r.ev_trace_parent,
          },
          leaseUntil,
        };
      });
    },
    { probesOnly: true },
  );
}
