/**
 * Lost delivery rows rebuilt from the events and the attempt log on SQLite (OperationsStore.deliveryReconstruct; the
 * decisions are domain/delivery-reconstruct.ts). One IMMEDIATE transaction per batch: writers are serial, across
 * processes too (`hookrail queue rebuild` and a running Hookrail take turns at SQLite's write lock), so between its
 * reads and its writes no fan-out pass, unsubscribe, deletion, retention pass or completion runs. A dry run reads in
 * one deferred transaction: one snapshot, no write lock.
 */
import type Database from 'better-sqlite3';
import {
  type BatchEvent,
  deliveryKey,
  type EndpointNow,
  type LoggedAttempt,
  planReconstruction,
  walkFrom,
} from '../../domain/delivery-reconstruct.ts';
import type {
  DeliveryReconstructBatch,
  OperationsStore,
  ReconstructedDelivery,
} from '../../ports/operations-store.ts';
import { eventTypes } from '../subscriptions.ts';
import type { RefreshDue } from './queue-due.ts';
import type { Row, St } from './rows.ts';

type Params = Parameters<OperationsStore['deliveryReconstruct']>[0];

/**
 * The walk: events accepted at or after `since` (ids sort by acceptance time, walkFrom), after the last one looked
 * at. One bound per text: given both, SQLite ranges the index by one and filters by the other, which would read
 * every event before `since` on the first batch.
 */
const EVENTS = (op: '>' | '>=') => `SELECT seq, id, tenant_id, type, resource_id, created_at, endpoint_id,
    seq <= (SELECT seq FROM fanout_cursor WHERE id = 1) AS fanned_out
  FROM events WHERE id ${op} ? ORDER BY id LIMIT ? + 0`;

const EXISTING = `SELECT event_id, endpoint_id FROM deliveries INDEXED BY deliveries_event
  WHERE event_seq IN (SELECT value FROM json_each(?))`;

/**
 * The attempts of the batch's id range whose delivery row is missing: one range of attempts_event (the batch is a
 * run of consecutive event ids, so the range holds its events' attempts and no others), each checked by one probe
 * of the deliveries' primary key. The webhook-id is the first hop's header (a `circuit_open` attempt has none).
 */
const LOST = `SELECT a.delivery_id, a.endpoint_id, a.event_id, a.started_at, a.finished_at, a.outcome,
    json_extract(a.request, '$.hops[0].headers."webhook-id"') AS webhook_id
  FROM attempts a INDEXED BY attempts_event
  WHERE a.event_id >= ? AND a.event_id <= ?
    AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.id = a.delivery_id)
  ORDER BY a.event_id, a.started_at, a.id`;

const REPLAYED = `SELECT DISTINCT replayed_from FROM deliveries
  WHERE replayed_from IN (SELECT value FROM json_each(?))`;
const LIVE_TENANTS = `SELECT id FROM tenants WHERE id IN (SELECT value FROM json_each(?)) AND deleted_at IS NULL`;
const ENDPOINT_COLUMNS = 'id, tenant_id, event_types, created_at, deleted_at';
const LIVE_ENDPOINTS = `SELECT ${ENDPOINT_COLUMNS} FROM endpoints
  WHERE tenant_id IN (SELECT value FROM json_each(?)) AND deleted_at IS NULL`;
const ENDPOINTS_BY_ID = `SELECT ${ENDPOINT_COLUMNS} FROM endpoints WHERE id IN (SELECT value FROM json_each(?))`;

const INSERT = `INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id, event_seq, event_type, resource_id,
    webhook_id, status, attempts, next_attempt_at, first_attempt_at, last_attempt_at, status_reason, replayed_from,
    created_at, updated_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?)
  ON CONFLICT (id) DO NOTHING`;

const endpointNow = (r: Row): EndpointNow => ({
  id: r.id as string,
  tenantId: r.tenant_id as string,
  eventTypes: eventTypes(r.event_types as string),
  createdAt: r.created_at as number,
  deleted: r.deleted_at !== null,
});

export function createSqliteDeliveryReconstruct(
  db: Database.Database,
  st: St,
  refreshDue: RefreshDue,
): Pick<OperationsStore, 'deliveryReconstruct' | 'deliveryReconstructFloor'> {
  const batch = (p: Params): DeliveryReconstructBatch => {
    const from = walkFrom(p);
    const rows = st(EVENTS(from.op)).all(from.id, p.limit) as Row[];
    const events = rows.map(
      (r): BatchEvent => ({
        seq: r.seq as number,
        id: r.id as string,
        tenantId: r.tenant_id as string,
        type: r.type as string,
        resourceId: (r.resource_id as string | null) ?? null,
        createdAt: r.created_at as number,
        fannedOut: r.fanned_out === 1,
        testEvent: r.endpoint_id !== null,
      }),
    );
    const walked = events.length < p.limit; // a short batch reached the newest event
    const after = walked ? null : events[events.length - 1]!.id;
    const taken = events.filter((e) => e.fannedOut && !e.testEvent);
    if (taken.length === 0) return { events: events.length, after, deliveries: [] };

    const existing = new Set(
      (st(EXISTING).all(JSON.stringify(taken.map((e) => e.seq))) as Row[]).map((r) =>
        deliveryKey(r.event_id as string, r.endpoint_id as string),
      ),
    );
    const lost = (st(LOST).all(events[0]!.id, events[events.length - 1]!.id) as Row[]).map(
      (r): LoggedAttempt => ({
        deliveryId: r.delivery_id as string,
        endpointId: r.endpoint_id as string,
        eventId: r.event_id as string,
        startedAt: r.started_at as number,
        finishedAt: r.finished_at as number,
        outcome: r.outcome as LoggedAttempt['outcome'],
        webhookId: (r.webhook_id as string | null) ?? null,
      }),
    );
    const lostIds = [...new Set(lost.map((a) => a.deliveryId))];
    const replayed = new Set(
      lostIds.length === 0
        ? []
        : (st(REPLAYED).all(JSON.stringify(lostIds)) as Row[]).map((r) => r.replayed_from as string),
    );
    const tenants = [...new Set(taken.map((e) => e.tenantId))];
    const live = new Set((st(LIVE_TENANTS).all(JSON.stringify(tenants)) as Row[]).map((r) => r.id as string));
    const endpoints = new Map<string, EndpointNow>();
    for (const r of st(LIVE_ENDPOINTS).all(JSON.stringify([...live])) as Row[])
      endpoints.set(r.id as string, endpointNow(r));
    const unread = [...new Set(lost.map((a) => a.endpointId))].filter((id) => !endpoints.has(id));
    if (unread.length > 0)
      for (const r of st(ENDPOINTS_BY_ID).all(JSON.stringify(unread)) as Row[])
        endpoints.set(r.id as string, endpointNow(r));

    const planned = planReconstruction({
      events: taken,
      existing,
      lost,
      replayed,
      endpoints: [...endpoints.values()],
      deletedTenants: new Set(tenants.filter((t) => !live.has(t))),
      now: p.now,
    });
    const deliveries: ReconstructedDelivery[] = [];
    const due = new Set<string>();
    for (const x of planned) {
      const d: ReconstructedDelivery = {
        source: x.source,
        deliveryId: x.deliveryId ?? p.ids.delivery(),
        endpointId: x.endpointId,
        eventId: x.event.id,
        status: x.state.status,
        statusReason: x.state.statusReason,
        attempts: x.state.attempts,
        webhookId: x.state.webhookId ?? p.ids.webhookId(),
      };
      if (!p.dryRun) {
        const s = x.state;
        const e = x.event;
        const written = st(INSERT).run(
          d.deliveryId,
          e.tenantId,
          d.endpointId,
          e.id,
          e.seq,
          e.type,
          e.resourceId,
          d.webhookId,
          s.status,
          s.attempts,
          s.nextAttemptAt,
          s.firstAttemptAt,
          s.lastAttemptAt,
          s.statusReason,
          x.createdAt,
          s.updatedAt,
        ).changes;
        if (written === 0) continue;
      }
      if (d.status === 'pending') due.add(d.endpointId);
      deliveries.push(d);
    }
    // The due time of each endpoint that got pending deliveries (none while it is disabled or deleted).
    if (!p.dryRun) for (const id of due) refreshDue(id);
    return { events: events.length, after, deliveries };
  };
  const run = db.transaction(batch);

  return {
    async deliveryReconstruct(p) {
      return p.dryRun ? run(p) : run.immediate(p);
    },
    async deliveryReconstructFloor() {
      const r = st('SELECT applied_at FROM schema_migrations WHERE version = 18').get() as Row | undefined;
      if (!r) throw new Error('migration 0018 (attempts.event_id) is not applied');
      return r.applied_at as number;
    },
  };
}
