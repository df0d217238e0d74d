/**
 * eventInsertBatch for PostgreSQL: group commit of a whole batch in one transaction, with idempotency keys that
 * stay unique per tenant across concurrent batches and processes. A batch without keys is a single statement, which
 * the caller runs without an explicit transaction.
 *
 * Why it is correct under concurrency: the claim is `INSERT INTO idempotency_keys ... ON CONFLICT DO NOTHING`.
 * When another transaction has inserted the same (tenant, key) and not yet committed, PostgreSQL makes our insert
 * wait for it; if it commits we see a conflict, if it aborts our row goes in. A claim therefore belongs to exactly
 * one transaction, and the event row is written in that same transaction, so a committed key always points at a
 * committed event. Taking over an expired key is an UPDATE guarded by `created_at <= cutoff`: a concurrent
 * taker waits on the row lock, re-evaluates the guard on the new row (now fresh) and falls back to reading it.
 * Keys are claimed in sorted order so two batches never lock the same keys in opposite orders (deadlock).
 */

import type { EventInsertOutcome, EventRecord, NewEvent } from '../../ports/store.ts';
import type { TxClient } from './migrate.ts';
import { joinJsonTexts, jsonTexts } from './query-helpers.ts';

export interface EventRow {
  id: string;
  tenant_id: string;
  type: string;
  resource_id: string | null;
  data: string;
  idempotency_key: string | null;
  request_hash: string | null;
  created_at: number;
}

export const EVENT_COLUMNS =
  'id, tenant_id, type, resource_id, data, idempotency_key, request_hash, created_at';

export function toEvent(r: EventRow): EventRecord {
  return {
    id: r.id,
    tenantId: r.tenant_id,
    type: r.type,
    resourceId: r.resource_id,
    data: r.data,
    idempotencyKey: r.idempotency_key,
    requestHash: r.request_hash,
    createdAt: r.created_at,
  };
}

/** All items of a batch that share one (tenant, key); the first one is the only candidate to create the event. */
interface KeyGroup {
  tenantId: string;
  key: string;
  leader: NewEvent;
  members: number[];
  /** Set once resolved: either this batch created `leader`, or the key belongs to an existing event. */
  outcome?: { created: true } | { created: false; event: EventRecord; requestHash: string | null };
}

/** A key can change hands between our statements only by pruning; give up rather than spin if it keeps moving. */
const MAX_CLAIM_ROUNDS = 5;

export async function insertEventBatch(
  client: TxClient,
  events: NewEvent[],
  now: number,
  idempotencyWindowMs: number,
): Promise<EventInsertOutcome[]> {
  const groups = new Map<string, KeyGroup>();
  for (const [i, ev] of events.entries()) {
    if (ev.idempotencyKey === null) continue;
    const id = JSON.stringify([ev.tenantId, ev.idempotencyKey]);
    const g = groups.get(id);
    if (g) g.members.push(i);
    else groups.set(id, { tenantId: ev.tenantId, key: ev.idempotencyKey, leader: ev, members: [i] });
  }

  // Plain code-unit order, the same in every process, so concurrent batches acquire key locks in one global order.
  const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  let pending = [...groups.values()].sort((a, b) => cmp(a.tenantId, b.tenantId) || cmp(a.key, b.key));
  const byId = (tenantId: string, key: string) => groups.get(JSON.stringify([tenantId, key]))!;
  const cutoff = now - idempotencyWindowMs;

  for (let round = 0; pending.length > 0; round++) {
    if (round >= MAX_CLAIM_ROUNDS) throw new Error('idempotency keys changed hands repeatedly; giving up');
    const arrays = (gs: KeyGroup[]) => [
      gs.map((g) => g.tenantId),
      gs.map((g) => g.key),
      gs.map((g) => g.leader.id),
      gs.map((g) => g.leader.requestHash),
    ];

    // 1. Claim fresh keys.
    const claimed = await client.query<{ tenant_id: string; key: string }>(
      `INSERT INTO idempotency_keys (tenant_id, key, event_id, request_hash, created_at)
       SELECT u.t, u.k, u.e, u.h, $5::bigint
         FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) WITH ORDINALITY AS u(t, k, e, h, ord)
        ORDER BY u.ord
       ON CONFLICT DO NOTHING
       RETURNING tenant_id, key`,
      [...arrays(pending), now],
    );
    for (const r of claimed.rows) byId(r.tenant_id, r.key).outcome = { created: true };
    let rest = pending.filter((g) => !g.outcome);
    if (rest.length === 0) break;

    // 2. Take over keys whose window has ended: a key recorded at c is live for [c, c + window), so at exactly
    //    c + window (created_at = cutoff) it is free again, as on SQLite.
    const taken = await client.query<{ tenant_id: string; key: string }>(
      `UPDATE idempotency_keys AS k
          SET event_id = u.e, request_hash = u.h, created_at = $5::bigint
         FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS u(t, k, e, h)
        WHERE k.tenant_id = u.t AND k.key = u.k AND k.created_at <= $6::bigint
       RETURNING k.tenant_id, k.key`,
      [...arrays(rest), now, cutoff],
    );
    for (const r of taken.rows) byId(r.tenant_id, r.key).outcome = { created: true };
    rest = rest.filter((g) => !g.outcome);
    if (rest.length === 0) break;

    // 3. The rest are live keys of committed events: read the original events.
    const existing = await client.query<
      EventRow & { k_tenant: string; k_key: string; k_hash: string | null }
    >(
      `SELECT k.tenant_id AS k_tenant, k.key AS k_key, k.request_hash AS k_hash,
              ${EVENT_COLUMNS.split(', ')
                .map((c) => `e.${c}`)
                .join(', ')}
         FROM unnest($1::text[], $2::text[]) AS u(t, k)
         JOIN idempotency_keys AS k ON k.tenant_id = u.t AND k.key = u.k
         JOIN events AS e ON e.id = k.event_id`,
      [rest.map((g) => g.tenantId), rest.map((g) => g.key)],
    );
    for (const r of existing.rows) {
      byId(r.k_tenant, r.k_key).outcome = { created: false, event: toEvent(r), requestHash: r.k_hash };
    }
    // Anything still unresolved was pruned between statements 1 and 3: go round and claim it again.
    pending = rest.filter((g) => !g.outcome);
  }

  // Every unkeyed item and every claimed leader becomes a new event, inserted in input order (so `seq`, and with
  // it fan-out order, follows the order the caller accepted them in) together with its fan-out row: one statement.
  const results = new Array<EventInsertOutcome | undefined>(events.length);
  for (const g of groups.values()) {
    const o = g.outcome!;
    const original = o.created ? { ...g.leader } : o.event;
    const originalHash = o.created ? g.leader.requestHash : o.requestHash;
    for (const [n, i] of g.members.entries()) {
      const ev = events[i]!;
      results[i] =
        o.created && n === 0
          ? { kind: 'created', event: original }
          : { kind: ev.requestHash === originalHash ? 'duplicate' : 'key_conflict', event: original };
    }
  }
  const fresh: NewEvent[] = [];
  for (const [i, ev] of events.entries()) {
    if (ev.idempotencyKey === null) results[i] = { kind: 'created', event: { ...ev } };
    if (results[i]!.kind === 'created') fresh.push(ev);
  }
  if (fresh.length > 0) await insertEvents(client, fresh);
  return results as EventInsertOutcome[];
}

async function insertEvents(client: TxClient, evs: NewEvent[]): Promise<void> {
  const col = <K extends keyof NewEvent>(k: K) => evs.map((e) => e[k]);
  await client.query(
    `WITH ins AS (
       INSERT INTO events (${EVENT_COLUMNS}, trace_parent)
       SELECT u.id, u.tenant_id, u.type, u.resource_id, u.data, u.idempotency_key, u.request_hash, u.created_at,
              u.trace_parent
         FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], ${jsonTexts('$5')}, $6::text[], $7::text[], $8::bigint[],
                     $9::text[])
              WITH ORDINALITY AS u(id, tenant_id, type, resource_id, data, idempotency_key, request_hash, created_at,
                                   trace_parent, ord)
        ORDER BY u.ord
       RETURNING seq, id, tenant_id, created_at
     )
     INSERT INTO fanout_pending (event_seq, event_id, tenant_id, created_at)
     SELECT seq, id, tenant_id, created_at FROM ins`,
    [
      col('id'),
      col('tenantId'),
      col('type'),
      col('resourceId'),
      joinJsonTexts(col('data')),
      col('idempotencyKey'),
      col('requestHash'),
      col('createdAt'),
      evs.map((e) => e.traceParent ?? null),
    ],
  );
}
