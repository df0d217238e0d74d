/**
 * The answer deadlines of the PostgreSQL store: the transactions that rewrite a whole backlog (re-enable,
 * unsubscribe, endpoint delete, tenant delete, lane rebalance) have BULK_DEADLINE_MS per statement, every other
 * statement the short deadline (queryTimeoutMs). Shown with a store whose short deadline is a few milliseconds: the
 * backlog-wide operations outlast it, and one of them waits out a lock held longer than it, while ordinary
 * statements stuck behind the same lock fail as store unavailable. Migrations have a deadline of a day
 * (MIGRATION_TX): they wait out another process's migration and build what they build.
 */
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createTenant, endpointRecord, ids, secretRecord } from '../../../test/conformance/fixtures.ts';
import { NOW } from '../../../test/conformance/store-conformance.ts';
import { dropSchema, freshSchemaName, postgresUrl } from '../../../test/support/postgres.ts';
import { expectUnavailable } from '../../../test/support/postgres-stores.ts';
import { DEFAULT_LANE_THRESHOLDS, DEFAULT_SHARED_LANES } from '../../domain/lanes.ts';
import type { EndpointRecord } from '../../ports/delivery-store.ts';
import type { OperationsStore } from '../../ports/operations-store.ts';
import type { Store } from '../../ports/store.ts';
import { loadMigrations } from './migrate.ts';
import { createPostgresStore } from './postgres-store.ts';
import { lockTenantGate } from './query-helpers.ts';

/** The short deadline under test: far below what rewriting BACKLOG deliveries takes. */
const SHORT_MS = 10;
/** Pending deliveries per endpoint: enough to take well over SHORT_MS per operation, little enough to stay quick. */
const BACKLOG = 20_000;

type PgStore = Store & OperationsStore;

const name = freshSchemaName('bulk');
const stores: PgStore[] = [];
let sql: pg.Client;

const open = (o: { queryTimeoutMs?: number; url?: string } = {}): PgStore => {
  const s = createPostgresStore({ connectionString: o.url ?? postgresUrl(), schema: name, ...o });
  stores.push(s);
  return s;
};

beforeAll(async () => {
  await open().migrate();
  sql = new pg.Client({ connectionString: postgresUrl(), options: `-c search_path=${name}` });
  await sql.connect();
});
afterEach(async () => {
  await Promise.all(stores.splice(0).map((s) => s.close()));
});
afterAll(async () => {
  await sql.end();
  await dropSchema(postgresUrl(), name);
});

/** A tenant with one endpoint (through the store, with the default deadline) and `n` pending deliveries to it. */
async function endpointWithBacklog(
  setup: PgStore,
  n: number,
  o: { tenantId?: string; status?: 'disabled'; eventTypes?: string[] } = {},
): Promise<EndpointRecord> {
  const tenantId = o.tenantId ?? (await createTenant(setup, NOW)).id;
  const ep = endpointRecord(tenantId, o.eventTypes ? { eventTypes: o.eventTypes } : {});
  await setup.endpointCreate({ endpoint: ep, secret: secretRecord(ep) });
  if (o.status)
    await setup.endpointSetStatus({ id: ep.id, tenantId, status: o.status, reason: 'manual', now: NOW });
  // One statement each for the events and their deliveries: alternately of two types (the unsubscribe drops one).
  await sql.query(
    `INSERT INTO events (id, tenant_id, type, data, created_at)
     SELECT $1 || g, $2, CASE WHEN g % 2 = 0 THEN 'order.created' ELSE 'order.paid' END, '{}', $3::bigint + g
       FROM generate_series(1, $4::int) g`,
    [`evt_${ep.id}_`, tenantId, NOW, n],
  );
  await sql.query(
    `INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id, event_seq, event_type, webhook_id, status,
                             next_attempt_at, created_at, updated_at)
     SELECT 'dlv_' || e.id, e.tenant_id, $1, e.id, e.seq, e.type, 'msg_' || e.id, 'pending', $2::bigint + 3600000,
            e.created_at, e.created_at
       FROM events e WHERE e.id LIKE $3`,
    [ep.id, NOW, `evt_${ep.id}_%`],
  );
  await sql.query('ANALYZE deliveries');
  return ep;
}

const countOf = async (endpointId: string, status: string) =>
  Number(
    (
      await sql.query<{ n: string }>(
        'SELECT count(*) AS n FROM deliveries WHERE endpoint_id = $1 AND status = $2',
        [endpointId, status],
      )
    ).rows[0]!.n,
  );

/** Runs op and returns its result and how long it took. */
async function timed<T>(op: () => Promise<T>): Promise<{ result: T; ms: number }> {
  const started = performance.now();
  const result = await op();
  return { result, ms: performance.now() - started };
}

describe('deadlines', () => {
  it('the backlog-wide operations outlast the short deadline and complete', async () => {
    const setup = open();
    const disabled = await endpointWithBacklog(setup, BACKLOG, { status: 'disabled' });
    const doomed = await endpointWithBacklog(setup, BACKLOG);
    const narrowed = await endpointWithBacklog(setup, BACKLOG);
    const tenant = await endpointWithBacklog(setup, BACKLOG);
    const s = open({ queryTimeoutMs: SHORT_MS });

    const enable = await timed(() =>
      s.endpointEnable({
        id: disabled.id,
        tenantId: disabled.tenantId,
        choice: { kind: 'deliver' },
        now: NOW + 1,
        ids,
      }),
    );
    expect(enable.result).toMatchObject({ requeued: BACKLOG, skipped: 0, endpoint: { status: 'enabled' } });

    const unsubscribe = await timed(() =>
      s.endpointUpdate({
        id: narrowed.id,
        tenantId: narrowed.tenantId,
        patch: { eventTypes: ['order.created'] },
        now: NOW + 1,
      }),
    );
    expect(unsubscribe.result?.eventTypes).toEqual(['order.created']);
    expect(await countOf(narrowed.id, 'cancelled')).toBe(BACKLOG / 2);

    const del = await timed(() =>
      s.endpointDelete({ id: doomed.id, tenantId: doomed.tenantId, now: NOW + 1 }),
    );
    expect(del.result).toBe(true);
    expect(await countOf(doomed.id, 'cancelled')).toBe(BACKLOG);

    const rebalance = await timed(() =>
      s.laneRebalance({
        now: NOW + 1,
        sharedLanes: DEFAULT_SHARED_LANES,
        thresholds: DEFAULT_LANE_THRESHOLDS,
      }),
    );
    // The enabled endpoints with a backlog past promoteBacklog get lanes of their own.
    expect(rebalance.result.filter((m) => m.kind === 'promoted').map((m) => m.endpointId)).toContain(
      disabled.id,
    );

    const tenantDelete = await timed(() => s.tenantDelete({ id: tenant.tenantId, now: NOW + 1 }));
    expect(tenantDelete.result).toBe(true);
    expect(await countOf(tenant.id, 'cancelled')).toBe(BACKLOG);

    const took = { enable, unsubscribe, del, rebalance, tenantDelete };
    console.log(
      `${BACKLOG} pending each: ${Object.entries(took)
        .map(([k, v]) => `${k} ${v.ms.toFixed(0)} ms`)
        .join(', ')}`,
    );
    // The premise: rewriting the backlog takes longer than the short deadline would have allowed.
    for (const op of [enable, unsubscribe, del, tenantDelete]) expect(op.ms).toBeGreaterThan(SHORT_MS);
  });

  it('a lock wait longer than the short deadline fails ordinary statements and is waited out by a bulk one', async () => {
    const setup = open();
    const ep = await endpointWithBacklog(setup, 10, { status: 'disabled' });
    const s = open({ queryTimeoutMs: SHORT_MS });
    const holder = new pg.Client({ connectionString: postgresUrl(), options: `-c search_path=${name}` });
    await holder.connect();
    try {
      // The tenant gate, held by another transaction: every write of the tenant's endpoints waits for it first.
      await holder.query('BEGIN');
      await lockTenantGate(holder, ep.tenantId);
      await holder.query('SELECT 1 FROM tenants WHERE id = $1 FOR UPDATE', [ep.tenantId]);

      // A statement on its own, a transaction, and the update that is not an unsubscribe: short deadline.
      await expectUnavailable(s.stepUpAccept({ tenantId: ep.tenantId, step: 1 }));
      await expectUnavailable(
        s.endpointSetStatus({
          id: ep.id,
          tenantId: ep.tenantId,
          status: 'disabled',
          reason: 'manual',
          now: NOW,
        }),
      );
      await expectUnavailable(
        s.endpointUpdate({ id: ep.id, tenantId: ep.tenantId, patch: { description: 'x' }, now: NOW }),
      );

      // The same wait, ended after several short deadlines, inside a backlog-wide transaction.
      const enabled = s.endpointEnable({
        id: ep.id,
        tenantId: ep.tenantId,
        choice: { kind: 'deliver' },
        now: NOW + 1,
        ids,
      });
      enabled.catch(() => {}); // awaited below, after the lock is released; a failure is reported there
      await new Promise((r) => setTimeout(r, SHORT_MS * 20));
      await holder.query('ROLLBACK');
      expect(await enabled).toMatchObject({ requeued: 10, endpoint: { status: 'enabled' } });
    } finally {
      await holder.end();
    }
  });

  it("a statement_timeout set for Hookrail's connections does not cut the backlog-wide operations short", async () => {
    const setup = open();
    const ep = await endpointWithBacklog(setup, BACKLOG);
    const url = new URL(postgresUrl());
    url.searchParams.set('options', `-c statement_timeout=${SHORT_MS}`);
    const s = open({ url: url.toString() });
    const del = await timed(() => s.tenantDelete({ id: ep.tenantId, now: NOW + 1 }));
    expect(del.result).toBe(true);
    expect(await countOf(ep.id, 'cancelled')).toBe(BACKLOG);
    expect(del.ms).toBeGreaterThan(SHORT_MS);

    // Outside them the setting holds: an ordinary statement stuck behind a lock is cancelled by the server.
    const other = await createTenant(setup, NOW);
    const holder = new pg.Client({ connectionString: postgresUrl(), options: `-c search_path=${name}` });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM tenants WHERE id = $1 FOR UPDATE', [other.id]);
      await expect(s.stepUpAccept({ tenantId: other.id, step: 1 })).rejects.toMatchObject({ code: '57014' });
      await holder.query('ROLLBACK');
    } finally {
      await holder.end();
    }
  });
});

describe('migrations', () => {
  it("wait out another process's migration of the schema and run, however long, under no short deadline", async () => {
    const schema = freshSchemaName('migr');
    const holder = new pg.Client({ connectionString: postgresUrl() });
    await holder.connect();
    const lockKey = `hookrail.migrate:${schema}`;
    try {
      // Another process migrating the same schema holds the lock (migrate.ts's prologue) for much longer than
      // the short deadline, as building an index on a large table does.
      await holder.query('SELECT pg_advisory_lock(hashtext($1))', [lockKey]);
      const s = createPostgresStore({ connectionString: postgresUrl(), schema, queryTimeoutMs: SHORT_MS });
      stores.push(s);
      let outcome: 'pending' | 'done' | unknown = 'pending';
      const migrating = s.migrate().then(
        () => (outcome = 'done'),
        (err: unknown) => (outcome = err),
      );
      await new Promise((r) => setTimeout(r, 300));
      expect(outcome).toBe('pending');
      await holder.query('SELECT pg_advisory_unlock(hashtext($1))', [lockKey]);
      await migrating;
      expect(outcome).toBe('done');
      const applied = await holder.query(`SELECT count(*)::int AS n FROM "${schema}".schema_migrations`);
      expect(applied.rows[0].n).toBe((await loadMigrations()).length);
    } finally {
      await holder.end();
      await dropSchema(postgresUrl(), schema);
    }
  });
});
